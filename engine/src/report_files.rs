//! Report file names that never collide: two runs in the same second (two CI jobs, a
//! retry) must not overwrite each other's evidence. A name is claimed by creating its first
//! file with `create_new`, which the filesystem grants to exactly one writer; the second
//! writer gets the same stem with `-2`, the third `-3`, and so on. The newest of them is read
//! back by its name (gate 4 judges the newest chaos report).

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use gates_core::state::ChaosEvidence;

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

/// A report file (or the directory holding them) that could not be read back as evidence.
#[derive(Debug, thiserror::Error)]
pub enum ReportUnreadable {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{}:{}: not a gates report: {source}", path.display(), source.line(), source.column())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: {source}", path.display())]
    Newer {
        path: PathBuf,
        #[source]
        source: gates_core::schema::NewerReport,
    },
}

/// The newest `chaos-ENV-*.json` under `dir` (by the timestamp in its name), read back as
/// the record the chaos run wrote. `Ok(None)` when there is none.
pub fn newest_chaos(
    dir: &Path,
    environment: &str,
) -> Result<Option<ChaosEvidence>, ReportUnreadable> {
    let prefix = format!("chaos-{environment}-");
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ReportUnreadable::Read {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let newest = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|name| {
            let rest = name.strip_prefix(&prefix)?.strip_suffix(".json")?;
            let (stamp, sequence) = stamp_and_sequence(rest);
            is_stamp(stamp).then(|| ((stamp.to_string(), sequence), name.clone()))
        })
        .max();
    let Some((_, name)) = newest else {
        return Ok(None);
    };
    let path = dir.join(&name);
    Ok(Some(ChaosEvidence {
        record: read(&path)?,
        file: path.display().to_string(),
    }))
}

/// A report read back as `T`: refused by name when a newer gates wrote it (its
/// `schema_version` is read before the rest, so a newer report is never half-read).
pub fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ReportUnreadable> {
    let text = fs::read_to_string(path).map_err(|source| ReportUnreadable::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if let Ok(versioned) = serde_json::from_str::<gates_core::schema::Versioned>(&text) {
        gates_core::schema::admit(versioned.schema_version).map_err(|source| {
            ReportUnreadable::Newer {
                path: path.to_path_buf(),
                source,
            }
        })?;
    }
    serde_json::from_str(&text).map_err(|source| ReportUnreadable::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// `20261129T201500Z`: the stamp alone, so `chaos-lab-production-…` is not read for `lab`.
fn is_stamp(text: &str) -> bool {
    text.len() == 16
        && text.ends_with('Z')
        && text.as_bytes()[8] == b'T'
        && text
            .bytes()
            .enumerate()
            .all(|(i, b)| i == 8 || i == 15 || b.is_ascii_digit())
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

    #[test]
    fn only_this_environments_reports_are_read_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let body = |host: &str| {
            format!(
                r#"{{"environment":"lab","host":"{host}","mode":"environment-vms","started_at":"2026-11-29T20:00:00.000Z","finished_at":"2026-11-29T20:01:00.000Z","verdict":"pass","outcome":"completed","trials":[]}}"#
            )
        };
        fs::write(
            dir.path().join("chaos-lab-20261128T200000Z.json"),
            body("pve1"),
        )
        .unwrap();
        fs::write(
            dir.path().join("chaos-lab-20261129T200000Z.json"),
            body("pve2"),
        )
        .unwrap();
        fs::write(
            dir.path()
                .join("chaos-lab-production-20261130T200000Z.json"),
            body("pve9"),
        )
        .unwrap();
        fs::write(
            dir.path().join("chaos-lab-20261130T200000Z.timeline.json"),
            "{}",
        )
        .unwrap();
        fs::write(
            dir.path().join("chaos-lab-20261129T200000Z-2.json"),
            body("pve3"),
        )
        .unwrap();
        let got = newest_chaos(dir.path(), "lab").unwrap().unwrap();
        assert_eq!(
            got.record.host, "pve3",
            "the second report of that second is the newest"
        );
        assert!(newest_chaos(dir.path(), "staging").unwrap().is_none());
        assert!(
            newest_chaos(&dir.path().join("missing"), "lab")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_chaos_report_from_a_newer_gates_is_refused_naming_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chaos-lab-20261129T200000Z.json");
        fs::write(
            &path,
            r#"{"schema_version":99,"environment":"lab","host":"pve1","mode":"environment-vms","started_at":"","finished_at":"","verdict":"pass","outcome":"completed","trials":[]}"#,
        )
        .unwrap();
        let err = newest_chaos(dir.path(), "lab").unwrap_err().to_string();
        assert!(err.contains("chaos-lab-20261129T200000Z.json"), "{err}");
        assert!(err.contains("schema_version 99"), "{err}");
        fs::write(&path, r#"{"schema_version":1,"environment":"lab","host":"pve1","mode":"environment-vms","started_at":"","finished_at":"","verdict":"pass","outcome":"completed","trials":[]}"#).unwrap();
        assert_eq!(
            newest_chaos(dir.path(), "lab")
                .unwrap()
                .unwrap()
                .record
                .host,
            "pve1"
        );
    }
}
