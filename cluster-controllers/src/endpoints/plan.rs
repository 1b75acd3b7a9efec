//! Planner: pure, no I/O.
//!
//! A Service's Endpoints object (upstream's endpoints controller, `syncService`): for a
//! Service with a selector, an Endpoints of the same name whose subsets list the selected
//! pods ([`pods`]; terminating pods only with `publishNotReadyAddresses`): ready pods under
//! `addresses`, the others under `notReadyAddresses`, each with the ports it resolves.
//! Subsets are repacked as upstream's `RepackSubsets` does: pods with the same port set share
//! a subset, addresses sorted by IP. A headless Service without ports lists its pods with no
//! ports; any other pod that resolves no port is left out. The Endpoints carries the Service's
//! labels (plus `service.kubernetes.io/headless` for a headless one). A Service without a
//! selector is left alone (its Endpoints are the user's); when the Service is gone, so is its
//! Endpoints.

use crate::endpointslice::plan::HEADLESS_LABEL;
use crate::endpointslice::pods::{self, PodEndpoint, ResolvedPort};
use berth_shared::k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Pod, Service,
};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// Endpoints carrying this annotation belong to a leader election, not a Service: never
/// deleted for want of one (upstream `checkLeftoverEndpoints`).
pub const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

/// What one pass does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Nothing,
    Create(Endpoints),
    /// The current object rewritten (it carries the `resourceVersion` read).
    Update(Endpoints),
    /// The current object, whose Service is gone.
    Delete(Endpoints),
}

fn is_headless(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

/// The Service's labels, with the headless marker set or removed.
fn labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.metadata.labels.clone().unwrap_or_default();
    if is_headless(svc) {
        labels.insert(HEADLESS_LABEL.to_string(), String::new());
    } else {
        labels.remove(HEADLESS_LABEL);
    }
    labels
}

fn address(e: &PodEndpoint) -> EndpointAddress {
    EndpointAddress {
        ip: e.ip.clone(),
        hostname: e.hostname.clone(),
        node_name: e.node_name.clone(),
        target_ref: Some(e.target_ref()),
    }
}

fn port(p: &ResolvedPort) -> EndpointPort {
    EndpointPort {
        name: p.name.clone(),
        port: p.port,
        protocol: Some(p.protocol.clone()),
        app_protocol: p.app_protocol.clone(),
    }
}

fn non_empty<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

/// The subsets for `svc`'s pods, repacked and sorted.
pub fn subsets(svc: &Service, pods: &[&Pod]) -> Vec<EndpointSubset> {
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let no_ports = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .is_none_or(Vec::is_empty);
    // Port set (sorted) → (ready, not ready) addresses; BTreeMap orders the subsets.
    type Packed = BTreeMap<Vec<ResolvedPort>, (Vec<EndpointAddress>, Vec<EndpointAddress>)>;
    let mut packed = Packed::new();
    for e in pods::endpoints_of(svc, pods, publish) {
        if e.ports.is_empty() && !(no_ports && is_headless(svc)) {
            continue;
        }
        let mut key = e.ports.clone();
        key.sort();
        let (ready, not_ready) = packed.entry(key).or_default();
        if e.ready {
            ready.push(address(&e));
        } else {
            not_ready.push(address(&e));
        }
    }
    packed
        .into_iter()
        .map(|(ports, (ready, not_ready))| EndpointSubset {
            addresses: non_empty(ready),
            not_ready_addresses: non_empty(not_ready),
            ports: non_empty(ports.iter().map(port).collect()),
        })
        .collect()
}

/// `None` and empty lists alike, as the API drops empty lists.
fn normalized(subsets: Option<&Vec<EndpointSubset>>) -> Vec<EndpointSubset> {
    subsets
        .into_iter()
        .flatten()
        .map(|s| EndpointSubset {
            addresses: s.addresses.clone().and_then(non_empty),
            not_ready_addresses: s.not_ready_addresses.clone().and_then(non_empty),
            ports: s.ports.clone().and_then(non_empty),
        })
        .collect()
}

/// Plans the Endpoints of the Service named like `current`: `svc` is `None` when the Service
/// is gone.
pub fn plan_endpoints(svc: Option<&Service>, pods: &[&Pod], current: Option<&Endpoints>) -> Action {
    let Some(svc) = svc else {
        let leader = current
            .and_then(|c| c.metadata.annotations.as_ref())
            .is_some_and(|a| a.contains_key(LEADER_ANNOTATION));
        return match current {
            Some(c) if !leader => Action::Delete(c.clone()),
            _ => Action::Nothing,
        };
    };
    if pods::selector(svc).is_none() {
        return Action::Nothing;
    }
    let subsets = subsets(svc, pods);
    let labels = labels(svc);
    match current {
        None => Action::Create(Endpoints {
            metadata: ObjectMeta {
                name: svc.metadata.name.clone(),
                namespace: svc.metadata.namespace.clone(),
                labels: non_empty_map(labels),
                ..ObjectMeta::default()
            },
            subsets: non_empty(subsets),
        }),
        Some(c) => {
            let same_labels = c.metadata.labels.clone().unwrap_or_default() == labels;
            if same_labels && normalized(c.subsets.as_ref()) == subsets {
                return Action::Nothing;
            }
            let mut new = c.clone();
            new.metadata.labels = non_empty_map(labels);
            new.subsets = non_empty(subsets);
            Action::Update(new)
        }
    }
}

fn non_empty_map(m: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!m.is_empty()).then_some(m)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
