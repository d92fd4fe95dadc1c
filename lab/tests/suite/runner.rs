//! The runner: files for clients, the Proxmox API driving the world, and a clean stop.

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_client_files_and_stops_cleanly() {
    let (lab, dir) = common::start("adr-007", 80, 1.0).await;
    let kc = std::fs::read_to_string(&lab.files.kubeconfig).expect("kubeconfig");
    let kc: serde_json::Value = gates_lab::yaml::from_str(&kc).expect("yaml");
    let contexts: Vec<&str> = kc["contexts"]
        .as_array()
        .expect("contexts")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        contexts,
        vec![
            "lab",
            "lab-readonly",
            "lab-production",
            "lab-production-readonly"
        ]
    );
    assert_eq!(
        kc["clusters"][1]["cluster"]["server"].as_str(),
        Some(lab.api_url(1).as_str())
    );

    let env: serde_json::Value = gates_lab::yaml::from_str(
        &std::fs::read_to_string(dir.path().join("env/lab.yaml")).expect("env"),
    )
    .expect("yaml");
    assert_eq!(env["like"], "staging");
    assert_eq!(env["kube"]["context"], "lab");
    assert_eq!(
        env["api"]["endpoint"].as_str(),
        Some(lab.api_url(0).as_str())
    );
    assert_eq!(
        env["ingress"]["urls"][0]["url"].as_str(),
        Some(lab.ingress_url(0).as_str())
    );
    assert_eq!(env["ingress"]["urls"][0]["host"], "whoami.lab.internal");
    assert_eq!(
        env["talos"]["endpoints"].as_array().map(|e| e.len()),
        Some(3)
    );
    assert_eq!(env["proxmox"]["token_id"], "gates@pve!lab");
    for key in [
        &env["kube"]["kubeconfig"],
        &env["talos"]["talosconfig"],
        &env["proxmox"]["token_secret_file"],
        &env["proxmox"]["ca_file"],
    ] {
        let p = std::path::PathBuf::from(key.as_str().expect("path"));
        assert!(p.is_absolute() && p.exists(), "{}", p.display());
    }
    let prod: serde_json::Value = gates_lab::yaml::from_str(
        &std::fs::read_to_string(dir.path().join("env/lab-production.yaml")).expect("env"),
    )
    .expect("yaml");
    assert_eq!(prod["like"], "production");
    assert_eq!(prod["proxmox"]["vms"]["tags"][0], "production");
    let tc: serde_json::Value = gates_lab::yaml::from_str(
        &std::fs::read_to_string(&lab.files.talosconfig).expect("talosconfig"),
    )
    .expect("yaml");
    assert!(
        tc["contexts"]["lab-production"]["endpoints"]
            .as_array()
            .is_some_and(|e| e.len() == 3)
    );
    let token = std::fs::read_to_string(&lab.files.proxmox_token).expect("token");
    assert_eq!(token.trim().len(), 36);

    // The Proxmox API drives the world: stopping a VM stops the Talos node in it.
    let pve_ca = reqwest::Certificate::from_pem(
        std::fs::read(&lab.files.proxmox_ca).expect("ca").as_slice(),
    )
    .expect("pem");
    let pve = reqwest::Client::builder()
        .add_root_certificate(pve_ca)
        .build()
        .expect("client");
    let auth = format!("PVEAPIToken=gates@pve!lab={}", token.trim());
    let r = pve
        .post(format!(
            "{}/api2/json/nodes/pve2/qemu/102/status/stop",
            lab.proxmox_url(0)
        ))
        .header("Authorization", &auth)
        .send()
        .await
        .expect("stop");
    assert_eq!(r.status(), 200);
    common::eventually(15, "the VM stops", || async {
        lab.shared.read(|w| !w.nodes[1].vm_running)
    })
    .await;
    common::eventually(5, "apid of a stopped VM stalls connections", || async {
        common::stalls(lab.apid_addr(1)).await
    })
    .await;
    assert!(
        lab.ground_truth()
            .events
            .iter()
            .any(|e| e.kind == "vm-stopped" && e.subject == "talos-lab-cp-02")
    );
    let reqs = lab.log.snapshot();
    assert!(
        reqs.iter()
            .any(|r| r.protocol == gates_lab::reqlog::Protocol::Proxmox
                && r.verb == "POST"
                && !r.read_only)
    );

    let api = std::net::SocketAddr::from((lab.plan.vip_ip(0), gates_lab::addr::KUBE_PORT));
    assert!(tokio::net::TcpStream::connect(api).await.is_ok());
    let truth_file = lab.files.ground_truth.clone();
    lab.stop().await;
    common::eventually(5, "a stopped lab refuses connections", || async {
        tokio::net::TcpStream::connect(api).await.is_err()
    })
    .await;
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(truth_file).expect("ground truth"))
            .expect("json");
    assert!(truth["events"].as_array().is_some_and(|e| !e.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_environment_files_of_an_earlier_lab_are_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env_dir = dir.path().join("env");
    std::fs::create_dir_all(&env_dir).expect("mkdir");
    std::fs::write(
        env_dir.join("lab-production.yaml"),
        "# Written by gates-lab for scenario adr-007\n",
    )
    .expect("write");
    std::fs::write(env_dir.join("staging.yaml"), "description: hand-written\n").expect("write");
    let opts = gates_lab::LabOptions {
        scenario: "staging-today".into(),
        subnet: 83,
        subnet_choice: gates_lab::addr::SubnetChoice::FirstFree,
        speed: 1.0,
        state_dir: dir.path().join("state"),
        env_dir: Some(env_dir.clone()),
        ..gates_lab::LabOptions::default()
    };
    let lab = gates_lab::Lab::start(opts).await.expect("lab");
    assert!(env_dir.join("lab.yaml").exists());
    assert!(
        !env_dir.join("lab-production.yaml").exists(),
        "stale lab file removed"
    );
    assert!(
        env_dir.join("staging.yaml").exists(),
        "other files untouched"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_labs_run_side_by_side() {
    let (a, _da) = common::start("adr-007", 81, 1.0).await;
    let (b, _db) = common::start("staging-today", 82, 1.0).await;
    let ca = common::kube_client(&a, "lab").await;
    let cb = common::kube_client(&b, "lab").await;
    use k8s_openapi::api::core::v1::Node;
    let na = kube::Api::<Node>::all(ca)
        .list(&Default::default())
        .await
        .expect("a");
    let nb = kube::Api::<Node>::all(cb)
        .list(&Default::default())
        .await
        .expect("b");
    assert_eq!((na.items.len(), nb.items.len()), (3, 2));
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_proxmox_token_and_busy_addresses() {
    let (lab, _dir) = common::start("adr-007", 84, 1.0).await;
    let secret = std::fs::read_to_string(&lab.files.proxmox_audit_token).expect("audit token");
    let ca = reqwest::Certificate::from_pem(
        std::fs::read(&lab.files.proxmox_ca).expect("ca").as_slice(),
    )
    .expect("pem");
    let pve = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client");
    let auth = format!(
        "PVEAPIToken={}={}",
        gates_lab::runner::PROXMOX_AUDIT_TOKEN_ID,
        secret.trim()
    );
    let r = pve
        .get(format!(
            "{}/api2/json/cluster/resources?type=vm",
            lab.proxmox_url(0)
        ))
        .header("Authorization", &auth)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 200);
    let r = pve
        .post(format!(
            "{}/api2/json/nodes/pve1/qemu/101/status/stop",
            lab.proxmox_url(0)
        ))
        .header("Authorization", &auth)
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 403);
    assert!(
        lab.shared.read(|w| w.nodes[0].vm_running),
        "nothing was stopped"
    );

    // A second lab asking for exactly the same subnet cannot listen and says where; one
    // that may move takes another subnet.
    let dir = tempfile::tempdir().expect("tempdir");
    let taken = lab.plan.subnet;
    let err = gates_lab::Lab::start(gates_lab::LabOptions {
        scenario: "adr-007".into(),
        subnet: taken,
        subnet_choice: gates_lab::addr::SubnetChoice::Exactly,
        speed: 1.0,
        state_dir: dir.path().join("state"),
        env_dir: None,
        ..gates_lab::LabOptions::default()
    })
    .await
    .expect_err("addresses are taken");
    assert!(
        err.to_string()
            .contains(&format!("127.{taken}.x.y is in use")),
        "{err}"
    );
    let moved = gates_lab::Lab::start(gates_lab::LabOptions {
        scenario: "adr-007".into(),
        subnet: taken,
        subnet_choice: gates_lab::addr::SubnetChoice::FirstFree,
        speed: 1.0,
        state_dir: dir.path().join("moved"),
        env_dir: None,
        ..gates_lab::LabOptions::default()
    })
    .await
    .expect("a lab that may move starts elsewhere");
    assert_ne!(moved.plan.subnet, taken);
    moved.stop().await;
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_may_make_down_addresses_refuse_instead_of_stall() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/lab/adr-007.yaml"),
    )
    .expect("scenario");
    let scenario = dir.path().join("refusing.yaml");
    std::fs::write(&scenario, format!("{text}\nunreachable: refuse\n")).expect("write");
    let lab = gates_lab::Lab::start(gates_lab::LabOptions {
        scenario: scenario.display().to_string(),
        subnet: 87,
        subnet_choice: gates_lab::addr::SubnetChoice::FirstFree,
        speed: 1.0,
        state_dir: dir.path().join("state"),
        env_dir: None,
        ..gates_lab::LabOptions::default()
    })
    .await
    .expect("lab");
    lab.shared.stop_vm(102).expect("stop");
    common::eventually(5, "apid of the stopped VM refuses at once", || async {
        matches!(
            tokio::time::timeout(
                std::time::Duration::from_millis(300),
                tokio::net::TcpStream::connect(lab.apid_addr(1)),
            )
            .await,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused
        )
    })
    .await;
    lab.stop().await;
}
