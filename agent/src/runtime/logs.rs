//! Copies a container's stdout/stderr FIFOs into its log file in the CRI log format.
//!
//! Each line becomes `<RFC 3339 UTC time, 9 fraction digits> <stdout|stderr> <F|P> <text>`:
//! `F` ends a line, `P` is a piece of a line longer than [`MAX_LINE`]. Output that ends
//! without a newline is written as a full line when the stream ends (as containerd's CRI
//! logger does). The file is rotated by size as the kubelet's log manager does it: `<log>` is
//! renamed to `<log>.<YYYYMMDD-hhmmss>` and a fresh `<log>` started, at the write that would
//! take it past the limit (at most once a second: the stamp has seconds); the garbage
//! collector (`gc::log_rotation`) compresses older rotated files and keeps their number.
//!
//! One copier task runs per started container. It stops after the container exited and the
//! FIFOs are drained, and reports that through a watch channel so `wait_exit` can return only
//! once the output is on disk. It also tees each chunk it reads to the clients attached to the
//! container (see [`attach`](super::attach)).

use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::attach::{self, Tee};
use super::fifo::FifoSource;

/// Lines longer than this are split into `P` pieces (the kubelet's 16 KiB).
pub(crate) const MAX_LINE: usize = 16 * 1024;

/// After the exit, how long to wait for the shim to finish writing.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamKind {
    Stdout,
    Stderr,
}

impl StreamKind {
    fn as_str(self) -> &'static str {
        match self {
            StreamKind::Stdout => "stdout",
            StreamKind::Stderr => "stderr",
        }
    }
}

/// `2026-11-22T09:00:00.000000000Z`
pub(crate) fn cri_timestamp(ts: Timestamp) -> String {
    let dt = ts.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.subsec_nanosecond()
    )
}

/// Splits one stream's bytes into CRI log lines.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    kind: StreamKind,
    pending: Vec<u8>,
}

impl LineSplitter {
    pub(crate) fn new(kind: StreamKind) -> Self {
        LineSplitter {
            kind,
            pending: Vec::new(),
        }
    }

    fn emit(&self, ts: &str, tag: char, text: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(ts.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.kind.as_str().as_bytes());
        out.push(b' ');
        out.push(tag as u8);
        out.push(b' ');
        out.extend_from_slice(text);
        out.push(b'\n');
    }

    /// Appends the log lines completed by `chunk` to `out`.
    pub(crate) fn push(&mut self, ts: &str, chunk: &[u8], out: &mut Vec<u8>) {
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(nl) = self.pending[start..].iter().position(|b| *b == b'\n') {
            let mut line = &self.pending[start..start + nl];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let mut rest = line;
            while rest.len() > MAX_LINE {
                self.emit(ts, 'P', &rest[..MAX_LINE], out);
                rest = &rest[MAX_LINE..];
            }
            self.emit(ts, 'F', rest, out);
            start += nl + 1;
        }
        self.pending.drain(..start);
        while self.pending.len() > MAX_LINE {
            let piece: Vec<u8> = self.pending.drain(..MAX_LINE).collect();
            self.emit(ts, 'P', &piece, out);
        }
    }

    /// At the end of the stream: a last line without newline is still a full line.
    pub(crate) fn finish(&mut self, ts: &str, out: &mut Vec<u8>) {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.emit(ts, 'F', &rest, out);
        }
    }
}

/// An append-only log file rotated by size.
#[derive(Debug)]
pub(crate) struct LogFile {
    path: PathBuf,
    file: Option<File>,
    size: u64,
    max_bytes: u64,
    warned: bool,
}

impl LogFile {
    pub(crate) fn new(path: PathBuf, max_bytes: u64) -> Self {
        LogFile {
            path,
            file: None,
            size: 0,
            max_bytes,
            warned: false,
        }
    }

    /// Creates the (empty) file now, as the CRI does when a container is created, so a running
    /// container that has printed nothing yet has logs to read and follow.
    pub(crate) fn create(&mut self) {
        if let Err(e) = self.open() {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot create the container log");
            self.warned = true;
        }
    }

