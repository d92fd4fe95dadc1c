//! Fleet runs against the lab: `gates check --envs FILE` over the lab's two environments and one
//! whose cluster does not answer judges each as a check of it alone would, makes the unreachable
//! cluster an error for its environment only, and writes one JUnit, JSON, HTML and metrics file
//! over all of them; a bad list is refused naming every problem's line.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::support::*;

/// `gates --env-dir ENVS ARGS...` in a blocking task, reports under `reports`.
async fn gates_run(envs: PathBuf, reports: PathBuf, args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        gates_with_config(&reports)
            .arg("--env-dir")
            .arg(&envs)
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// An HTTP server on 127.0.0.1 that answers `200 OK` to `count` requests, one connection each,
/// and hands back each request's first line.
fn pushgateway(count: usize) -> (String, std::thread::JoinHandle<Vec<String>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for _ in 0..count {
            let (mut stream, _) = listener.accept().unwrap();
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(30)))
                .unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 65536];
            loop {
                let n = stream.read(&mut buf).unwrap();
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).into_owned();
                let Some(head_end) = text.find("\r\n\r\n") else {
                    if n == 0 {
                        break;
                    }
                    continue;
                };
                let length = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap())
                    })
                    .unwrap_or(0);
                if request.len() >= head_end + 4 + length || n == 0 {
                    break;
                }
            }
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let text = String::from_utf8_lossy(&request).into_owned();
            lines.push(text.lines().next().unwrap_or("").to_string());
        }
        lines
    });
    (url, handle)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The lab's staging environment again, its kubeconfig's server a loopback port nothing
/// listens on: a cluster that does not answer.
fn unreachable_copy(envs: &Path, dir: &Path) {
    let lab = std::fs::read_to_string(envs.join("lab.yaml")).unwrap();
    let kubeconfig_line = lab
        .lines()
        .find(|l| l.trim_start().starts_with("kubeconfig:"))
        .unwrap();
    let path = kubeconfig_line
        .split_once(':')
        .unwrap()
        .1
        .trim()
        .trim_matches('"');
    let kubeconfig = std::fs::read_to_string(path).unwrap();
    let server = kubeconfig
        .lines()
        .find(|l| l.trim_start().starts_with("server:"))
        .unwrap()
        .split_once(':')
        .unwrap()
        .1
        .trim()
        .to_string();
    let dead = dir.join("dead-kubeconfig");
    std::fs::write(&dead, kubeconfig.replace(&server, "https://127.0.0.1:9")).unwrap();
    std::fs::write(
        envs.join("lab-dark.yaml"),
        lab.replace(
            kubeconfig_line,
            &format!("  kubeconfig: \"{}\"", dead.display()),
        ),
    )
    .unwrap();
}

