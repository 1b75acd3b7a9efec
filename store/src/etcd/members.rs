//! The etcd members as this controller reaches them: one client per member and the member
//! requests go to first, so a dead member costs one failed connect, not a share of every
//! request. etcd-client's own balancer spreads requests over every member, including one that
//! refuses connections, and answers `tcp connect error` for those; here a request that a
//! member could not take moves on to the next member at once.
//!
//! What may move on depends on whether the request could have been applied: a read always
//! may; a write only when the member never took it (it refused the connection, or answered
//! that it has no leader). A write that was sent and then lost (a broken connection, a
//! timeout) may have been applied: its caller has to find out (see [`Failure::Ambiguous`]).

use super::super::StoreError;
use etcd_client::{Client, ConnectOptions, GetOptions, GetResponse};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How long one etcd request may take before it counts as failed.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request keeps going round the members while none can take it: long enough to
/// ride out a raft election after the leader member died (etcd's default election timeout is
/// 1 s), short enough that losing the quorum answers 503 soon.
const RIDE_OUT: Duration = Duration::from_secs(6);
/// The pause between two rounds over the members.
const ROUND_PAUSE: Duration = Duration::from_millis(150);

/// Why a request to etcd failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum Failure {
    /// No member took it: nothing was applied.
    #[error("{0}")]
    NotSent(String),
    /// A member took it and the answer was lost: a write may or may not have been applied.
    #[error("{0}")]
    Ambiguous(String),
    /// etcd answered with an error (e.g. a compacted revision): nothing was applied.
    #[error("{0}")]
    Refused(String),
}

impl Failure {
    pub(super) fn into_store_error(self) -> StoreError {
        match self {
            Failure::NotSent(m) | Failure::Ambiguous(m) | Failure::Refused(m) => {
                StoreError::Unavailable(m)
            }
        }
    }
}

/// Whether a request that failed with `e` reached no member at all (or one that refused it
/// before proposing it): then it may go to another member, writes included.
fn not_sent(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(s) => {
            let m = s.message();
            // tonic's answer for a member whose port refuses connections, and etcd's for a
            // member cut off from the quorum (`require_leader`): neither proposed anything.
            (s.code() == tonic::Code::Unavailable
                && (m.contains("tcp connect error")
                    || m.contains("error trying to connect")
                    || m.contains("Connection refused")))
                || m.contains("no leader")
        }
        _ => false,
    }
}

/// Whether the failure is the member's (try another) rather than an answer about the request.
fn member_failed(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) => matches!(
            s.code(),
            tonic::Code::Unavailable
                | tonic::Code::DeadlineExceeded
                | tonic::Code::Unknown
                | tonic::Code::Cancelled
                | tonic::Code::Internal
        ),
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        _ => false,
    }
}

/// One client per member, and which one is tried first. Cheap to clone.
#[derive(Clone)]
pub(super) struct Members {
    clients: Arc<Vec<(String, Client)>>,
    preferred: Arc<AtomicUsize>,
}

