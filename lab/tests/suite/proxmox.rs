//! The Proxmox VE API server over real TLS on loopback, against the in-memory backend.
//! These tests look for a free subnet from 230..=238 on (see `proxmox_support`).

use crate::proxmox_support;

use std::time::{Duration, Instant};

use crate::proxmox_support::{Cluster, fast, start};
use gates_lab::proxmox::{HaState, Upid, VmStatus};
use serde_json::Value;

async fn get(c: &Cluster, host: u8, path: &str) -> (u16, Value) {
    let resp = c
        .client()
        .get(c.url(host, path))
        .header("Authorization", c.auth())
        .send()
        .await
        .expect("request");
    let status = resp.status().as_u16();
    let body = resp.bytes().await.expect("body");
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn post(c: &Cluster, host: u8, path: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let resp = c
        .client()
        .post(c.url(host, path))
        .header("Authorization", c.auth())
        .form(form)
        .send()
        .await
        .expect("request");
    let status = resp.status().as_u16();
    let body = resp.bytes().await.expect("body");
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn reason(resp: &reqwest::Response) -> String {
    resp.extensions()
        .get::<hyper::ext::ReasonPhrase>()
        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
        .unwrap_or_default()
}

/// Polls a task on the node named in its UPID until it stops; returns the final status object.
async fn wait_task(c: &Cluster, host: u8, upid: &str) -> Value {
    let node = Upid::parse(upid).expect("upid").node;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = get(c, host, &format!("/nodes/{node}/tasks/{upid}/status")).await;
        assert_eq!(status, 200, "{body}");
        if body["data"]["status"] == "stopped" {
            return body["data"].clone();
        }
        assert_eq!(body["data"]["status"], "running");
        assert!(Instant::now() < deadline, "task did not stop: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn token_auth_accepts_the_token_and_rejects_others_with_a_delayed_empty_401() {
    let c = start(231, fast()).await;
    let (status, body) = get(&c, 1, "/version").await;
    assert_eq!(status, 200);
    assert_eq!(body["data"]["version"], "9.1.1");
    assert_eq!(body["data"]["release"], "9.1");

    for (header, expected_reason) in [
        (None, "No ticket"),
        (
            Some(format!("PVEAPIToken={}=wrong", proxmox_support::TOKEN_ID)),
            "Authentication failed!",
        ),
        (
            Some(format!(
                "PVEAPIToken={}:{}",
                proxmox_support::TOKEN_ID,
                proxmox_support::TOKEN_SECRET
            )),
            "Authentication failed!",
        ),
    ] {
        let mut req = c.client().get(c.url(2, "/version"));
        if let Some(h) = &header {
            req = req.header("Authorization", h);
        }
        let started = Instant::now();
        let resp = req.send().await.expect("request");
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "401 must be delayed"
        );
        assert_eq!(resp.status().as_u16(), 401);
        assert_eq!(reason(&resp), expected_reason);
        assert_eq!(resp.headers()["connection"], "close");
        assert!(
            resp.bytes().await.expect("body").is_empty(),
            "401 body must be empty"
        );
    }
}

#[tokio::test]
async fn envelopes_use_integer_booleans_and_proxmox_shapes() {
    let c = start(232, fast()).await;

    let (_, status) = get(&c, 1, "/cluster/status").await;
    let list = status["data"].as_array().expect("array");
    assert_eq!(list[0]["type"], "cluster");
    assert_eq!(list[0]["quorate"], 1);
    assert_eq!(list[0]["nodes"], 3);
    let pve1 = list.iter().find(|e| e["name"] == "pve1").expect("pve1");
    assert_eq!(pve1["online"], 1);
    assert_eq!(pve1["local"], 1);
    assert_eq!(pve1["ip"].as_str(), Some(c.host_ip(1).to_string().as_str()));
    let pve2 = list.iter().find(|e| e["name"] == "pve2").expect("pve2");
    assert_eq!(pve2["local"], 0);

    let (_, nodes) = get(&c, 2, "/nodes").await;
    let nodes = nodes["data"].as_array().expect("array").clone();
    assert_eq!(nodes.len(), 3);
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(n["status"], "online");
        assert_eq!(n["ssl_fingerprint"], c.fingerprints[i]);
        assert!(n["maxmem"].is_u64());
    }

    let (_, res) = get(&c, 3, "/cluster/resources?type=vm").await;
    let vms = res["data"].as_array().expect("array").clone();
    assert_eq!(vms.len(), 4);
    let vm = vms.iter().find(|v| v["vmid"] == 101).expect("101");
    assert_eq!(vm["id"], "qemu/101");
    assert_eq!(vm["type"], "qemu");
    assert_eq!(vm["node"], "pve1");
    assert_eq!(vm["status"], "running");
    assert_eq!(vm["tags"], "k8s;staging");
    assert_eq!(vm["template"], 0);
    assert!(vm.get("hastate").is_none());
    let ha = vms.iter().find(|v| v["vmid"] == 103).expect("103");
    assert_eq!(ha["hastate"], "started");

    let (_, all) = get(&c, 1, "/cluster/resources").await;
    assert_eq!(
        all["data"].as_array().expect("array").len(),
        7,
        "3 nodes + 4 VMs"
    );

    let (_, cfg) = get(&c, 1, "/nodes/pve1/qemu/101/config").await;
    assert_eq!(
        cfg["data"]["smbios1"],
        "uuid=6c3fa683-bef9-4425-b413-eaa45a9d0101"
    );
    assert_eq!(cfg["data"]["memory"], "8192", "memory is a string property");
    assert_eq!(cfg["data"]["cores"], 4);
    assert_eq!(cfg["data"]["digest"].as_str().expect("digest").len(), 40);

    let (_, current) = get(&c, 2, "/nodes/pve1/qemu/101/status/current").await;
    assert_eq!(current["data"]["qmpstatus"], "running");
    assert_eq!(current["data"]["ha"]["managed"], 0);
    let (_, current) = get(&c, 2, "/nodes/pve3/qemu/103/status/current").await;
    assert_eq!(current["data"]["ha"]["managed"], 1);

    let (_, list) = get(&c, 1, "/nodes/localhost/qemu").await;
    let ids: Vec<u64> = list["data"]
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|v| v["vmid"].as_u64())
        .collect();
    assert_eq!(ids, vec![101, 104]);

    let (status, bad) = get(&c, 1, "/cluster/resources?type=vms").await;
    assert_eq!(status, 400);
    assert_eq!(
        bad["errors"]["type"],
        "value 'vms' does not have a value in the enumeration 'vm, storage, node, sdn'"
    );
    assert_eq!(bad["message"], "Parameter verification failed.\n");

    let records = c.records.lock().expect("records").clone();
    assert!(records.iter().all(|r| r.system == "proxmox" && r.read_only));
    assert!(
        records
            .iter()
            .any(|r| r.path == "/api2/json/cluster/resources" && r.status == 200)
    );
}

