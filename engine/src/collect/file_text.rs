//! A snapshot file's text. A large file is read in parts on several threads: copying a few
//! hundred megabytes into fresh memory costs about as much as finding the objects in them.

use std::fs::File;
use std::io;
use std::path::Path;

/// Files smaller than this are read on one thread.
const IN_PARTS_FROM: u64 = 16 << 20;

/// The text of `file`, whose size was found to be `len`.
pub fn read(file: &Path, len: u64) -> io::Result<String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len < IN_PARTS_FROM as usize || threads < 2 || !cfg!(unix) {
        return std::fs::read_to_string(file);
    }
    let bytes = read_in_parts(&File::open(file)?, len, threads)?;
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// Exactly `len` bytes of `file`, in `parts` parts side by side; a file that is no longer
/// `len` bytes long is an error rather than a torn read.
#[cfg(unix)]
fn read_in_parts(file: &File, len: usize, parts: usize) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let changed = || io::Error::other("the file changed size while it was read; read it again");
    let mut bytes = vec![0u8; len];
    let size = len.div_ceil(parts).max(1);
    std::thread::scope(|scope| {
        let readers: Vec<_> = bytes
            .chunks_mut(size)
            .enumerate()
            .map(|(k, part)| scope.spawn(move || file.read_exact_at(part, (k * size) as u64)))
            .collect();
        readers.into_iter().try_for_each(|reader| {
            reader
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    })
    .map_err(|err| match err.kind() {
        io::ErrorKind::UnexpectedEof => changed(),
        _ => err,
    })?;
    if file.read_at(&mut [0u8; 1], len as u64)? != 0 {
        return Err(changed());
    }
    Ok(bytes)
}

#[cfg(not(unix))]
fn read_in_parts(file: &File, len: usize, _parts: usize) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(len);
    file.take(len as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() != len {
        return Err(io::Error::other(
            "the file changed size while it was read; read it again",
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("snapshot.json");
        std::fs::write(&path, bytes).expect("written");
        (dir, path)
    }

    #[test]
    fn a_file_read_in_parts_is_the_file() {
        let text: Vec<u8> = (0..10_007u32).flat_map(|n| n.to_le_bytes()).collect();
        let (_dir, path) = file_with(&text);
        for parts in [1, 2, 3, 7, 64] {
            let read = read_in_parts(&File::open(&path).unwrap(), text.len(), parts);
            assert_eq!(read.unwrap(), text, "{parts} parts");
        }
    }

    #[test]
    fn a_file_that_is_not_the_size_it_was_is_an_error_not_a_torn_read() {
        let (_dir, path) = file_with(b"{\"items\": []}");
        for len in [5, 40] {
            let err = read_in_parts(&File::open(&path).unwrap(), len, 2).unwrap_err();
            assert!(err.to_string().contains("changed size"), "{len}: {err}");
        }
    }

    #[test]
    fn a_large_file_is_its_text_and_invalid_utf8_is_refused() {
        let text = "{\"a\": \"é\"}\n".repeat((IN_PARTS_FROM as usize / 12) + 1);
        let (_dir, path) = file_with(text.as_bytes());
        let len = text.len() as u64;
        assert_eq!(read(&path, len).unwrap(), text);
        let mut bytes = text.into_bytes();
        let middle = bytes.len() / 2;
        bytes[middle] = 0xff;
        let (_dir, path) = file_with(&bytes);
        let err = read(&path, len).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    }
}
