//! A plain-TCP HTTP/1.0 client for pod IPs and the local registry: one request per connection,
//! the whole answer read until the server closes (HTTP/1.0 rules out chunked bodies), every
//! step under a deadline.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Parses a raw HTTP answer (status line, headers, body).
pub fn parse_response(raw: &[u8]) -> Result<HttpResponse, String> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .or_else(|| text.split_once("\n\n"))
        .unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split_whitespace();
    let proto = parts.next().unwrap_or_default();
    if !proto.starts_with("HTTP/") {
        return Err(format!("not an HTTP answer: {:?}", truncate(&text, 200)));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(HttpResponse {
        status,
        headers,
        body: body.to_string(),
    })
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Sends one request to `addr` (`host:port`) and reads the answer; `Err` says which step failed.
pub fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<HttpResponse, String> {
    let sock: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr}: no address"))?;
    let mut s =
        TcpStream::connect_timeout(&sock, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    let mut req =
        format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nUser-Agent: berth-tests\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())
        .map_err(|e| format!("send to {addr}: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("read from {addr}: {e} (after {} bytes)", raw.len()))?;
    parse_response(&raw)
}

/// `GET http://ip:port/path` with a 5-second deadline per step.
pub fn http_get(ip: &str, port: u16, path: &str) -> Result<HttpResponse, String> {
    http_request(
        &format!("{ip}:{port}"),
        "GET",
        path,
        &[],
        Duration::from_secs(5),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn answers_are_split_into_status_headers_and_body() {
        let r =
            parse_response(b"HTTP/1.0 404 Not Found\r\nContent-Type: text/html\r\n\r\n<h1>no</h1>")
                .unwrap();
        assert_eq!(r.status, 404);
        assert_eq!(r.header("content-type"), Some("text/html"));
        assert_eq!(r.body, "<h1>no</h1>");
        assert!(parse_response(b"SSH-2.0-OpenSSH").is_err());
    }

    #[test]
    fn a_get_reaches_a_local_server() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let n = c.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            c.write_all(b"HTTP/1.0 200 OK\r\n\r\nhello").unwrap();
            req
        });
        let r = http_get("127.0.0.1", port, "/index.html").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "hello"));
        assert!(
            server
                .join()
                .unwrap()
                .starts_with("GET /index.html HTTP/1.0\r\n")
        );
    }

    #[test]
    fn a_closed_port_is_an_error_that_says_connect() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = http_get("127.0.0.1", port, "/").unwrap_err();
        assert!(err.starts_with("connect"), "{err}");
    }
}