/// The lab's staging environment again, its repository a checkout that is not there: an
/// environment that cannot be checked at all.
fn repository_gone_copy(envs: &Path) {
    let lab = std::fs::read_to_string(envs.join("lab.yaml")).unwrap();
    std::fs::write(
        envs.join("lab-gone.yaml"),
        format!("{lab}repo:\n  path: no-such-checkout\n"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_judges_each_environment_as_alone_and_an_unreachable_cluster_errs_only_for_its_own()
{
    let dir = tempfile::tempdir().unwrap();
    let _lab = start_lab("adr-007", 126, dir.path()).await;
    let envs = dir.path().join("environments");
    unreachable_copy(&envs, dir.path());
    repository_gone_copy(&envs);
    let list = dir.path().join("fleet.txt");
    std::fs::write(
        &list,
        "# the nightly fleet\nlab-production\nlab\nlab-dark # its API is down\nlab-gone\n",
    )
    .unwrap();
    let reports = dir.path().join("reports");
    let metrics = dir.path().join("fleet.prom");
    let junit = dir.path().join("fleet.xml");
    let (push_url, pushed) = pushgateway(4);
    let out = gates_run(
        envs.clone(),
        reports.clone(),
        [
            strings(&["check", "--envs"]),
            vec![list.display().to_string()],
            strings(&["--format", "json", "--jobs", "2", "--reports"]),
            vec![reports.display().to_string()],
            strings(&["--metrics"]),
            vec![metrics.display().to_string()],
            strings(&["--junit"]),
            vec![junit.display().to_string()],
            vec!["--pushgateway".to_string(), push_url],
        ]
        .concat(),
    )
    .await;
    let fleet: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("JSON ({err}): {}\n{}", stdout(&out), stderr(&out)));
    // The worst environment decides: the unreachable one could not be evaluated.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(fleet["schema_version"], 1);
    let members = fleet["environments"].as_array().unwrap();
    let order: Vec<&str> = members
        .iter()
        .map(|m| m["environment"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["lab-production", "lab", "lab-dark", "lab-gone"]);

    // Each environment's verdicts are those a check of it alone gives.
    for (index, env) in ["lab-production", "lab"].into_iter().enumerate() {
        assert_eq!(members[index]["outcome"], "judged", "{env}");
        let alone_reports = dir.path().join(format!("alone-{env}"));
        let alone = gates_run(
            envs.clone(),
            alone_reports.clone(),
            [
                strings(&["check", env, "--format", "json", "--reports"]),
                vec![alone_reports.display().to_string()],
            ]
            .concat(),
        )
        .await;
        let alone: Value = serde_json::from_slice(&alone.stdout).unwrap();
        assert_eq!(
            trial_verdicts(&members[index]["record"]),
            trial_verdicts(&alone),
            "{env}"
        );
    }
    // The lab's staging passes its static gates in the fleet as alone.
    assert!(
        trial_verdicts(&members[1]["record"])
            .iter()
            .all(|(name, v)| v == "pass" || v == "skip" || name.starts_with("gate4")),
        "{:#}",
        members[1]["record"]
    );
    // The dark one: its Kubernetes trials are errors that name the unreachable API; judged,
    // not refused, and nothing of it leaks into the other environments.
    let dark = &members[2];
    assert_eq!(dark["outcome"], "judged");
    let dark_verdicts = trial_verdicts(&dark["record"]);
    assert!(dark_verdicts.iter().any(|(_, v)| v == "error"));
    assert!(
        dark_verdicts
            .iter()
            .all(|(name, _)| name.contains("::lab-dark::"))
    );
    assert!(
        stderr(&out).contains("error: the Kubernetes API of lab-dark cannot be used"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("Kubernetes API of lab cannot"));
    // The one that cannot be checked at all: refused with the reason, for it alone.
    let gone = &members[3];
    assert_eq!(gone["outcome"], "refused", "{gone:#}");
    let error = gone["error"].as_str().unwrap();
    assert!(
        error.contains("no-such-checkout not found (from repo.path in"),
        "{error}"
    );
    assert!(
        stderr(&out).contains("error: lab-gone could not be checked: repository"),
        "{}",
        stderr(&out)
    );

    // One JUnit over all: a suite per environment and gate, valid for Jenkins' schema.
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    for suite in [
        "name=\"adr007.lab-production.gate5\"",
        "name=\"adr007.lab.gate1\"",
        "name=\"adr007.lab-dark.gate1\"",
        "name=\"gates.lab-gone\"",
        "name=\"lab-gone::check\"",
    ] {
        assert!(xml.contains(suite), "{suite} in {xml}");
    }
    // The metrics of every environment in one exposition, each series labelled by it.
    let prom = std::fs::read_to_string(&metrics).unwrap();
    crate::reports::parse_metrics(&prom).unwrap_or_else(|e| panic!("{e}\n{prom}"));
    assert_eq!(prom.matches("# TYPE gates_gate_verdict gauge").count(), 1);
    // Each environment pushed to its own group, so one replaces only its own series.
    assert_eq!(
        pushed.join().unwrap(),
        ["lab-production", "lab", "lab-dark", "lab-gone"]
            .map(|env| format!("PUT /metrics/job/gates/environment/{env}/command/check HTTP/1.1"))
    );
    assert!(
        prom.contains("gates_check_refused{environment=\"lab-gone\"} 1"),
        "{prom}"
    );
    for env in ["lab-production", "lab", "lab-dark"] {
        assert!(
            prom.contains(&format!("gates_check_refused{{environment=\"{env}\"}} 0")),
            "{prom}"
        );
        assert!(
            prom.contains(&format!("gates_gate_verdict{{environment=\"{env}\",")),
            "{env}: {prom}"
        );
    }
    // The fleet's page links each environment's own page, written beside it.
    let page = std::fs::read_dir(&reports)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("gates-fleet-")
                && p.extension().is_some_and(|e| e == "html")
        })
        .expect("the fleet's page");
    let html = std::fs::read_to_string(&page).unwrap();
    for env in ["lab-production", "lab", "lab-dark"] {
        let link = html
            .split("<a href=\"")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap())
            .find(|href| href.starts_with(&format!("{env}-")))
            .unwrap_or_else(|| panic!("a link to {env}'s page in {html}"));
        assert!(reports.join(link).is_file(), "{link}");
    }
}

#[tokio::test]
async fn a_bad_environment_list_is_refused_naming_every_problem_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("fleet.txt");
    std::fs::write(&list, "staging\nprodution\nstaging\n").unwrap();
    let out = gates_run(
        root().join("gates/environments"),
        dir.path().join("reports"),
        [
            strings(&["check", "--envs"]),
            vec![list.display().to_string()],
        ]
        .concat(),
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    let said = stderr(&out);
    let file = list.display().to_string();
    assert!(
        said.contains(&format!(
            "{file}:2: no environment `prodution`; did you mean `production`?"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "{file}:3: `staging` is listed twice (first on line 1)"
        )),
        "{said}"
    );
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

#[tokio::test]
async fn a_fleet_filter_that_selects_nothing_anywhere_is_refused_and_one_word_is_the_filter() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    // Refused at the plan, before any cluster is read, whether listed or run.
    for list in [true, false] {
        let mut args = strings(&["check", "--all", "gate9"]);
        if list {
            args.push("--list".to_string());
        }
        let out = gates_run(root().join("gates/environments"), reports.clone(), args).await;
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("the selection leaves no trial in any environment of the fleet"),
            "{}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains("cannot be used"), "{}", stderr(&out));
    }
    let out = gates_run(
        root().join("gates/environments"),
        reports,
        strings(&["check", "--all", "gate3", "--list"]),
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed = stdout(&out);
    assert!(
        listed.contains("gate3::staging::l2-announcement"),
        "{listed}"
    );
    assert!(
        listed.contains("gate3::production::l2-announcement"),
        "{listed}"
    );
    assert!(!listed.contains("gate1::"), "{listed}");
    let out = gates_run(
        root().join("gates/environments"),
        dir.path().join("reports"),
        strings(&["check", "--all", "staging", "gate1"]),
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("give at most one word, the filter"),
        "{}",
        stderr(&out)
    );
}
