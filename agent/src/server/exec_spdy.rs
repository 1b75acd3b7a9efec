//! `exec` and `attach` over SPDY/3.1, as kubectl 1.29 and older (and newer ones falling back)
//! ask for them: the client opens an `error` stream and, as the query asks, `stdin`,
//! `stdout`, `stderr` and (with a TTY) `resize` streams; once they are all open the process
//! runs (or the container is attached to) with them. In
//! `v4.channel.k8s.io` the error stream ends with the same `Status` the WebSocket protocol
//! sends, which carries the exit code; older versions get the failure's text.

use std::time::Duration;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequest, Path, RawQuery, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::SharedBackend;
use super::exec::{
    self, Output, Process, ProcessRequest, StreamParams, copy_chunks, exit_status, stream_params,
};
use super::port_forward::{offered_protocols, on_upgrade, switching, wants_spdy};
use super::spdy::{Session, Stream, StreamWriter, header};

/// The versions served, best first.
const VERSIONS: [&str; 4] = [
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

/// How long the client has to open every stream it asked for.
const STREAMS_DEADLINE: Duration = Duration::from_secs(30);

/// The streams the query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expect {
    stdin: bool,
    stdout: bool,
    stderr: bool,
    resize: bool,
}

/// The transport a client upgrades to.
enum Transport {
    Spdy(Request),
    WebSocket(WebSocketUpgrade),
}

/// `/exec/...` and `/attach/...` (`R` says which) over the transport the client asks for: SPDY
/// for a client that asks to upgrade to it, else the WebSocket protocol. A WebSocket upgrade
/// that cannot be made is refused first, then a query that asks for nothing to run or attach
/// gets a 400 with the kubelet's text.
pub(super) async fn route<R: ProcessRequest>(
    State(backend): State<SharedBackend>,
    Path(target): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    req: Request,
) -> Response {
    let transport = if wants_spdy(req.headers()) {
        Transport::Spdy(req)
    } else {
        match WebSocketUpgrade::from_request(req, &backend).await {
            Ok(ws) => Transport::WebSocket(ws),
            Err(rejection) => return rejection.into_response(),
        }
    };
    let p = stream_params(query.as_deref().unwrap_or_default());
    let process = match R::process(target, &p) {
        Ok(process) => process,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    match transport {
        Transport::Spdy(req) => serve(backend, process, &p, req),
        Transport::WebSocket(ws) => exec::serve(backend, process, ws),
    }
}

fn serve(backend: SharedBackend, process: Process, p: &StreamParams, mut req: Request) -> Response {
    let offered = offered_protocols(req.headers());
    let Some(version) = offered
        .iter()
        .find(|v| VERSIONS.contains(&v.as_str()))
        .cloned()
    else {
        return (
            StatusCode::FORBIDDEN,
            format!(
                "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server supports {VERSIONS:?}"
            ),
        )
            .into_response();
    };
    let expect = Expect {
        stdin: p.stdin,
        stdout: p.stdout,
        stderr: p.stderr && !p.tty,
        resize: p.tty && version != "v2.channel.k8s.io" && version != "channel.k8s.io",
    };
    let v4 = version == VERSIONS[0];
    on_upgrade(&mut req, move |io| {
        run(Session::start(io), backend, process, expect, v4)
    });
    switching(&version)
}

/// The streams once all asked-for ones are open.
#[derive(Default)]
struct Streams {
    error: Option<Stream>,
    stdin: Option<Stream>,
    stdout: Option<Stream>,
    stderr: Option<Stream>,
    resize: Option<Stream>,
}

impl Streams {
    fn complete(&self, e: Expect) -> bool {
        self.error.is_some()
            && self.stdin.is_some() == e.stdin
            && self.stdout.is_some() == e.stdout
            && self.stderr.is_some() == e.stderr
            && self.resize.is_some() == e.resize
    }
}

async fn collect(session: &mut Session, expect: Expect) -> Option<Streams> {
    let mut s = Streams::default();
    let wait = async {
        while !s.complete(expect) {
            let stream = session.streams.recv().await?;
            let slot = match header(&stream.headers, "streamType").unwrap_or_default() {
                "error" => &mut s.error,
                "stdin" => &mut s.stdin,
                "stdout" => &mut s.stdout,
                "stderr" => &mut s.stderr,
                "resize" => &mut s.resize,
                _ => continue,
            };
            *slot = Some(stream);
        }
        Some(())
    };
    tokio::time::timeout(STREAMS_DEADLINE, wait).await.ok()??;
    Some(s)
}

/// Copies a process output into a stream, then ends the stream.
fn pump(from: Output, to: Option<StreamWriter>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        copy_chunks(from, [], |chunk| {
            let to = to.clone();
            async move {
                match &to {
                    Some(w) => w.write(&chunk).await,
                    None => true,
                }
            }
        })
        .await;
        if let Some(w) = &to {
            w.finish().await;
        }
    })
}

