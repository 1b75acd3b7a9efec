//! One HTTPS connection from accept to close: the TLS handshake under a deadline, the peer's
//! identity, HTTP/1.1 and HTTP/2 (with upgrades) under a header-read timeout and an idle
//! timeout, and a lingering close so that a client still sending a refused body reads the answer
//! instead of a reset.
//!
//! Timeouts, and what they must not cut:
//! - the TLS handshake must finish within `tls_handshake` of the accept;
//! - an HTTP/1 request head must arrive within `header_read` of its first byte (hyper's
//!   `header_read_timeout`; hyper starts that clock when it waits for a head, so a kept-alive
//!   connection waiting for its next request would be cut by it: [`HeadTimer`] moves the start
//!   to the first byte, leaving waiting to the idle timeout);
//! - a connection with no open request (HTTP/1 or HTTP/2) is closed `idle` after its last
//!   answer ended. A request is open until its response body has been sent, so watches and log
//!   streams, however quiet, keep their connection.
//!
//! hyper's own answers to requests it cannot parse are rewritten with a `Status` body on their
//! way out (see `auto_answer`).

use super::authn::{Peer, Tokens, identity_from_cert};
use super::conn_table::Slot;
use super::guarded::Guarded;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::UnixTime;
use rustls::server::danger::ClientCertVerifier;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::Service;

/// A closing connection keeps reading (and discarding) what the client still sends until the
/// client has been quiet this long,
const LINGER: Duration = Duration::from_millis(500);
/// for at most this long in all,
const LINGER_MAX: Duration = Duration::from_secs(10);
/// and at most this much.
const LINGER_BYTES: usize = 16 * 1024 * 1024;
/// How long open requests get to finish when a connection is closed (shutdown, shed, idle).
const GRACE: Duration = Duration::from_secs(5);

/// The connection timeouts; a zero duration disables one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub tls_handshake: Duration,
    pub header_read: Duration,
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            tls_handshake: Duration::from_secs(10),
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(90),
        }
    }
}

/// What every connection needs, shared by all of them.
pub struct Shared {
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// Verifies client chains against the cluster CA.
    pub verifier: Arc<dyn ClientCertVerifier>,
    pub router: Router,
    pub tokens: Tokens,
    pub timeouts: Timeouts,
    pub shutdown: CancellationToken,
}

#[derive(Debug, Clone, Copy)]
struct Requests {
    open: usize,
    idle_since: Instant,
}

/// A connection's traffic: its open requests and the bytes it has read.
pub struct Activity {
    requests: watch::Sender<Requests>,
    /// Reads so far, and their count when the last request ended: reads after that are the
    /// next request head.
    reads: AtomicU64,
    reads_at_idle: AtomicU64,
    read: Notify,
}

impl Activity {
    pub fn new() -> Activity {
        Activity {
            requests: watch::Sender::new(Requests {
                open: 0,
                idle_since: Instant::now(),
            }),
            reads: AtomicU64::new(0),
            reads_at_idle: AtomicU64::new(0),
            read: Notify::new(),
        }
    }

    /// No request is open.
    pub fn is_idle(&self) -> bool {
        self.requests.borrow().open == 0
    }

    fn note_read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read.notify_waiters();
    }

    /// Bytes of a request head have been read since the last request ended (or the connection
    /// began: hyper's protocol detection reads the first bytes before the head is parsed).
    fn head_started(&self) -> bool {
        self.reads.load(Ordering::Relaxed) > self.reads_at_idle.load(Ordering::Relaxed)
    }

    /// Returns once something has been read after the read count was `since`.
    async fn read_after(&self, since: u64) {
        loop {
            let notified = self.read.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.reads.load(Ordering::Relaxed) > since {
                return;
            }
            notified.await;
        }
    }

    /// Returns once no request has been open for `timeout`; never for a zero timeout.
    pub async fn idle_for(&self, timeout: Duration) {
        if timeout.is_zero() {
            return std::future::pending().await;
        }
        let mut rx = self.requests.subscribe();
        loop {
            let now = *rx.borrow_and_update();
            if now.open == 0 {
                tokio::select! {
                    () = tokio::time::sleep_until(now.idle_since + timeout) => return,
                    _ = rx.changed() => {}
                }
            } else {
                // The sender lives in `self`: `changed` cannot fail while we borrow it.
                let _ = rx.changed().await;
            }
        }
    }
}

