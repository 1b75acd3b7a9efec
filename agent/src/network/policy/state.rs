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

use berth_api::client::{Client, ClientError, ListParams, ResumingWatch, WatchEvent};
use berth_api::k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

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

fn key_of(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    )
}

/// Objects of one kind by `namespace/name`, fed by a list and then its watch.
struct Cache<T> {
    group: &'static str,
    plural: &'static str,
    objects: BTreeMap<String, T>,
    watch: Option<ResumingWatch<T>>,
}

impl<T> Cache<T>
where
    T: DeserializeOwned + Metadata<Ty = ObjectMeta> + Send + 'static,
{
    fn new(group: &'static str, plural: &'static str) -> Cache<T> {
        Cache {
            group,
            plural,
            objects: BTreeMap::new(),
            watch: None,
        }
    }

    async fn relist(&mut self, client: &Client) -> Result<(), ClientError> {
        let rt = crate::node::rt(self.plural, self.group, "v1");
        let list = client.list::<T>(rt, None, &ListParams::default()).await?;
        self.objects = list
            .items
            .into_iter()
            .map(|o| (key_of(o.metadata()), o))
            .collect();
        self.watch = Some(ResumingWatch::new(
            client.clone(),
            rt,
            None,
            ListParams::default(),
            &list.resource_version,
        ));
        Ok(())
    }

    /// The next event applied to the cache; `false` when the watch cannot resume (relist).
    async fn next(&mut self) -> bool {
        let Some(watch) = self.watch.as_mut() else {
            return std::future::pending().await;
        };
        match watch.next().await {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                self.objects.insert(key_of(o.metadata()), o);
                true
            }
            Ok(WatchEvent::Deleted(o)) => {
                self.objects.remove(&key_of(o.metadata()));
                true
            }
            Ok(WatchEvent::Bookmark(_)) => true,
            Err(_) => {
                self.watch = None;
                false
            }
        }
    }
}

/// Lists, watches and publishes until `shutdown`; relists a kind whose watch fails.
pub async fn run(client: Client, tx: watch::Sender<Arc<PolicyState>>, shutdown: CancellationToken) {
    let mut pods = Cache::<Pod>::new("", "pods");
    let mut namespaces = Cache::<Namespace>::new("", "namespaces");
    let mut policies = Cache::<NetworkPolicy>::new("networking.k8s.io", "networkpolicies");
    let mut backoff = Duration::from_millis(200);
    loop {
        if pods.watch.is_none() || namespaces.watch.is_none() || policies.watch.is_none() {
            let listed = async {
                if pods.watch.is_none() {
                    pods.relist(&client).await?;
                }
                if namespaces.watch.is_none() {
                    namespaces.relist(&client).await?;
                }
                if policies.watch.is_none() {
                    policies.relist(&client).await?;
                }
                Ok::<(), ClientError>(())
            };
            if let Err(e) = listed.await {
                tracing::warn!(error = %e, "network policy: listing pods, namespaces and policies failed; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
            backoff = Duration::from_millis(200);
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
