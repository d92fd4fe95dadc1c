//! Paths an environment file names (kubeconfigs, talosconfigs, CA files, tokens), which are
//! relative to that file. The configuration's validation and every client read them so.

use std::path::{Path, PathBuf};

/// A path from an environment file, relative to that file's directory, with `~` expanded.
pub fn resolve(env_file: &Path, path: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    if path.is_absolute() {
        return path.to_path_buf();
    }
    env_file
        .parent()
        .map_or_else(|| path.to_path_buf(), |dir| dir.join(path))
}
