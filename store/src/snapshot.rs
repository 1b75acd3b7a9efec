//! The snapshot file of `berth-controller snapshot save|restore`: every object of the store
//! at one revision, in a format that does not depend on the backend (the redb file or etcd
//! can both produce and consume it).
//!
//! Layout (integers little-endian):
//! ```text
//! "BERTHSNP"                    8 bytes, the magic
//! version: u32                  1
//! revision: u64                 the store revision the objects are consistent at
//! count: u64                    number of records
//! count × { key_len: u32, key (UTF-8), data_len: u32, data (the object's JSON) }
//! sha256: 32 bytes              of everything before it
//! ```
//! Keys are the store's keys; each object's JSON carries its uid and resourceVersion. A file
//! is written atomically (a temporary file in the same directory, fsync'd, renamed, the
//! directory fsync'd) and private (0600: it holds every Secret).

use super::Revision;
use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"BERTHSNP";
const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 8 + 8;
const DIGEST: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("not a Berth snapshot (bad magic)")]
    BadMagic,
    #[error("snapshot format version {0} is not supported (this build reads {VERSION})")]
    UnsupportedVersion(u32),
    #[error("the snapshot is truncated")]
    Truncated,
    #[error("the snapshot is corrupt: its checksum does not match its content")]
    Checksum,
    #[error("the snapshot is corrupt: {0}")]
    Malformed(String),
    #[error("object {0} is too large for a snapshot record")]
    TooLarge(String),
}

impl SnapshotError {
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// The content of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub revision: Revision,
    /// (store key, object JSON), in the order written.
    pub objects: Vec<(String, Bytes)>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError + '_ {
    move |source| SnapshotError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn len_u32(n: usize, key: &str) -> Result<[u8; 4], SnapshotError> {
    u32::try_from(n)
        .map(u32::to_le_bytes)
        .map_err(|_| SnapshotError::TooLarge(key.to_string()))
}

/// The bytes of a snapshot of `objects` at `revision`.
pub fn encode<K, V>(
    revision: Revision,
    objects: impl IntoIterator<Item = (K, V)>,
) -> Result<Vec<u8>, SnapshotError>
where
    K: AsRef<str>,
    V: AsRef<[u8]>,
{
    let mut records = Vec::new();
    let mut count: u64 = 0;
    for (key, data) in objects {
        let (key, data) = (key.as_ref(), data.as_ref());
        records.extend_from_slice(&len_u32(key.len(), key)?);
        records.extend_from_slice(key.as_bytes());
        records.extend_from_slice(&len_u32(data.len(), key)?);
        records.extend_from_slice(data);
        count += 1;
    }
    let mut out = Vec::with_capacity(HEADER + records.len() + DIGEST);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&revision.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&records);
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    Ok(out)
}

/// Reads `n` bytes at `*at`, advancing it.
fn take<'a>(buf: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], SnapshotError> {
    let end = at.checked_add(n).ok_or(SnapshotError::Truncated)?;
    let out = buf.get(*at..end).ok_or(SnapshotError::Truncated)?;
    *at = end;
    Ok(out)
}

