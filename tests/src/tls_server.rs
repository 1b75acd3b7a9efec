//! A small blocking HTTPS server in the test process, for what the controller calls out to:
//! admission and conversion webhooks, aggregated API servers. One thread per connection,
//! HTTP/1.1 with keep-alive (the controller keeps its connections open between calls), each
//! request answered by the test's handler; [`TlsServer::stop`] (or drop) closes the listener
//! and cuts every open connection, so the next call is refused as by a server that went away.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject as _;

/// One request as the handler sees it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// With its query.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// Every value of the header `name` (case-insensitive), in order.
    pub fn header_values(&self, name: &str) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// A handler's answer: status code and JSON body.
pub type Answer = (u16, serde_json::Value);

type Handler = Arc<dyn Fn(&Request) -> Answer + Send + Sync>;

pub struct TlsServer {
    pub port: u16,
    stopped: Arc<AtomicBool>,
    /// Every connection accepted, to cut them when the server stops.
    open: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<std::thread::JoinHandle<()>>,
}

/// Reads one request: its line, headers, then Content-Length bytes of body.
fn read_request(stream: &mut impl Read) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

fn serve(tcp: TcpStream, config: Arc<rustls::ServerConfig>, handler: Handler) {
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut stream = rustls::StreamOwned::new(conn, tcp);
    while let Some(request) = read_request(&mut stream) {
        let (code, body) = handler(&request);
        let body = body.to_string();
        let head = format!(
            "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            if code < 400 { "OK" } else { "Error" },
            body.len()
        );
        let written = stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body.as_bytes()))
            .and_then(|()| stream.flush());
        if written.is_err() {
            return;
        }
    }
}

impl TlsServer {
    /// Listens on 127.0.0.1 (a free port) with `config`, answering with `handler`.
    pub fn start(
        config: Arc<rustls::ServerConfig>,
        handler: impl Fn(&Request) -> Answer + Send + Sync + 'static,
    ) -> TlsServer {
        let handler: Handler = Arc::new(handler);
        let listener =
            TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("cannot listen: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("no address: {e}"))
            .port();
        let stopped = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::new()));
        let accept = {
            let (stopped, open) = (stopped.clone(), open.clone());
            std::thread::spawn(move || {
                for tcp in listener.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(tcp) = tcp else { continue };
                    let _ = tcp.set_nodelay(true);
                    if let Ok(clone) = tcp.try_clone() {
                        open.lock().unwrap_or_else(|e| e.into_inner()).push(clone);
                    }
                    let (config, handler) = (config.clone(), handler.clone());
                    std::thread::spawn(move || serve(tcp, config, handler));
                }
            })
        };
        TlsServer {
            port,
            stopped,
            open,
            accept: Some(accept),
        }
    }

    /// `https://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// Closes the listener and every connection: calls are refused from now on.
    pub fn stop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag and drops the listener.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        for tcp in self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = tcp.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A server configuration presenting a certificate for `names` (DNS names, or `127.0.0.1`)
/// from a new CA; returns it with that CA's PEM (the `caBundle`).
pub fn serving_config(ca_name: &str, names: &[&str]) -> (Arc<rustls::ServerConfig>, String) {
    crate::client::install_crypto_provider();
    let cert = crate::pki::serving_certificate(ca_name, names);
    let chain: Vec<_> = rustls_pki_chain(&cert.cert_pem);
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes())
        .unwrap_or_else(|e| panic!("key: {e}"));
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap_or_else(|e| panic!("server config: {e}"));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (Arc::new(config), cert.ca_pem)
}

fn rustls_pki_chain(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("certificate: {e}"))
}
