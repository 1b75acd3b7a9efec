//! grpc probes: `grpc.health.v1.Health/Check` over cleartext HTTP/2 to the pod IP; success iff
//! the answer is `SERVING`. The two messages are one optional field each, so they are encoded
//! by hand instead of pulling in a gRPC stack.

use std::time::Duration;

use berth_api::k8s_openapi::api::core::v1::GRPCAction;
use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::{CONTENT_TYPE, HeaderMap, TE, USER_AGENT};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::{Outcome, ProbeError, Target, USER_AGENT as PROBE_AGENT, checked_port, join_host_port};
use crate::pod::restart::go_duration;

const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// `HealthCheckResponse.ServingStatus` names.
const SERVING_STATUS: [&str; 4] = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"];
const SERVING: u64 = 1;

/// gRPC status code names, as grpc-go prints them.
const CODES: [&str; 17] = [
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];
const UNIMPLEMENTED: u32 = 12;

/// How a health call ended when it got an answer.
enum Answer {
    /// A `HealthCheckResponse` with this status.
    Status(u64),
    /// A non-OK gRPC status: code and message.
    Error(u32, String),
}

/// One step of the probe, finished by `deadline`: its value, or the failure the kubelet
/// reports when time ran out (`late`) or the step failed (`failed`).
async fn before<T, E>(
    deadline: tokio::time::Instant,
    step: impl std::future::Future<Output = Result<T, E>>,
    late: String,
    failed: impl FnOnce(E) -> String,
) -> Result<T, Outcome> {
    match tokio::time::timeout_at(deadline, step).await {
        Err(_) => Err(Outcome::failure(late)),
        Ok(Err(e)) => Err(Outcome::failure(failed(e))),
        Ok(Ok(value)) => Ok(value),
    }
}

pub(super) async fn probe(
    action: &GRPCAction,
    target: Target<'_>,
    timeout: Duration,
) -> Result<Outcome, ProbeError> {
    let port = checked_port(action.port.into())?;
    let host = target.pod_ip.ok_or(ProbeError::NoPodIp)?;
    let addr = join_host_port(host, port);
    let service = action.service.as_deref().unwrap_or_default();
    let deadline = tokio::time::Instant::now() + timeout;
    let within = go_duration(timeout);
    let connect = TcpStream::connect((host, port));
    let late = format!(
        "timeout: failed to connect service {addr:?} within {within}: context deadline exceeded"
    );
    let failed = |e| format!("error: failed to connect service at {addr:?}: {e}");
    let tcp = match before(deadline, connect, late, failed).await {
        Ok(tcp) => tcp,
        Err(outcome) => return Ok(outcome),
    };
    let late = format!("timeout: health rpc did not complete within {within}");
    let failed = |e| format!("error: health rpc probe failed: {e}");
    let answer = match before(deadline, check(tcp, &addr, service), late, failed).await {
        Ok(answer) => answer,
        Err(outcome) => return Ok(outcome),
    };
    Ok(match answer {
        Answer::Status(SERVING) => Outcome::success("service is healthy"),
        Answer::Status(other) => {
            let name = usize::try_from(other)
                .ok()
                .and_then(|i| SERVING_STATUS.get(i))
                .map_or_else(|| other.to_string(), |n| (*n).to_string());
            Outcome::failure(format!("service unhealthy (responded with {name:?})"))
        }
        Answer::Error(UNIMPLEMENTED, message) => Outcome::failure(format!(
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {message}"
        )),
        Answer::Error(code, message) => {
            let name = usize::try_from(code)
                .ok()
                .and_then(|i| CODES.get(i))
                .map_or_else(|| format!("Code({code})"), |n| (*n).to_string());
            Outcome::failure(format!(
                "error: health rpc probe failed: rpc error: code = {name} desc = {message}"
            ))
        }
    })
}