#[tokio::test]
async fn missing_vm_is_a_500_and_unknown_paths_are_501() {
    let c = start(233, fast()).await;
    let resp = c
        .client()
        .get(c.url(1, "/nodes/pve1/qemu/999/status/current"))
        .header("Authorization", c.auth())
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 500);
    let expected = "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist";
    assert_eq!(reason(&resp), expected);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["data"], Value::Null);
    assert_eq!(body["message"], format!("{expected}\n"));

    // VM 102 lives on pve2, not pve1: its config is not on pve1 either.
    let (status, body) = get(&c, 1, "/nodes/pve1/qemu/102/config").await;
    assert_eq!(status, 500);
    assert!(
        body["message"]
            .as_str()
            .expect("msg")
            .contains("nodes/pve1/qemu-server/102.conf")
    );

    let (status, body) = get(&c, 1, "/nodes/pve1/frobnicate").await;
    assert_eq!(status, 501);
    assert_eq!(
        body["message"],
        "Method 'GET /nodes/pve1/frobnicate' not implemented\n"
    );
    let (status, _) = post(&c, 1, "/version", &[]).await;
    assert_eq!(status, 501);
    let (status, body) = get(&c, 1, "/nodes/pve9/qemu").await;
    assert_eq!(status, 500);
    assert!(
        body["message"]
            .as_str()
            .expect("msg")
            .starts_with("hostname lookup 'pve9' failed")
    );
}

