//! The node's presence in the cluster: registers the Node (labels, taints, capacity, addresses,
//! nodeInfo, conditions), renews its Lease in `kube-node-lease` every 10 s, and every 10 s
//! checks that containerd answers (Ready, else `KubeletNotReady`), takes the pressure
//! conditions the eviction manager judged ([`pressure`]) and compares the status it would post
//! with the one the API holds: it posts at once when they differ (a pressure came or went, the
//! node lifecycle controller marked the node Unknown while the agent was away or cut off) and
//! at least every minute otherwise, as the kubelet does.

pub mod address;
pub mod allocatable;
pub mod cgroup_layout;
pub mod cgroups;
pub mod host;
pub mod pressure;
pub mod qos_cgroups;
pub mod status;

use berth_api::client::{Client, ClientError};
use berth_api::k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use berth_api::k8s_openapi::api::core::v1::{Node, Taint};
use berth_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use berth_api::resource::{self, ResourceType};
use pressure::Pressures;
use serde_json::json;
use status::HostFacts;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const LEASE_RENEW: Duration = Duration::from_secs(10);
pub const LEASE_DURATION_SECONDS: i32 = 40;
pub const STATUS_EVERY: Duration = Duration::from_secs(60);
/// How often the status is computed and compared with the API's (the kubelet's
/// `nodeStatusUpdateFrequency`, and its eviction manager's monitoring interval).
pub const STATUS_CHECK: Duration = Duration::from_secs(10);

/// The host's pressure conditions, as the eviction manager ([`crate::eviction`]) judges them
/// every housekeeping interval.
pub struct PressureMonitor {
    rx: tokio::sync::watch::Receiver<Pressures>,
}

impl PressureMonitor {
    pub fn new(rx: tokio::sync::watch::Receiver<Pressures>) -> Self {
        PressureMonitor { rx }
    }

    /// The pressures to report now.
    pub async fn sample(&mut self) -> Pressures {
        *self.rx.borrow_and_update()
    }

    /// Resolves when the pressures change (never, once the manager is gone).
    async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A resource the agent uses (every one it names is in the table).
pub(crate) fn rt(plural: &str, group: &str, version: &str) -> &'static ResourceType {
    match resource::by_plural(group, version, plural) {
        Some(rt) => rt,
        None => unreachable!("{plural} is in the resource table"),
    }
}

/// Creates the Node with its labels, annotations and taints, or brings an existing one's labels
/// and the agent's annotations up to date (other annotations are left as they are). Taints are applied only when the Node is created, as the kubelet's `--register-with-taints`
/// are: a taint an operator removed (or added) stays so across agent restarts.
pub async fn register(
    client: &Client,
    facts: &HostFacts,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    taints: &[Taint],
) -> Result<Node, ClientError> {
    let nodes = rt("nodes", "", "v1");
    let wanted = status::node(facts, labels, annotations, taints, jiff::Timestamp::now());
    match client.create(nodes, None, &wanted).await {
        Ok(n) => Ok(n),
        Err(e) if e.is_conflict() => {
            let patch = json!({"metadata": {"labels": wanted.metadata.labels,
                                            "annotations": annotations}});
            client
                .merge_patch(nodes, None, &facts.node_name, &patch, false)
                .await
        }
        Err(e) => Err(e),
    }
}

/// Posts the node's status.
pub async fn post_status(
    client: &Client,
    facts: &HostFacts,
    ready: bool,
    pressures: Pressures,
    previous: Option<&Node>,
) -> Result<Node, ClientError> {
    let nodes = rt("nodes", "", "v1");
    let status = status::node_status(
        facts,
        ready,
        pressures,
        jiff::Timestamp::now(),
        previous.and_then(|n| n.status.as_ref()),
    );
    client
        .merge_patch(
            nodes,
            None,
            &facts.node_name,
            &json!({"status": status}),
            true,
        )
        .await
}

/// Creates or renews the node's Lease.
pub async fn renew_lease(client: &Client, node: &str) -> Result<(), ClientError> {
    let leases = rt("leases", "coordination.k8s.io", "v1");
    let now = MicroTime(jiff::Timestamp::now());
    match client
        .get::<Lease>(leases, Some("kube-node-lease"), node)
        .await?
    {
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = Some(node.to_string());
            spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
            spec.renew_time = Some(now);
            client
                .replace(leases, Some("kube-node-lease"), node, &lease, false)
                .await?;
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(node.to_string()),
                    namespace: Some("kube-node-lease".to_string()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(node.to_string()),
                    lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    ..LeaseSpec::default()
                }),
            };
            client
                .create(leases, Some("kube-node-lease"), &lease)
                .await?;
        }
    }
    Ok(())
}

/// How long the runtime may take to answer before the node reports not Ready.
const RUNTIME_CHECK: Duration = Duration::from_secs(5);

/// Whether containerd answers (the kubelet's runtime status check): the node is Ready only then.
async fn runtime_ready(runtime: &crate::runtime::Runtime) -> bool {
    matches!(
        tokio::time::timeout(RUNTIME_CHECK, runtime.version()).await,
        Ok(Ok(_))
    )
}

/// Keeps the Lease and status fresh until `shutdown`.
pub async fn heartbeat(
    client: Client,
    facts: HostFacts,
    mut node: Option<Node>,
    mut monitor: PressureMonitor,
    runtime: crate::runtime::Runtime,
    shutdown: CancellationToken,
) {
    let nodes = rt("nodes", "", "v1");
    let mut lease_tick = tokio::time::interval(LEASE_RENEW);
    let mut status_tick = tokio::time::interval(STATUS_CHECK);
    let mut last_post = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = lease_tick.tick() => {
                if let Err(e) = renew_lease(&client, &facts.node_name).await {
                    tracing::warn!(error = %e, "renewing the node lease failed");
                }
            }
            // A pressure came or went: post now, not at the next tick.
            _ = monitor.changed() => status_tick.reset_immediately(),
            _ = status_tick.tick() => {
                let pressures = monitor.sample().await;
                let ready = runtime_ready(&runtime).await;
                // The API's status, not the last one posted: a controller may have written it.
                if let Ok(Some(n)) = client.get::<Node>(nodes, None, &facts.node_name).await {
                    node = Some(n);
                }
                let api = node.as_ref().and_then(|n| n.status.as_ref());
                let wanted =
                    status::node_status(&facts, ready, pressures, jiff::Timestamp::now(), api);
                if !status::differs(api, &wanted) && last_post.elapsed() < STATUS_EVERY {
                    continue;
                }
                match post_status(&client, &facts, ready, pressures, node.as_ref()).await {
                    Ok(n) => {
                        node = Some(n);
                        last_post = tokio::time::Instant::now();
                    }
                    Err(e) => tracing::warn!(error = %e, "posting node status failed"),
                }
            }
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Waits until the controller has given the node a pod CIDR.
pub async fn wait_for_pod_cidr(
    client: &Client,
    node: &str,
    shutdown: &CancellationToken,
) -> Option<String> {
    let nodes = rt("nodes", "", "v1");
    loop {
        if let Ok(Some(n)) = client.get::<Node>(nodes, None, node).await
            && let Some(cidr) = n.spec.and_then(|s| s.pod_cidr)
        {
            return Some(cidr);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = shutdown.cancelled() => return None,
        }
    }
}
