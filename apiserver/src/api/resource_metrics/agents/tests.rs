//! The kept-alive client against local agents (TLS with client certificates from a test PKI)
//! that count the connections they accept.

use super::*;
use crate::api::proxy::AgentDialer;
use crate::pki::Pki;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{mpsc, watch};

const PATH: &str = "/metrics/resource";
const LONG: Duration = Duration::from_secs(30);

fn pki(dir: &tempfile::TempDir) -> Pki {
    crate::pki::load_or_create(dir.path(), &[]).expect("test PKI")
}

fn client(pki: &Pki) -> AgentClient {
    let dialer = AgentDialer::new(pki).expect("dialer");
    AgentClient::new(dialer.client_config(), LONG)
}

/// A local agent serving `pki`'s serving certificate, asking for a client certificate signed
/// by `pki`'s CA, answering `ok <path>` (to at most `answers` requests per connection: the next
/// one closes it unanswered).
struct Agent {
    endpoint: Endpoint,
    accepted: Arc<AtomicUsize>,
    close: watch::Sender<u32>,
    closed: mpsc::UnboundedReceiver<()>,
}

impl Agent {
    async fn start(pki: &Pki) -> Agent {
        Agent::answering(pki, usize::MAX).await
    }

    async fn answering(pki: &Pki, answers: usize) -> Agent {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pemfile::certs(&mut pki.ca_cert.as_bytes()) {
            roots.add(c.expect("CA PEM")).expect("CA");
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.into(),
            provider.clone(),
        )
        .build()
        .expect("client verifier");
        let certs = rustls_pemfile::certs(&mut pki.server_cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("server PEM");
        let key = rustls_pemfile::private_key(&mut pki.server_key.as_bytes())
            .expect("key PEM")
            .expect("a key");
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let (close, close_rx) = watch::channel(0);
        let (closed_tx, closed) = mpsc::unbounded_channel();
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                // Closes this connection at the next `close_connections`, not at an earlier one.
                let mut close = close_rx.clone();
                close.borrow_and_update();
                let closed = closed_tx.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let served = Arc::new(AtomicUsize::new(0));
                    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let n = served.fetch_add(1, Ordering::SeqCst);
                        async move {
                            if n >= answers {
                                // hyper closes a connection whose service fails, unanswered.
                                return Err(std::io::Error::other("closed unanswered"));
                            }
                            let body = format!("ok {}", req.uri().path());
                            Ok(hyper::Response::new(Full::new(Bytes::from(body))))
                        }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service);
                    // Dropping the connection closes its socket, as an agent that restarts.
                    tokio::select! {
                        _ = conn => {}
                        _ = close.changed() => {}
                    }
                    let _ = closed.send(());
                });
            }
        });
        Agent {
            endpoint: ("127.0.0.1".to_string(), port),
            accepted,
            close,
            closed,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Closes every open connection and waits until `n` of them are closed.
    async fn close_connections(&mut self, n: usize) {
        self.close.send_modify(|g| *g += 1);
        for _ in 0..n {
            self.closed.recv().await.expect("a connection task");
        }
    }
}

#[tokio::test]
async fn scrapes_of_one_agent_share_one_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki(&dir);
    let agent = Agent::start(&pki).await;
    let client = client(&pki);
    for _ in 0..3 {
        let text = client.get_text(&agent.endpoint, PATH, LONG).await;
        assert_eq!(text.expect("an answer"), format!("ok {PATH}"));
    }
    assert_eq!(agent.accepted(), 1, "three scrapes, one connection");
}

#[tokio::test]
async fn each_agent_address_and_port_gets_its_own_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki(&dir);
    let (a, b) = (Agent::start(&pki).await, Agent::start(&pki).await);
    let client = client(&pki);
    for agent in [&a, &b, &a, &b] {
        client
            .get_text(&agent.endpoint, PATH, LONG)
            .await
            .expect("an answer");
    }
    assert_eq!((a.accepted(), b.accepted()), (1, 1));
}

#[tokio::test]
async fn a_connection_the_agent_closed_is_dialled_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki(&dir);
    let mut agent = Agent::start(&pki).await;
    let client = client(&pki);
    client
        .get_text(&agent.endpoint, PATH, LONG)
        .await
        .expect("an answer");
    agent.close_connections(1).await;
    // Whether or not the client has seen the close yet, the scrape answers on a new connection.
    let text = client.get_text(&agent.endpoint, PATH, LONG).await;
    assert_eq!(
        text.expect("an answer after the close"),
        format!("ok {PATH}")
    );
    assert_eq!(agent.accepted(), 2);
}

#[tokio::test]
async fn a_scrape_lost_with_a_kept_connection_is_sent_again_on_a_new_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki(&dir);
    let agent = Agent::answering(&pki, 1).await;
    let client = client(&pki);
    for _ in 0..2 {
        let text = client.get_text(&agent.endpoint, PATH, LONG).await;
        assert_eq!(text.expect("an answer"), format!("ok {PATH}"));
    }
    assert_eq!(agent.accepted(), 2, "the kept connection, then a new one");
}

#[tokio::test]
async fn an_agent_whose_certificate_another_ca_signed_is_not_scraped() {
    let (ours, theirs) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let agent = Agent::start(&pki(&theirs)).await;
    let client = client(&pki(&ours));
    let err = client
        .get_text(&agent.endpoint, PATH, LONG)
        .await
        .expect_err("an untrusted agent");
    assert!(matches!(err, ScrapeError::Dial(_)), "{err:?}");
    assert!(err.is_transient());
}

#[test]
fn agent_uris_bracket_ipv6_addresses() {
    let cases = [
        (
            ("10.0.0.1", 10250),
            "https://10.0.0.1:10250/metrics/resource",
        ),
        (("::1", 10250), "https://[::1]:10250/metrics/resource"),
        (
            ("node-1.example", 443),
            "https://node-1.example:443/metrics/resource",
        ),
    ];
    for ((addr, port), want) in cases {
        let uri = agent_uri(&(addr.to_string(), port), PATH).expect("a URI");
        assert_eq!(uri.to_string(), want);
    }
    assert!(matches!(
        agent_uri(&("a b".to_string(), 1), PATH),
        Err(ScrapeError::Address(_))
    ));
}

#[test]
fn idle_connections_outlast_the_wait_for_the_next_tick() {
    let cases = [
        (Duration::from_secs(15), Duration::from_secs(90)),
        (Duration::from_secs(60), Duration::from_secs(120)),
        (Duration::from_secs(300), Duration::from_secs(600)),
    ];
    for (resolution, want) in cases {
        assert_eq!(idle_timeout(resolution), want, "{resolution:?}");
    }
}
