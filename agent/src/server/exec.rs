//! `GET /exec/{ns}/{pod}/{container}` (and `attach`) over a WebSocket speaking
//! `v5.channel.k8s.io` (or v4): binary messages whose first byte is the channel — 0 stdin,
//! 1 stdout, 2 stderr, 3 status (a `Status` JSON at exit, `NonZeroExitCode` carrying the exit
//! code), 4 resize (`{"Width","Height"}`), and in v5 255 = close a channel (stdin EOF).

use super::attach::AttachRequest;
use super::{ExecRequest, ExecStreams, SharedBackend};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const STATUS: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

pub(super) fn params(raw: &str) -> (Vec<String>, bool, bool) {
    let mut command = Vec::new();
    let (mut stdin, mut tty) = (false, false);
    for kv in raw.split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let v = percent_decode(v);
        match k {
            "command" => command.push(v),
            "stdin" | "input" => stdin = v == "true" || v == "1",
            "tty" => tty = v == "true" || v == "1",
            _ => {}
        }
    }
    (command, stdin, tty)
}

/// The channel protocols served, best first.
pub(super) const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/// How long, after the status went out, the client has to answer the close handshake. Until
/// then its input is read (and dropped): a socket closed with unread input is reset, and the
/// reset can overtake the status on its way through the controller's proxy — the lost exit
/// code and `close 1006` kubectl reported.
const CLOSE_HANDSHAKE: Duration = Duration::from_secs(5);

/// The query parameters of an exec or attach request.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct StreamParams {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// Parses the query (`command` repeated, booleans as `true` or `1` as the API server sends
/// them to the kubelet).
pub(super) fn stream_params(raw: &str) -> StreamParams {
    let (command, stdin, tty) = params(raw);
    let flag = |names: [&str; 2]| {
        raw.split('&').any(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            names.contains(&k) && (v == "true" || v == "1")
        })
    };
    StreamParams {
        command,
        stdin,
        stdout: flag(["stdout", "output"]),
        stderr: flag(["stderr", "error"]),
        tty,
    }
}

/// A query value decoded as a form value: `+` is a space, then `%XX` escapes.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// A close with code 1000: kubectl reads a close without a code (1005) as an error.
fn normal_close() -> Message {
    Message::Close(Some(axum::extract::ws::CloseFrame {
        code: 1000,
        reason: "".into(),
    }))
}

/// The status message sent on channel 3 when the process ends.
pub fn exit_status(code: i32) -> serde_json::Value {
    if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("command terminated with non-zero exit code: error executing command, exit status {code}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        })
    }
}

/// The exec a query asks for in `(namespace, pod, container)`, or why not (the kubelet's 400
/// text) for one without a command (both transports).
pub(super) fn exec_request(
    (namespace, pod, container): (String, String, String),
    p: &StreamParams,
) -> Result<ExecRequest, &'static str> {
    if p.command.is_empty() {
        return Err("you must specify at least one command for the container");
    }
    Ok(ExecRequest {
        namespace,
        pod,
        container,
        command: p.command.clone(),
        stdin: p.stdin,
        tty: p.tty,
    })
}

/// What an exec or attach session runs.
pub(super) enum Process {
    Exec(ExecRequest),
    Attach(AttachRequest),
}

impl Process {
    /// Starts the process (or attaches to the container) on the backend.
    pub(super) async fn start(self, backend: &SharedBackend) -> Result<ExecStreams, String> {
        match self {
            Process::Exec(req) => backend.exec(req).await,
            Process::Attach(req) => backend.attach(req).await,
        }
    }
}

/// The `(namespace, pod, container)` of an exec or attach path.
pub(super) type Target = (String, String, String);

/// A request read from a query and the pod's `(namespace, pod, container)`: exec or attach.
pub(super) trait ProcessRequest {
    /// What the query asks to run, or why not (the kubelet's 400 text).
    fn process(target: Target, p: &StreamParams) -> Result<Process, &'static str>;
}

impl ProcessRequest for ExecRequest {
    fn process(target: Target, p: &StreamParams) -> Result<Process, &'static str> {
        exec_request(target, p).map(Process::Exec)
    }
}

/// Runs `process` over the WebSocket protocol once the client's upgrade completes.
pub(super) fn serve(backend: SharedBackend, process: Process, ws: WebSocketUpgrade) -> Response {
    ws.protocols(PROTOCOLS)
        .on_upgrade(move |socket| async move {
            let streams = process.start(&backend).await;
            session(socket, streams).await;
        })
}

/// A process's output.
pub(super) type Output = std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>;

/// Reads `from` until it ends, handing each chunk (after `prefix`) to `send` until `send`
/// answers false: the other side went away.
pub(super) async fn copy_chunks<F, Fut>(mut from: Output, prefix: impl AsRef<[u8]>, mut send: F)
where
    F: FnMut(Vec<u8>) -> Fut,
    Fut: Future<Output = bool>,
{
    let prefix = prefix.as_ref();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut chunk = Vec::with_capacity(prefix.len() + n);
                chunk.extend_from_slice(prefix);
                chunk.extend_from_slice(&buf[..n]);
                if !send(chunk).await {
                    return;
                }
            }
        }
    }
}

