//! What the two controllers that write `status.loadBalancer` share (LoadBalancer Services',
//! [`crate::loadbalancer`], and Ingresses', [`crate::ingress`]): the address a Ready node
//! lends them, whether a Node event changes it, and the write of the entries their planners
//! decided on (each keeps its own planning).

use crate::condition;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{Delta, DeltaType, Object, ObjectKey};
use berth_shared::resource::ResourceType;
use core::net::Ipv4Addr;
use serde::Serialize;
use serde_json::json;

/// A Ready node's InternalIP, if it is Ready and has one.
pub(crate) fn ready_address(node: &Object) -> Option<Ipv4Addr> {
    let v = node.value().ok()?;
    if !condition::is_true(&v, "Ready") {
        return None;
    }
    v.pointer("/status/addresses")?
        .as_array()?
        .iter()
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str()?.parse().ok())
}

/// Whether a Node event changes what `address` reads of the Node (a deleted one has none), so
/// the statuses that list it need another pass.
pub(crate) fn address_changed(d: &Delta, address: fn(&Object) -> Option<Ipv4Addr>) -> bool {
    let before = d.old.as_deref().and_then(address);
    let after = match d.kind {
        DeltaType::Deleted => None,
        _ => address(&d.object),
    };
    before != after
}

/// Writes `ingress` as `status.loadBalancer.ingress` of `object` (the `resource` at `key`, as
/// the informer showed it: the write carries its `resourceVersion`, so a conflict requeues),
/// through the status subresource; an empty list writes `loadBalancer: {}`, as upstream does.
/// An object deleted meanwhile needs nothing more.
pub(crate) fn apply_load_balancer_status<I: Serialize>(
    registry: &Registry,
    resource: &ResourceType,
    key: &ObjectKey,
    object: &impl Serialize,
    ingress: &[I],
) -> Result<(), RegistryError> {
    let mut value = serde_json::to_value(object)?;
    value["status"]["loadBalancer"] = if ingress.is_empty() {
        json!({})
    } else {
        json!({"ingress": serde_json::to_value(ingress)?})
    };
    match registry.update(
        resource,
        key.namespace(),
        key.name(),
        value,
        Part::Status,
        &WriteOptions::default(),
    ) {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