fn u32_at(buf: &[u8], at: &mut usize) -> Result<u32, SnapshotError> {
    let b = take(buf, at, 4)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn u64_at(buf: &[u8], at: &mut usize) -> Result<u64, SnapshotError> {
    let mut a = [0u8; 8];
    a.copy_from_slice(take(buf, at, 8)?);
    Ok(u64::from_le_bytes(a))
}

/// Parses and verifies snapshot bytes: magic, version, checksum, then every record.
pub fn decode(buf: &[u8]) -> Result<Snapshot, SnapshotError> {
    if buf.len() < MAGIC.len() {
        return Err(SnapshotError::Truncated);
    }
    if &buf[..MAGIC.len()] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    if buf.len() < HEADER + DIGEST {
        return Err(SnapshotError::Truncated);
    }
    let mut at = MAGIC.len();
    let version = u32_at(buf, &mut at)?;
    if version != VERSION {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let (content, digest) = buf.split_at(buf.len() - DIGEST);
    if Sha256::digest(content).as_slice() != digest {
        // A file cut short fails here too: its last 32 bytes are not a digest of the rest.
        return Err(SnapshotError::Checksum);
    }
    let revision = u64_at(content, &mut at)?;
    let count = u64_at(content, &mut at)?;
    let mut objects = Vec::new();
    for _ in 0..count {
        let key_len = u32_at(content, &mut at)? as usize;
        let key = std::str::from_utf8(take(content, &mut at, key_len)?)
            .map_err(|e| SnapshotError::Malformed(format!("a key is not UTF-8: {e}")))?
            .to_string();
        let data_len = u32_at(content, &mut at)? as usize;
        let data = Bytes::copy_from_slice(take(content, &mut at, data_len)?);
        objects.push((key, data));
    }
    if at != content.len() {
        return Err(SnapshotError::Malformed(format!(
            "{} bytes after the last record",
            content.len() - at
        )));
    }
    Ok(Snapshot { revision, objects })
}

/// Writes snapshot bytes (checked with [`decode`] first) to `path` atomically, mode 0600.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    let snapshot = decode(bytes)?;
    berth_shared::private_files::write_atomic(path, bytes)
        .map_err(|(at, source)| SnapshotError::Io { path: at, source })?;
    Ok(snapshot)
}

/// Writes a snapshot of `objects` at `revision` to `path` (atomically, mode 0600).
pub fn write<K, V>(
    path: &Path,
    revision: Revision,
    objects: impl IntoIterator<Item = (K, V)>,
) -> Result<Snapshot, SnapshotError>
where
    K: AsRef<str>,
    V: AsRef<[u8]>,
{
    write_bytes(path, &encode(revision, objects)?)
}

/// Reads and verifies the snapshot at `path`.
pub fn read(path: &Path) -> Result<Snapshot, SnapshotError> {
    decode(&std::fs::read(path).map_err(io(path))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn sample() -> Vec<(String, Bytes)> {
        vec![
            (
                "/registry/configmaps/default/a".to_string(),
                Bytes::from_static(
                    br#"{"metadata":{"name":"a","uid":"u-1","resourceVersion":"5"}}"#,
                ),
            ),
            (
                "/registry/secrets/kube-system/b".to_string(),
                Bytes::from_static(
                    br#"{"metadata":{"name":"b","uid":"u-2","resourceVersion":"9"}}"#,
                ),
            ),
        ]
    }

    #[test]
    fn a_snapshot_reads_back_as_written_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("backup.snap");
        write(&path, 42, sample()).unwrap();
        let s = read(&path).unwrap();
        assert_eq!(
            s,
            Snapshot {
                revision: 42,
                objects: sample()
            }
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn an_empty_store_makes_a_valid_snapshot() {
        let bytes = encode(7, Vec::<(String, Bytes)>::new()).unwrap();
        assert_eq!(decode(&bytes).unwrap().revision, 7);
        assert!(decode(&bytes).unwrap().objects.is_empty());
    }

    #[test]
    fn a_truncated_snapshot_is_rejected() {
        let bytes = encode(42, sample()).unwrap();
        for cut in [0, 4, HEADER, HEADER + 10, bytes.len() - 1] {
            let err = decode(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(err, SnapshotError::Truncated | SnapshotError::Checksum),
                "cut at {cut}: {err}"
            );
        }
    }

    #[test]
    fn a_corrupted_byte_is_rejected() {
        let bytes = encode(42, sample()).unwrap();
        for i in [12, HEADER + 3, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(
                matches!(decode(&bad), Err(SnapshotError::Checksum)),
                "flipped byte {i}"
            );
        }
    }

    #[test]
    fn other_files_and_versions_are_named_as_such() {
        assert!(matches!(
            decode(b"SQLite format 3\0 and more bytes than a header holds ......"),
            Err(SnapshotError::BadMagic)
        ));
        let mut bytes = encode(1, sample()).unwrap();
        bytes[8] = 2;
        assert!(matches!(
            decode(&bytes),
            Err(SnapshotError::UnsupportedVersion(2))
        ));
    }

    #[test]
    fn a_failed_write_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("backup.snap");
        assert!(write(&path, 1, sample()).is_err());
        assert!(!path.exists());
    }
}
