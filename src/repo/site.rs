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
