//! Blocking raw-HTTPS access to the API for tests: requests that return a `Reply`, and watch
//! streams read event by event with deadlines. Wraps `client::AsyncApi` in a private
//! single-threaded runtime.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::{AsyncApi, Endpoint, Reply, Req};
use crate::process::LogTail;

/// A blocking API client; failures of the transport panic with the request and the log tail.
pub struct Api {
    rt: tokio::runtime::Runtime,
    inner: AsyncApi,
    logs: LogTail,
}

impl Api {
    pub fn new(endpoint: Endpoint, logs: LogTail) -> Api {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("cannot build a tokio runtime: {e}"));
        // The client must be built inside the runtime that will drive its connections.
        let inner = rt.block_on(async { AsyncApi::new(endpoint) });
        Api { rt, inner, logs }
    }

    /// Sends `req`; `Err` carries the transport error (connection refused, TLS alert, ...).
    pub fn try_send(&self, req: Req) -> Result<Reply, String> {
        self.rt.block_on(self.inner.send(&req))
    }

    /// Sends `req` and returns whatever status came back; panics if there was no HTTP answer.
    pub fn send(&self, req: Req) -> Reply {
        let line = req.line();
        self.try_send(req)
            .unwrap_or_else(|e| panic!("no HTTP answer to {line}: {e}\n{}", self.logs.render()))
    }

    /// Sends `req` and requires `status`; returns the JSON body (or `Null` if it is not JSON).
    pub fn expect(&self, req: Req, status: u16) -> Value {
        let reply = self.send(req);
        if reply.status != status {
            panic!(
                "expected HTTP {status}\n{}\n{}",
                reply.describe(),
                self.logs.render()
            );
        }
        reply.json_or_null()
    }

    pub fn get(&self, path: &str) -> Reply {
        self.send(Req::get(path))
    }

    /// GET that must answer 200 with JSON.
    pub fn get_ok(&self, path: &str) -> Value {
        self.expect(Req::get(path), 200)
    }

    /// POST that must answer 201 Created; returns the stored object.
    pub fn create(&self, collection: &str, body: &Value) -> Value {
        self.expect(Req::post(collection, body), 201)
    }

    /// Opens a watch (`path` must carry `watch=true`). A non-200 answer is returned as
    /// `Err(reply)` so tests can check 410s answered up front.
    /// Watches the collection at `path` (a list path, no query) from its current version, so
    /// every change after this call arrives and nothing from before. Panics if it cannot.
    pub fn watch_from_now(&self, path: &str) -> Watch<'_> {
        let list = self.get_ok(path);
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("0");
        self.watch(&format!("{path}?watch=true&resourceVersion={rv}"))
            .unwrap_or_else(|r| panic!("cannot watch {path}: {}", r.describe()))
    }

    pub fn watch(&self, path: &str) -> Result<Watch<'_>, Box<Reply>> {
        let req = Req::get(path);
        let line = req.line();
        let resp = self
            .rt
            .block_on(self.inner.open(&req))
            .unwrap_or_else(|e| panic!("no HTTP answer to {line}: {e}\n{}", self.logs.render()));
        let status = resp.status().as_u16();
        if status != 200 {
            let content_type = header(&resp, reqwest::header::CONTENT_TYPE);
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse().ok());
            let http_version = format!("{:?}", resp.version());
            let warnings = crate::client::warnings(resp.headers());
            let body = self.rt.block_on(resp.text()).unwrap_or_default();
            return Err(Box::new(Reply {
                request: line,
                status,
                content_type,
                http_version,
                retry_after,
                warnings,
                body,
            }));
        }
        Ok(Watch {
            api: self,
            request: line,
            resp,
            buf: Vec::new(),
            seen: Vec::new(),
            ended: false,
        })
    }

    pub fn logs(&self) -> &LogTail {
        &self.logs
    }

    pub fn inner(&self) -> &AsyncApi {
        &self.inner
    }
}

fn header(resp: &reqwest::Response, name: reqwest::header::HeaderName) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// What reading a watch stream gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Event(Value),
    /// Nothing arrived in time.
    Timeout,
    /// The server ended the stream (or the connection failed: see the message).
    Closed(String),
}

/// An open watch: newline-delimited JSON events.
pub struct Watch<'a> {
    api: &'a Api,
    request: String,
    resp: reqwest::Response,
    buf: Vec<u8>,
    seen: Vec<Value>,
    ended: bool,
}

impl Watch<'_> {
    /// The next event, waiting at most `timeout`.
    pub fn next(&mut self, timeout: Duration) -> Next {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                let event: Value = serde_json::from_str(text).unwrap_or_else(|e| {
                    panic!("watch line is not JSON ({e}): {text}\n{}", self.describe())
                });
                self.seen.push(event.clone());
                return Next::Event(event);
            }
            if self.ended {
                return Next::Closed("stream ended".into());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Next::Timeout;
            }
            let resp = &mut self.resp;
            // The timer must be created inside the runtime, hence the async block.
            let chunk = self
                .api
                .rt
                .block_on(async { tokio::time::timeout(left, resp.chunk()).await });
            match chunk {
                Err(_) => return Next::Timeout,
                Ok(Ok(Some(bytes))) => self.buf.extend_from_slice(&bytes),
                Ok(Ok(None)) => {
                    self.ended = true;
                    // A last event without a trailing newline is still an event.
                    if !self.buf.is_empty() {
                        self.buf.push(b'\n');
                    }
                }
                Ok(Err(e)) => {
                    self.ended = true;
                    return Next::Closed(crate::client::error_chain(&e));
                }
            }
        }
    }

    /// The next event that is not a BOOKMARK; panics (with everything seen) if none comes.
    pub fn expect_event(&mut self, timeout: Duration, what: &str) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left) {
                Next::Event(e) if e["type"] == "BOOKMARK" => continue,
                Next::Event(e) => return e,
                other => panic!(
                    "expected a watch event ({what}), got {other:?}\n{}",
                    self.describe()
                ),
            }
        }
    }

    /// Events read so far (bookmarks included).
    pub fn seen(&self) -> &[Value] {
        &self.seen
    }

    /// The request, the events seen (type, name, resourceVersion) and the log tail.
    pub fn describe(&self) -> String {
        let events: Vec<String> = self.seen.iter().map(event_summary).collect();
        format!(
            "watch: {}\nevents seen ({}):\n{}\n{}",
            self.request,
            events.len(),
            events.join("\n"),
            self.api.logs.render()
        )
    }
}

/// `TYPE name rv=N` for one watch event.
pub fn event_summary(e: &Value) -> String {
    let meta = &e["object"]["metadata"];
    format!(
        "{} {} rv={}",
        e["type"].as_str().unwrap_or("?"),
        meta["name"].as_str().unwrap_or("?"),
        meta["resourceVersion"].as_str().unwrap_or("?")
    )
}
