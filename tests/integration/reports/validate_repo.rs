//! `gates validate` on an environment's `repo` section: the checkout, the layout it names and
//! the declared state it holds, read from files only.

use super::*;

/// The shipped configuration in `dir`, with `section` appended to staging's file; returns
/// the line the section's first key is on.
fn staging_with_repo(dir: &Path, section: &str) -> usize {
    copy_shipped_config(dir);
    let env = dir.join("environments/staging.yaml");
    let mut text = std::fs::read_to_string(&env).unwrap();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let first = text.lines().count() + 2;
    text.push_str("repo:\n");
    text.push_str(section);
    std::fs::write(&env, text).unwrap();
    first
}

fn validate(dir: &Path) -> Output {
    crate::support::gates(dir)
        .arg("--config")
        .arg(dir)
        .arg("validate")
        .output()
        .unwrap()
}

/// A copy of the adr-007 fixture repository, to break.
fn repo_copy(to: &Path) -> PathBuf {
    let repo = to.join("fleet");
    let status = Command::new("cp")
        .arg("-a")
        .arg(root().join("fixtures/repo/adr-007"))
        .arg(&repo)
        .status()
        .unwrap();
    assert!(status.success());
    repo
}

#[test]
fn validate_reads_a_good_repository_section_and_its_declared_state_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    let repo = root().join("fixtures/repo/adr-007");
    staging_with_repo(
        dir.path(),
        &format!(
            "  path: {}\n  environment: staging\n  terraform: terraform\n  tfvars:\n    staging: terraform/environments/staging.tfvars\n",
            repo.display()
        ),
    );
    let out = validate(dir.path());
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{o}{}", stderr(&out));
    assert!(o.contains("  staging: ok (gates 1, 2, 3, 4"), "{o}");
    assert!(o.contains(", repo)"), "the section is named: {o}");
    assert!(
        o.contains(&format!(
            "note: repository {}: 2 environments read (production, staging)",
            repo.display()
        )),
        "{o}"
    );
}

#[test]
fn validate_names_the_line_and_key_of_a_layout_directory_the_repository_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_copy(dir.path());
    let first = staging_with_repo(
        dir.path(),
        &format!(
            "  path: {}\n  kubernetes:\n    staging: clusters/stagin\n",
            repo.display()
        ),
    );
    let out = validate(dir.path());
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{o}{}", stderr(&out));
    let file = dir.path().join("environments/staging.yaml");
    assert!(
        o.contains(&format!(
            "error: {}:{}:14: repo.kubernetes.staging: clusters/stagin is not a directory in the repository {}",
            file.display(),
            first + 2,
            repo.display()
        )),
        "{o}"
    );
    assert!(o.contains("  staging: PROBLEMS"), "{o}");

    // A checkout that is not there at all is named at `repo.path`.
    std::fs::remove_dir_all(&repo).unwrap();
    let o = stdout(&validate(dir.path()));
    assert!(
        o.contains(&format!(
            "{}:{first}:9: repo.path: {} is not a directory",
            file.display(),
            repo.display()
        )),
        "{o}"
    );
}

#[test]
fn validate_reports_a_broken_manifest_in_the_repository_at_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_copy(dir.path());
    let release = repo.join("kubernetes/infrastructure/controllers/traefik/release.yaml");
    let text = std::fs::read_to_string(&release).unwrap();
    // An unclosed flow mapping on line 3.
    let broken: Vec<&str> = text.lines().collect();
    let mut lines: Vec<String> = broken.iter().map(|l| l.to_string()).collect();
    lines.insert(2, "broken: {unclosed".to_string());
    std::fs::write(&release, lines.join("\n")).unwrap();
    staging_with_repo(dir.path(), &format!("  path: {}\n", repo.display()));
    let out = validate(dir.path());
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{o}{}", stderr(&out));
    let at = format!("{}:", release.display());
    // Problems are grouped under the file they name: the file's heading, then its errors.
    assert!(o.contains(&format!("    {}:\n", release.display())), "{o}");
    let errors: Vec<&str> = o
        .lines()
        .filter(|l| l.trim_start().starts_with("error:") && l.contains(&at))
        .collect();
    let line = errors
        .first()
        .unwrap_or_else(|| panic!("no error at {at}: {o}"));
    let after = &line[line.find(&at).unwrap() + at.len()..];
    let number: usize = after
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("no line number: {line}"));
    // The parser notices where the mapping should have closed, a line or two on.
    assert!((3..=5).contains(&number), "{line}");
    // Both environments of the repository include Traefik; the error is said once.
    assert_eq!(errors.len(), 1, "{o}");
}

#[test]
fn validate_names_a_talos_patch_it_cannot_read_with_the_manifest_problems() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_copy(dir.path());
    std::fs::write(
        repo.join("talos/staging/controlplane.yaml.j2"),
        "cluster:\n  allowSchedulingOnControlPlanes: {{ ENV.SCHEDULE }}\n",
    )
    .unwrap();
    staging_with_repo(dir.path(), &format!("  path: {}\n", repo.display()));
    let out = validate(dir.path());
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{o}{}", stderr(&out));
    assert!(
        o.contains("Talos value not known: talos/staging/controlplane.yaml.j2:2: v1alpha1 cluster.allowSchedulingOnControlPlanes is written by the Jinja interpolation `{{ ENV.SCHEDULE }}`"),
        "{o}"
    );
    // Control flow leaves the whole template unread.
    std::fs::write(
        repo.join("talos/staging/controlplane.yaml.j2"),
        "{% if ENV.SCHEDULE %}\ncluster:\n  allowSchedulingOnControlPlanes: true\n{% endif %}\n",
    )
    .unwrap();
    let out = validate(dir.path());
    let o = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{o}{}", stderr(&out));
    assert!(
        o.contains("Talos patch not read: talos/staging/controlplane.yaml.j2: a Jinja template with control flow"),
        "{o}"
    );
}