impl Default for Activity {
    fn default() -> Activity {
        Activity::new()
    }
}

/// Marks one request open from its arrival until its response body is dropped.
pub struct RequestMark(Arc<Activity>);

impl RequestMark {
    pub fn new(activity: Arc<Activity>) -> RequestMark {
        activity.requests.send_modify(|r| r.open += 1);
        RequestMark(activity)
    }
}

impl Drop for RequestMark {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.requests.send_modify(|r| {
            r.open = r.open.saturating_sub(1);
            if r.open == 0 {
                r.idle_since = Instant::now();
                let reads = activity.reads.load(Ordering::Relaxed);
                activity.reads_at_idle.store(reads, Ordering::Relaxed);
            }
        });
    }
}

/// hyper's HTTP/1 server uses its timer only for the header-read timeout. hyper asks for a
/// sleep until `now + header_read` as soon as it waits for a request head; this timer's sleep
/// starts counting then only if bytes of the head are already in, else at the first byte.
struct HeadTimer {
    activity: Arc<Activity>,
    timeout: Duration,
}

/// A boxed future as hyper's `Sleep` (which must be `Sync`; the mutex is only ever reached
/// through `&mut`, so it is never locked).
struct BoxedSleep(std::sync::Mutex<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl BoxedSleep {
    fn boxed(f: impl Future<Output = ()> + Send + 'static) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(BoxedSleep(std::sync::Mutex::new(Box::pin(f))))
    }
}

impl Future for BoxedSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = match self.get_mut().0.get_mut() {
            Ok(f) => f,
            Err(poisoned) => poisoned.into_inner(),
        };
        inner.as_mut().poll(cx)
    }
}

impl hyper::rt::Sleep for BoxedSleep {}

impl hyper::rt::Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        BoxedSleep::boxed(tokio::time::sleep(duration))
    }

    fn sleep_until(&self, _deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let activity = self.activity.clone();
        let timeout = self.timeout;
        let since = activity.reads.load(Ordering::Relaxed);
        let started = activity.head_started();
        BoxedSleep::boxed(async move {
            if !started {
                activity.read_after(since).await;
            }
            tokio::time::sleep(timeout).await;
        })
    }
}

/// The TLS stream as hyper sees it: reads are noted in the [`Activity`], hyper's automatic error
/// answers are replaced by ones with a `Status` body, and shutting down lingers (see [`LINGER`]).
struct Tracked<T> {
    inner: T,
    activity: Arc<Activity>,
    linger: Option<Lingering>,
    discarded: usize,
    /// The answer sent instead of hyper's automatic one, and how much of it is out. hyper
    /// writes nothing after such an answer; whatever it would is dropped.
    replaced: Option<(Vec<u8>, usize)>,
}

/// A lingering close: when it started, and the deadline that moves with what the client sends.
struct Lingering {
    started: Instant,
    quiet: Pin<Box<tokio::time::Sleep>>,
}

impl<T> Tracked<T> {
    fn new(inner: T, activity: Arc<Activity>) -> Tracked<T> {
        Tracked {
            inner,
            activity,
            linger: None,
            discarded: 0,
            replaced: None,
        }
    }

    /// No request is open and the client has sent bytes of the next head: the only moment hyper
    /// writes an automatic answer.
    fn between_requests(&self) -> bool {
        self.activity.is_idle() && self.activity.head_started()
    }

    /// Whether `written`, about to go out, is hyper's automatic answer to a request it could not
    /// parse; if so, the replacement is queued in its place.
    fn take_over(&mut self, written: &[u8]) -> bool {
        if !self.between_requests() {
            return false;
        }
        let Some(code) = super::auto_answer::automatic_error(written) else {
            return false;
        };
        tracing::debug!(
            code = code.as_u16(),
            "answering an unparsable request with a Status"
        );
        self.replaced = Some((super::auto_answer::replacement(code, written), 0));
        true
    }
}

