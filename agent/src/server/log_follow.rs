//! Reading a container's log file as it grows, across size rotation: the runtime renames
//! `<log>` to `<log>.1` and starts a new `<log>`, so a follower holds the file it opened, drains
//! it when the path names a new file, and carries on from the start of the new one.
//!
//! Reads come in chunks of at most [`CHUNK`] bytes, so a follower that fell behind a fast
//! writer catches up in bounded steps (not one allocation the size of the file), and a chunk
//! that filled up says more is waiting.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use tokio::fs::File;
use tokio::io::AsyncReadExt;

/// The most one read returns.
pub const CHUNK: usize = 1 << 20;

/// A log file being followed.
pub struct LogFollower {
    path: PathBuf,
    file: Option<File>,
    inode: Option<u64>,
}

async fn inode_at(path: &PathBuf) -> Option<u64> {
    tokio::fs::metadata(path).await.ok().map(|m| m.ino())
}

impl LogFollower {
    /// Starts following `path` from its beginning (a missing file is waited for).
    pub fn new(path: PathBuf) -> LogFollower {
        LogFollower {
            path,
            file: None,
            inode: None,
        }
    }

    /// The inode of the file being read (`None` before it was opened).
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
        let mut out = Vec::new();
        if let Some(f) = self.file.as_mut() {
            let _ = f.take(CHUNK as u64).read_to_end(&mut out).await;
            if !out.is_empty() {
                return out;
            }
        }
        // Drained. Rotated (or first call): switch to the file at the path.
        let current = inode_at(&self.path).await;
        if current.is_some()
            && current != self.inode
            && let Ok(mut f) = File::open(&self.path).await
        {
            let inode = f.metadata().await.ok().map(|m| m.ino());
            let _ = (&mut f).take(CHUNK as u64).read_to_end(&mut out).await;
            self.file = Some(f);
            self.inode = inode;
        }
        out
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
