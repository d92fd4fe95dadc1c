//! Reading talosconfig files the way talosctl does.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::common::pki::Ca;
use base64::Engine as _;
use gates_infra::talos::{
    TalosConfigError, candidate_paths, load_context, locate, normalize_private_key_pem,
    parse_context,
};

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A talosconfig with contexts `staging` (current) and `production`.
fn talosconfig_text(ca: &Ca, key_pem: &str, cert_pem: &str) -> String {
    format!(
        "context: staging\ncontexts:\n  staging:\n    endpoints:\n      - 10.0.50.11\n      - 10.0.50.12:50000\n      - https://10.0.50.13\n    nodes: [10.0.50.11]\n    ca: {ca}\n    crt: {crt}\n    key: {key}\n  production:\n    endpoints: [10.0.60.11]\n    ca: {ca}\n    crt: {crt}\n    key: {key}\n",
        ca = b64(&ca.pem()),
        crt = b64(cert_pem),
        key = b64(key_pem),
    )
}

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
    let owned: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| {
        owned
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| OsString::from(v))
    }
}

#[test]
fn talos_ed25519_label_is_rewritten_and_der_kept() {
    let ca = Ca::new("talos");
    let leaf = ca.client("os:admin");
    let talos = leaf.talos_key_pem();
    assert!(talos.contains("BEGIN ED25519 PRIVATE KEY"));
    let fixed =
        String::from_utf8(normalize_private_key_pem(talos.as_bytes()).expect("ok")).expect("utf8");
    assert!(fixed.contains("-----BEGIN PRIVATE KEY-----"));
    assert!(!fixed.contains("ED25519"));
    // Same base64 body, so the same DER.
    let body = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("-----"))
            .collect::<String>()
    };
    assert_eq!(body(&fixed), body(&talos));
    // Plain PKCS#8 passes unchanged.
    let plain = normalize_private_key_pem(leaf.key_pem.as_bytes()).expect("plain");
    assert_eq!(plain, leaf.key_pem.as_bytes());
    // Garbage is refused without echoing it.
    let err = normalize_private_key_pem(b"not a key").expect_err("garbage");
    assert!(err.to_string().contains("no private key"), "{err}");
}

#[test]
fn named_context_is_read_with_endpoints_and_credentials() {
    let ca = Ca::new("talos");
    let leaf = ca.client("os:admin");
    let text = talosconfig_text(&ca, &leaf.talos_key_pem(), &leaf.cert_pem);
    let ctx = parse_context(Path::new("tc"), &text, Some("staging")).expect("context");
    assert_eq!(ctx.name, "staging");
    assert_eq!(
        ctx.endpoints,
        vec!["10.0.50.11", "10.0.50.12:50000", "https://10.0.50.13"]
    );
    assert_eq!(
        ctx.endpoint_hosts(),
        vec!["10.0.50.11", "10.0.50.12", "10.0.50.13"]
    );
    assert_eq!(ctx.nodes, vec!["10.0.50.11"]);
    assert_eq!(ctx.credentials.ca_pem, ca.pem().as_bytes());
    let (_, key) = ctx.credentials.identity_pem().expect("identity");
    assert!(String::from_utf8_lossy(key).contains("BEGIN PRIVATE KEY"));

    // No explicit context: the file's current one.
    let current = parse_context(Path::new("tc"), &text, None).expect("current");
    assert_eq!(current.name, "staging");
    let prod = parse_context(Path::new("tc"), &text, Some("production")).expect("prod");
    assert_eq!(prod.endpoints, vec!["10.0.60.11"]);
}