#[tokio::test]
async fn power_actions_return_upids_whose_tasks_run_then_stop() {
    let c = start(234, fast()).await;
    let (status, body) = post(&c, 2, "/nodes/pve1/qemu/101/status/stop", &[]).await;
    assert_eq!(status, 200, "{body}");
    let upid_text = body["data"].as_str().expect("upid string").to_string();
    let upid = Upid::parse(&upid_text).expect("valid UPID");
    assert_eq!(upid.node, "pve1");
    assert_eq!(upid.worker_type, "qmstop");
    assert_eq!(upid.id, "101");
    assert_eq!(upid.user, proxmox_support::TOKEN_ID);
    assert!(upid_text.ends_with(':'));

    let (_, first) = get(&c, 1, &format!("/nodes/pve1/tasks/{upid_text}/status")).await;
    assert_eq!(first["data"]["status"], "running");
    assert!(first["data"].get("exitstatus").is_none());
    assert_eq!(first["data"]["user"], "gates@pve");
    assert_eq!(first["data"]["tokenid"], "lab");

    let done = wait_task(&c, 3, &upid_text).await;
    assert_eq!(done["exitstatus"], "OK");
    assert_eq!(c.backend.vm(101).expect("vm").status, VmStatus::Stopped);

    // Stopping a stopped VM is OK; starting works; starting a running VM is a task error.
    let (_, again) = post(&c, 1, "/nodes/pve1/qemu/101/status/stop", &[]).await;
    let again = wait_task(&c, 1, again["data"].as_str().expect("upid")).await;
    assert_eq!(again["exitstatus"], "OK");
    let (_, start) = post(&c, 1, "/nodes/pve1/qemu/101/status/start", &[]).await;
    let start_upid = start["data"].as_str().expect("upid").to_string();
    assert!(start_upid.contains(":qmstart:101:"));
    assert_eq!(wait_task(&c, 1, &start_upid).await["exitstatus"], "OK");
    assert_eq!(c.backend.vm(101).expect("vm").status, VmStatus::Running);
    let (_, twice) = post(&c, 1, "/nodes/pve1/qemu/101/status/start", &[]).await;
    let twice = twice["data"].as_str().expect("upid").to_string();
    assert_eq!(
        wait_task(&c, 1, &twice).await["exitstatus"],
        "VM 101 already running"
    );
    let (_, log) = get(&c, 1, &format!("/nodes/pve1/tasks/{twice}/log")).await;
    let lines = log["data"].as_array().expect("log");
    assert_eq!(
        lines.last().expect("line")["t"],
        "TASK ERROR: VM 101 already running"
    );
    assert_eq!(lines[0]["n"], 1);

    // A task is only known on its own node; garbage is rejected.
    let (status, body) = get(&c, 1, &format!("/nodes/pve2/tasks/{twice}/status")).await;
    assert_eq!(status, 400);
    assert_eq!(body["errors"]["upid"], "no such task");
    let (status, body) = get(&c, 1, "/nodes/pve1/tasks/UPID:nonsense/status").await;
    assert_eq!(status, 400);
    assert_eq!(body["errors"]["upid"], "unable to parse worker upid");

    // Form booleans are 0/1, never "true".
    let (status, body) = post(
        &c,
        1,
        "/nodes/pve1/qemu/101/status/shutdown",
        &[("forceStop", "true")],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["errors"]["forceStop"],
        "type check ('boolean') failed - got 'true'"
    );

    let records = c.records.lock().expect("records").clone();
    assert!(records.iter().any(|r| r.verb == "POST" && !r.read_only));
}

