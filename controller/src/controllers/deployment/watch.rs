//! Which Deployments a store event concerns: the Deployment itself, the controller of a
//! ReplicaSet (or, for an orphan, the Deployments whose selector matches it), and for a deleted
//! pod the Deployment owning its ReplicaSet (Recreate waits for old pods to be gone).

use super::{controller_ref, deployments, replica_sets};
use crate::registry::{Registry, prefix};
use crate::store::{EventType, StoreEvent};
use berth_shared::k8s_openapi::api::apps::v1::Deployment;
use berth_shared::selector::LabelSelector;
use serde_json::Value;
use std::collections::BTreeMap;

/// The Deployments (`namespace/name`) a store event may concern.
pub(super) fn affected(registry: &Registry, ev: &StoreEvent) -> Vec<String> {
    let key = &*ev.key;
    if let Some(rest) = key.strip_prefix("/apps/deployments/") {
        return vec![rest.to_string()];
    }
    let replica_set = key.starts_with("/apps/replicasets/");
    let deleted_pod = key.starts_with("/core/pods/") && ev.event_type == EventType::Deleted;
    if !(replica_set || deleted_pod) {
        return Vec::new();
    }
    let Ok(obj) = ev.object.value() else {
        return Vec::new();
    };
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if replica_set {
        return match controller_ref(&obj) {
            Some(("Deployment", owner, _)) => vec![format!("{ns}/{owner}")],
            Some(_) => Vec::new(),
            None => matching_deployments(registry, ns, &ev.object.index.labels),
        };
    }
    if let Some(("ReplicaSet", rs, _)) = controller_ref(&obj)
        && let Ok(rs_rt) = replica_sets()
        && let Ok(stored) = registry.get(rs_rt, Some(ns), rs)
        && let Ok(rs) = stored.value()
        && let Some(("Deployment", owner, _)) = controller_ref(&rs)
    {
        return vec![format!("{ns}/{owner}")];
    }
    Vec::new()
}

/// Deployments of `ns` whose selector matches an orphan ReplicaSet's labels (candidates for
/// adopting it).
fn matching_deployments(
    registry: &Registry,
    ns: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<String> {
    let Ok(rt) = deployments() else {
        return Vec::new();
    };
    let (_, items, _) = registry
        .store()
        .list(&prefix(rt, Some(ns)), None, None, |_| true);
    items
        .iter()
        .filter_map(|item| {
            let d: Deployment = serde_json::from_slice(&item.data).ok()?;
            let sel = LabelSelector::from_k8s(&d.spec?.selector).ok()?;
            (!sel.is_empty() && sel.matches(labels))
                .then(|| format!("{ns}/{}", d.metadata.name.unwrap_or_default()))
        })
        .collect()
}