impl Members {
    /// A client for each endpoint; connections are made on first use, so a member that is
    /// down at start is simply skipped then.
    pub(super) async fn connect(
        endpoints: &[String],
        options: &ConnectOptions,
    ) -> Result<Members, StoreError> {
        let mut clients = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let client = Client::connect([endpoint.as_str()], Some(options.clone()))
                .await
                .map_err(|e| StoreError::Unavailable(format!("etcd {endpoint}: {e}")))?;
            clients.push((endpoint.clone(), client));
        }
        if clients.is_empty() {
            return Err(StoreError::Backend("no etcd endpoint given".into()));
        }
        Ok(Members {
            clients: Arc::new(clients),
            preferred: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The client requests go to first (watches use it as well).
    pub(super) fn preferred(&self) -> Client {
        let i = self.preferred.load(Ordering::Relaxed) % self.clients.len();
        self.clients[i].1.clone()
    }

    /// The member after the preferred one becomes preferred (its watch broke, say).
    pub(super) fn move_on(&self) {
        let i = self.preferred.load(Ordering::Relaxed);
        let _ = self.preferred.compare_exchange(
            i,
            (i + 1) % self.clients.len(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// A read: any member's failure moves on to the next member.
    pub(super) async fn read<T, F, Fut>(&self, op: F) -> Result<T, Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call(op, true).await
    }

    /// A range read of `key` (with `options`) from any member that answers.
    pub(super) async fn get(
        &self,
        key: impl Into<Vec<u8>>,
        options: Option<GetOptions>,
    ) -> Result<GetResponse, StoreError> {
        let key = key.into();
        self.read(|mut c| {
            let (key, options) = (key.clone(), options.clone());
            async move { c.get(key, options).await }
        })
        .await
        .map_err(Failure::into_store_error)
    }

    /// A write: moves on only while no member took it.
    pub(super) async fn write<T, F, Fut>(&self, op: F) -> Result<T, Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call(op, false).await
    }

    async fn call<T, F, Fut>(&self, op: F, idempotent: bool) -> Result<T, Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = tokio::time::Instant::now() + RIDE_OUT;
        loop {
            match self.round(&op, idempotent).await {
                Err(f @ (Failure::NotSent(_) | Failure::Ambiguous(_)))
                    if tokio::time::Instant::now() + ROUND_PAUSE < deadline
                        && (idempotent || matches!(f, Failure::NotSent(_))) =>
                {
                    tokio::time::sleep(ROUND_PAUSE).await;
                }
                other => return other,
            }
        }
    }

    /// One try at each member, from the preferred one on.
    async fn round<T, F, Fut>(&self, op: &F, idempotent: bool) -> Result<T, Failure>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let n = self.clients.len();
        let first = self.preferred.load(Ordering::Relaxed);
        let mut last = Failure::NotSent("no etcd member answered".into());
        for k in 0..n {
            let i = (first + k) % n;
            let (endpoint, client) = &self.clients[i];
            let failure = match tokio::time::timeout(REQUEST_TIMEOUT, op(client.clone())).await {
                Ok(Ok(v)) => {
                    if k > 0 {
                        let _ = self.preferred.compare_exchange(
                            first,
                            i,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                        tracing::info!(member = %endpoint, "etcd: requests now go to this member");
                    }
                    return Ok(v);
                }
                Ok(Err(e)) if not_sent(&e) => Failure::NotSent(format!("etcd {endpoint}: {e}")),
                Ok(Err(e)) if member_failed(&e) => {
                    Failure::Ambiguous(format!("etcd {endpoint}: {e}"))
                }
                Ok(Err(e)) => return Err(Failure::Refused(e.to_string())),
                Err(_) => Failure::Ambiguous(format!("etcd {endpoint}: request timed out")),
            };
            tracing::debug!(member = %endpoint, failure = ?failure, "etcd request failed");
            match failure {
                Failure::Ambiguous(_) if !idempotent => return Err(failure),
                f => last = f,
            }
        }
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: tonic::Code, message: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, message))
    }

    #[test]
    fn a_refused_connection_or_no_leader_means_nothing_was_proposed() {
        assert!(not_sent(&status(
            tonic::Code::Unavailable,
            "error trying to connect: tcp connect error: Connection refused (os error 111)"
        )));
        assert!(not_sent(&status(
            tonic::Code::Unavailable,
            "etcdserver: no leader"
        )));
        // A connection that broke after the request went out may have been applied.
        assert!(!not_sent(&status(
            tonic::Code::Unavailable,
            "error reading a body from connection: connection reset"
        )));
        assert!(!not_sent(&status(
            tonic::Code::Unavailable,
            "etcdserver: request timed out"
        )));
        // An answer about the request is no member's failure.
        assert!(!member_failed(&status(
            tonic::Code::OutOfRange,
            "etcdserver: mvcc: required revision has been compacted"
        )));
        assert!(member_failed(&status(
            tonic::Code::Unavailable,
            "etcdserver: leader changed"
        )));
    }
}