async fn run(
    mut session: Session,
    backend: SharedBackend,
    process: Process,
    expect: Expect,
    v4: bool,
) {
    let Some(mut streams) = collect(&mut session, expect).await else {
        session.close();
        return;
    };
    let Some(error) = streams.error.take() else {
        session.close();
        return;
    };
    let started = process.start(&backend).await;
    let process = match started {
        Ok(p) => p,
        Err(e) => {
            let text = if v4 {
                json!({"metadata": {}, "status": "Failure", "message": e, "reason": "InternalError"})
                    .to_string()
            } else {
                e
            };
            error.writer.write(text.as_bytes()).await;
            error.writer.finish().await;
            session.close();
            return;
        }
    };
    let out = pump(
        process.stdout,
        streams.stdout.as_ref().map(|s| s.writer.clone()),
    );
    let err = process
        .stderr
        .map(|e| pump(e, streams.stderr.as_ref().map(|s| s.writer.clone())));
    if let (Some(mut stdin_stream), Some(mut stdin)) = (streams.stdin.take(), process.stdin) {
        let close_stdin = process.close_stdin;
        tokio::spawn(async move {
            while let Some(bytes) = stdin_stream.incoming.recv().await {
                if stdin.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            let _ = stdin.shutdown().await;
            if let Some(c) = close_stdin {
                c();
            }
        });
    }
    if let (Some(mut resize_stream), Some(resize)) = (streams.resize.take(), process.resize) {
        tokio::spawn(async move {
            let mut pending = Vec::new();
            while let Some(bytes) = resize_stream.incoming.recv().await {
                pending.extend_from_slice(&bytes);
                // A sequence of JSON objects (`{"Width":80,"Height":24}`), as Go's encoder
                // writes them.
                let mut values =
                    serde_json::Deserializer::from_slice(&pending).into_iter::<serde_json::Value>();
                let mut used = 0;
                while let Some(Ok(v)) = values.next() {
                    used = values.byte_offset();
                    let w = v["Width"].as_u64().unwrap_or(0) as u16;
                    let h = v["Height"].as_u64().unwrap_or(0) as u16;
                    if w > 0 && h > 0 {
                        resize(w, h);
                    }
                }
                pending.drain(..used);
            }
        });
    }
    let _ = out.await;
    if let Some(e) = err {
        let _ = e.await;
    }
    let code = process.exit.await.unwrap_or(1);
    if v4 {
        error
            .writer
            .write(exit_status(code).to_string().as_bytes())
            .await;
    } else if code != 0 {
        let text = format!("command terminated with non-zero exit code: exit status {code}");
        error.writer.write(text.as_bytes()).await;
    }
    error.writer.finish().await;
    session.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_stream_is_always_awaited() {
        let all = Streams::default();
        let none = Expect {
            stdin: false,
            stdout: false,
            stderr: false,
            resize: false,
        };
        assert!(!all.complete(none), "the error stream is always awaited");
    }
}