    fn open(&mut self) -> std::io::Result<&mut File> {
        if self.file.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            self.size = file.metadata()?.len();
            self.file = Some(file);
        }
        self.file
            .as_mut()
            .ok_or_else(|| std::io::Error::other("log file not open"))
    }

    /// Renames the file to its rotated name; a rotated file of this second already there
    /// leaves the file growing until the next second.
    fn rotate(&mut self) -> std::io::Result<()> {
        let rotated = crate::gc::plan::logs::rotated_path(&self.path, Timestamp::now());
        if rotated.exists() {
            return Ok(());
        }
        self.file = None;
        std::fs::rename(&self.path, rotated)?;
        self.size = 0;
        Ok(())
    }

    /// Writes `data` (whole lines); errors are reported once and the data dropped, so a
    /// broken log directory never blocks the container.
    pub(crate) fn write(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let result = (|| {
            self.open()?;
            if self.size > 0 && self.size + data.len() as u64 > self.max_bytes {
                self.rotate()?;
            }
            let file = self.open()?;
            file.write_all(data)?;
            self.size += data.len() as u64;
            Ok::<(), std::io::Error>(())
        })();
        if let Err(e) = result {
            self.file = None;
            if !self.warned {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot write container log");
                self.warned = true;
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes a live log and its rotated files (`<log>.*`); missing files are fine.
pub(crate) fn remove_log_files(log: &Path) -> std::io::Result<()> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Ok(());
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let prefix = format!("{name}.");
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        if file == name || file.starts_with(&prefix) {
            match std::fs::remove_file(entry.path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
    }
    Ok(())
}

/// A running copier: `done` turns true once it finished.
#[derive(Debug)]
pub(crate) struct Copier {
    pub(crate) done: watch::Receiver<bool>,
    abort: AbortHandle,
}

impl Copier {
    pub(crate) fn abort(&self) {
        self.abort.abort();
    }
}

/// Spawns the copier for one container. `exited` resolves when the task has exited.
pub(crate) fn spawn_copier(
    log: LogFile,
    stdout: FifoSource,
    stderr: Option<FifoSource>,
    tee: Tee,
    exited: impl Future<Output = ()> + Send + 'static,
) -> Copier {
    let (done_tx, done_rx) = watch::channel(false);
    let task = tokio::spawn(async move {
        copy(log, stdout, stderr, &tee, exited).await;
        // The tee goes before `done`: attached clients have seen the end when a waiter wakes.
        drop(tee);
        let _ = done_tx.send(true);
    });
    Copier {
        done: done_rx,
        abort: task.abort_handle(),
    }
}

/// Reads both FIFOs until the task exited and they are drained (or the drain timed out).
async fn copy(
    mut log: LogFile,
    mut stdout: FifoSource,
    mut stderr: Option<FifoSource>,
    tee: &Tee,
    exited: impl Future<Output = ()>,
) {
    let mut out_lines = LineSplitter::new(StreamKind::Stdout);
    let mut err_lines = LineSplitter::new(StreamKind::Stderr);
    let mut out_buf = vec![0u8; 32 * 1024];
    let mut err_buf = vec![0u8; 32 * 1024];
    let mut out_done = false;
    let mut err_done = stderr.is_none();
    let mut draining = false;
    let drain_deadline = tokio::time::sleep(Duration::from_secs(86_400 * 365));
    tokio::pin!(exited, drain_deadline);
    let mut lines = Vec::new();
    while !(out_done && err_done) {
        lines.clear();
        tokio::select! {
            r = stdout.read(&mut out_buf), if !out_done => match r {
                Ok(n) if n > 0 => {
                    attach::tee(tee, StreamKind::Stdout, &out_buf[..n]);
                    out_lines.push(&cri_timestamp(Timestamp::now()), &out_buf[..n], &mut lines);
                }
                _ => out_done = true,
            },
            r = read_opt(&mut stderr, &mut err_buf), if !err_done => match r {
                Ok(n) if n > 0 => {
                    attach::tee(tee, StreamKind::Stderr, &err_buf[..n]);
                    err_lines.push(&cri_timestamp(Timestamp::now()), &err_buf[..n], &mut lines);
                }
                _ => err_done = true,
            },
            () = &mut exited, if !draining => {
                draining = true;
                stdout.begin_drain();
                if let Some(e) = stderr.as_mut() {
                    e.begin_drain();
                }
                drain_deadline
                    .as_mut()
                    .reset(tokio::time::Instant::now() + DRAIN_TIMEOUT);
            }
            () = &mut drain_deadline, if draining => {
                tracing::debug!(path = %stdout.path().display(), "log drain timed out");
                break;
            }
        }
        log.write(&lines);
    }
    lines.clear();
    let ts = cri_timestamp(Timestamp::now());
    out_lines.finish(&ts, &mut lines);
    err_lines.finish(&ts, &mut lines);
    log.write(&lines);
    tracing::trace!(path = %log.path().display(), "log copier finished");
}

async fn read_opt(src: &mut Option<FifoSource>, buf: &mut [u8]) -> std::io::Result<usize> {
    match src {
        Some(s) => s.read(buf).await,
        None => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TS: &str = "2026-11-22T09:00:00.000000000Z";

    fn run(chunks: &[&[u8]], finish: bool) -> String {
        let mut s = LineSplitter::new(StreamKind::Stdout);
        let mut out = Vec::new();
        for c in chunks {
            s.push(TS, c, &mut out);
        }
        if finish {
            s.finish(TS, &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn lines_become_full_cri_entries() {
        let cases: [(&[&[u8]], bool, &str); 6] = [
            (&[b"hello\n"], false, "T stdout F hello\n"),
            (&[b"a\nb\n"], false, "T stdout F a\nT stdout F b\n"),
            (&[b"hal", b"f\n"], false, "T stdout F half\n"),
            (&[b"no newline"], false, ""),
            (&[b"no newline"], true, "T stdout F no newline\n"),
            (
                &[b"crlf\r\n", b"\n"],
                false,
                "T stdout F crlf\nT stdout F \n",
            ),
        ];
        for (chunks, finish, want) in cases {
            assert_eq!(run(chunks, finish), want.replace('T', TS), "{chunks:?}");
        }
    }

    #[test]
    fn long_lines_are_split_into_partial_pieces() {
        let mut line = vec![b'x'; MAX_LINE * 2 + 5];
        line.push(b'\n');
        let out = run(&[&line], false);
        let tags: Vec<&str> = out.lines().map(|l| l.split(' ').nth(2).unwrap()).collect();
        assert_eq!(tags, vec!["P", "P", "F"]);
        assert_eq!(out.lines().last().unwrap(), format!("{TS} stdout F xxxxx"));
    }

    #[test]
    fn timestamps_are_utc_with_nine_fraction_digits() {
        let ts: Timestamp = "2026-11-22T09:00:01.5+01:00".parse().unwrap();
        assert_eq!(cri_timestamp(ts), "2026-11-22T08:00:01.500000000Z");
    }

    #[test]
    fn removing_a_log_takes_its_rotated_files_but_not_other_logs() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "0.log",
            "0.log.20260101-000001.gz",
            "0.log.20260101-000002",
            "1.log",
            "10.log",
        ] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        remove_log_files(&dir.path().join("0.log")).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, vec!["1.log", "10.log"]);
    }

    #[test]
    fn creating_a_log_leaves_an_empty_file_before_any_output() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c").join("0.log");
        LogFile::new(path.clone(), 10).create();
        assert_eq!(std::fs::read(&path).unwrap(), b"");
    }

    #[test]
    fn log_file_rotates_by_size_to_a_stamped_name_at_most_once_a_second() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c").join("0.log");
        let mut log = LogFile::new(path.clone(), 10);
        log.write(b"12345678\n");
        log.write(b"abc\n");
        log.write(b"def\n");
        log.write(b"0123456789xyz\n");
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("c"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let cur = std::fs::read_to_string(&path).unwrap();
        // Either both rotations fell in one second (the second one waits) or in two.
        match names.len() {
            2 => {
                assert!(names[1].starts_with("0.log.2"), "{names:?}");
                let old = std::fs::read_to_string(dir.path().join("c").join(&names[1])).unwrap();
                assert_eq!(old, "12345678\n");
                assert_eq!(cur, "abc\ndef\n0123456789xyz\n");
            }
            3 => {
                let old = std::fs::read_to_string(dir.path().join("c").join(&names[2])).unwrap();
                assert_eq!(old, "abc\ndef\n");
                assert_eq!(cur, "0123456789xyz\n");
            }
            n => panic!("{n} files: {names:?}"),
        }
    }
}
