//! Exec into a running container through containerd: streaming ([`ExecHandle`], for
//! `kubectl exec`) and collected ([`exec_output`], for exec probes and hooks).
//!
//! The exec's process is the container's own spec process (env, cwd, user, capabilities)
//! with `args` and `terminal` replaced, as `ctr task exec` does. Wait is issued before Start;
//! after the exit the output FIFOs are drained before the process is deleted.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use containerd_client::services::v1::{
    CloseIoRequest, DeleteProcessRequest, ExecProcessRequest, KillRequest, ResizePtyRequest,
    StartRequest, WaitRequest,
};
use containerd_client::tonic::Request;
use containerd_client::tonic::metadata::AsciiMetadataValue;
use containerd_client::tonic::transport::Channel;
use prost_types::Any;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::net::unix::pipe;
use tokio::sync::watch;

use super::containerd::{Connection, grpc_error};
use super::fifo::{self, FifoSource};
use super::{ContainerId, ExecIo, RuntimeError};

const PROCESS_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Process";
/// Output kept by [`exec_output`] per stream; the rest is read and dropped.
const OUTPUT_LIMIT: usize = 1024 * 1024;

static EXEC_SEQ: AtomicU64 = AtomicU64::new(0);

/// What the exit watch carries: nothing yet, then the exit code or why waiting failed.
type ExitSlot = Option<Result<i32, String>>;

/// An exec's stdout or stderr.
#[derive(Debug)]
pub struct ExecStream(DuplexStream);

impl ExecStream {
    pub(crate) fn from_duplex(stream: DuplexStream) -> Self {
        ExecStream(stream)
    }
}

impl AsyncRead for ExecStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

/// A process's stdin, writing to `W`: an exec's pipe ([`ExecStdin`]) or an attached client's
/// side of the container's stdin ([`AttachStdin`](super::AttachStdin)). Shutting it down ends
/// the input.
#[derive(Debug)]
pub struct Stdin<W>(pub(super) W);

/// An exec's stdin; dropping it (or [`ExecControl::close_stdin`]) closes the process's stdin.
pub type ExecStdin = Stdin<pipe::Sender>;

impl<W: AsyncWrite + Unpin> AsyncWrite for Stdin<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Resize, close stdin, kill and wait for one exec; cheap to clone.
#[derive(Clone, Debug)]
pub struct ExecControl {
    channel: Channel,
    ns: AsciiMetadataValue,
    container_id: String,
    exec_id: String,
    exit: watch::Receiver<ExitSlot>,
}

/// A started exec: take the streams out, keep the control.
#[derive(Debug)]
pub struct ExecHandle {
    pub stdin: Option<ExecStdin>,
    pub stdout: Option<ExecStream>,
    /// `None` with a terminal (the terminal carries both streams).
    pub stderr: Option<ExecStream>,
    pub control: ExecControl,
}

impl ExecHandle {
    pub async fn resize(&self, width: u16, height: u16) -> Result<(), RuntimeError> {
        self.control.resize(width, height).await
    }

    /// Waits for the exit code.
    pub async fn wait(&self) -> Result<i32, RuntimeError> {
        self.control.wait().await
    }
}

impl ExecControl {
    fn req<T>(&self, msg: T) -> Request<T> {
        let mut r = Request::new(msg);
        r.metadata_mut()
            .insert("containerd-namespace", self.ns.clone());
        r
    }

    fn tasks(&self) -> containerd_client::services::v1::tasks_client::TasksClient<Channel> {
        containerd_client::services::v1::tasks_client::TasksClient::new(self.channel.clone())
    }

    pub async fn resize(&self, width: u16, height: u16) -> Result<(), RuntimeError> {
        self.tasks()
            .resize_pty(self.req(ResizePtyRequest {
                container_id: self.container_id.clone(),
                exec_id: self.exec_id.clone(),
                width: u32::from(width),
                height: u32::from(height),
            }))
            .await
            .map_err(|s| grpc_error("resize pty", &format!("exec {}", self.exec_id), s))?;
        Ok(())
    }

    /// Tells the shim to close the process's stdin.
    pub async fn close_stdin(&self) -> Result<(), RuntimeError> {
        self.tasks()
            .close_io(self.req(CloseIoRequest {
                container_id: self.container_id.clone(),
                exec_id: self.exec_id.clone(),
                stdin: true,
            }))
            .await
            .map_err(|s| grpc_error("close io", &format!("exec {}", self.exec_id), s))?;
        Ok(())
    }

    pub async fn kill(&self, signal: u32) -> Result<(), RuntimeError> {
        let killed = self
            .tasks()
            .kill(self.req(KillRequest {
                container_id: self.container_id.clone(),
                exec_id: self.exec_id.clone(),
                signal,
                all: false,
            }))
            .await;
        match killed {
            Ok(_) => Ok(()),
            Err(s) if s.code() == containerd_client::tonic::Code::NotFound => Ok(()),
            Err(s) => Err(grpc_error(
                "kill exec",
                &format!("exec {}", self.exec_id),
                s,
            )),
        }
    }

