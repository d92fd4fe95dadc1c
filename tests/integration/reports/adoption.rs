//! Completions, the man page, --version, validate and the kube overrides.

use super::*;

#[test]
fn bash_completion_offers_the_subcommands_and_check_options() {
    let script = stdout(
        &gates_with_config(Path::new("."))
            .args(["completions", "bash"])
            .output()
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gates.bash");
    std::fs::write(&file, script).unwrap();
    let complete = |words: &str| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
                 COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; _gates gates; echo \"${{COMPREPLY[@]}}\"",
                file.display()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let subcommands = complete("gates ''");
    for word in [
        "check",
        "chaos",
        "history",
        "adr",
        "validate",
        "completions",
        "man",
    ] {
        assert!(
            subcommands.split_whitespace().any(|w| w == word),
            "{word}: {subcommands}"
        );
    }
    let options = complete("gates check --");
    for flag in [
        "--metrics",
        "--pushgateway",
        "--kubeconfig",
        "--context",
        "--junit",
    ] {
        assert!(
            options.split_whitespace().any(|w| w == flag),
            "{flag}: {options}"
        );
    }
}

#[test]
fn the_man_page_is_roff_naming_every_subcommand() {
    let out = gates_with_config(Path::new("."))
        .arg("man")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = stdout(&out);
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH gates"),
        "{page}"
    );
    for word in [
        "check",
        "chaos",
        "recover",
        "history",
        "adr",
        "validate",
        "\\-\\-kubeconfig",
    ] {
        assert!(page.contains(word), "{word}");
    }
}

#[test]
fn version_names_the_commit() {
    let out = gates_with_config(Path::new("."))
        .arg("--version")
        .output()
        .unwrap();
    let text = stdout(&out);
    let inner = text
        .trim()
        .strip_prefix(&format!("gates {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{text}"));
    let commit = inner.split_whitespace().next().unwrap();
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success());
    match head {
        // Built from this checkout: the commit is HEAD's, or the one given in GATES_COMMIT.
        Some(head) if std::env::var_os("GATES_COMMIT").is_none() => {
            let head = stdout(&head);
            assert!(
                head.trim().starts_with(commit) || commit.starts_with(head.trim()),
                "{text} vs {head}"
            );
        }
        _ => assert!(!commit.is_empty()),
    }
}

#[test]
fn validate_passes_the_shipped_configuration_without_touching_anything() {
    let out = gates_with_config(Path::new("."))
        .arg("validate")
        .output()
        .unwrap();
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{o}{}", stderr(&out));
    assert!(o.contains("5 gates,"), "{o}");
    assert!(o.contains("  staging: ok (gates 1, 2, 3, 4"), "{o}");
    assert!(o.contains("  production: ok (gates 3, 5"), "{o}");
}

#[test]
fn validate_names_the_file_and_key_of_a_missing_kubeconfig_and_an_unknown_context() {
    let dir = tempfile::tempdir().unwrap();
    copy_shipped_config(dir.path());
    let env = dir.path().join("environments/staging.yaml");
    let shipped = std::fs::read_to_string(&env).unwrap();
    std::fs::write(
        &env,
        shipped.replace(
            "  # kubeconfig: ~/.kube/staging.yaml        # optional",
            "  kubeconfig: missing.kubeconfig",
        ),
    )
    .unwrap();
    let validate = || {
        crate::support::gates(dir.path())
            .arg("--config")
            .arg(dir.path())
            .arg("validate")
            .output()
            .unwrap()
    };
    // A kubeconfig that does not exist is already a configuration error at load, with its line.
    let out = validate();
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{}{e}", stdout(&out));
    assert!(
        e.contains("staging.yaml:")
            && e.contains("kube.kubeconfig `missing.kubeconfig` does not exist"),
        "{e}"
    );
    std::fs::write(&env, shipped).unwrap();
    // production names a kubeconfig that exists but lacks production's context: validate
    // reads the kubeconfig and says so.
    std::fs::write(dir.path().join("kc.yaml"), kubeconfig("elsewhere")).unwrap();
    let production = dir.path().join("environments/production.yaml");
    let text = std::fs::read_to_string(&production).unwrap().replacen(
        "kube:\n",
        "kube:\n  kubeconfig: ../kc.yaml\n",
        1,
    );
    std::fs::write(&production, text).unwrap();
    let out = validate();
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{o}{}", stderr(&out));
    assert!(
        o.contains("production.yaml: kube.context: `admin@production` is not a context")
            && o.contains("(it has: elsewhere)"),
        "{o}"
    );
}

fn kubeconfig(context: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: https://127.0.0.1:1}}\n\
         users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: {context}\n  context: {{cluster: c, user: u}}\n\
         current-context: {context}\n"
    )
}

#[test]
fn kubeconfig_and_context_flags_override_the_environment_file() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc.yaml");
    std::fs::write(&kc, kubeconfig("elsewhere")).unwrap();
    let out = gates_with_config(dir.path())
        .args([
            "check",
            "staging",
            "gate1::staging::control-plane-nodes",
            "--exact",
            "--reports",
        ])
        .arg(dir.path())
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["--context", "not-there"])
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("kubeconfig context `not-there`"), "{all}");
    // Without --context, the file's context (admin@staging) is not in this kubeconfig either.
    let out = gates_with_config(dir.path())
        .args([
            "check",
            "staging",
            "gate1::staging::control-plane-nodes",
            "--exact",
            "--reports",
        ])
        .arg(dir.path())
        .arg("--kubeconfig")
        .arg(&kc)
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(all.contains("kubeconfig context `admin@staging`"), "{all}");
}
