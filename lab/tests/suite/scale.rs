//! A generated scenario with thousands of nodes and tens of thousands of pods loads and
//! serves paged lists (issue 4 item 10). How fast is a benchmark's business, not this test's.

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_scenario_serves_paged_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lab = gates_lab::Lab::start(gates_lab::LabOptions {
        scenario: String::new(),
        generate_nodes: Some(2000),
        pods_per_node: None,
        subnet: 78,
        subnet_choice: gates_lab::addr::SubnetChoice::FirstFree,
        speed: 1.0,
        state_dir: dir.path().join("state"),
        env_dir: None,
    })
    .await
    .expect("generated lab starts");
    let (nodes, pods) = lab.shared.read(|w| (w.nodes.len(), w.envs[0].pods.len()));
    assert_eq!(nodes, 2000);
    assert!(pods >= 19_970, "{pods} pods");
    let pending = lab
        .shared
        .read(|w| w.envs[0].pods.values().filter(|p| p.node.is_none()).count());
    assert_eq!(pending, 0, "everything fits");

    let http = common::https_client(&lab);
    let token = lab.admin_token().to_string();
    for (path, expected) in [("/api/v1/pods", pods), ("/api/v1/nodes", nodes)] {
        let mut count = 0;
        let api = lab.api_url(0);
        let mut url = format!("{api}{path}?limit=500");
        loop {
            let page: serde_json::Value = http
                .get(&url)
                .bearer_auth(&token)
                .send()
                .await
                .expect("send")
                .json()
                .await
                .expect("json");
            count += page["items"].as_array().expect("items").len();
            match page["metadata"]["continue"].as_str() {
                Some(c) => url = format!("{api}{path}?limit=500&continue={c}"),
                None => break,
            }
        }
        assert_eq!(count, expected, "{path}");
    }
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generator_puts_as_many_pods_per_node_as_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let start = |pods_per_node| {
        gates_lab::Lab::start(gates_lab::LabOptions {
            scenario: String::new(),
            generate_nodes: Some(23),
            pods_per_node,
            subnet: 171,
            subnet_choice: gates_lab::addr::SubnetChoice::FirstFree,
            speed: 1.0,
            state_dir: dir.path().join("state"),
            env_dir: None,
        })
    };
    for (asked, expected) in [(Some(5), 100), (None, 200)] {
        let lab = start(asked).await.expect("generated lab starts");
        let pods = lab.shared.read(|w| w.envs[0].pods.len());
        assert_eq!(pods, expected, "20 workers, {asked:?} pods per node");
        lab.stop().await;
    }
}