    pub async fn wait(&self) -> Result<i32, RuntimeError> {
        let mut exit = self.exit.clone();
        let slot = exit
            .wait_for(Option::is_some)
            .await
            .map_err(|_| RuntimeError::Containerd {
                op: "wait exec",
                message: "the exec's waiter went away".to_string(),
                transient: true,
            })?
            .clone();
        match slot {
            Some(Ok(code)) => Ok(code),
            Some(Err(message)) => Err(RuntimeError::Containerd {
                op: "wait exec",
                message,
                transient: true,
            }),
            None => Err(RuntimeError::Containerd {
                op: "wait exec",
                message: "no exit status".to_string(),
                transient: true,
            }),
        }
    }
}

/// The `process` object of the container's spec (cached).
async fn exec_base(conn: &Connection, id: &ContainerId) -> Result<serde_json::Value, RuntimeError> {
    if let Some(base) = conn
        .exec_bases
        .lock()
        .ok()
        .and_then(|b| b.get(id.as_str()).cloned())
    {
        return Ok(base);
    }
    let container = conn.get_container(id.as_str()).await?;
    let spec: serde_json::Value = container
        .spec
        .as_ref()
        .map(|any| serde_json::from_slice(&any.value))
        .transpose()
        .map_err(|e| RuntimeError::InvalidConfig(format!("container {id} has a bad spec: {e}")))?
        .unwrap_or_default();
    let process = spec
        .get("process")
        .cloned()
        .ok_or_else(|| RuntimeError::InvalidConfig(format!("container {id} has no process")))?;
    if let Ok(mut bases) = conn.exec_bases.lock() {
        bases.insert(id.to_string(), process.clone());
    }
    Ok(process)
}

/// Copies one output FIFO into `sink` until the exec exited and the FIFO is drained. A sink
/// nobody reads any more is dropped, and the FIFO still drained so the process never blocks.
async fn pump(mut src: FifoSource, sink: DuplexStream, mut exit: watch::Receiver<ExitSlot>) {
    let mut sink = Some(sink);
    let mut buf = vec![0u8; 32 * 1024];
    let mut draining = false;
    let drain_deadline = tokio::time::sleep(Duration::from_secs(86_400 * 365));
    tokio::pin!(drain_deadline);
    loop {
        tokio::select! {
            r = src.read(&mut buf) => match r {
                Ok(n) if n > 0 => {
                    if let Some(s) = sink.as_mut()
                        && s.write_all(&buf[..n]).await.is_err()
                    {
                        sink = None;
                    }
                }
                _ => break,
            },
            _ = async { exit.wait_for(Option::is_some).await.map(|_| ()) }, if !draining => {
                draining = true;
                src.begin_drain();
                drain_deadline.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(5));
            }
            () = &mut drain_deadline, if draining => break,
        }
    }
}

