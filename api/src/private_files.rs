//! Private files and directories, for both binaries: directories 0700 and files 0600 (the
//! controller's data dir with its store, PKI, join tokens, kubeconfig and node password
//! records; the agent's root dir with its key, certificate, CA and node secret). Made so, and
//! checked at every start: a mode someone loosened is tightened again with a warning.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A private file or directory that could not be read or written: its path and the OS's error.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct FileError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl FileError {
    /// The error of an I/O step on `path`, for `map_err`.
    pub fn at(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
        move |source| FileError {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Mode of private directories.
pub const DIR_MODE: u32 = 0o700;
/// Mode of private files.
pub const FILE_MODE: u32 = 0o600;

/// Writes `bytes` to `path` as a private file (0600), whole or not at all: into a temporary
/// file beside it, fsync'd, renamed over `path`, then the directory fsync'd. A failure
/// leaves no temporary file. Returns the path an error concerns with the error.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), (std::path::PathBuf, std::io::Error)> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let at = |p: &Path| {
        let p = p.to_path_buf();
        move |e| (p, e)
    };
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(FILE_MODE)
            .open(&tmp)
            .map_err(at(&tmp))?;
        // The mode of an existing temporary file is not changed by `open`.
        f.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(at(&tmp))?;
        f.write_all(bytes).map_err(at(&tmp))?;
        f.sync_all().map_err(at(&tmp))?;
        std::fs::rename(&tmp, path).map_err(at(path))?;
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(at(&dir))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates `dir` (and missing parents) with mode 0700, or tightens an existing one (with a
/// warning: see [`check`]).
pub fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    check(dir, DIR_MODE)
}

/// Sets `path`'s permission bits to `mode` if they allow more (group or other bits, or owner
/// bits beyond `mode`); returns the old bits when it changed them.
pub fn tighten(path: &Path, mode: u32) -> std::io::Result<Option<u32>> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        // A symlink's own mode means nothing; its target is not ours to judge.
        return Ok(None);
    }
    let old = meta.permissions().mode() & 0o7777;
    if old & !mode == 0 {
        return Ok(None);
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(Some(old))
}

/// [`tighten`], logging a warning when the mode was loosened; a missing path is fine.
pub fn check(path: &Path, mode: u32) -> std::io::Result<()> {
    match tighten(path, mode) {
        Ok(Some(old)) => {
            tracing::warn!(
                path = %path.display(),
                was = format_args!("{old:04o}"),
                now = format_args!("{mode:04o}"),
                "permissions were looser than they must be; tightened"
            );
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// [`check`]s `dir` (0700) and every regular file directly in it (0600).
pub fn check_tree(dir: &Path) -> std::io::Result<()> {
    check(dir, DIR_MODE)?;
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            check(&entry.path(), FILE_MODE)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn new_directories_are_private_and_loosened_ones_are_tightened() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn only_modes_that_allow_more_are_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("f");
        std::fs::write(&f, "x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(tighten(&f, FILE_MODE).unwrap(), None);
        assert_eq!(mode(&f), 0o400, "stricter than wanted is left alone");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(tighten(&f, FILE_MODE).unwrap(), Some(0o644));
        assert_eq!(mode(&f), 0o600);
    }

    #[test]
    fn a_tree_check_fixes_the_directory_and_its_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pki");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        for f in ["ca.key", "ca.crt"] {
            std::fs::write(dir.join(f), "x").unwrap();
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        check_tree(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("ca.key")), 0o600);
        assert_eq!(mode(&dir.join("ca.crt")), 0o600);
        check_tree(&tmp.path().join("missing")).unwrap();
    }
}
