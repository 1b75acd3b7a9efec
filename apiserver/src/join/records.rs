//! Private records of joining under the data dir (node passwords, join tokens): salted SHA-256
//! digests of random secrets, and files that appear whole or not at all (mode 0600, in
//! directories of mode 0700), so a reader running beside the CLI never sees half a record.
//!
//! The secrets digested here are random (128 bits or more from the agent or the controller, 82
//! for a per-node token), so a fast hash is enough: there is no dictionary to guess from.

use sha2::Digest;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `sha256:<salt hex>:<digest hex>` of a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaltedDigest {
    salt: Vec<u8>,
    digest: Vec<u8>,
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn digest(salt: &[u8], secret: &str) -> Vec<u8> {
    let mut h = sha2::Sha256::new();
    h.update(salt);
    h.update(secret.as_bytes());
    h.finalize().to_vec()
}

/// Compares in time independent of where the inputs differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl SaltedDigest {
    /// The digest of `secret` with a fresh random salt.
    pub fn of(secret: &str) -> SaltedDigest {
        let salt: [u8; 16] = rand::random();
        SaltedDigest {
            digest: digest(&salt, secret),
            salt: salt.to_vec(),
        }
    }

    /// Reads `sha256:<salt>:<digest>`; `None` for anything else.
    pub fn parse(text: &str) -> Option<SaltedDigest> {
        let mut parts = text.trim().split(':');
        let (Some("sha256"), Some(salt), Some(want), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        Some(SaltedDigest {
            salt: unhex(salt)?,
            digest: unhex(want)?,
        })
    }

    /// Whether `secret` is the one digested (compared in constant time).
    pub fn matches(&self, secret: &str) -> bool {
        same(&digest(&self.salt, secret), &self.digest)
    }
}

impl std::fmt::Display for SaltedDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}:{}", hex(&self.salt), hex(&self.digest))
    }
}

/// Writes a new file (mode 0600) and syncs it.
fn write_new(path: &Path, contents: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()
}

/// A complete temporary file for `name` in `dir`, which is made (0700) if missing.
fn temporary(dir: &Path, name: &str, contents: &str) -> std::io::Result<std::path::PathBuf> {
    berth_shared::private_files::ensure_dir(dir)?;
    let nonce: u64 = rand::random();
    let tmp = dir.join(format!(".{name}.{nonce:016x}.tmp"));
    if let Err(e) = write_new(&tmp, contents) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Makes a new directory entry survive a crash as well as the file's contents.
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Creates `dir/name` holding `contents` unless it exists: `true` if this call created it,
/// `false` if another was there first. The file is linked in complete (a hard link from a
/// temporary file), so two writers racing for a name cannot both win.
pub fn create_whole(dir: &Path, name: &str, contents: &str) -> std::io::Result<bool> {
    let tmp = temporary(dir, name, contents)?;
    let path = dir.join(name);
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            sync_dir(dir);
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Replaces (or creates) `dir/name` with `contents` in one rename: readers see the old file or
/// the new one, never a mix.
pub fn replace_whole(dir: &Path, name: &str, contents: &str) -> std::io::Result<()> {
    let tmp = temporary(dir, name, contents)?;
    if let Err(e) = std::fs::rename(&tmp, dir.join(name)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_digest_matches_only_its_secret_and_survives_its_text_form() {
        let d = SaltedDigest::of("s3cret");
        assert!(d.matches("s3cret"));
        assert!(!d.matches("s3cres"));
        assert!(!d.matches(""));
        let text = d.to_string();
        assert!(
            text.starts_with("sha256:") && !text.contains("s3cret"),
            "{text}"
        );
        assert_eq!(SaltedDigest::parse(&text), Some(d.clone()));
        // Two digests of one secret differ (salted) and both match.
        let again = SaltedDigest::of("s3cret");
        assert_ne!(again, d);
        assert!(again.matches("s3cret"));
        for bad in [
            "",
            "garbage",
            "md5:00:00",
            "sha256:0g:00",
            "sha256:00:00:00",
        ] {
            assert_eq!(SaltedDigest::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn files_are_created_once_and_replaced_whole_in_private_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("records");
        assert!(create_whole(&dir, "a", "one\n").unwrap());
        assert!(!create_whole(&dir, "a", "two\n").unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "one\n");
        replace_whole(&dir, "a", "three\n").unwrap();
        replace_whole(&dir, "b", "four\n").unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "three\n");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("a")), 0o600);
        assert_eq!(mode(&dir.join("b")), 0o600);
        // No temporary files are left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    }
}
