//! Several API servers behind one client: the one requests go to now, and what a failed
//! request does — move on to the next server (round-robin) and retry there, or not.
//!
//! The client sticks with a server while it answers. A server that cannot be reached (refused
//! or timed-out connection, failed TLS handshake), that dropped a request in flight, or that
//! says it is unavailable (502/503/504) makes the client move to the next one; the request is
//! retried there when doing so cannot apply it twice (see [`decide`]). Every server is tried at
//! most once per request; all servers share one CA and accept the same client certificate.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How a request to one server failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No connection (refused, timed out, TLS handshake failed): nothing was sent.
    Connect,
    /// The connection broke after the request was sent: the server may have applied it.
    Transport,
    /// The server answered with this status.
    Status(u16),
}

/// What the client does after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Hand the failure to the caller; stay on this server (it answered).
    Return,
    /// Move to the next server and hand the failure to the caller (a retry could apply a
    /// non-idempotent request twice: the caller decides).
    SwitchAndReturn,
    /// Move to the next server and send the request there.
    SwitchAndRetry,
}

/// The decision for `failure` of a request whose method is `idempotent` (GET, PUT with a
/// resourceVersion, DELETE), when `more` servers remain untried for it.
///
/// `503` is retried for every method: the server refused the request without applying it (a
/// controller that lost its store, or is shutting down). `502`/`504` and broken connections
/// are retried only when repeating the request is harmless. Other statuses are the answer.
pub fn decide(failure: Failure, idempotent: bool, more: bool) -> Decision {
    let switch = match failure {
        Failure::Connect => true,
        Failure::Transport => true,
        Failure::Status(code) => matches!(code, 502..=504),
    };
    if !switch {
        return Decision::Return;
    }
    let safe = match failure {
        Failure::Connect | Failure::Status(503) => true,
        Failure::Transport | Failure::Status(_) => idempotent,
    };
    if safe && more {
        Decision::SwitchAndRetry
    } else {
        Decision::SwitchAndReturn
    }
}

/// The server after `current` of `count`, round-robin.
pub fn next(current: usize, count: usize) -> usize {
    if count == 0 { 0 } else { (current + 1) % count }
}

/// The servers of one client (shared by its clones) and the index of the current one.
#[derive(Debug)]
pub struct Servers {
    urls: Vec<Arc<str>>,
    current: AtomicUsize,
}

impl Servers {
    /// `urls`, each without a trailing `/`; `None` when there is none.
    pub fn new<S: AsRef<str>>(urls: &[S]) -> Option<Servers> {
        let urls: Vec<Arc<str>> = urls
            .iter()
            .map(|u| Arc::from(u.as_ref().trim().trim_end_matches('/')))
            .filter(|u: &Arc<str>| !u.is_empty())
            .collect();
        (!urls.is_empty()).then_some(Servers {
            urls,
            current: AtomicUsize::new(0),
        })
    }

    pub fn len(&self) -> usize {
        self.urls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }

    pub fn urls(&self) -> &[Arc<str>] {
        &self.urls
    }

    /// The current server: its index and URL.
    pub fn current(&self) -> (usize, Arc<str>) {
        let i = self.current.load(Ordering::Acquire) % self.urls.len();
        (i, self.urls[i].clone())
    }

    /// Moves on from server `failed` to the next one, unless another request already moved
    /// the client on (so that concurrent failures of one server skip only that server).
    /// Returns the server to use now.
    pub fn move_on(&self, failed: usize, why: &dyn std::fmt::Display) -> (usize, Arc<str>) {
        let to = next(failed, self.urls.len());
        if to != failed
            && self
                .current
                .compare_exchange(failed, to, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            tracing::warn!(
                from = %self.urls[failed],
                to = %self.urls[to],
                error = %why,
                "switching API server"
            );
        }
        self.current()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_goes_round_the_servers() {
        assert_eq!(next(0, 3), 1);
        assert_eq!(next(2, 3), 0);
        assert_eq!(next(0, 1), 0);
    }

    /// Each row: the failure, whether the request is idempotent, whether another server is
    /// left to try, and what the client does.
    #[test]
    fn each_failure_decides_whether_to_switch_servers_and_retry() {
        use Decision::*;
        use Failure::*;
        let mut cases = vec![
            // An unreachable server is left and the request sent to the next.
            ("unreachable", Connect, true, true, SwitchAndRetry),
            ("unreachable", Connect, false, true, SwitchAndRetry),
            ("unavailable", Status(503), true, true, SwitchAndRetry),
            ("unavailable", Status(503), false, true, SwitchAndRetry),
            // A request that may have been applied is repeated only if idempotent.
            ("cut off, idempotent", Transport, true, true, SwitchAndRetry),
            ("cut off", Transport, false, true, SwitchAndReturn),
            ("gateway timeout", Status(504), false, true, SwitchAndReturn),
            (
                "bad gateway, idempotent",
                Status(502),
                true,
                true,
                SwitchAndRetry,
            ),
            // With every server tried the failure goes to the caller.
            ("every server tried", Connect, true, false, SwitchAndReturn),
        ];
        // An answer is an answer.
        for code in [400, 401, 403, 404, 409, 410, 422, 429, 500] {
            cases.push(("an answer", Status(code), true, true, Return));
        }
        for (name, failure, idempotent, others_left, want) in cases {
            let got = decide(failure, idempotent, others_left);
            assert_eq!(got, want, "{name}: {failure:?} idempotent={idempotent}");
        }
    }

    #[test]
    fn concurrent_failures_of_one_server_skip_only_that_server() {
        let s = Servers::new(&["https://a/", "https://b", "https://c"]).unwrap();
        assert_eq!(s.current(), (0, Arc::from("https://a")));
        assert_eq!(s.move_on(0, &"refused").0, 1);
        // A second request that failed on server 0 too does not skip server 1.
        assert_eq!(s.move_on(0, &"refused").0, 1);
        assert_eq!(s.move_on(1, &"refused").0, 2);
        assert_eq!(s.move_on(2, &"refused").0, 0);
    }

    #[test]
    fn empty_server_lists_are_refused() {
        assert!(Servers::new::<&str>(&[]).is_none());
        assert!(Servers::new(&["", " "]).is_none());
    }
}
