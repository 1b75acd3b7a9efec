//! The accept loop: admits connections under the connection cap (see `conn_table`), backs off
//! when accept fails (out of file descriptors, the error repeats until one is freed: retrying at
//! once spins a core and floods the log), and rate-limits its warnings to one a second with
//! the count of the suppressed ones.

use super::authn::Tokens;
use super::conn;
pub use super::conn::Timeouts;
use super::conn_table::{Admission, ConnTable};
use axum::Router;
use rustls::server::danger::ClientCertVerifier;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// At most one warning of a kind per this interval.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// How connections are limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open connections at most (further lowered to what the open-files limit allows).
    pub max_connections: usize,
    pub timeouts: Timeouts,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 10_000,
            timeouts: Timeouts::default(),
        }
    }
}

/// Counters of the accept loop and the connection table, for `/metrics`.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    pub(super) open: AtomicUsize,
    pub(super) shed: AtomicU64,
    pub(super) refused: AtomicU64,
    accept_errors: AtomicU64,
}

impl ConnectionStats {
    /// The counters in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, kind, help, value) in [
            (
                "berth_open_connections",
                "gauge",
                "Open API connections.",
                self.open.load(Ordering::Relaxed) as u64,
            ),
            (
                "berth_connections_shed_total",
                "counter",
                "Connections closed at the connection limit to make room (handshaking or idle).",
                self.shed.load(Ordering::Relaxed),
            ),
            (
                "berth_connections_refused_total",
                "counter",
                "Connections closed at once at the connection limit (every open one was busy).",
                self.refused.load(Ordering::Relaxed),
            ),
            (
                "berth_accept_errors_total",
                "counter",
                "Failed accepts (e.g. out of file descriptors).",
                self.accept_errors.load(Ordering::Relaxed),
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        out
    }
}

/// Capped exponential backoff: 10 ms, 20 ms, 40 ms … 1 s, back to 10 ms after a success.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);

    pub fn new() -> Backoff {
        Backoff { next: Self::FIRST }
    }

    /// The pause before the next attempt.
    pub fn pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        pause
    }

    pub fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new()
    }
}

/// Lets one event of a kind through per interval and counts the ones it holds back.
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    pub fn new(every: Duration) -> Throttle {
        Throttle {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(suppressed since the last one)` if this event may be logged.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        if self.last.is_some_and(|last| now < last + self.every) {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// Raises the soft open-files limit to the hard one (as Go programs do at start) and returns how
/// many connections fit under it, keeping an eighth (at least 256) for the store, the logs, the
/// connections to agents, and the shed connections whose tasks have yet to close them.
/// Worked example: a limit of 1,024 leaves 768 connections; 1,048,576 leaves 917,504.
pub fn connection_budget() -> Option<usize> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (mut soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        soft = hard;
    }
    Some(budget(usize::try_from(soft).unwrap_or(usize::MAX)))
}

fn budget(files: usize) -> usize {
    files.saturating_sub((files / 8).max(256))
}

/// Out of file descriptors (or kernel memory for them): only closing a connection helps.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    use nix::errno::Errno;
    e.raw_os_error().is_some_and(|code| {
        [Errno::EMFILE, Errno::ENFILE, Errno::ENOBUFS, Errno::ENOMEM]
            .iter()
            .any(|errno| *errno as i32 == code)
    })
}

/// Accepts connections until `shutdown`; each connection is served until it closes.
pub async fn serve(
    listener: TcpListener,
    (config, verifier): (Arc<rustls::ServerConfig>, Arc<dyn ClientCertVerifier>),
    router: Router,
    tokens: Tokens,
    limits: ConnectionLimits,
    stats: Arc<ConnectionStats>,
    shutdown: CancellationToken,
) {
    let budget = connection_budget().unwrap_or(usize::MAX);
    let table = ConnTable::new(limits.max_connections.min(budget).max(1), stats.clone());
    tracing::info!(
        max_connections = table.limit(),
        tls_handshake_timeout = ?limits.timeouts.tls_handshake,
        header_read_timeout = ?limits.timeouts.header_read,
        idle_connection_timeout = ?limits.timeouts.idle,
        "accepting connections"
    );
    let shared = Arc::new(conn::Shared {
        acceptor: tokio_rustls::TlsAcceptor::from(config),
        verifier,
        router,
        tokens,
        timeouts: limits.timeouts,
        shutdown: shutdown.clone(),
    });
    let mut backoff = Backoff::new();
    let mut accept_failed = Throttle::new(LOG_EVERY);
    let mut at_limit = Throttle::new(LOG_EVERY);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = shutdown.cancelled() => return,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => {
                backoff.reset();
                tcp
            }
            Err(e) => {
                stats.accept_errors.fetch_add(1, Ordering::Relaxed);
                let shed = out_of_descriptors(&e) && table.shed();
                if let Some(suppressed) = accept_failed.allow(Instant::now()) {
                    tracing::warn!(error = %e, suppressed, shed, "accept failed");
                }
                tokio::select! {
                    () = tokio::time::sleep(backoff.pause()) => {}
                    () = shutdown.cancelled() => return,
                }
                continue;
            }
        };
        let slot = match table.admit() {
            Admission::Admitted(slot) => slot,
            Admission::AdmittedByShedding(slot) => {
                if let Some(suppressed) = at_limit.allow(Instant::now()) {
                    tracing::warn!(
                        limit = table.limit(),
                        suppressed,
                        "at the connection limit: shed an idle or handshaking connection"
                    );
                }
                slot
            }
            Admission::Refused => {
                if let Some(suppressed) = at_limit.allow(Instant::now()) {
                    tracing::warn!(
                        limit = table.limit(),
                        suppressed,
                        "at the connection limit with every connection busy: refused one"
                    );
                }
                continue;
            }
        };
        tokio::spawn(conn::serve(tcp, shared.clone(), slot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_10_ms_to_1_s_and_resets() {
        let mut b = Backoff::new();
        let ms: Vec<u128> = (0..9).map(|_| b.pause().as_millis()).collect();
        // 10 · 2^7 = 1280 is capped at 1000.
        assert_eq!(ms, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.pause(), Duration::from_millis(10));
    }

    #[test]
    fn the_throttle_lets_one_event_a_second_through_and_counts_the_others() {
        let mut t = Throttle::new(Duration::from_secs(1));
        let start = Instant::now();
        assert_eq!(t.allow(start), Some(0));
        for i in 1..=500 {
            assert_eq!(t.allow(start + Duration::from_micros(i)), None);
        }
        assert_eq!(t.allow(start + Duration::from_millis(999)), None);
        assert_eq!(t.allow(start + Duration::from_secs(1)), Some(501));
        assert_eq!(t.allow(start + Duration::from_secs(3)), Some(0));
    }

    #[test]
    fn the_connection_budget_keeps_an_eighth_of_the_files_and_at_least_256() {
        assert_eq!(budget(1_024), 768);
        assert_eq!(budget(1_048_576), 917_504);
        assert_eq!(budget(100), 0);
    }

    #[test]
    fn descriptor_exhaustion_is_told_from_other_accept_errors() {
        let emfile = std::io::Error::from_raw_os_error(nix::errno::Errno::EMFILE as i32);
        let aborted = std::io::Error::from_raw_os_error(nix::errno::Errno::ECONNABORTED as i32);
        assert!(out_of_descriptors(&emfile));
        assert!(!out_of_descriptors(&aborted));
    }
}
