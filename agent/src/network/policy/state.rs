//! Every Pod, Namespace and NetworkPolicy in the cluster, listed and then watched, published
//! as one snapshot ([`PolicyState`]) to the policy enforcer after each burst of changes (as
//! [`crate::network::service_state`] does for the service proxy).
//!
//! Reading every pod of the cluster is more than upstream's node authorizer lets a kubelet
//! read; the controller's bootstrap RBAC grants it to nodes for this (`system:berth:network-policy`,
//! as k3s grants kube-router's controller), since a peer is any pod's labels and address.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use berth_api::client::Client;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::network::watch_cache::{Listed, Relister, WatchCache};

/// Changes arriving this close together are published together (well inside the 1 s in which
/// a change must be enforced).
const BATCH: Duration = Duration::from_millis(50);

/// The cluster's Pods, Namespaces and NetworkPolicies, keyed `namespace/name`.
#[derive(Debug, Clone, Default)]
pub struct PolicyState {
    pub pods: BTreeMap<String, Pod>,
    pub namespaces: BTreeMap<String, Namespace>,
    pub policies: BTreeMap<String, NetworkPolicy>,
    /// All three have been listed at least once (before that, nothing is known, which is not
    /// "no policies").
    pub synced: bool,
}

/// A channel for the state, starting empty and unsynced.
pub fn channel() -> (
    watch::Sender<Arc<PolicyState>>,
    watch::Receiver<Arc<PolicyState>>,
) {
    watch::channel(Arc::new(PolicyState::default()))
}

/// Lists, watches and publishes until `shutdown`; relists a kind whose watch fails.
pub async fn run(client: Client, tx: watch::Sender<Arc<PolicyState>>, shutdown: CancellationToken) {
    let mut pods = WatchCache::<Pod>::new("", "v1", "pods");
    let mut namespaces = WatchCache::<Namespace>::new("", "v1", "namespaces");
    let mut policies =
        WatchCache::<NetworkPolicy>::new("networking.k8s.io", "v1", "networkpolicies");
    let mut relister = Relister::new("network policy: pods, namespaces and policies");
    loop {
        match relister
            .relist(
                &client,
                &mut [&mut pods, &mut namespaces, &mut policies],
                &shutdown,
            )
            .await
        {
            Listed::Ready => {}
            Listed::Retry => continue,
            Listed::Shutdown => return,
        }
        tx.send_replace(Arc::new(PolicyState {
            pods: pods.objects.clone(),
            namespaces: namespaces.objects.clone(),
            policies: policies.objects.clone(),
            synced: true,
        }));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = pods.next() => {}
            _ = namespaces.next() => {}
            _ = policies.next() => {}
        }
        let batch_end = tokio::time::Instant::now() + BATCH;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(batch_end) => break,
                ok = pods.next() => if !ok { break },
                ok = namespaces.next() => if !ok { break },
                ok = policies.next() => if !ok { break },
            }
        }
    }
}