#[tokio::test]
async fn ha_managed_stop_queues_an_ha_request_and_flips_the_requested_state() {
    let c = start(235, fast()).await;
    let (_, body) = post(&c, 1, "/nodes/pve3/qemu/103/status/stop", &[]).await;
    let upid = body["data"].as_str().expect("upid").to_string();
    assert!(upid.contains(":hastop:103:"), "{upid}");
    let done = wait_task(&c, 1, &upid).await;
    assert_eq!(done["exitstatus"], "OK");
    let (_, ha) = get(&c, 2, "/cluster/ha/resources").await;
    let entry = ha["data"]
        .as_array()
        .expect("array")
        .iter()
        .find(|r| r["sid"] == "vm:103")
        .expect("vm:103")
        .clone();
    assert_eq!(entry["state"], "stopped");
    assert_eq!(entry["type"], "vm");
    let vm = c.backend.vm(103).expect("vm");
    assert_eq!(vm.ha.expect("ha").requested, HaState::Stopped);
    assert_eq!(vm.status, VmStatus::Stopped);

    let (_, body) = post(&c, 2, "/nodes/pve3/qemu/103/status/start", &[]).await;
    let upid = body["data"].as_str().expect("upid").to_string();
    assert!(upid.contains(":hastart:103:"), "{upid}");
    assert_eq!(wait_task(&c, 2, &upid).await["exitstatus"], "OK");
    assert_eq!(c.backend.vm(103).expect("vm").status, VmStatus::Running);
}