pub(crate) async fn exec(
    conn: &Connection,
    id: &ContainerId,
    cmd: &[String],
    io: ExecIo,
) -> Result<ExecHandle, RuntimeError> {
    if cmd.is_empty() {
        return Err(RuntimeError::InvalidConfig(
            "exec needs a command".to_string(),
        ));
    }
    let mut process = exec_base(conn, id).await?;
    process["args"] = serde_json::json!(cmd);
    process["terminal"] = serde_json::json!(io.tty);
    let value = serde_json::to_vec(&process)
        .map_err(|e| RuntimeError::InvalidConfig(format!("exec process: {e}")))?;

    let exec_id = format!(
        "exec-{}-{}",
        std::process::id(),
        EXEC_SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let dir = conn.opts.state_dir.join(id.as_str()).join(&exec_id);
    let io_err = |e| RuntimeError::io(format!("exec FIFOs in {}", dir.display()), e);
    std::fs::create_dir_all(&dir).map_err(io_err)?;
    let setup = || -> io::Result<(FifoSource, Option<FifoSource>, Option<pipe::Sender>)> {
        fifo::make(&dir.join("stdout"))?;
        let stdout = FifoSource::open(&dir.join("stdout"))?;
        let stderr = if io.tty {
            None
        } else {
            fifo::make(&dir.join("stderr"))?;
            Some(FifoSource::open(&dir.join("stderr"))?)
        };
        let stdin = if io.stdin {
            fifo::make(&dir.join("stdin"))?;
            Some(fifo::open_sender(&dir.join("stdin"))?)
        } else {
            None
        };
        Ok((stdout, stderr, stdin))
    };
    let (stdout_src, stderr_src, stdin) = match setup() {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(io_err(e));
        }
    };
    let path = |name: &str| dir.join(name).display().to_string();
    let created = conn
        .tasks()
        .exec(conn.req(ExecProcessRequest {
            container_id: id.to_string(),
            stdin: if io.stdin {
                path("stdin")
            } else {
                String::new()
            },
            stdout: path("stdout"),
            stderr: if io.tty {
                String::new()
            } else {
                path("stderr")
            },
            terminal: io.tty,
            spec: Some(Any {
                type_url: PROCESS_TYPE_URL.to_string(),
                value,
            }),
            exec_id: exec_id.clone(),
        }))
        .await;
    if let Err(s) = created {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(grpc_error("exec", &format!("task of container {id}"), s));
    }

    let (exit_tx, exit_rx) = watch::channel::<ExitSlot>(None);
    let (out_sink, out_read) = tokio::io::duplex(64 * 1024);
    let mut pumps = vec![tokio::spawn(pump(stdout_src, out_sink, exit_rx.clone()))];
    let stderr = stderr_src.map(|src| {
        let (sink, read) = tokio::io::duplex(64 * 1024);
        pumps.push(tokio::spawn(pump(src, sink, exit_rx.clone())));
        ExecStream(read)
    });
    let control = ExecControl {
        channel: conn.channel.clone(),
        ns: conn.ns.clone(),
        container_id: id.to_string(),
        exec_id: exec_id.clone(),
        exit: exit_rx,
    };

    // Start, then wait: containerd keeps an exited process (and its exit status) until it is
    // deleted, so nothing is missed, and no clean-up can delete the process before it started.
    let started = conn
        .tasks()
        .start(conn.req(StartRequest {
            container_id: id.to_string(),
            exec_id: exec_id.clone(),
        }))
        .await;
    if let Err(s) = started {
        let _ = control.kill(9).await;
        let _ = conn
            .tasks()
            .delete_process(conn.req(DeleteProcessRequest {
                container_id: id.to_string(),
                exec_id: exec_id.clone(),
            }))
            .await;
        let _ = std::fs::remove_dir_all(&dir);
        return Err(grpc_error("start exec", &format!("exec in {id}"), s));
    }
    let waiter = control.clone();
    let cleanup_dir = dir.clone();
    tokio::spawn(async move {
        // A transient failure of the wait call is retried: the process is deleted only once
        // its exit was seen (or containerd no longer knows it).
        let mut attempts = 0;
        let result = loop {
            let wait_req = waiter.req(WaitRequest {
                container_id: waiter.container_id.clone(),
                exec_id: waiter.exec_id.clone(),
            });
            match waiter.tasks().wait(wait_req).await {
                Ok(r) => break Ok(r.into_inner().exit_status as i32),
                Err(s)
                    if attempts < 50
                        && matches!(
                            s.code(),
                            containerd_client::tonic::Code::Unavailable
                                | containerd_client::tonic::Code::Unknown
                                | containerd_client::tonic::Code::Cancelled
                                | containerd_client::tonic::Code::DeadlineExceeded
                        ) =>
                {
                    tracing::debug!(exec = %waiter.exec_id, error = %s.message(), "waiting on an exec failed; retrying");
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(s) => {
                    tracing::warn!(exec = %waiter.exec_id, error = %s.message(), "waiting on an exec failed");
                    break Err(s.message().to_string());
                }
            }
        };
        let _ = exit_tx.send(Some(result));
        for p in pumps {
            let _ = tokio::time::timeout(Duration::from_secs(6), p).await;
        }
        let _ = waiter
            .tasks()
            .delete_process(waiter.req(DeleteProcessRequest {
                container_id: waiter.container_id.clone(),
                exec_id: waiter.exec_id.clone(),
            }))
            .await;
        let _ = std::fs::remove_dir_all(&cleanup_dir);
    });
    Ok(ExecHandle {
        stdin: stdin.map(Stdin),
        stdout: Some(ExecStream(out_read)),
        stderr,
        control,
    })
}

async fn read_limited(stream: Option<ExecStream>) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(mut stream) = stream else {
        return out;
    };
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = OUTPUT_LIMIT.saturating_sub(out.len());
        out.extend_from_slice(&buf[..n.min(room)]);
    }
    out
}

pub(crate) async fn exec_output(
    conn: &Connection,
    id: &ContainerId,
    cmd: &[String],
    timeout: Duration,
) -> Result<(i32, Vec<u8>), RuntimeError> {
    let mut handle = exec(conn, id, cmd, ExecIo::default()).await?;
    let stdout = handle.stdout.take();
    let stderr = handle.stderr.take();
    let control = handle.control.clone();
    let run = async {
        let (out, err, code) =
            tokio::join!(read_limited(stdout), read_limited(stderr), control.wait());
        code.map(|code| (code, out, err))
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(result) => {
            let (code, mut out, err) = result?;
            out.extend_from_slice(&err);
            Ok((code, out))
        }
        Err(_) => {
            let _ = handle.control.kill(9).await;
            Err(RuntimeError::ExecTimeout(timeout))
        }
    }
}
