//! What the ingress proxy serves, kept current: every Ingress and IngressClass (listed, then
//! watched), the Services and EndpointSlices the service proxy already watches, and the TLS
//! Secrets our Ingresses name, read one by one (nodes may read only those: the node authorizer
//! lets a node get a `kubernetes.io/tls` Secret an Ingress of its namespace names, and no
//! other). Each burst of changes becomes one [`Snapshot`]: a new route table and certificate
//! set, swapped in whole, so open connections keep going and their next request sees it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use berth_api::client::Client;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Snapshot;
use super::certs::{self, Certificates};
use super::routes::{self, Backends, SecretRef};
use crate::network::service_state::ServiceState;
use crate::network::watch_cache::{Listed, Relister, WatchCache};

/// Changes arriving this close together are published together.
const BATCH: Duration = Duration::from_millis(50);
/// TLS Secrets are read again this often (a renewed certificate is served within it).
const SECRET_REFRESH: Duration = Duration::from_secs(30);

/// Reads the named TLS Secrets; one that is absent, unreadable or not a TLS key is left out
/// (its hosts get the default certificate), and said so once per change of reason.
async fn read_secrets(
    client: &Client,
    wanted: &[SecretRef],
    reported: &mut BTreeMap<SecretRef, String>,
) -> Certificates {
    let rt = crate::node::rt("secrets", "", "v1");
    let mut out = Certificates::new();
    for s in wanted {
        let read = client
            .get::<Secret>(rt, Some(&s.namespace), &s.name)
            .await
            .map_err(|e| e.to_string())
            .and_then(|secret| secret.ok_or_else(|| "not found".to_string()))
            .and_then(|secret| certs::parse_secret(&secret).map_err(|e| e.to_string()));
        match read {
            Ok(key) => {
                reported.remove(s);
                out.insert(s.clone(), key);
            }
            Err(why) => {
                if reported.get(s) != Some(&why) {
                    tracing::warn!(secret = %format!("{}/{}", s.namespace, s.name), error = %why,
                        "ingress: TLS secret not served; its hosts get the default certificate");
                    reported.insert(s.clone(), why);
                }
            }
        }
    }
    out
}

/// Lists, watches and publishes until `shutdown`.
pub async fn run(
    client: Client,
    mut services: watch::Receiver<Arc<ServiceState>>,
    tx: watch::Sender<Arc<Snapshot>>,
    shutdown: CancellationToken,
) {
    let mut ingresses = WatchCache::<Ingress>::new("networking.k8s.io", "v1", "ingresses");
    let mut classes = WatchCache::<IngressClass>::new("networking.k8s.io", "v1", "ingressclasses");
    let mut relister = Relister::new("ingress: ingresses and classes");
    let mut certificates = Certificates::new();
    let mut secrets_read: Option<(Vec<SecretRef>, tokio::time::Instant)> = None;
    let mut reported = BTreeMap::new();
    loop {
        match relister
            .relist(&client, &mut [&mut ingresses, &mut classes], &shutdown)
            .await
        {
            Listed::Ready => {}
            Listed::Retry => continue,
            Listed::Shutdown => return,
        }
        let all_ingresses: Vec<Ingress> = ingresses.objects.values().cloned().collect();
        let all_classes: Vec<IngressClass> = classes.objects.values().cloned().collect();
        let wanted: Vec<SecretRef> = routes::tls_secrets(&all_ingresses, &all_classes)
            .into_iter()
            .collect();
        let stale = match &secrets_read {
            Some((read, at)) => *read != wanted || at.elapsed() >= SECRET_REFRESH,
            None => true,
        };
        if stale {
            certificates = read_secrets(&client, &wanted, &mut reported).await;
            secrets_read = Some((wanted, tokio::time::Instant::now()));
        }
        let service_state = services.borrow_and_update().clone();
        let table = routes::plan_routes(
            &all_ingresses,
            &all_classes,
            &Backends {
                services: &service_state.services,
                slices: &service_state.slices,
            },
        );
        let changed = {
            let current = tx.borrow();
            current.routes != table
                || current.certificates.keys().ne(certificates.keys())
                || current
                    .certificates
                    .values()
                    .zip(certificates.values())
                    .any(|(a, b)| !Arc::ptr_eq(a, b) && a.cert != b.cert)
                || current.synced != service_state.synced
        };
        if changed {
            tx.send_replace(Arc::new(Snapshot {
                routes: table,
                certificates: certificates.clone(),
                synced: service_state.synced,
            }));
        }
        let refresh = tokio::time::sleep(SECRET_REFRESH);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ingresses.next() => {}
            _ = classes.next() => {}
            r = services.changed() => if r.is_err() { return },
            _ = refresh => {}
        }
        let batch_end = tokio::time::Instant::now() + BATCH;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(batch_end) => break,
                ok = ingresses.next() => if !ok { break },
                ok = classes.next() => if !ok { break },
                r = services.changed() => if r.is_err() { return },
            }
        }
    }
}