#[test]
fn missing_context_lists_the_available_ones() {
    let ca = Ca::new("talos");
    let leaf = ca.client("os:admin");
    let text = talosconfig_text(&ca, &leaf.talos_key_pem(), &leaf.cert_pem);
    let err = parse_context(Path::new("/x/talosconfig"), &text, Some("lab")).expect_err("missing");
    match &err {
        TalosConfigError::ContextNotFound {
            context, available, ..
        } => {
            assert_eq!(context, "lab");
            assert_eq!(
                available,
                &vec!["production".to_string(), "staging".to_string()]
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("production, staging") && text.contains("/x/talosconfig"),
        "{text}"
    );
}

#[test]
fn empty_key_and_bad_base64_are_named() {
    let ca = Ca::new("talos");
    let leaf = ca.client("os:admin");
    let text = talosconfig_text(&ca, &leaf.talos_key_pem(), &leaf.cert_pem);
    let no_key = text.replace(&format!("key: {}", b64(&leaf.talos_key_pem())), "key: \"\"");
    let err = parse_context(Path::new("tc"), &no_key, Some("staging")).expect_err("no key");
    assert!(
        matches!(err, TalosConfigError::MissingField { field: "key", .. }),
        "{err:?}"
    );
    let bad = text.replace(&format!("ca: {}", b64(&ca.pem())), "ca: '%%%'");
    let err = parse_context(Path::new("tc"), &bad, Some("staging")).expect_err("bad");
    assert!(
        matches!(err, TalosConfigError::BadPem { field: "ca", .. }),
        "{err:?}"
    );
}

#[test]
fn lookup_order_is_explicit_then_env_then_home() {
    let explicit = PathBuf::from("/etc/gates/talosconfig");
    let env = env_of(&[("TALOSCONFIG", "/env/talosconfig"), ("HOME", "/home/op")]);
    assert_eq!(
        candidate_paths(Some(&explicit), &env),
        vec![explicit.clone()]
    );
    assert_eq!(
        candidate_paths(None, &env),
        vec![
            PathBuf::from("/env/talosconfig"),
            PathBuf::from("/home/op/.talos/config")
        ]
    );
    let only_home = env_of(&[("HOME", "/home/op")]);
    assert_eq!(
        candidate_paths(None, &only_home),
        vec![PathBuf::from("/home/op/.talos/config")]
    );
    // TALOS_HOME replaces ~/.talos, but only when absolute.
    let talos_home = env_of(&[("HOME", "/home/op"), ("TALOS_HOME", "/opt/talos")]);
    assert_eq!(
        candidate_paths(None, &talos_home),
        vec![PathBuf::from("/opt/talos/config")]
    );
    let relative = env_of(&[("HOME", "/home/op"), ("TALOS_HOME", "rel")]);
    assert_eq!(
        candidate_paths(None, &relative),
        vec![PathBuf::from("/home/op/.talos/config")]
    );
}

#[test]
fn env_var_file_wins_when_it_exists_and_home_is_the_fallback() {
    let ca = Ca::new("talos");
    let leaf = ca.client("os:admin");
    let dir = tempfile::tempdir().expect("tmp");
    let env_file = dir.path().join("from-env");
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".talos")).expect("mkdir");
    let home_file = home.join(".talos").join("config");
    std::fs::write(
        &home_file,
        talosconfig_text(&ca, &leaf.talos_key_pem(), &leaf.cert_pem),
    )
    .expect("write");

    let env = env_of(&[
        ("TALOSCONFIG", env_file.to_str().expect("utf8")),
        ("HOME", home.to_str().expect("utf8")),
    ]);
    // $TALOSCONFIG names a missing file: the home file is used.
    assert_eq!(locate(None, &env).expect("home"), home_file);
    std::fs::write(&env_file, "context: x\ncontexts: {}\n").expect("write");
    assert_eq!(locate(None, &env).expect("env"), env_file);

    // An explicit path that does not exist is an error, not a fallback.
    let missing = dir.path().join("nope");
    let err = locate(Some(&missing), &env).expect_err("missing");
    assert!(
        matches!(&err, TalosConfigError::NotFound { tried } if tried == &vec![missing.clone()]),
        "{err:?}"
    );

    // The public loader with an explicit file.
    let ctx = load_context(Some(&home_file), Some("production")).expect("load");
    assert_eq!(ctx.path, home_file);
    assert_eq!(ctx.endpoints, vec!["10.0.60.11"]);
}
