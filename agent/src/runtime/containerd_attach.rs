//! Attach to a running container's main process through containerd: output from the
//! container's [`AttachPoint`] (the log copier's tee), input into its stdin FIFO, terminal
//! resizes (`ResizePty` on the task) and, for `stdinOnce`, closing stdin (`CloseIO`).

use std::sync::Arc;

use containerd_client::services::v1::{CloseIoRequest, ResizePtyRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::{broadcast, watch};

use super::attach::{self, AttachPoint};
use super::containerd::{Connection, grpc_error, label_bool};
use super::containerd_exec::{ExecStream, Stdin};
use super::logs::StreamKind;
use super::{ContainerId, RuntimeError, TaskState, labels};

/// What an attaching client wants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttachIo {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

/// A client's input to an attached container; shutting it down ends this client's stdin.
pub type AttachStdin = Stdin<DuplexStream>;

/// Resize the container's terminal and learn when the attachment ended; cheap to clone.
#[derive(Clone)]
pub struct AttachControl {
    conn: Arc<Connection>,
    id: String,
    ended: watch::Receiver<bool>,
}

impl std::fmt::Debug for AttachControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachControl")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl AttachControl {
    pub async fn resize(&self, width: u16, height: u16) -> Result<(), RuntimeError> {
        self.conn
            .tasks()
            .resize_pty(self.conn.req(ResizePtyRequest {
                container_id: self.id.clone(),
                exec_id: String::new(),
                width: u32::from(width),
                height: u32::from(height),
            }))
            .await
            .map_err(|s| grpc_error("resize pty", &format!("task {}", self.id), s))?;
        Ok(())
    }

    /// Resolves once the container's output ended (it exited) or this client stopped reading.
    pub async fn ended(&self) {
        let mut ended = self.ended.clone();
        let _ = ended.wait_for(|e| *e).await;
    }
}

/// An attachment: take the streams out, keep the control.
#[derive(Debug)]
pub struct AttachHandle {
    /// Output from now on (with a terminal, everything the terminal shows).
    pub stdout: Option<ExecStream>,
    /// `None` with a terminal, or when not asked for.
    pub stderr: Option<ExecStream>,
    /// `None` unless asked for (and the container has stdin).
    pub stdin: Option<AttachStdin>,
    pub tty: bool,
    pub control: AttachControl,
}

/// Why an attach was refused, in the words the client sees.
pub(crate) fn not_running(id: &ContainerId) -> RuntimeError {
    RuntimeError::InvalidConfig(format!("container {id} is not running"))
}

pub(crate) async fn attach(
    conn: &Arc<Connection>,
    id: &ContainerId,
    io: AttachIo,
) -> Result<AttachHandle, RuntimeError> {
    let container = conn.get_container(id.as_str()).await?;
    let tty = label_bool(&container.labels, labels::TTY);
    let has_stdin = label_bool(&container.labels, labels::STDIN);
    let stdin_once = label_bool(&container.labels, labels::STDIN_ONCE);
    if io.stdin && !has_stdin {
        return Err(RuntimeError::InvalidConfig(format!(
            "container {id} was not created with stdin: true, so it cannot take input"
        )));
    }
    if !matches!(conn.status(id).await?, TaskState::Running { .. }) {
        return Err(not_running(id));
    }
    let point = conn
        .attach_points
        .lock()
        .ok()
        .and_then(|p| p.get(id.as_str()).cloned())
        .ok_or_else(|| not_running(id))?;
    let rx = point.subscribe().ok_or_else(|| not_running(id))?;

    let (ended_tx, ended) = watch::channel(false);
    let (out_sink, out_read) = tokio::io::duplex(64 * 1024);
    let want_err = io.stderr && !tty;
    let (err_sink, err_read) = if want_err {
        let (s, r) = tokio::io::duplex(64 * 1024);
        (Some(s), Some(r))
    } else {
        (None, None)
    };
    tokio::spawn(pump_output(
        rx,
        io.stdout || tty,
        out_sink,
        err_sink,
        ended_tx,
    ));

    let stdin = io.stdin.then(|| {
        let (client, container_side) = tokio::io::duplex(64 * 1024);
        tokio::spawn(pump_input(
            conn.clone(),
            id.to_string(),
            point.clone(),
            stdin_once,
            container_side,
        ));
        Stdin(client)
    });
    Ok(AttachHandle {
        stdout: Some(ExecStream::from_duplex(out_read)),
        stderr: err_read.map(ExecStream::from_duplex),
        stdin,
        tty,
        control: AttachControl {
            conn: conn.clone(),
            id: id.to_string(),
            ended,
        },
    })
}

/// Copies the container's output to this client until the container's output ends or the
/// client stops reading both streams.
async fn pump_output(
    mut rx: broadcast::Receiver<attach::Chunk>,
    want_out: bool,
    out: DuplexStream,
    err: Option<DuplexStream>,
    ended: watch::Sender<bool>,
) {
    let mut out = Some(out);
    let mut err = err;
    loop {
        let chunk = match rx.recv().await {
            Ok(c) => c,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::debug!(missed, "an attached client fell behind; output dropped");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => break,
        };
        // With a terminal everything arrives on stdout; without one stderr goes to stderr.
        let sink = match chunk.stream {
            StreamKind::Stderr if err.is_some() => &mut err,
            StreamKind::Stdout if !want_out => continue,
            _ => &mut out,
        };
        if let Some(s) = sink.as_mut()
            && s.write_all(&chunk.data).await.is_err()
        {
            *sink = None;
        }
        if out.is_none() && err.is_none() {
            // The client reads neither stream any more: it detached.
            break;
        }
    }
    drop((out, err));
    let _ = ended.send(true);
}

/// Copies this client's input into the container's stdin; at its end, closes the container's
/// stdin if it is `stdinOnce` and this is the first client whose input ended.
async fn pump_input(
    conn: Arc<Connection>,
    id: String,
    point: Arc<AttachPoint>,
    stdin_once: bool,
    mut input: DuplexStream,
) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match input.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => attach::write_stdin(&point.stdin, &buf[..n]).await,
        }
    }
    if stdin_once && point.first_stdin_end() {
        // Every writer must go for the process to read EOF: the agent's, then the shim's.
        point.stdin.lock().await.take();
        let closed = conn
            .tasks()
            .close_io(conn.req(CloseIoRequest {
                container_id: id.clone(),
                exec_id: String::new(),
                stdin: true,
            }))
            .await;
        if let Err(s) = closed {
            tracing::debug!(id, error = %s.message(), "closing the container's stdin failed");
        }
    }
}
