//! hyper's own answers, given a Kubernetes `Status` body. hyper answers a request it cannot parse
//! (400 for a malformed request line or header, 414 for a URI over its fixed 65,534 bytes, 431
//! for a head over [`MAX_HEAD_BYTES`] or [`MAX_HEADERS`] fields) by itself, before the router
//! sees anything, with an empty body. The connection's writer recognises those answers by their
//! shape and sends [`replacement`] instead: the same status with a `Status` body, and
//! `connection: close` (hyper closes the connection after them).
//!
//! The shape: a whole response head, written when no request is open and after the client sent
//! new bytes, with a 4xx/5xx status, `content-length: 0`, no `content-type` and nothing after the
//! head. Every 4xx/5xx the router produces carries a JSON body with a `content-type` (see
//! `status_body`), so only hyper's automatic answers have it.

use axum::http::StatusCode;

/// The largest request head hyper reads (its `max_buf_size`): upstream's `MaxHeaderBytes`.
pub const MAX_HEAD_BYTES: usize = 1024 * 1024;
/// The most header fields hyper parses in one request (its default).
pub const MAX_HEADERS: usize = 100;
/// hyper's fixed limit on the request target (`MAX_URI_LEN`).
const MAX_URI_BYTES: usize = 65_534;

/// The status of the automatic answer hyper wrote in `written`, if it is one.
pub fn automatic_error(written: &[u8]) -> Option<StatusCode> {
    let rest = written
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| written.strip_prefix(b"HTTP/1.0 "))?;
    let code = std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()?;
    let code = StatusCode::from_u16(code).ok()?;
    if !(code.is_client_error() || code.is_server_error()) {
        return None;
    }
    // The head must be all there is: no body follows an automatic answer.
    let head = written.strip_suffix(b"\r\n\r\n")?;
    if head.windows(4).any(|w| w == b"\r\n\r\n") {
        return None;
    }
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let mut lines = head.split("\r\n").skip(1);
    let empty = lines
        .clone()
        .any(|l| l.strip_prefix("content-length:").map(str::trim) == Some("0"));
    let typed = lines.any(|l| l.starts_with("content-type:"));
    (empty && !typed).then_some(code)
}

/// The `Status` reason and message for an answer of the HTTP layer.
fn reason_and_message(code: StatusCode) -> (&'static str, String) {
    match code {
        StatusCode::BAD_REQUEST => (
            "BadRequest",
            "malformed HTTP request: the request line or a header could not be parsed".into(),
        ),
        // Kubernetes has no reason for these two: upstream leaves an unknown reason out.
        StatusCode::URI_TOO_LONG => (
            "",
            format!("the request URI is longer than the server accepts ({MAX_URI_BYTES} bytes)"),
        ),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            "",
            format!(
                "the request header fields are larger than the server accepts ({MAX_HEAD_BYTES} \
                 bytes, {MAX_HEADERS} fields)"
            ),
        ),
        other => (
            "",
            other
                .canonical_reason()
                .map_or_else(|| format!("HTTP {}", other.as_u16()), str::to_string),
        ),
    }
}

/// The answer sent instead of hyper's: its status line and date, a `Status` body.
pub fn replacement(code: StatusCode, hyper_head: &[u8]) -> Vec<u8> {
    let (reason, message) = reason_and_message(code);
    let status = super::error::failure_status(&message, reason, None, code.as_u16());
    let body = super::error::status_body(&status);
    let head = String::from_utf8_lossy(hyper_head);
    let date = head
        .split("\r\n")
        .find(|l| l.to_ascii_lowercase().starts_with("date:"));
    let mut out = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n",
        code.as_u16(),
        code.canonical_reason().unwrap_or("Error"),
        body.len()
    );
    if let Some(date) = date {
        out.push_str(date);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "date: Tue, 01 Jul 2025 10:00:00 GMT";

    fn automatic(status_line: &str) -> Vec<u8> {
        format!("{status_line}\r\ncontent-length: 0\r\n{DATE}\r\n\r\n").into_bytes()
    }

    #[test]
    fn hypers_automatic_answers_are_recognised() {
        for (line, code) in [
            ("HTTP/1.1 400 Bad Request", 400),
            ("HTTP/1.1 414 URI Too Long", 414),
            ("HTTP/1.1 431 Request Header Fields Too Large", 431),
            ("HTTP/1.0 400 Bad Request", 400),
        ] {
            assert_eq!(
                automatic_error(&automatic(line)).map(|c| c.as_u16()),
                Some(code),
                "{line}"
            );
        }
    }

    #[test]
    fn the_routers_answers_are_left_alone() {
        // A Status from the router: typed, with a body.
        let status = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n\
                       content-length: 2\r\n\r\n{}";
        assert_eq!(automatic_error(status), None);
        // Typed but empty (a HEAD answer).
        let head = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n\
                     content-length: 0\r\n\r\n";
        assert_eq!(automatic_error(head), None);
        // Successes, and bytes that are not a response head.
        assert_eq!(automatic_error(&automatic("HTTP/1.1 200 OK")), None);
        assert_eq!(automatic_error(&automatic("HTTP/1.1 204 No Content")), None);
        assert_eq!(automatic_error(b"{\"kind\":\"Status\"}"), None);
        assert_eq!(
            automatic_error(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0"),
            None
        );
        // An empty error with more after its head is not hyper's.
        let mut two = automatic("HTTP/1.1 400 Bad Request");
        two.extend_from_slice(&automatic("HTTP/1.1 400 Bad Request"));
        assert_eq!(automatic_error(&two), None);
    }

    #[test]
    fn the_replacement_carries_a_status_and_closes() {
        let hyper = automatic("HTTP/1.1 414 URI Too Long");
        let out = String::from_utf8(replacement(StatusCode::URI_TOO_LONG, &hyper)).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{head}");
        assert!(
            head.contains("connection: close") && head.contains(DATE),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let status: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["status"], "Failure");
        assert_eq!(status["code"], 414);
        assert!(status.get("reason").is_none(), "{status}");
        assert!(status["message"].as_str().unwrap().contains("65534"));

        let bad = replacement(
            StatusCode::BAD_REQUEST,
            &automatic("HTTP/1.1 400 Bad Request"),
        );
        let bad = String::from_utf8(bad).unwrap();
        let status: serde_json::Value =
            serde_json::from_str(bad.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(status["reason"], "BadRequest");
    }
}
