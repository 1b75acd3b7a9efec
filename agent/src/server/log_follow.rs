//! Reading a container's log file as it grows, across size rotation: the runtime renames
//! `<log>` to `<log>.<stamp>` and starts a new `<log>`, so a follower holds the file it opened,
//! drains it when the path names a new file, then reads every file rotated after it, oldest
//! first (gzipped ones decompressed), before the new live file: a follower that fell several
//! rotations behind a fast writer loses no line. Only files already deleted by the log
//! collector (past `--container-log-max-files`) are skipped.
//!
//! Reads come in chunks of at most [`CHUNK`] bytes, so a follower that fell behind a fast
//! writer catches up in bounded steps (not one allocation the size of the file), and a chunk
//! that filled up says more is waiting.

use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tokio::fs::File;
use tokio::io::AsyncReadExt;

use crate::gc::plan::logs::{RotatedFile, rotated_files};

/// The most one read returns.
pub const CHUNK: usize = 1 << 20;

/// A log file being followed.
pub struct LogFollower {
    path: PathBuf,
    file: Option<File>,
    /// The inode of the live file opened last (`None` before it was opened).
    inode: Option<u64>,
    /// Whether `file` is the live file (not a rotated one being caught up on).
    reading_live: bool,
    /// The stamp of the newest rotated file already read or known to be older than what is read.
    floor: Option<String>,
    /// Rotated files still to read before the live one, oldest first.
    pending: VecDeque<RotatedFile>,
    /// A decompressed rotated file being handed out in chunks.
    buffered: Vec<u8>,
}

async fn inode_at(path: &PathBuf) -> Option<u64> {
    tokio::fs::metadata(path).await.ok().map(|m| m.ino())
}

/// The rotated files of the log at `path` newer than `floor`, oldest first, with their inodes
/// (`None` for a compressed one).
async fn rotated_after(path: &Path, floor: Option<&str>) -> Vec<(RotatedFile, Option<u64>)> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    if let Ok(mut entries) = tokio::fs::read_dir(dir).await {
        while let Ok(Some(e)) = entries.next_entry().await {
            if let Some(n) = e.file_name().to_str() {
                names.push(n.to_string());
            }
        }
    }
    let mut out = Vec::new();
    for f in rotated_files(name, names.iter().map(String::as_str)) {
        if f.partial || floor.is_some_and(|floor| f.stamp.as_str() <= floor) {
            continue;
        }
        let inode = if f.compressed {
            None
        } else {
            inode_at(&dir.join(&f.file_name)).await
        };
        out.push((f, inode));
    }
    out
}

/// A gzipped rotated file's content (empty if it is gone or unreadable).
fn gunzip(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = flate2::read::GzDecoder::new(f).read_to_end(&mut out);
    }
    out
}

impl LogFollower {
    /// Starts following `path` from its beginning (a missing file is waited for).
    pub fn new(path: PathBuf) -> LogFollower {
        LogFollower {
            path,
            file: None,
            inode: None,
            reading_live: false,
            floor: None,
            pending: VecDeque::new(),
            buffered: Vec::new(),
        }
    }

    /// The inode of the live file being read (`None` before it was opened).
    pub fn inode(&self) -> Option<u64> {
        self.inode
    }

