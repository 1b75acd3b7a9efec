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
//!
//! Memory: a node runs hundreds of mostly quiet containers, so a copier holds nothing per
//! container that only a read needs. It waits for a FIFO to be readable, reads into a buffer
//! that lives for that one read, and keeps only the unfinished line (at most [`MAX_LINE`]).

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

    /// Appends the log lines completed by `chunk` to `out`. Only an unfinished line (at most
    /// [`MAX_LINE`] bytes) stays behind, in a buffer of its size: the common chunk of whole
    /// lines is split where it lies and leaves nothing allocated.
    pub(crate) fn push(&mut self, ts: &str, chunk: &[u8], out: &mut Vec<u8>) {
        if self.pending.is_empty() {
            let used = self.split(ts, chunk, out);
            self.pending.extend_from_slice(&chunk[used..]);
            return;
        }
        let mut data = std::mem::take(&mut self.pending);
        data.extend_from_slice(chunk);
        let used = self.split(ts, &data, out);
        data.drain(..used);
        if !data.is_empty() {
            data.shrink_to_fit();
            self.pending = data;
        }
    }

    /// Emits the whole lines at the start of `data` and then `P` pieces while more than
    /// [`MAX_LINE`] bytes are left; returns how many bytes it used.
    fn split(&self, ts: &str, data: &[u8], out: &mut Vec<u8>) -> usize {
        let mut start = 0;
        while let Some(nl) = data[start..].iter().position(|b| *b == b'\n') {
            let mut line = &data[start..start + nl];
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
        while data.len() - start > MAX_LINE {
            self.emit(ts, 'P', &data[start..start + MAX_LINE], out);
            start += MAX_LINE;
        }
        start
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

/// The most one read takes from a FIFO (a pipe holds 64 KiB; the shim writes less at a time).
const READ_CHUNK: usize = 32 * 1024;

/// One stream of the container: its FIFO and the line it is in the middle of.
struct Stream {
    src: FifoSource,
    lines: LineSplitter,
    done: bool,
}

impl Stream {
    fn new(kind: StreamKind, src: FifoSource) -> Self {
        Stream {
            src,
            lines: LineSplitter::new(kind),
            done: false,
        }
    }

    /// After the FIFO became readable: reads once into a buffer that lives only for this read
    /// (an idle container holds none), tees the chunk and appends its lines to `out`. EOF or
    /// an error ends the stream.
    fn read_ready(&mut self, ready: std::io::Result<()>, tee: &Tee, out: &mut Vec<u8>) {
        let mut buf = Vec::with_capacity(READ_CHUNK);
        match ready.and_then(|()| self.src.try_read_buf(&mut buf)) {
            Ok(n) if n > 0 => {
                attach::tee(tee, self.lines.kind, &buf);
                self.lines.push(&cri_timestamp(Timestamp::now()), &buf, out);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            _ => self.done = true,
        }
    }
}

/// Reads both FIFOs until the task exited and they are drained (or the drain timed out).
async fn copy(
    mut log: LogFile,
    stdout: FifoSource,
    stderr: Option<FifoSource>,
    tee: &Tee,
    exited: impl Future<Output = ()>,
) {
    let mut out = Stream::new(StreamKind::Stdout, stdout);
    let mut err = stderr.map(|e| Stream::new(StreamKind::Stderr, e));
    let mut draining = false;
    let drain_deadline = tokio::time::sleep(Duration::from_secs(86_400 * 365));
    tokio::pin!(exited, drain_deadline);
    while !(out.done && err.as_ref().is_none_or(|e| e.done)) {
        let mut lines = Vec::new();
        tokio::select! {
            r = out.src.readable(), if !out.done => out.read_ready(r, tee, &mut lines),
            r = readable(&err), if err.as_ref().is_some_and(|e| !e.done) => {
                if let Some(e) = err.as_mut() {
                    e.read_ready(r, tee, &mut lines);
                }
            }
            () = &mut exited, if !draining => {
                draining = true;
                out.src.begin_drain();
                if let Some(e) = err.as_mut() {
                    e.src.begin_drain();
                }
                drain_deadline
                    .as_mut()
                    .reset(tokio::time::Instant::now() + DRAIN_TIMEOUT);
            }
            () = &mut drain_deadline, if draining => {
                tracing::debug!(path = %out.src.path().display(), "log drain timed out");
                break;
            }
        }
        log.write(&lines);
    }
    let mut lines = Vec::new();
    let ts = cri_timestamp(Timestamp::now());
    out.lines.finish(&ts, &mut lines);
    if let Some(e) = err.as_mut() {
        e.lines.finish(&ts, &mut lines);
    }
    log.write(&lines);
    tracing::trace!(path = %log.path().display(), "log copier finished");
}

/// Readiness of a stream that may not exist (only selected when it does).
async fn readable(stream: &Option<Stream>) -> std::io::Result<()> {
    match stream {
        Some(s) => s.src.readable().await,
        None => std::future::pending().await,
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

    /// The splitter as it was when it kept every chunk in its buffer: the behaviour to keep.
    fn reference(chunks: &[&[u8]]) -> Vec<u8> {
        let s = LineSplitter::new(StreamKind::Stdout);
        let mut pending = Vec::new();
        let mut out = Vec::new();
        for chunk in chunks {
            pending.extend_from_slice(chunk);
            let mut start = 0;
            while let Some(nl) = pending[start..].iter().position(|b| *b == b'\n') {
                let mut line = &pending[start..start + nl];
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                let mut rest = line;
                while rest.len() > MAX_LINE {
                    s.emit(TS, 'P', &rest[..MAX_LINE], &mut out);
                    rest = &rest[MAX_LINE..];
                }
                s.emit(TS, 'F', rest, &mut out);
                start += nl + 1;
            }
            pending.drain(..start);
            while pending.len() > MAX_LINE {
                let piece: Vec<u8> = pending.drain(..MAX_LINE).collect();
                s.emit(TS, 'P', &piece, &mut out);
            }
        }
        out
    }

    #[test]
    fn lines_come_out_as_before_however_the_output_is_chunked() {
        let mut input = Vec::new();
        input.extend_from_slice(b"short\nhalf");
        input.extend_from_slice(&vec![b'x'; MAX_LINE * 2 + 3]);
        input.extend_from_slice(b"\r\n\n");
        input.extend_from_slice(&vec![b'y'; MAX_LINE]);
        input.push(b'\r');
        input.extend_from_slice(b"\nlast\r\ntail");
        for size in [
            1000,
            4097,
            MAX_LINE - 1,
            MAX_LINE,
            MAX_LINE + 1,
            input.len(),
        ] {
            let chunks: Vec<&[u8]> = input.chunks(size).collect();
            let mut s = LineSplitter::new(StreamKind::Stdout);
            let mut out = Vec::new();
            for c in &chunks {
                s.push(TS, c, &mut out);
            }
            assert!(out == reference(&chunks), "chunks of {size}");
        }
    }

    #[test]
    fn the_splitter_holds_only_an_unfinished_line() {
        let mut s = LineSplitter::new(StreamKind::Stdout);
        let mut out = Vec::new();
        let mut burst = b"line\n".repeat(6000);
        burst.extend_from_slice(b"abc");
        s.push(TS, &burst, &mut out);
        assert!(s.pending.capacity() < 64, "{}", s.pending.capacity());
        s.push(TS, b"def\n", &mut out);
        assert_eq!(s.pending.capacity(), 0);
        assert!(out.ends_with(b" stdout F abcdef\n"));
    }

    #[tokio::test]
    async fn the_copier_logs_and_tees_every_line_and_ends_after_the_exit() {
        use tokio::io::AsyncWriteExt;
        use tokio::net::unix::pipe;

        let dir = tempfile::tempdir().unwrap();
        let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
        let log_path = dir.path().join("0.log");
        for p in [&out_path, &err_path] {
            crate::runtime::fifo::make(p).unwrap();
        }
        let stdout = FifoSource::open(&out_path).unwrap();
        let stderr = FifoSource::open(&err_path).unwrap();
        let (point, tee) = attach::AttachPoint::new(None);
        let mut attached = point.subscribe().unwrap();
        let (exit_tx, exit_rx) = tokio::sync::oneshot::channel::<()>();
        let log = LogFile::new(log_path.clone(), 1 << 20);
        let mut copier = spawn_copier(log, stdout, Some(stderr), tee, async move {
            let _ = exit_rx.await;
        });
        // The shim's side.
        let mut out = pipe::OpenOptions::new().open_sender(&out_path).unwrap();
        let mut err = pipe::OpenOptions::new().open_sender(&err_path).unwrap();
        out.write_all(b"one\ntw").await.unwrap();
        err.write_all(b"oops\n").await.unwrap();
        out.write_all(b"o\nno newline").await.unwrap();
        drop((out, err));
        exit_tx.send(()).unwrap();
        copier.done.wait_for(|done| *done).await.unwrap();

        let log = std::fs::read_to_string(&log_path).unwrap();
        let mut lines: [Vec<&str>; 2] = [Vec::new(), Vec::new()];
        for line in log.lines() {
            let (ts, rest) = line.split_once(' ').unwrap();
            assert!(ts.parse::<Timestamp>().is_ok(), "{line}");
            lines[usize::from(rest.starts_with("stderr"))].push(rest);
        }
        assert_eq!(
            lines,
            [
                vec!["stdout F one", "stdout F two", "stdout F no newline"],
                vec!["stderr F oops"]
            ]
        );
        let mut teed: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
        while let Ok(chunk) = attached.recv().await {
            teed[usize::from(chunk.stream == StreamKind::Stderr)].extend_from_slice(&chunk.data);
        }
        assert_eq!(teed, [b"one\ntwo\nno newline".to_vec(), b"oops\n".to_vec()]);
        assert!(point.subscribe().is_none());
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