/// One unary call on a fresh HTTP/2 connection.
async fn check(tcp: TcpStream, addr: &str, service: &str) -> Result<Answer, String> {
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let result = call(&mut sender, addr, service).await;
    driver.abort();
    result
}

async fn call(
    sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    addr: &str,
    service: &str,
) -> Result<Answer, String> {
    let request = Request::post(format!("http://{addr}{CHECK_PATH}"))
        .header(CONTENT_TYPE, "application/grpc")
        .header(TE, "trailers")
        .header(USER_AGENT, PROBE_AGENT)
        .body(Full::new(encode_request(service)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!(
            "unexpected HTTP status code {}",
            response.status().as_u16()
        ));
    }
    // A "trailers-only" answer carries the status in the headers.
    if let Some(status) = grpc_status(response.headers()) {
        return Ok(status);
    }
    let collected = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    if let Some(status) = collected.trailers().and_then(grpc_status) {
        return Ok(status);
    }
    let body = collected.to_bytes();
    let message = body.get(5..).ok_or("short gRPC message")?;
    Ok(Answer::Status(decode_status(message)?))
}

/// A non-OK `grpc-status`, if present.
fn grpc_status(headers: &HeaderMap) -> Option<Answer> {
    let code: u32 = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    if code == 0 {
        return None;
    }
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .map(|m| {
            percent_encoding::percent_decode_str(m)
                .decode_utf8_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    Some(Answer::Error(code, message))
}

/// A length-prefixed `HealthCheckRequest { string service = 1; }`.
fn encode_request(service: &str) -> Bytes {
    let mut message = BytesMut::new();
    if !service.is_empty() {
        message.put_u8(0x0a); // field 1, length-delimited
        put_varint(&mut message, service.len() as u64);
        message.put_slice(service.as_bytes());
    }
    let mut framed = BytesMut::with_capacity(5 + message.len());
    framed.put_u8(0); // not compressed
    framed.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    framed.put_slice(&message);
    framed.freeze()
}

fn put_varint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn varint(buf: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).ok_or("truncated varint")?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

/// `HealthCheckResponse { ServingStatus status = 1; }`; absent means 0 (`UNKNOWN`).
fn decode_status(message: &[u8]) -> Result<u64, String> {
    let (mut at, mut status) = (0, 0);
    while at < message.len() {
        let key = varint(message, &mut at)?;
        let skip = match key & 7 {
            0 => {
                let v = varint(message, &mut at)?;
                if key >> 3 == 1 {
                    status = v;
                }
                0
            }
            1 => 8,
            2 => usize::try_from(varint(message, &mut at)?).map_err(|e| e.to_string())?,
            5 => 4,
            wire => return Err(format!("unsupported wire type {wire}")),
        };
        at = at.checked_add(skip).ok_or("bad length")?;
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use berth_api::k8s_openapi::api::core::v1::Container;
    use http_body_util::StreamBody;
    use http_body_util::combinators::BoxBody;
    use hyper::body::{Frame, Incoming};
    use hyper::service::service_fn;

    use super::*;
    use crate::probe::ProbeResult;

    /// A tiny h2c health server: service "" is SERVING, "down" is NOT_SERVING, "missing"
    /// answers NOT_FOUND, "ancient" answers UNIMPLEMENTED (trailers-only), "stuck" never
    /// answers.
    async fn server() -> u16 {
        let (listener, port) = super::super::tests::listening().await;
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let service = service_fn(|req: Request<Incoming>| async move {
                        Ok::<_, Infallible>(answer(req).await)
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        port
    }

    type Body = BoxBody<Bytes, Infallible>;

    async fn answer(req: Request<Incoming>) -> hyper::Response<Body> {
        assert_eq!(req.uri().path(), CHECK_PATH);
        assert_eq!(req.headers()[CONTENT_TYPE], "application/grpc");
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let service = String::from_utf8(body.get(7..).unwrap_or_default().to_vec()).unwrap();
        let reply = |status: Option<u64>, code: u32, message: &str| {
            let mut frames: Vec<Result<Frame<Bytes>, Infallible>> = Vec::new();
            if let Some(status) = status {
                let mut m = BytesMut::new();
                m.put_u8(0x08);
                put_varint(&mut m, status);
                let mut framed = BytesMut::new();
                framed.put_u8(0);
                framed.put_u32(m.len() as u32);
                framed.put_slice(&m);
                frames.push(Ok(Frame::data(framed.freeze())));
            }
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", code.to_string().parse().unwrap());
            trailers.insert("grpc-message", message.parse().unwrap());
            frames.push(Ok(Frame::trailers(trailers)));
            let body = StreamBody::new(futures::stream::iter(frames));
            hyper::Response::builder()
                .header(CONTENT_TYPE, "application/grpc")
                .body(BodyExt::boxed(body))
                .unwrap()
        };
        match service.as_str() {
            "" => reply(Some(1), 0, ""),
            "down" => reply(Some(2), 0, ""),
            "missing" => reply(None, 5, "unknown%20service"),
            "ancient" => hyper::Response::builder()
                .header(CONTENT_TYPE, "application/grpc")
                .header("grpc-status", "12")
                .header("grpc-message", "unknown service grpc.health.v1.Health")
                .body(BodyExt::boxed(Full::new(Bytes::new())))
                .unwrap(),
            _ => {
                tokio::time::sleep(Duration::from_secs(30)).await; // not ordering: a server slower than the probe timeout
                reply(Some(1), 0, "")
            }
        }
    }

    async fn run(port: u16, service: &str, timeout: Duration) -> Outcome {
        let c = Container::default();
        let action = GRPCAction {
            port: i32::from(port),
            service: (!service.is_empty()).then(|| service.to_string()),
        };
        let target = Target {
            container: &c,
            pod_ip: Some("127.0.0.1"),
        };
        probe(&action, target, timeout).await.unwrap()
    }

    #[tokio::test]
    async fn serving_is_success_and_other_answers_are_failures() {
        let port = server().await;
        let second = Duration::from_secs(1);
        assert_eq!(
            run(port, "", second).await,
            Outcome::success("service is healthy")
        );
        assert_eq!(
            run(port, "down", second).await,
            Outcome::failure("service unhealthy (responded with \"NOT_SERVING\")")
        );
        assert_eq!(
            run(port, "missing", second).await,
            Outcome::failure(
                "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"
            )
        );
        let ancient = run(port, "ancient", second).await;
        assert_eq!(ancient.result, ProbeResult::Failure);
        assert!(
            ancient
                .output
                .starts_with("error: this server does not implement")
        );
    }

    #[tokio::test]
    async fn no_answer_within_the_timeout_is_failure() {
        let port = server().await;
        let out = run(port, "stuck", Duration::from_millis(200)).await;
        assert_eq!(
            out,
            Outcome::failure("timeout: health rpc did not complete within 200ms")
        );
    }

    #[tokio::test]
    async fn nothing_listening_is_failure() {
        let port = super::super::tests::closed_port().await;
        let out = run(port, "", Duration::from_secs(1)).await;
        assert_eq!(out.result, ProbeResult::Failure);
        assert!(
            out.output
                .starts_with("error: failed to connect service at"),
            "{}",
            out.output
        );
    }

    #[test]
    fn messages_round_trip_through_the_hand_encoding() {
        let framed = encode_request("db");
        assert_eq!(&framed[..], &[0, 0, 0, 0, 4, 0x0a, 2, b'd', b'b']);
        assert_eq!(&encode_request("")[..], &[0, 0, 0, 0, 0]);
        // status = NOT_SERVING, with an unknown length-delimited field before it
        assert_eq!(decode_status(&[0x12, 1, 0xff, 0x08, 2]).unwrap(), 2);
        assert_eq!(decode_status(&[]).unwrap(), 0);
        assert!(decode_status(&[0x08]).is_err());
    }
}
