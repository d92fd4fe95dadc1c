use crate::support::*;

#[test]
fn a_typo_in_an_environment_file_exits_2_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gates");
    copy_dir(&root().join("gates"), &config);
    let staging = config.join("environments/staging.yaml");
    let text = std::fs::read_to_string(&staging)
        .unwrap()
        .replace("host_label:", "host_lable:");
    std::fs::write(&staging, text).unwrap();
    let reports = tempfile::tempdir().unwrap();
    let out = gates(reports.path())
        .arg("--config")
        .arg(&config)
        .args(["check", "staging", "--list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("staging.yaml:") && err.contains("unknown key `host_lable`"),
        "{err}"
    );
    assert!(err.contains("did you mean `host_label`?"), "{err}");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else if !entry.file_name().to_string_lossy().starts_with("lab") {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
