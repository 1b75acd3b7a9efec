//! The node IPAM controller: gives every Node without `spec.podCIDR` a /24 of the cluster CIDR.

pub mod plan;

use crate::api::error::ApiError;
use crate::registry::{Part, Registry, WriteOptions};
use berth_shared::reconcile::{self, Outcome, Queue};
use berth_shared::resource;
use plan::Cidr;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn reconcile_one(registry: &Registry, cluster: Cidr, name: &str) -> Result<Outcome, ApiError> {
    let Some(rt) = resource::by_plural("", "v1", "nodes") else {
        return Ok(Outcome::Done);
    };
    let Ok(node) = registry.get(rt, None, name) else {
        return Ok(Outcome::Done);
    };
    if node
        .value()?
        .pointer("/spec/podCIDR")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty())
    {
        return Ok(Outcome::Done);
    }
    let (_, nodes, _) = registry.store().list("/core/nodes/", None, None, |_| true);
    let used: Vec<Cidr> = nodes
        .iter()
        .filter_map(|n| n.value().ok())
        .filter_map(|n| {
            n.pointer("/spec/podCIDR")
                .and_then(Value::as_str)
                .and_then(Cidr::parse)
        })
        .collect();
    let Some(cidr) = plan::allocate(cluster, &used) else {
        tracing::warn!(node = name, %cluster, "no pod CIDR left for the node");
        return Ok(Outcome::RequeueAfter(std::time::Duration::from_secs(30)));
    };
    // A conflict (another node took it meanwhile) requeues and picks again.
    registry.update_with(
        rt,
        None,
        name,
        Part::Main,
        &WriteOptions::default(),
        |mut n| {
            if n.pointer("/spec/podCIDR")
                .and_then(Value::as_str)
                .is_some_and(|c| !c.is_empty())
            {
                return Ok(n);
            }
            n["spec"]["podCIDR"] = json!(cidr.to_string());
            n["spec"]["podCIDRs"] = json!([cidr.to_string()]);
            Ok(n)
        },
    )?;
    tracing::info!(node = name, cidr = %cidr, "allocated pod CIDR");
    Ok(Outcome::Done)
}

pub fn start(
    registry: Registry,
    cluster: Cidr,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let store = registry.store().clone();
        let queue: Queue<String> = Queue::new();
        let registry = Arc::new(registry);
        let r = registry.clone();
        // One worker: allocations must not race each other.
        let runner = tokio::spawn(reconcile::run(
            queue.clone(),
            1,
            shutdown.clone(),
            "node-ipam",
            move |name: String| {
                let r = r.clone();
                async move {
                    tokio::task::spawn_blocking(move || reconcile_one(&r, cluster, &name))
                        .await
                        .map_err(|e| ApiError::Internal(e.to_string()))?
                }
            },
        ));
        super::follow::names(&store, "/core/nodes/", &shutdown, |name| queue.add(name)).await;
        let _ = runner.await;
    })
}
