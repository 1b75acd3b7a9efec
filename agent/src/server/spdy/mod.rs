//! A server-side SPDY/3.1 connection, as kubectl's streaming protocols use it (port-forward
//! always; exec and attach for kubectl 1.29 and older): the client opens streams with
//! SYN_STREAM, each is accepted with a SYN_REPLY and handed out with its headers, its
//! incoming data and a writer. kubectl's SPDY library does no flow control, so none is done
//! here either. `frame.rs` is the framing, `headers.rs` the compressed header blocks.

mod frame;
mod headers;

use std::collections::HashMap;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use frame::{FLAG_FIN, Frame};
pub use headers::{Headers, get as header};

/// Why a connection ended badly.
#[derive(Debug, thiserror::Error)]
pub enum SpdyError {
    #[error("SPDY protocol error: {0}")]
    Protocol(String),
    #[error("SPDY connection: {0}")]
    Io(#[from] std::io::Error),
}

/// The largest data frame written (the reader's buffer size is what kubectl's framer reads
/// at once anyway).
const CHUNK: usize = 32 * 1024;

/// A stream the client opened.
pub struct Stream {
    pub headers: Headers,
    /// What the client sends on it; ends at its FIN (or reset, or the connection's end).
    pub incoming: mpsc::Receiver<Vec<u8>>,
    pub writer: StreamWriter,
}

/// Writes to one stream.
#[derive(Clone)]
pub struct StreamWriter {
    id: u32,
    out: mpsc::Sender<Vec<u8>>,
}

impl StreamWriter {
    /// Sends `data` (in frames of at most 32 KiB); false once the connection is gone.
    pub async fn write(&self, data: &[u8]) -> bool {
        for chunk in data.chunks(CHUNK) {
            let frame = Frame::Data {
                stream: self.id,
                flags: 0,
                data: chunk.to_vec(),
            };
            if self.out.send(frame::encode(&frame)).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Ends this side of the stream (FIN).
    pub async fn finish(&self) {
        let frame = Frame::Data {
            stream: self.id,
            flags: FLAG_FIN,
            data: Vec::new(),
        };
        let _ = self.out.send(frame::encode(&frame)).await;
    }
}

/// A connection: the streams the client opens, and a way to close it.
pub struct Session {
    pub streams: mpsc::Receiver<Stream>,
    done: CancellationToken,
}

impl Session {
    /// Serves SPDY on `io` until the client goes or [`Session::close`].
    pub fn start<IO>(io: IO) -> Session
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (reader, writer) = tokio::io::split(io);
        let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(256);
        let (streams_tx, streams) = mpsc::channel(16);
        let done = CancellationToken::new();
        tokio::spawn(write_loop(writer, out_rx, done.clone()));
        let reading = done.clone();
        tokio::spawn(async move {
            tokio::select! {
                r = read_loop(reader, out_tx, streams_tx) => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "SPDY connection ended");
                    }
                }
                _ = reading.cancelled() => {}
            }
        });
        Session { streams, done }
    }

    /// Sends what is queued, a GOAWAY, and closes the connection.
    pub fn close(&self) {
        self.done.cancel();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.done.cancel();
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    mut frames: mpsc::Receiver<Vec<u8>>,
    done: CancellationToken,
) {
    loop {
        tokio::select! {
            biased;
            f = frames.recv() => match f {
                Some(bytes) => {
                    if w.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                None => break,
            },
            _ = done.cancelled() => {
                // What handlers queued before closing still goes out.
                while let Ok(bytes) = frames.try_recv() {
                    if w.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                let _ = w
                    .write_all(&frame::encode(&Frame::GoAway { last_stream: 0, status: 0 }))
                    .await;
                break;
            }
        }
    }
    let _ = w.flush().await;
    let _ = w.shutdown().await;
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut r: R,
    out: mpsc::Sender<Vec<u8>>,
    streams: mpsc::Sender<Stream>,
) -> Result<(), SpdyError> {
    let mut codec = headers::Codec::default();
    let mut open: HashMap<u32, mpsc::Sender<Vec<u8>>> = HashMap::new();
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        while let Some((frame, used)) = frame::parse(&buf)? {
            buf.drain(..used);
            match frame {
                Frame::SynStream {
                    stream,
                    flags,
                    headers,
                } => {
                    let headers = codec.decode(&headers)?;
                    let reply = Frame::SynReply {
                        stream,
                        flags: 0,
                        headers: codec.encode(&[])?,
                    };
                    if out.send(frame::encode(&reply)).await.is_err() {
                        return Ok(());
                    }
                    let (tx, incoming) = mpsc::channel(64);
                    if flags & FLAG_FIN == 0 {
                        open.insert(stream, tx);
                    }
                    let s = Stream {
                        headers,
                        incoming,
                        writer: StreamWriter {
                            id: stream,
                            out: out.clone(),
                        },
                    };
                    if streams.send(s).await.is_err() {
                        return Ok(());
                    }
                }
                Frame::Data {
                    stream,
                    flags,
                    data,
                } => {
                    if let Some(tx) = open.get(&stream)
                        && !data.is_empty()
                        && tx.send(data).await.is_err()
                    {
                        open.remove(&stream);
                    }
                    if flags & FLAG_FIN != 0 {
                        open.remove(&stream);
                    }
                }
                Frame::RstStream { stream, .. } => {
                    open.remove(&stream);
                }
                Frame::Ping { id } => {
                    let _ = out.send(frame::encode(&Frame::Ping { id })).await;
                }
                Frame::GoAway { .. } => return Ok(()),
                Frame::Headers { headers, .. } => {
                    // Keeps the header context in step; the headers themselves mean nothing here.
                    codec.decode(&headers)?;
                }
                Frame::SynReply { headers, .. } => {
                    codec.decode(&headers)?;
                }
                Frame::Ignored => {}
            }
        }
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > frame::MAX_LENGTH + 8 {
            return Err(SpdyError::Protocol("frame too large".into()));
        }
    }
}

#[cfg(test)]
mod tests;
