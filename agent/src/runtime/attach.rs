//! Attaching to a container's main process (`kubectl attach`, `kubectl run -i`, `kubectl debug
//! -i`): its output from now on, and its stdin.
//!
//! The log copier is the only reader of a container's stdout/stderr FIFOs; it tees every chunk
//! it reads into a broadcast channel per container ([`AttachPoint`]), so any number of clients
//! can attach and the log stays complete. The copier owns the only strong sender: when it
//! finished (the task exited and the FIFOs are drained) every attached client sees the end.
//! A client that falls behind by more than the channel holds loses the chunks it missed, as a
//! slow `kubectl attach` does upstream; the container never waits for it.
//!
//! stdin: the agent holds the write side of the container's stdin FIFO (which also keeps the
//! container from seeing EOF while nobody is attached). Attached clients write through it; for
//! a container with `stdinOnce` the first client's stdin ending closes it for good: the agent
//! drops its writer and asks the shim to close its own (`CloseIO`), so the process reads EOF.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::sync::broadcast;

use super::logs::StreamKind;

/// How many chunks an attached client may fall behind before it loses output.
const BACKLOG: usize = 256;

/// One chunk of a container's output.
#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    pub(crate) stream: StreamKind,
    pub(crate) data: Bytes,
}

/// The copier's side: sends what it reads; dropping it ends every attachment.
pub(crate) type Tee = broadcast::Sender<Chunk>;

/// The container's stdin writer, shared by its attached clients; `None` once closed.
pub(crate) type SharedStdin = Arc<tokio::sync::Mutex<Option<pipe::Sender>>>;

/// What attaching to one container needs, kept per started (or adopted) container.
#[derive(Debug)]
pub(crate) struct AttachPoint {
    output: broadcast::WeakSender<Chunk>,
    pub(crate) stdin: SharedStdin,
    /// Whether a client already ended its stdin (what `stdinOnce` counts).
    stdin_used: Mutex<bool>,
}

impl AttachPoint {
    /// A new point and the tee its copier sends into.
    pub(crate) fn new(stdin: Option<pipe::Sender>) -> (Arc<AttachPoint>, Tee) {
        let (tee, _) = broadcast::channel(BACKLOG);
        let point = AttachPoint {
            output: tee.downgrade(),
            stdin: Arc::new(tokio::sync::Mutex::new(stdin)),
            stdin_used: Mutex::new(false),
        };
        (Arc::new(point), tee)
    }

    /// A receiver of the output from now on; `None` once the copier finished.
    pub(crate) fn subscribe(&self) -> Option<broadcast::Receiver<Chunk>> {
        self.output.upgrade().map(|tee| tee.subscribe())
    }

    /// Records that a client's stdin ended; true the first time.
    pub(crate) fn first_stdin_end(&self) -> bool {
        let mut used = self.stdin_used.lock().unwrap_or_else(|e| e.into_inner());
        !std::mem::replace(&mut *used, true)
    }
}

/// Writes one client's input to the container's stdin; input after the stdin was closed is
/// dropped, as it is upstream.
pub(crate) async fn write_stdin(stdin: &SharedStdin, data: &[u8]) {
    let mut guard = stdin.lock().await;
    if let Some(w) = guard.as_mut()
        && w.write_all(data).await.is_err()
    {
        *guard = None;
    }
}

/// Sends one chunk to whoever is attached (nobody, mostly: that is not an error).
pub(crate) fn tee(tee: &Tee, stream: StreamKind, data: &[u8]) {
    if tee.receiver_count() > 0 {
        let _ = tee.send(Chunk {
            stream,
            data: Bytes::copy_from_slice(data),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn attached_clients_see_output_from_now_on_and_the_end_when_the_copier_stops() {
        let (point, tx) = AttachPoint::new(None);
        tee(&tx, StreamKind::Stdout, b"before");
        let mut rx = point.subscribe().expect("the copier runs");
        tee(&tx, StreamKind::Stderr, b"after");
        let got = rx.recv().await.unwrap();
        assert_eq!(got.stream, StreamKind::Stderr);
        assert_eq!(&got.data[..], b"after");
        drop(tx);
        assert!(matches!(
            rx.recv().await,
            Err(broadcast::error::RecvError::Closed)
        ));
        assert!(point.subscribe().is_none(), "nothing to attach to any more");
    }

    #[test]
    fn only_the_first_stdin_end_counts_for_stdin_once() {
        let (point, _tx) = AttachPoint::new(None);
        assert!(point.first_stdin_end());
        assert!(!point.first_stdin_end());
    }
}