/// Sends a `Status` on channel 3.
async fn send_status<S>(sink: &mut S, status: &serde_json::Value)
where
    S: futures::Sink<Message> + Unpin,
{
    let mut msg = vec![STATUS];
    msg.extend_from_slice(status.to_string().as_bytes());
    let _ = sink.send(Message::Binary(msg.into())).await;
}

/// Runs one exec or attach session over the socket: output to the client, the client's stdin
/// and resizes to the process, the status at the end, then the close handshake.
pub(super) async fn session(socket: WebSocket, streams: Result<ExecStreams, String>) {
    let (mut sink, mut source) = socket.split();
    let streams = match streams {
        Ok(s) => s,
        Err(e) => {
            let status = json!({"metadata": {}, "status": "Failure", "message": e, "reason": "InternalError"});
            send_status(&mut sink, &status).await;
            let _ = sink.send(normal_close()).await;
            let _ = tokio::time::timeout(CLOSE_HANDSHAKE, async {
                while let Some(Ok(_)) = source.next().await {}
            })
            .await;
            return;
        }
    };
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let pump = |reader, channel: u8, tx: tokio::sync::mpsc::Sender<Vec<u8>>| {
        tokio::spawn(copy_chunks(reader, [channel], move |msg| {
            let tx = tx.clone();
            async move { tx.send(msg).await.is_ok() }
        }))
    };
    let out_task = pump(streams.stdout, STDOUT, out_tx.clone());
    let err_task = streams.stderr.map(|e| pump(e, STDERR, out_tx.clone()));
    drop(out_tx);

    // Client → process: stdin and resize, until the client closes the socket. Once the
    // process is done (`done`), stdin is dropped: a write must never wait on a pipe nobody
    // reads while the close handshake waits for this task.
    let (done_tx, mut done_rx) = tokio::sync::watch::channel(false);
    let mut stdin = streams.stdin;
    let resize = streams.resize;
    let close_stdin = streams.close_stdin;
    let mut input = tokio::spawn(async move {
        while let Some(Ok(msg)) = source.next().await {
            if *done_rx.borrow() {
                stdin = None;
            }
            let data = match msg {
                Message::Binary(b) => b.to_vec(),
                Message::Text(t) => t.as_bytes().to_vec(),
                Message::Close(_) => break,
                _ => continue,
            };
            let Some((&channel, payload)) = data.split_first() else {
                continue;
            };
            match channel {
                STDIN => {
                    if let Some(w) = stdin.as_mut() {
                        let written = tokio::select! {
                            r = w.write_all(payload) => r.is_ok(),
                            _ = done_rx.wait_for(|d| *d) => false,
                        };
                        if !written {
                            stdin = None;
                        }
                    }
                }
                RESIZE => {
                    if let (Some(r), Ok(v)) = (
                        &resize,
                        serde_json::from_slice::<serde_json::Value>(payload),
                    ) {
                        let w = v["Width"].as_u64().unwrap_or(0) as u16;
                        let h = v["Height"].as_u64().unwrap_or(0) as u16;
                        if w > 0 && h > 0 {
                            r(w, h);
                        }
                    }
                }
                CLOSE if payload.first() == Some(&STDIN) => {
                    if let Some(mut w) = stdin.take() {
                        let _ = w.shutdown().await;
                    }
                    if let Some(c) = &close_stdin {
                        c();
                    }
                }
                _ => {}
            }
        }
        if let Some(mut w) = stdin.take() {
            let _ = w.shutdown().await;
        }
        if let Some(c) = &close_stdin {
            c();
        }
    });

    // Process → client, until the output ends or the client went away.
    let mut client_gone = false;
    loop {
        tokio::select! {
            msg = out_rx.recv() => match msg {
                Some(msg) => {
                    if sink.send(Message::Binary(msg.into())).await.is_err() {
                        client_gone = true;
                        break;
                    }
                }
                None => break,
            },
            _ = &mut input => {
                client_gone = true;
                break;
            }
        }
    }
    if client_gone {
        // Detached (or a broken connection): nothing to report to; the process goes on.
        out_task.abort();
        if let Some(t) = err_task {
            t.abort();
        }
        input.abort();
        return;
    }
    let _ = out_task.await;
    if let Some(t) = err_task {
        let _ = t.await;
    }
    let code = streams.exit.await.unwrap_or(1);
    let _ = done_tx.send(true);
    send_status(&mut sink, &exit_status(code)).await;
    let _ = sink.send(normal_close()).await;
    if tokio::time::timeout(CLOSE_HANDSHAKE, &mut input)
        .await
        .is_err()
    {
        input.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_command_parameters_form_the_argv() {
        let p = stream_params("command=sh&command=-c&command=exit%203&stdout=true&stdin=true");
        assert_eq!(p.command, vec!["sh", "-c", "exit 3"]);
        assert!(p.stdin && p.stdout);
        assert!(!p.tty && !p.stderr);
    }

    #[test]
    fn booleans_come_as_true_or_as_the_kubelets_1() {
        let p = stream_params("stdin=1&stdout=1&tty=1&stderr=0");
        assert!(p.stdin && p.stdout && p.tty);
        assert!(!p.stderr);
    }

    #[test]
    fn a_non_zero_exit_carries_its_code_for_kubectl() {
        let s = exit_status(3);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0]["message"], "3");
        assert_eq!(exit_status(0)["status"], "Success");
    }
}
