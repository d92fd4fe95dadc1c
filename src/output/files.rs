//! Files the command line writes itself: reports asked for by path, snapshots.

use std::fs;
use std::path::Path;

use crate::error::AppError;

/// Write `text` to `path`, creating its directory first.
pub fn write_file(path: &Path, text: &str) -> Result<(), AppError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(AppError::file(dir, "create the directory"))?;
    }
    fs::write(path, text).map_err(AppError::file(path, "write"))
}
