//! httpGet probes: an HTTP/1.1 GET from the node to the pod (HTTPS without certificate
//! verification); status 200–399 is success. Redirects to the same host are followed (up to
//! 10); a redirect elsewhere ends the probe as a success, as upstream does.

use berth_api::client::any_certificate::AnyServerCertificate;
use std::sync::Arc;
use std::time::Duration;

use berth_api::k8s_openapi::api::core::v1::{HTTPGetAction, HTTPHeader};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header::{ACCEPT, CONNECTION, HOST, HeaderName, HeaderValue, LOCATION, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::crypto::ring;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{
    Outcome, ProbeError, Target, USER_AGENT as PROBE_AGENT, host, join_host_port, resolve_port,
};

/// How much of a response body ends up in the probe's output.
const MAX_BODY: usize = 10 * 1024;
const MAX_REDIRECTS: usize = 10;

/// A fully resolved request target.
struct Url {
    https: bool,
    host: String,
    port: u16,
    path: String,
}

impl Url {
    fn authority(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    fn text(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority(), self.path)
    }
}

pub(super) async fn probe(
    action: &HTTPGetAction,
    target: Target<'_>,
    timeout: Duration,
) -> Result<Outcome, ProbeError> {
    let mut url = Url {
        https: action
            .scheme
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("https")),
        host: host(action.host.as_deref(), target)?.to_string(),
        port: resolve_port(&action.port, target.container)?,
        path: match action.path.as_deref().unwrap_or_default() {
            "" => "/".to_string(),
            p if p.starts_with('/') => p.to_string(),
            p => format!("/{p}"),
        },
    };
    let headers = headers(action.http_headers.as_deref().unwrap_or_default())?;
    let tls = url.https.then(tls_connector).transpose()?;
    let deadline = tokio::time::Instant::now() + timeout;
    for _ in 0..=MAX_REDIRECTS {
        let shown = url.text();
        let exchange = get(&url, &headers, tls.as_ref());
        let (status, location, body) = match tokio::time::timeout_at(deadline, exchange).await {
            Err(_) => {
                return Ok(Outcome::failure(format!(
                    "Get \"{shown}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                )));
            }
            Ok(Err(e)) => return Ok(Outcome::failure(format!("Get \"{shown}\": {e}"))),
            Ok(Ok(response)) => response,
        };
        let code = status.as_u16();
        if status.is_redirection()
            && let Some(next) = location.and_then(|l| same_host_redirect(&url, &l))
        {
            url.path = next;
            continue;
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        return Ok(match code {
            200..=299 => Outcome::success(body),
            300..=399 => {
                Outcome::success(format!("Probe terminated redirects, Response body: {body}"))
            }
            _ => Outcome::failure(format!("HTTP probe failed with statuscode: {code}")),
        });
    }
    Ok(Outcome::failure(format!(
        "Get \"{}\": stopped after {MAX_REDIRECTS} redirects",
        url.text()
    )))
}

/// The request headers: the probe's own, then `User-Agent: kube-probe/1.34` and `Accept: */*`
/// unless given (an empty `Accept` removes it).
fn headers(given: &[HTTPHeader]) -> Result<Vec<(HeaderName, HeaderValue)>, ProbeError> {
    let mut out = Vec::with_capacity(given.len() + 2);
    for h in given {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| ProbeError::InvalidHeader(h.name.clone()))?;
        let value = HeaderValue::from_str(&h.value)
            .map_err(|_| ProbeError::InvalidHeader(h.name.clone()))?;
        out.push((name, value));
    }
    if !out.iter().any(|(n, _)| n == USER_AGENT) {
        out.push((USER_AGENT, HeaderValue::from_static(PROBE_AGENT)));
    }
    match out.iter().find(|(n, _)| n == ACCEPT) {
        None => out.push((ACCEPT, HeaderValue::from_static("*/*"))),
        Some((_, v)) if v.is_empty() => out.retain(|(n, _)| n != ACCEPT),
        Some(_) => {}
    }
    Ok(out)
}

/// The path of a redirect that stays on the probed host, if it does.
fn same_host_redirect(from: &Url, location: &str) -> Option<String> {
    if location.starts_with('/') && !location.starts_with("//") {
        return Some(location.to_string());
    }
    let (scheme, rest) = location.split_once("://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let https = scheme.eq_ignore_ascii_case("https");
    let default_port = if https { 443 } else { 80 };
    let same_port = |p: &str| p.parse::<u16>().ok() == Some(from.port);
    let same = https == from.https
        && (authority == from.authority()
            || (authority == from.host && from.port == default_port)
            || authority
                .rsplit_once(':')
                .is_some_and(|(h, p)| h.trim_matches(['[', ']']) == from.host && same_port(p)));
    same.then(|| {
        if path.is_empty() {
            "/".to_string()
        } else {
            path.to_string()
        }
    })
}

type Response = (StatusCode, Option<String>, Vec<u8>);

async fn get(
    url: &Url,
    headers: &[(HeaderName, HeaderValue)],
    tls: Option<&TlsConnector>,
) -> Result<Response, String> {
    let tcp = TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| format!("dial tcp {}: {e}", url.authority()))?;
    let mut request = Request::get(url.path.as_str())
        .header(HOST, url.authority())
        .header(CONNECTION, "close");
    for (name, value) in headers {
        if name == HOST {
            // A `Host` header from the probe replaces the default (Go's `req.Host`).
            if let Some(h) = request.headers_mut() {
                h.insert(HOST, value.clone());
            }
        } else {
            request = request.header(name, value);
        }
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    match tls {
        None => exchange(tcp, request).await,
        Some(connector) => {
            let name = ServerName::try_from(url.host.clone()).map_err(|e| e.to_string())?;
            let stream = connector
                .connect(name, tcp)
                .await
                .map_err(|e| format!("tls: {e}"))?;
            exchange(stream, request).await
        }
    }
}

async fn exchange<S>(stream: S, request: Request<Empty<Bytes>>) -> Result<Response, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string());
    let result = match response {
        Ok(response) => {
            let status = response.status();
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_string);
            let mut body = response.into_body();
            let mut data = Vec::new();
            while data.len() < MAX_BODY {
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Some(chunk) = frame.data_ref() {
                            data.extend_from_slice(chunk);
                        }
                    }
                    Some(Err(e)) => return Err(e.to_string()),
                    None => break,
                }
            }
            data.truncate(MAX_BODY);
            Ok((status, location, data))
        }
        Err(e) => Err(e),
    };
    driver.abort();
    result
}