    /// Everything written since the last call (the whole file on the first). Lossy UTF-8;
    /// a line may be split between calls.
    pub async fn read_new(&mut self) -> String {
        let mut out = Vec::new();
        loop {
            let chunk = self.read_chunk().await;
            if chunk.is_empty() {
                break;
            }
            out.extend_from_slice(&chunk);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Up to [`CHUNK`] bytes written since the last call; empty when nothing new. Bytes, not
    /// text: a chunk may end inside a line (or a character).
    pub async fn read_chunk(&mut self) -> Vec<u8> {
        loop {
            let mut out = Vec::new();
            if let Some(f) = self.file.as_mut() {
                let _ = f.take(CHUNK as u64).read_to_end(&mut out).await;
                if !out.is_empty() {
                    return out;
                }
            }
            if !self.buffered.is_empty() {
                let n = self.buffered.len().min(CHUNK);
                return self.buffered.drain(..n).collect();
            }
            if let Some(next) = self.pending.pop_front() {
                self.open_rotated(next).await;
                continue;
            }
            // Drained. Rotated (or first call): catch up on what was rotated since, then
            // switch to the file at the path.
            let current = inode_at(&self.path).await;
            if current.is_none() || (self.reading_live && current == self.inode) {
                return out;
            }
            let newer = rotated_after(&self.path, self.floor.as_deref()).await;
            if self.inode.is_none() {
                // First open: the history before it is not followed.
                self.floor = newer
                    .last()
                    .map(|(f, _)| f.stamp.clone())
                    .or(self.floor.take());
            } else {
                // The file just drained is among them (found by its inode; by its place, the
                // first, once compressed); every later one is read before the live file.
                let skip = if self.reading_live {
                    let drained = newer
                        .iter()
                        .position(|(_, inode)| inode.is_some() && *inode == self.inode)
                        .unwrap_or(0);
                    if let Some((f, _)) = newer.get(drained) {
                        self.floor = Some(f.stamp.clone());
                    }
                    drained + 1
                } else {
                    0
                };
                self.pending = newer.into_iter().skip(skip).map(|(f, _)| f).collect();
                if !self.pending.is_empty() {
                    self.file = None;
                    self.reading_live = false;
                    continue;
                }
            }
            if let Ok(f) = File::open(&self.path).await {
                self.inode = f.metadata().await.ok().map(|m| m.ino());
                self.file = Some(f);
                self.reading_live = true;
                continue;
            }
            return out;
        }
    }

    /// Starts reading a rotated file: in place, or decompressed if the collector has gzipped it
    /// meanwhile.
    async fn open_rotated(&mut self, f: RotatedFile) {
        self.floor = Some(f.stamp.clone());
        self.file = None;
        self.reading_live = false;
        let Some(dir) = self.path.parent().map(Path::to_path_buf) else {
            return;
        };
        let plain = f
            .file_name
            .strip_suffix(".gz")
            .unwrap_or(&f.file_name)
            .to_string();
        if !f.compressed
            && let Ok(file) = File::open(dir.join(&plain)).await
        {
            self.file = Some(file);
            return;
        }
        let gz = dir.join(format!("{plain}.gz"));
        self.buffered = tokio::task::spawn_blocking(move || gunzip(&gz))
            .await
            .unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(path: &std::path::Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[tokio::test]
    async fn a_follower_sees_appends_then_crosses_a_rotation_without_losing_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        let mut f = LogFollower::new(log.clone());
        assert_eq!(f.read_new().await, "", "no file yet");
        append(&log, "one\n");
        assert_eq!(f.read_new().await, "one\n");
        append(&log, "two\n");
        assert_eq!(f.read_new().await, "two\n");
        // The writer adds a last line, rotates, and writes to a fresh file.
        append(&log, "three\n");
        std::fs::rename(&log, dir.path().join("0.log.1")).unwrap();
        append(&log, "four\n");
        assert_eq!(f.read_new().await, "three\nfour\n");
        append(&log, "five\n");
        assert_eq!(f.read_new().await, "five\n");
        assert_eq!(f.read_new().await, "");
    }

    /// `<log>` renamed to its rotated name at second `n` of a fixed minute.
    fn rotate(log: &std::path::Path, n: u32) -> PathBuf {
        let at: jiff::Timestamp = format!("2026-11-29T10:00:{n:02}Z").parse().unwrap();
        let rotated = crate::gc::plan::logs::rotated_path(log, at);
        std::fs::rename(log, &rotated).unwrap();
        rotated
    }

    fn gzip(path: &std::path::Path) {
        let data = std::fs::read(path).unwrap();
        let mut gz = path.as_os_str().to_os_string();
        gz.push(".gz");
        let mut enc = flate2::write::GzEncoder::new(
            std::fs::File::create(PathBuf::from(gz)).unwrap(),
            flate2::Compression::fast(),
        );
        enc.write_all(&data).unwrap();
        enc.finish().unwrap();
        std::fs::remove_file(path).unwrap();
    }

    #[tokio::test]
    async fn a_follower_several_rotations_behind_reads_every_rotated_file_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        // History from before the follower started is not followed.
        append(&log, "old\n");
        rotate(&log, 1);
        append(&log, "one\n");
        let mut f = LogFollower::new(log.clone());
        assert_eq!(f.read_new().await, "one\n");
        // Three rotations while the follower is away; the collector gzips the oldest two, the
        // follower's own file included.
        append(&log, "two\n");
        let first = rotate(&log, 2);
        append(&log, "three\n");
        let second = rotate(&log, 3);
        append(&log, "four\n");
        rotate(&log, 4);
        append(&log, "five\n");
        gzip(&first);
        gzip(&second);
        assert_eq!(f.read_new().await, "two\nthree\nfour\nfive\n");
        // And once more, the follower's own file still plain.
        append(&log, "six\n");
        rotate(&log, 5);
        append(&log, "seven\n");
        rotate(&log, 6);
        append(&log, "eight\n");
        assert_eq!(f.read_new().await, "six\nseven\neight\n");
        assert_eq!(f.read_new().await, "");
    }

    #[tokio::test]
    async fn a_large_backlog_comes_in_bounded_chunks_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        let line = format!("{}\n", "x".repeat(1023));
        append(&log, &line.repeat(3 * 1024 + 1));
        let mut f = LogFollower::new(log.clone());
        let mut sizes = Vec::new();
        loop {
            let chunk = f.read_chunk().await;
            if chunk.is_empty() {
                break;
            }
            sizes.push(chunk.len());
        }
        assert_eq!(sizes, vec![CHUNK, CHUNK, CHUNK, 1024]);
    }
}
