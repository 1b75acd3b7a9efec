//! The node IPAM controller: gives every Node without `spec.podCIDR` a /24 of the cluster CIDR.

pub mod plan;

use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{Context, Controller, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::NODES;
use plan::Cidr;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn pod_cidr(node: &Value) -> Option<&str> {
    node.pointer("/spec/podCIDR")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
}

struct NodeIpam {
    registry: Registry,
    nodes: Arc<Informer>,
    cluster: Cidr,
}

impl Reconciler for NodeIpam {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        self.nodes.reconcile_cached(key, |node| {
            if pod_cidr(&node.value()?).is_some() {
                return Ok(Outcome::Done);
            }
            // The cache reflects every allocation made before this pass: passes run one at a
            // time and each waits for the cache to catch up with its write.
            let used: Vec<Cidr> = self
                .nodes
                .list()
                .iter()
                .filter_map(|n| n.value().ok())
                .filter_map(|n| pod_cidr(&n).and_then(Cidr::parse))
                .collect();
            let Some(cidr) = plan::allocate(self.cluster, &used) else {
                tracing::warn!(node = %key, cluster = %self.cluster, "no pod CIDR left for the node");
                return Ok(Outcome::RequeueAfter(std::time::Duration::from_secs(30)));
            };
            self.registry.update_with(
                NODES,
                None,
                key.name(),
                Part::Main,
                &WriteOptions::default(),
                |mut n| {
                    if pod_cidr(&n).is_some() {
                        return Ok::<_, RegistryError>(n);
                    }
                    n["spec"]["podCIDR"] = json!(cidr.to_string());
                    n["spec"]["podCIDRs"] = json!([cidr.to_string()]);
                    Ok(n)
                },
            )?;
            tracing::info!(node = %key, cidr = %cidr, "allocated pod CIDR");
            Ok(Outcome::Done)
        })
    }
}

/// Runs the node IPAM controller until `shutdown`.
pub async fn run(ctx: Context, cluster: Cidr, shutdown: CancellationToken) {
    let reconciler = Arc::new(NodeIpam {
        registry: ctx.registry.clone(),
        nodes: ctx.informer(NODES),
        cluster,
    });
    // One worker: allocations must not race each other.
    Controller::new("node-ipam", &ctx, NODES)
        .workers(1)
        .run(reconciler, shutdown)
        .await;
}
