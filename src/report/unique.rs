//! Report file names that never collide: two runs in the same second (two CI jobs, a
//! retry) must not overwrite each other's evidence. A name is claimed by creating its first
//! file with `create_new`, which the filesystem grants to exactly one writer; the second
//! writer gets the same stem with `-2`, the third `-3`, and so on.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// The first of `base`, `base-2`, `base-3`, ... whose `.EXT` file this call could create
/// (empty; the writer fills it). The directory is created if needed. When nothing can be
/// created (a read-only directory), `base` comes back and the writer reports the error.
pub fn claim(base: &Path, ext: &str) -> PathBuf {
    if let Some(dir) = base.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    for n in 1..10_000u32 {
        let stem = numbered(base, n);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(stem.with_extension(ext))
        {
            Ok(_) => return stem,
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return base.to_path_buf(),
        }
    }
    base.to_path_buf()
}

/// `base` for the first, `base-N` for the N-th.
fn numbered(base: &Path, n: u32) -> PathBuf {
    if n == 1 {
        return base.to_path_buf();
    }
    let mut name = base.file_name().unwrap_or_default().to_os_string();
    name.push(format!("-{n}"));
    base.with_file_name(name)
}

/// Splits `20261129T201500Z-2` into the stamp and its sequence number (1 when unnumbered),
/// so the newest of several same-second reports can be found.
pub fn stamp_and_sequence(text: &str) -> (&str, u32) {
    match text.rsplit_once('-') {
        Some((stamp, n)) => match n.parse::<u32>() {
            Ok(n) if n >= 2 => (stamp, n),
            _ => (text, 1),
        },
        None => (text, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_reports_in_the_same_second_get_different_names() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("staging-20261129T191500Z");
        let first = claim(&base, "json");
        let second = claim(&base, "json");
        let third = claim(&base, "json");
        assert_eq!(first, base);
        assert_eq!(second, dir.path().join("staging-20261129T191500Z-2"));
        assert_eq!(third, dir.path().join("staging-20261129T191500Z-3"));
        assert!(second.with_extension("json").exists());
    }

    #[test]
    fn the_sequence_number_is_read_back_from_a_name() {
        assert_eq!(
            stamp_and_sequence("20261129T191500Z"),
            ("20261129T191500Z", 1)
        );
        assert_eq!(
            stamp_and_sequence("20261129T191500Z-12"),
            ("20261129T191500Z", 12)
        );
    }
}
