//! FIFOs for container and exec stdio, read without ever blocking the shim.
//!
//! The runc shim opens a stdio FIFO for writing and that open blocks until a reader exists,
//! so the reader is opened first. A reader that only holds `O_RDONLY` would see EOF before the
//! shim connects, so [`FifoSource`] also holds an `O_RDWR` "keeper": while it is open the pipe
//! always has a writer and reads just wait for data. When the process has exited,
//! [`FifoSource::begin_drain`] drops the keeper; reads then return what is buffered and EOF
//! once the shim closed its end too.
//!
//! Linux only reports hang-up on a FIFO reader if a writer opened after the reader did
//! (`pipe_poll` compares the reader's open-time writer count). That is why the `O_RDONLY` end
//! is opened *before* the keeper: the keeper's own open makes later hang-ups visible.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use nix::sys::stat::Mode;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

/// Creates a FIFO at `path` (mode 0600) unless one is already there.
pub(crate) fn make(path: &Path) -> io::Result<()> {
    match nix::unistd::mkfifo(path, Mode::S_IRUSR | Mode::S_IWUSR) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EEXIST) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// The read side of a stdio FIFO.
#[derive(Debug)]
pub(crate) struct FifoSource {
    path: PathBuf,
    reader: pipe::Receiver,
    keeper: Option<File>,
}

impl FifoSource {
    /// Opens the FIFO for reading (non-blocking) plus the keeper. Needs a tokio runtime.
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let reader = pipe::OpenOptions::new().open_receiver(path)?;
        let keeper = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(FifoSource {
            path: path.to_path_buf(),
            reader,
            keeper: Some(keeper),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// From now on reads end with EOF once every other writer (the shim) closed its end.
    pub(crate) fn begin_drain(&mut self) {
        self.keeper = None;
    }

    /// Reads some bytes; `Ok(0)` is EOF (only possible after [`Self::begin_drain`]).
    pub(crate) async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf).await
    }

    /// Waits until a read may have something (or EOF) to return, without a buffer: a reader
    /// of an idle FIFO holds no memory for the data it does not get.
    pub(crate) async fn readable(&self) -> io::Result<()> {
        self.reader.readable().await
    }

    /// Reads what is there into `buf`'s spare capacity without waiting; `Ok(0)` is EOF (as
    /// for [`Self::read`]), `WouldBlock` a readiness that had nothing after all.
    pub(crate) fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        self.reader.try_read_buf(buf)
    }
}

/// Opens the write side of a FIFO (for exec stdin) without waiting for a reader.
pub(crate) fn open_sender(path: &Path) -> io::Result<pipe::Sender> {
    pipe::OpenOptions::new().read_write(true).open_sender(path)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;

    use super::*;

    /// A new FIFO in a temporary directory (which goes with the returned guard).
    fn new_fifo() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        make(&path).unwrap();
        (dir, path)
    }

    /// A writer (the shim's role) connected to the FIFO at `path`, `bytes` written.
    async fn writer_having_sent(path: &std::path::Path, bytes: &[u8]) -> pipe::Sender {
        let mut writer = pipe::OpenOptions::new().open_sender(path).unwrap();
        writer.write_all(bytes).await.unwrap();
        writer
    }

    async fn assert_eof(src: &mut FifoSource) {
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(2), src.read(&mut buf))
            .await
            .expect("EOF after drain")
            .unwrap();
        assert_eq!(n, 0);
    }

    #[tokio::test]
    async fn reads_wait_for_data_then_end_after_drain_and_writer_close() {
        let (_dir, path) = new_fifo();
        let mut src = FifoSource::open(&path).unwrap();
        // The writer connects only after the reader exists.
        let mut writer = writer_having_sent(&path, b"hello\n").await;
        let mut buf = [0u8; 64];
        let n = src.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"hello\n");
        // No EOF while the keeper holds the pipe, even with the writer gone.
        writer.write_all(b"tail").await.unwrap();
        drop(writer);
        let n = src.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"tail");
        let pending = tokio::time::timeout(Duration::from_millis(50), src.read(&mut buf)).await;
        assert!(pending.is_err(), "read must wait while the keeper is open");
        src.begin_drain();
        assert_eof(&mut src).await;
    }

    #[tokio::test]
    async fn a_reader_opened_after_the_writer_left_still_sees_eof() {
        let (_dir, path) = new_fifo();
        let mut first = FifoSource::open(&path).unwrap();
        let writer = writer_having_sent(&path, b"kept").await;
        // An agent restart: a new source opens while the old one still holds the data.
        let mut second = FifoSource::open(&path).unwrap();
        drop(writer);
        first.begin_drain();
        drop(first);
        second.begin_drain();
        let mut buf = [0u8; 16];
        let n = second.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"kept");
        assert_eof(&mut second).await;
    }
}