/// Probes do not verify the pod's certificate (upstream sets `InsecureSkipVerify`).
fn tls_connector() -> Result<TlsConnector, ProbeError> {
    let provider = Arc::new(ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(AnyServerCertificate::new(provider))
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Mutex;

    use berth_api::k8s_openapi::api::core::v1::Container;
    use berth_api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use http_body_util::Full;
    use hyper::body::Incoming;
    use hyper::service::service_fn;

    use super::*;
    use crate::probe::ProbeResult;
    use crate::probe::tests::container_with_port;

    type Seen = Arc<Mutex<Vec<Request<Incoming>>>>;

    /// A tiny HTTP server: `/status/<code>` answers that code, `/redirect` sends to
    /// `/status/500`, `/away` redirects to another host, `/slow` never answers; every
    /// request is kept for inspection. With `tls`, it speaks HTTPS with a self-signed
    /// certificate.
    async fn server(tls: bool) -> (u16, Seen) {
        let (listener, port) = super::super::tests::listening().await;
        let seen: Seen = Arc::default();
        let acceptor = tls.then(tls_acceptor);
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let log = log.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let log = log.clone();
                        async move { Ok::<_, Infallible>(answer(req, &log).await) }
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    match acceptor {
                        None => {
                            let _ = http.serve_connection(TokioIo::new(tcp), service).await;
                        }
                        Some(a) => {
                            let Ok(stream) = a.accept(tcp).await else {
                                return;
                            };
                            let _ = http.serve_connection(TokioIo::new(stream), service).await;
                        }
                    }
                });
            }
        });
        (port, seen)
    }

    async fn answer(req: Request<Incoming>, log: &Seen) -> hyper::Response<Full<Bytes>> {
        let path = req.uri().path().to_string();
        log.lock().unwrap().push(req);
        let mut response = hyper::Response::builder();
        let (status, body) = match path.as_str() {
            "/redirect" => {
                response = response.header(LOCATION, "/status/500");
                (302, "moved")
            }
            "/away" => {
                response = response.header(LOCATION, "http://192.0.2.1/");
                (302, "gone")
            }
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(30)).await; // not ordering: a server slower than the probe timeout
                (200, "late")
            }
            p => (
                p.strip_prefix("/status/")
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(200),
                "ok",
            ),
        };
        response
            .status(status)
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap()
    }

    fn tls_acceptor() -> tokio_rustls::TlsAcceptor {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["pod.test".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let config =
            rustls::ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![cert.der().clone()],
                    rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
                )
                .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }

    fn action(port: u16, path: &str) -> HTTPGetAction {
        HTTPGetAction {
            port: IntOrString::Int(port.into()),
            path: Some(path.into()),
            ..HTTPGetAction::default()
        }
    }

    async fn run(a: &HTTPGetAction, c: &Container) -> Outcome {
        let target = Target {
            container: c,
            pod_ip: Some("127.0.0.1"),
        };
        probe(a, target, Duration::from_secs(2)).await.unwrap()
    }

    #[tokio::test]
    async fn status_200_to_399_is_success_and_400_up_is_failure() {
        let (port, _) = server(false).await;
        let c = Container::default();
        for (code, want) in [
            (200, ProbeResult::Success),
            (204, ProbeResult::Success),
            (304, ProbeResult::Success),
            (399, ProbeResult::Success),
            (400, ProbeResult::Failure),
            (404, ProbeResult::Failure),
            (500, ProbeResult::Failure),
        ] {
            let out = run(&action(port, &format!("/status/{code}")), &c).await;
            assert_eq!(out.result, want, "status {code}: {}", out.output);
        }
        let failed = run(&action(port, "/status/503"), &c).await;
        assert_eq!(failed.output, "HTTP probe failed with statuscode: 503");
    }

    #[tokio::test]
    async fn requests_carry_the_path_port_name_and_headers() {
        let (port, seen) = server(false).await;
        let c = container_with_port("web", i32::from(port));
        let a = HTTPGetAction {
            port: IntOrString::String("web".into()),
            path: Some("healthz?full=1".into()),
            http_headers: Some(vec![
                HTTPHeader {
                    name: "X-Custom".into(),
                    value: "yes".into(),
                },
                HTTPHeader {
                    name: "Host".into(),
                    value: "app.example".into(),
                },
            ]),
            ..HTTPGetAction::default()
        };
        assert_eq!(run(&a, &c).await, Outcome::success("ok"));
        let requests = seen.lock().unwrap();
        let req = requests.last().unwrap();
        assert_eq!(req.uri().path(), "/healthz");
        assert_eq!(req.uri().query(), Some("full=1"));
        let h = req.headers();
        assert_eq!(h["x-custom"], "yes");
        assert_eq!(h["host"], "app.example");
        assert_eq!(h["user-agent"], "kube-probe/1.34");
        assert_eq!(h["accept"], "*/*");
    }

    #[tokio::test]
    async fn same_host_redirects_are_followed_and_others_end_in_success() {
        let (port, _) = server(false).await;
        let c = Container::default();
        let followed = run(&action(port, "/redirect"), &c).await;
        assert_eq!(followed.output, "HTTP probe failed with statuscode: 500");
        let away = run(&action(port, "/away"), &c).await;
        assert_eq!(away.result, ProbeResult::Success);
        assert!(away.output.starts_with("Probe terminated redirects"));
    }

    #[tokio::test]
    async fn https_does_not_verify_the_certificate() {
        let (port, _) = server(true).await;
        let c = Container::default();
        let a = HTTPGetAction {
            scheme: Some("HTTPS".into()),
            ..action(port, "/status/200")
        };
        assert_eq!(run(&a, &c).await, Outcome::success("ok"));
    }

    #[tokio::test]
    async fn no_answer_within_the_timeout_is_failure() {
        let (port, _) = server(false).await;
        let c = Container::default();
        let target = Target {
            container: &c,
            pod_ip: Some("127.0.0.1"),
        };
        let out = probe(&action(port, "/slow"), target, Duration::from_millis(200))
            .await
            .unwrap();
        assert_eq!(out.result, ProbeResult::Failure);
        assert!(
            out.output.contains("context deadline exceeded"),
            "{}",
            out.output
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_failure() {
        let port = super::super::tests::closed_port().await;
        let out = run(&action(port, "/"), &Container::default()).await;
        assert_eq!(out.result, ProbeResult::Failure);
        assert!(
            out.output
                .starts_with(&format!("Get \"http://127.0.0.1:{port}/\": dial tcp"))
        );
    }

    #[test]
    fn default_headers_yield_to_the_probes_own() {
        let given = [
            HTTPHeader {
                name: "User-Agent".into(),
                value: "mine".into(),
            },
            HTTPHeader {
                name: "Accept".into(),
                value: String::new(),
            },
        ];
        let h = headers(&given).unwrap();
        assert_eq!(h.len(), 1, "empty Accept removes the header: {h:?}");
        assert_eq!(h[0].1, "mine");
    }

    #[test]
    fn redirect_targets_are_classified_by_host() {
        let from = Url {
            https: false,
            host: "10.0.0.5".into(),
            port: 8080,
            path: "/".into(),
        };
        assert_eq!(
            same_host_redirect(&from, "/login").as_deref(),
            Some("/login")
        );
        assert_eq!(
            same_host_redirect(&from, "http://10.0.0.5:8080/x").as_deref(),
            Some("/x")
        );
        assert_eq!(same_host_redirect(&from, "http://10.0.0.6:8080/x"), None);
        assert_eq!(same_host_redirect(&from, "https://10.0.0.5:8080/x"), None);
        assert_eq!(same_host_redirect(&from, "//other/x"), None);
    }
}
