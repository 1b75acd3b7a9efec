//! Serves the health check node ports ([`health_check`]) on every address of the node: one
//! listener per port, opened when a Local LoadBalancer gets its port and closed when it goes;
//! each request gets one response and the connection is closed (as an external balancer's
//! probe wants). A port another process holds is logged and retried at the next change.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::health_check::{self, HealthCheck};
use crate::network::service_state::ServiceState;

/// A probe must send its request head within this.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

struct Serving {
    check: watch::Sender<HealthCheck>,
    stop: CancellationToken,
}

/// Reads a request head (up to 8 KiB) and answers with the current state of `check`.
async fn answer(mut conn: TcpStream, check: watch::Receiver<HealthCheck>) {
    let mut buf = vec![0u8; 8192];
    let mut filled = 0;
    let read = tokio::time::timeout(REQUEST_DEADLINE, async {
        while filled < buf.len() {
            match conn.read(&mut buf[filled..]).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => filled += n,
            }
            if buf[..filled].windows(4).any(|w| w == b"\r\n\r\n") {
                return true;
            }
        }
        true
    })
    .await;
    if !matches!(read, Ok(true)) {
        return;
    }
    let response = health_check::response(&check.borrow());
    let _ = conn.write_all(response.as_bytes()).await;
    let _ = conn.shutdown().await;
}

async fn serve(
    listener: TcpListener,
    check: watch::Receiver<HealthCheck>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((conn, _)) => { tokio::spawn(answer(conn, check.clone())); }
                Err(e) => tracing::debug!(error = %e, "health check: accept failed"),
            },
        }
    }
}

/// Runs until `shutdown`, keeping a listener on every health check port of this node.
pub async fn run(
    mut state: watch::Receiver<Arc<ServiceState>>,
    node: String,
    shutdown: CancellationToken,
) {
    let mut serving: BTreeMap<u16, Serving> = BTreeMap::new();
    loop {
        let current = state.borrow_and_update().clone();
        if current.synced {
            let svcs: Vec<Service> = current.services.values().cloned().collect();
            let eps: Vec<EndpointSlice> = current.slices.values().cloned().collect();
            let wanted = health_check::health_checks(&node, &svcs, &eps);
            serving.retain(|port, s| {
                let keep = wanted.contains_key(port);
                if !keep {
                    s.stop.cancel();
                }
                keep
            });
            for (port, check) in wanted {
                if let Some(s) = serving.get(&port) {
                    s.check.send_if_modified(|c| {
                        let changed = *c != check;
                        *c = check.clone();
                        changed
                    });
                    continue;
                }
                match TcpListener::bind(("0.0.0.0", port)).await {
                    Ok(listener) => {
                        let (tx, rx) = watch::channel(check);
                        let stop = shutdown.child_token();
                        tokio::spawn(serve(listener, rx, stop.clone()));
                        serving.insert(port, Serving { check: tx, stop });
                    }
                    Err(e) => {
                        tracing::warn!(port, error = %e, "health check node port: cannot listen")
                    }
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = state.changed() => if changed.is_err() { return },
        }
    }
}
