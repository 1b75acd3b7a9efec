//! A blocking TLS connection to the controller for connection-level tests: HTTP/1.1 bytes
//! written by hand (a request, or half of one), the answer read back, and whether the server has
//! closed the connection — which the pooled HTTPS client hides.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// One TLS connection (ALPN `http/1.1`), trusting only the given CA, without a client
/// certificate.
pub struct RawTls {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    closed: bool,
}

impl RawTls {
    /// Connects to `127.0.0.1:port` and completes the TLS handshake, within `timeout`.
    pub fn connect(port: u16, ca_pem: &[u8], timeout: Duration) -> Result<RawTls, String> {
        crate::client::install_crypto_provider();
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|e| format!("CA PEM: {e}"))?;
            roots.add(cert).map_err(|e| format!("CA: {e}"))?;
        }
        let mut config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
        let conn = rustls::ClientConnection::new(Arc::new(config), name)
            .map_err(|e| format!("TLS client: {e}"))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let tcp =
            TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
        tcp.set_read_timeout(Some(timeout))
            .and_then(|()| tcp.set_write_timeout(Some(timeout)))
            .map_err(|e| format!("socket options: {e}"))?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| format!("TLS handshake: {e}"))?;
        }
        Ok(RawTls {
            stream,
            closed: false,
        })
    }

    /// Writes `bytes` (and flushes them onto the socket).
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush())
            .map_err(|e| format!("send: {e}"))
    }

    /// Reads one answer with a `Content-Length` body: `(status, head, body)`.
    pub fn read_answer(&mut self, timeout: Duration) -> Result<(u16, String, String), String> {
        let deadline = Instant::now() + timeout;
        let mut raw = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let text = String::from_utf8_lossy(&raw).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= length {
                    let status = head
                        .split_whitespace()
                        .nth(1)
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| format!("no status line in {head:?}"))?;
                    return Ok((status, head.to_string(), body.to_string()));
                }
            }
            if Instant::now() >= deadline {
                return Err(format!("no complete answer in time; got {text:?}"));
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(format!("closed before a complete answer; got {text:?}")),
                Ok(n) => raw.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(format!("read: {e}; got {text:?}")),
            }
        }
    }

    /// Whether the server has closed the connection (EOF, close_notify or reset), looking for
    /// at most a few milliseconds. Stray bytes are discarded.
    pub fn is_closed(&mut self) -> bool {
        if self.closed {
            return true;
        }
        if self
            .stream
            .sock
            .set_read_timeout(Some(Duration::from_millis(5)))
            .is_err()
        {
            self.closed = true;
            return true;
        }
        let mut chunk = [0u8; 4096];
        self.closed = match self.stream.read(&mut chunk) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        };
        self.closed
    }
}
