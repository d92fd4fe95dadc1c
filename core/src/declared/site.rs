//! Where a declared value was written: a repository-relative file and a 1-based line. Every
//! value of the declared state carries one, so evidence can say `file:line: key: value`, and
//! every problem in a repository file is a [`RepoError`] that names the file and line.

use std::fmt;

/// A place in the repository.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Site {
    /// Relative to the repository root, with `/` separators.
    pub file: String,
    /// 1-based; 0 when the file as a whole is meant.
    pub line: usize,
}

impl Site {
    pub fn new(file: impl Into<String>, line: usize) -> Site {
        Site {
            file: file.into(),
            line,
        }
    }

    /// The directory of the file, repository-relative.
    pub fn file_dir(&self) -> String {
        match self.file.rsplit_once('/') {
            Some((dir, _)) => dir.to_string(),
            None => String::new(),
        }
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.file)
        } else {
            write!(f, "{}:{}", self.file, self.line)
        }
    }
}

/// `file:line: key: value`, the shape of every evidence line.
pub fn at(site: &Site, key: &str, value: impl fmt::Display) -> String {
    format!("{site}: {key}: {value}")
}

/// A repository file gates cannot read as declared state: unreadable, malformed, or holding a
/// construct gates does not evaluate. The message says what and, where there is one, the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoError {
    pub site: Site,
    pub message: String,
    /// The repository does not declare the value at all (a Terraform variable with no default
    /// and no tfvars line, as in a module meant to be called from elsewhere): the trials that
    /// need it skip saying so, rather than erring on a repository that was read completely.
    pub undeclared: bool,
}

impl RepoError {
    pub fn new(site: Site, message: impl Into<String>) -> RepoError {
        RepoError {
            site,
            message: message.into(),
            undeclared: false,
        }
    }

    /// A value the repository does not declare (see [`RepoError::undeclared`]).
    pub fn undeclared(site: Site, message: impl Into<String>) -> RepoError {
        RepoError {
            undeclared: true,
            ..RepoError::new(site, message)
        }
    }

    pub fn file(file: &str, message: impl Into<String>) -> RepoError {
        RepoError::new(Site::new(file, 0), message)
    }
}

impl fmt::Display for RepoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.site, self.message)
    }
}

impl std::error::Error for RepoError {}

/// The file a problem names first (`talos/x.yaml.j2:4: ...`, or after a lead-in such as
/// `Talos patch not read: `), if any.
fn file_of(problem: &str) -> Option<&str> {
    const EXTENSIONS: [&str; 10] = [
        ".yaml", ".yml", ".json", ".tf", ".tfvars", ".hcl", ".j2", ".tftpl", ".tpl", ".toml",
    ];
    problem.split_whitespace().find_map(|token| {
        let (path, _) = token.split_once(':')?;
        EXTENSIONS
            .iter()
            .any(|ext| path.ends_with(ext))
            .then_some(path)
    })
}

/// Problems grouped by the file they name, in the order each file first appears; those
/// naming no file first.
pub fn by_file(problems: &[String]) -> Vec<(Option<&str>, Vec<&String>)> {
    let mut groups: Vec<(Option<&str>, Vec<&String>)> = vec![(None, Vec::new())];
    for problem in problems {
        let file = file_of(problem);
        match groups.iter_mut().find(|(f, _)| *f == file) {
            Some((_, list)) => list.push(problem),
            None => groups.push((file, vec![problem])),
        }
    }
    groups.retain(|(_, list)| !list.is_empty());
    groups
}

#[cfg(test)]
mod grouping_tests {
    use super::*;

    #[test]
    fn problems_are_grouped_under_the_file_they_name_in_first_seen_order() {
        let problems: Vec<String> = [
            "gates/environments/staging.yaml:3:1: unknown key `x`",
            "Talos patch not read: talos/a.yaml.j2: a Jinja template with control flow",
            "kube.kubeconfig: /nowhere does not exist",
            "talos/b.yaml.j2:2: v1alpha1 machine.type is written by ...",
            "Talos value not known: talos/a.yaml.j2:5: v1alpha1 cluster.x is written by ...",
        ]
        .map(String::from)
        .to_vec();
        let groups: Vec<(Option<&str>, usize)> = by_file(&problems)
            .into_iter()
            .map(|(f, list)| (f, list.len()))
            .collect();
        assert_eq!(
            groups,
            [
                (None, 1),
                (Some("gates/environments/staging.yaml"), 1),
                (Some("talos/a.yaml.j2"), 2),
                (Some("talos/b.yaml.j2"), 1),
            ]
        );
    }
}