#[tokio::test]
async fn a_host_that_is_down_gives_595_through_others_and_stalls_connections() {
    let c = start(236, fast()).await;
    let (status, body) = post(&c, 1, "/nodes/pve3/status", &[("command", "shutdown")]).await;
    assert_eq!(status, 200);
    assert_eq!(body, serde_json::json!({"data": null}));

    // Wait (bounded) for the cluster to see pve3 offline.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, s) = get(&c, 1, "/cluster/status").await;
        let pve3 = s["data"]
            .as_array()
            .expect("array")
            .iter()
            .find(|e| e["name"] == "pve3")
            .expect("pve3")
            .clone();
        if pve3["online"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "pve3 never went offline");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let started = Instant::now();
    let resp = c
        .client()
        .get(c.url(1, "/nodes/pve3/qemu"))
        .header("Authorization", c.auth())
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 595);
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(reason(&resp), "No route to host");
    assert!(resp.bytes().await.expect("body").is_empty());

    // Cluster-wide views keep working from a survivor.
    let (status, nodes) = get(&c, 2, "/nodes").await;
    assert_eq!(status, 200);
    let pve3 = nodes["data"]
        .as_array()
        .expect("array")
        .iter()
        .find(|n| n["node"] == "pve3")
        .expect("pve3")
        .clone();
    assert_eq!(pve3["status"], "offline");
    assert!(pve3.get("uptime").is_none());

    // Its node config is proxied to it, so unreadable while it is off.
    let (status, _) = get(&c, 2, "/nodes/pve3/config").await;
    assert_eq!(status, 595);

    // pve3's own address drops packets: the connect hangs until the client gives up.
    let err = c
        .client()
        .get(c.url(3, "/version"))
        .header("Authorization", c.auth())
        .timeout(Duration::from_millis(500))
        .send()
        .await
        .expect_err("pve3 is off");
    assert!(err.is_timeout(), "{err:?}");

    // Wake-on-LAN from pve1 brings it back.
    let (status, body) = post(&c, 1, "/nodes/pve3/wakeonlan", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"], "BC:24:11:00:00:03");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let result = c
            .client()
            .get(c.url(3, "/version"))
            .header("Authorization", c.auth())
            .send()
            .await;
        if let Ok(resp) = result
            && resp.status().as_u16() == 200
        {
            break;
        }
        assert!(Instant::now() < deadline, "pve3 never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, config) = get(&c, 1, "/nodes/pve3/config").await;
    assert_eq!(status, 200);
    assert_eq!(config["data"]["wakeonlan"], "mac=BC:24:11:00:00:03");
    let (status, body) = post(&c, 1, "/nodes/pve1/wakeonlan", &[]).await;
    assert_eq!(status, 500);
    assert_eq!(
        body["message"],
        "'pve1' is local node, cannot wake my self!\n"
    );
}

#[tokio::test]
async fn start_without_quorum_fails_before_any_task() {
    let c = start(237, fast()).await;
    c.backend.set_host_online("pve2", false);
    c.backend.set_host_online("pve3", false);
    let (status, body) = post(&c, 1, "/nodes/pve1/qemu/104/status/start", &[]).await;
    assert_eq!(status, 500);
    assert_eq!(body["message"], "cluster not ready - no quorum?\n");
    let (_, s) = get(&c, 1, "/cluster/status").await;
    assert_eq!(s["data"][0]["quorate"], 0);
}

#[tokio::test]
async fn idle_keep_alive_connections_close_and_a_stopped_server_refuses_connections() {
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut c = start(
        238,
        gates_lab::proxmox::ProxmoxOptions {
            idle_timeout: Duration::from_millis(300),
            ..fast()
        },
    )
    .await;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(c.ca.cert_der().clone()).expect("root");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let pve1 = std::net::SocketAddr::new(c.host_ip(1), gates_lab::addr::PROXMOX_PORT);
    let tcp = tokio::net::TcpStream::connect(pve1).await.expect("connect");
    let name = rustls::pki_types::ServerName::from(c.host_ip(1));
    let mut tls = connector.connect(name, tcp).await.expect("handshake");
    let request = format!(
        "GET /api2/json/version HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n\r\n",
        c.host_ip(1),
        c.auth()
    );
    tls.write_all(request.as_bytes()).await.expect("write");
    let started = Instant::now();
    let mut buf = Vec::new();
    // The server answers, keeps the connection open while idle, then closes it.
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut buf))
        .await
        .expect("server never closed the idle connection");
    assert!(started.elapsed() >= Duration::from_millis(250));
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.contains("pve-api-daemon/3.0"), "{text}");

    c.handles.remove(0).stop().await;
    assert!(tokio::net::TcpStream::connect(pve1).await.is_err());
}

#[tokio::test]
async fn an_audit_token_reads_but_power_calls_get_403_before_proxying() {
    let c = start(230, fast()).await;
    let auth = format!(
        "PVEAPIToken={}={}",
        proxmox_support::AUDIT_TOKEN_ID,
        proxmox_support::AUDIT_TOKEN_SECRET
    );
    let resp = c
        .client()
        .get(c.url(1, "/cluster/resources?type=vm"))
        .header("Authorization", &auth)
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 200);

    c.backend.set_host_online("pve3", false);
    for (path, expected) in [
        (
            "/nodes/pve1/qemu/101/status/stop",
            "Permission check failed (/vms/101, VM.PowerMgmt)",
        ),
        (
            "/nodes/pve3/qemu/103/status/stop",
            "Permission check failed (/vms/103, VM.PowerMgmt)",
        ),
        (
            "/nodes/pve3/wakeonlan",
            "Permission check failed (/nodes/pve3, Sys.PowerMgmt)",
        ),
        (
            "/nodes/localhost/status",
            "Permission check failed (/nodes/pve1, Sys.PowerMgmt)",
        ),
    ] {
        let resp = c
            .client()
            .post(c.url(1, path))
            .header("Authorization", &auth)
            .form(&[("command", "shutdown")])
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status().as_u16(), 403, "{path}");
        assert_eq!(reason(&resp), expected);
        let body: Value = resp.json().await.expect("json");
        assert_eq!(body["message"], format!("{expected}\n"));
    }
    assert_eq!(c.backend.vm(101).expect("vm").status, VmStatus::Running);
}
