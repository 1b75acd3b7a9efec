//! Attaching to a container's main process (`kubectl attach`, `kubectl run -i`, `kubectl debug
//! -i`): its output from now on, and its stdin.
//!
//! The log copier is the only reader of a container's stdout/stderr FIFOs; it tees every chunk
//! it reads into a broadcast channel per container ([`AttachPoint`]), so any number of clients
//! can attach and the log stays complete. The first client to attach makes the channel, and
//! the copier drops it at its next chunk once the last client left: most containers are never
//! attached to and a channel allocates its [`BACKLOG`] slots up front, so a container nobody
//! attaches to holds no channel and its copier copies no chunk. The copier owns the [`Tee`]:
//! when it finished (the task exited and the FIFOs are drained) the tee closes the channel,
//! every attached client sees the end and no client can attach any more. A client that falls
//! behind by more than the channel holds loses the chunks it missed, as a slow `kubectl
//! attach` does upstream; the container never waits for it.
//!
//! stdin: the agent holds the write side of the container's stdin FIFO (which also keeps the
//! container from seeing EOF while nobody is attached). Attached clients write through it; for
//! a container with `stdinOnce` the first client's stdin ending closes it for good: the agent
//! drops its writer and asks the shim to close its own (`CloseIO`), so the process reads EOF.

use std::sync::{Arc, Mutex, MutexGuard};

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

/// Where a container's output goes besides its log, shared by its copier and its
/// [`AttachPoint`].
#[derive(Debug)]
enum Output {
    /// The copier runs; the channel exists while clients are (or were lately) attached.
    Open(Option<broadcast::Sender<Chunk>>),
    /// The copier finished: the output ended.
    Ended,
}

#[derive(Debug)]
struct Shared {
    output: Mutex<Output>,
}

impl Shared {
    /// The lock, also after a panic elsewhere (the state is a plain value, never half-written).
    fn lock(&self) -> MutexGuard<'_, Output> {
        self.output.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The copier's side: sends what it reads; dropping it ends every attachment.
#[derive(Debug)]
pub(crate) struct Tee {
    shared: Arc<Shared>,
}

impl Drop for Tee {
    fn drop(&mut self) {
        // Dropping the only sender closes the channel: receivers get what is left, then the end.
        *self.shared.lock() = Output::Ended;
    }
}

/// The container's stdin writer, shared by its attached clients; `None` once closed.
pub(crate) type SharedStdin = Arc<tokio::sync::Mutex<Option<pipe::Sender>>>;

/// What attaching to one container needs, kept per started (or adopted) container.
#[derive(Debug)]
pub(crate) struct AttachPoint {
    shared: Arc<Shared>,
    pub(crate) stdin: SharedStdin,
    /// Whether a client already ended its stdin (what `stdinOnce` counts).
    stdin_used: Mutex<bool>,
}

impl AttachPoint {
    /// A new point and the tee its copier sends into; no channel yet.
    pub(crate) fn new(stdin: Option<pipe::Sender>) -> (Arc<AttachPoint>, Tee) {
        let shared = Arc::new(Shared {
            output: Mutex::new(Output::Open(None)),
        });
        let point = AttachPoint {
            shared: shared.clone(),
            stdin: Arc::new(tokio::sync::Mutex::new(stdin)),
            stdin_used: Mutex::new(false),
        };
        (Arc::new(point), Tee { shared })
    }

    /// A receiver of the output from now on (making the channel if this is the only client);
    /// `None` once the copier finished.
    pub(crate) fn subscribe(&self) -> Option<broadcast::Receiver<Chunk>> {
        match &mut *self.shared.lock() {
            Output::Ended => None,
            Output::Open(Some(tx)) => Some(tx.subscribe()),
            Output::Open(slot @ None) => {
                let (tx, rx) = broadcast::channel(BACKLOG);
                *slot = Some(tx);
                Some(rx)
            }
        }
    }

    /// Records that a client's stdin ended; true the first time.
    pub(crate) fn first_stdin_end(&self) -> bool {
        let mut used = self.stdin_used.lock().unwrap_or_else(|e| e.into_inner());
        !std::mem::replace(&mut *used, true)
    }

    /// Whether a channel exists now.
    #[cfg(test)]
    fn has_channel(&self) -> bool {
        matches!(*self.shared.lock(), Output::Open(Some(_)))
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

/// Sends one chunk to whoever is attached (nobody, mostly: that is not an error). The chunk
/// is copied only when someone is attached; a channel whose last client left is dropped here,
/// under the lock that [`AttachPoint::subscribe`] takes, so no client can be joining it.
pub(crate) fn tee(tee: &Tee, stream: StreamKind, data: &[u8]) {
    let mut output = tee.shared.lock();
    let Output::Open(slot) = &mut *output else {
        return;
    };
    match slot {
        Some(tx) if tx.receiver_count() > 0 => {
            let _ = tx.send(Chunk {
                stream,
                data: Bytes::copy_from_slice(data),
            });
        }
        Some(_) => *slot = None,
        None => {}
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
    fn no_channel_exists_until_a_client_attaches() {
        let (point, tx) = AttachPoint::new(None);
        tee(&tx, StreamKind::Stdout, b"nobody listens");
        assert!(!point.has_channel());
        let _rx = point.subscribe().expect("the copier runs");
        assert!(point.has_channel());
    }

    #[tokio::test]
    async fn several_clients_see_the_same_output_and_the_end() {
        let (point, tx) = AttachPoint::new(None);
        let mut first = point.subscribe().expect("the copier runs");
        let mut second = point.subscribe().expect("the copier runs");
        tee(&tx, StreamKind::Stdout, b"both");
        for rx in [&mut first, &mut second] {
            assert_eq!(&rx.recv().await.unwrap().data[..], b"both");
        }
        drop(tx);
        for rx in [&mut first, &mut second] {
            assert!(matches!(
                rx.recv().await,
                Err(broadcast::error::RecvError::Closed)
            ));
        }
    }

    #[tokio::test]
    async fn the_channel_goes_after_the_last_client_left_and_a_new_client_gets_a_new_one() {
        let (point, tx) = AttachPoint::new(None);
        let first = point.subscribe().expect("the copier runs");
        drop(first);
        tee(&tx, StreamKind::Stdout, b"nobody listens any more");
        assert!(!point.has_channel());
        let mut again = point.subscribe().expect("the copier runs");
        tee(&tx, StreamKind::Stdout, b"fresh");
        assert_eq!(&again.recv().await.unwrap().data[..], b"fresh");
    }

    #[test]
    fn only_the_first_stdin_end_counts_for_stdin_once() {
        let (point, _tx) = AttachPoint::new(None);
        assert!(point.first_stdin_end());
        assert!(!point.first_stdin_end());
    }
}