impl<T: AsyncWrite + Unpin> Tracked<T> {
    /// Writes out what is left of a replacement answer.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some((bytes, sent)) = &mut self.replaced {
            while *sent < bytes.len() {
                let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*sent..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *sent += n;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.note_read();
        }
        r
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.replaced.is_some() || this.take_over(buf) {
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let total = bufs.iter().map(|b| b.len()).sum();
        if this.replaced.is_some() {
            return Poll::Ready(Ok(total));
        }
        // An automatic answer is a small head: look at it whole.
        let head = bufs.iter().find(|b| !b.is_empty());
        if total <= 4096
            && head.is_some_and(|b| b.starts_with(b"HTTP/1."))
            && this.between_requests()
        {
            let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            if this.take_over(&joined) {
                return Poll::Ready(Ok(total));
            }
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    /// Sends close_notify and FIN, then reads and discards until the client closes or has been
    /// quiet for [`LINGER`], for at most [`LINGER_MAX`] and [`LINGER_BYTES`]: closing a socket
    /// with unread data makes the kernel send a reset, which can destroy an answer (a 413 for a
    /// body we did not read) before the client has read it, and fails a client still sending
    /// its body. Go's net/http lingers too (half a second, after discarding 256 KiB).
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.linger.is_none() {
            ready!(this.poll_replacement(cx))?;
            ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
            this.linger = Some(Lingering {
                started: Instant::now(),
                quiet: Box::pin(tokio::time::sleep(LINGER)),
            });
        }
        let mut scratch = [0u8; 8192];
        let mut heard = false;
        while this.discarded < LINGER_BYTES {
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {
                    this.discarded += buf.filled().len();
                    heard = true;
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => break,
            }
        }
        if this.discarded >= LINGER_BYTES {
            return Poll::Ready(Ok(()));
        }
        let Some(linger) = this.linger.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        if heard {
            let deadline = (Instant::now() + LINGER).min(linger.started + LINGER_MAX);
            linger.quiet.as_mut().reset(deadline);
        }
        linger.quiet.as_mut().poll(cx).map(Ok)
    }
}

/// Serves one accepted TCP connection until it closes, is shed (`slot` evicted), idles out or
/// the server shuts down.
pub async fn serve(tcp: TcpStream, shared: Arc<Shared>, slot: Slot) {
    let _ = tcp.set_nodelay(true);
    let remote = tcp.peer_addr().ok().map(super::tls::PeerAddr);
    let accept = shared.acceptor.accept(tcp);
    let limit = shared.timeouts.tls_handshake;
    let handshake = async move {
        if limit.is_zero() {
            Ok(accept.await)
        } else {
            tokio::time::timeout(limit, accept).await
        }
    };
    let tls = tokio::select! {
        r = handshake => match r {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!("TLS handshake timed out");
                return;
            }
        },
        () = slot.evicted().cancelled() => {
            tracing::debug!("connection shed during its TLS handshake");
            return;
        }
        () = shared.shutdown.cancelled() => return,
    };
    // Only a chain that verifies against the cluster CA identifies anyone.
    let peer = Peer(tls.get_ref().1.peer_certificates().and_then(|chain| {
        let (leaf, intermediates) = chain.split_first()?;
        shared
            .verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .ok()?;
        identity_from_cert(leaf)
    }));
    let activity = Arc::new(Activity::new());
    slot.established(activity.clone());

    let svc = {
        let activity = activity.clone();
        let router = shared.router.clone();
        let tokens = shared.tokens.clone();
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            let mark = RequestMark::new(activity.clone());
            req.extensions_mut().insert(peer.clone());
            if let Some(addr) = remote {
                req.extensions_mut().insert(addr);
            }
            req.extensions_mut().insert(tokens.clone());
            let mut router = router.clone();
            async move {
                let resp = router.call(req.map(axum::body::Body::new)).await?;
                Ok::<_, std::convert::Infallible>(resp.map(|body| Guarded::wrap(body, mark)))
            }
        })
    };
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .max_buf_size(super::auto_answer::MAX_HEAD_BYTES)
        .max_headers(super::auto_answer::MAX_HEADERS);
    if !shared.timeouts.header_read.is_zero() {
        builder
            .http1()
            .timer(HeadTimer {
                activity: activity.clone(),
                timeout: shared.timeouts.header_read,
            })
            .header_read_timeout(shared.timeouts.header_read);
    }
    let io = Tracked::new(tls, activity.clone());
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let why = tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            return;
        }
        () = shared.shutdown.cancelled() => "shutdown",
        () = slot.evicted().cancelled() => "shed at the connection limit",
        () = activity.idle_for(shared.timeouts.idle) => "idle",
    };
    tracing::debug!(reason = why, "closing connection");
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(GRACE, conn).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Timer;
    use tokio::io::DuplexStream;

    /// Polls `f` once, with virtual time advanced by `by` first.
    async fn done_after<F: Future + Unpin>(f: &mut F, by: Duration) -> bool {
        tokio::time::advance(by).await;
        futures::poll!(f).is_ready()
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_open_requests_idles_out_after_the_timeout() {
        let a = Activity::new();
        let mut idle = Box::pin(a.idle_for(Duration::from_secs(90)));
        assert!(!done_after(&mut idle, Duration::from_secs(89)).await);
        assert!(done_after(&mut idle, Duration::from_secs(2)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_request_keeps_the_connection_however_long_it_lasts() {
        let a = Arc::new(Activity::new());
        let mut idle = Box::pin(a.idle_for(Duration::from_secs(90)));
        let watch = RequestMark::new(a.clone());
        assert!(!done_after(&mut idle, Duration::from_secs(600)).await);
        drop(watch);
        // The clock restarts when the last answer ends.
        assert!(!done_after(&mut idle, Duration::from_secs(89)).await);
        assert!(done_after(&mut idle, Duration::from_secs(2)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_idle_timeout_never_fires() {
        let a = Activity::new();
        let mut idle = Box::pin(a.idle_for(Duration::ZERO));
        assert!(!done_after(&mut idle, Duration::from_secs(3600)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_header_timer_counts_from_the_first_byte_of_a_head() {
        let a = Arc::new(Activity::new());
        let timer = HeadTimer {
            activity: a.clone(),
            timeout: Duration::from_secs(10),
        };
        let mut head = timer.sleep_until(std::time::Instant::now() + Duration::from_secs(10));
        // A kept-alive connection waiting for its next request: not the header timer's business.
        assert!(!done_after(&mut head, Duration::from_secs(60)).await);
        a.note_read();
        assert!(!done_after(&mut head, Duration::ZERO).await);
        assert!(!done_after(&mut head, Duration::from_secs(9)).await);
        assert!(done_after(&mut head, Duration::from_secs(2)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn head_bytes_read_before_hyper_waits_for_the_head_start_the_clock_at_once() {
        let a = Arc::new(Activity::new());
        // The protocol detection read the first bytes of the first request.
        a.note_read();
        let timer = HeadTimer {
            activity: a.clone(),
            timeout: Duration::from_secs(10),
        };
        let mut head = timer.sleep_until(std::time::Instant::now());
        assert!(!done_after(&mut head, Duration::ZERO).await);
        assert!(done_after(&mut head, Duration::from_secs(11)).await);
    }

    const AUTOMATIC: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\n\
        content-length: 0\r\ndate: Tue, 01 Jul 2025 10:00:00 GMT\r\n\r\n";

    /// Reads one answer with a `content-length` body from `client`.
    async fn answer(client: &mut DuplexStream) -> (String, serde_json::Value) {
        use tokio::io::AsyncReadExt;
        let mut raw = Vec::new();
        loop {
            let mut chunk = [0u8; 1024];
            let n = client.read(&mut chunk).await.expect("read");
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&raw));
            raw.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&raw).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n")
                && let Some(len) = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .and_then(|l| l.parse::<usize>().ok())
                && body.len() >= len
            {
                let status = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
                return (head.to_string(), status);
            }
        }
    }

    /// A tracked connection (and its client end) that has read the start of a head.
    fn reading() -> (Tracked<DuplexStream>, DuplexStream, Arc<Activity>) {
        let (server, client) = tokio::io::duplex(64 * 1024);
        let activity = Arc::new(Activity::new());
        let conn = Tracked::new(server, activity.clone());
        activity.note_read();
        (conn, client, activity)
    }

    /// Writes hyper's automatic 431 answer through `conn`.
    async fn send_automatic(conn: &mut Tracked<DuplexStream>) {
        use tokio::io::AsyncWriteExt;
        conn.write_all(AUTOMATIC).await.expect("write");
        conn.flush().await.expect("flush");
    }

    #[tokio::test]
    async fn hypers_automatic_answer_goes_out_with_a_status_body() {
        // The client sent the start of a head hyper could not parse.
        let (mut conn, mut client, _) = reading();
        send_automatic(&mut conn).await;
        let (head, status) = answer(&mut client).await;
        assert!(head.starts_with("HTTP/1.1 431 "), "{head}");
        assert!(head.contains("connection: close"), "{head}");
        assert_eq!(status["kind"], "Status", "{status}");
        assert_eq!(status["code"], 431, "{status}");
    }

    #[tokio::test]
    async fn answers_to_requests_pass_untouched() {
        use tokio::io::AsyncReadExt;
        let (mut conn, mut client, activity) = reading();
        // While a request is open the same bytes are that request's answer.
        let open = RequestMark::new(activity.clone());
        send_automatic(&mut conn).await;
        drop(open);
        // After it, with nothing new from the client, they are still its answer going out.
        send_automatic(&mut conn).await;
        let mut got = vec![0u8; AUTOMATIC.len() * 2];
        client.read_exact(&mut got).await.expect("read");
        assert_eq!(got, [AUTOMATIC, AUTOMATIC].concat());
    }

    #[tokio::test(start_paused = true)]
    async fn a_closing_connection_lingers_while_the_client_keeps_sending() {
        use tokio::io::AsyncWriteExt;
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let mut conn = Tracked::new(server, Arc::new(Activity::new()));
        let mut closing = Box::pin(conn.shutdown());
        // 8 s of a client sending every 400 ms: longer than one quiet period, so it lingers on.
        for _ in 0..20 {
            client.write_all(&[0u8; 1024]).await.expect("send");
            assert!(!done_after(&mut closing, Duration::ZERO).await);
            assert!(!done_after(&mut closing, Duration::from_millis(400)).await);
        }
        // Quiet: closed once half a second has passed since the last bytes.
        assert!(done_after(&mut closing, Duration::from_millis(200)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lingering_close_ends_after_ten_seconds_however_the_client_sends() {
        use tokio::io::AsyncWriteExt;
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let mut conn = Tracked::new(server, Arc::new(Activity::new()));
        let mut closing = Box::pin(conn.shutdown());
        let mut elapsed = Duration::ZERO;
        while !done_after(&mut closing, Duration::from_millis(250)).await {
            elapsed += Duration::from_millis(250);
            assert!(elapsed <= LINGER_MAX, "still lingering after {elapsed:?}");
            client.write_all(&[0u8; 1024]).await.expect("send");
        }
        assert!(
            elapsed >= LINGER_MAX - Duration::from_millis(250),
            "{elapsed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_request_ends_the_next_head_waits_for_new_bytes() {
        let a = Arc::new(Activity::new());
        let request = RequestMark::new(a.clone());
        a.note_read();
        drop(request);
        let timer = HeadTimer {
            activity: a.clone(),
            timeout: Duration::from_secs(10),
        };
        let mut head = timer.sleep_until(std::time::Instant::now());
        assert!(!done_after(&mut head, Duration::from_secs(60)).await);
    }
}
