//! Planner: pure, no I/O.
//!
//! A Service's EndpointSlices (upstream's EndpointSlice reconciler, IPv4 single stack,
//! `reconcileByPortMapping`): the selected pods ([`super::pods`], terminating ones included)
//! become endpoints grouped by their resolved port set; each group lives in slices of at most
//! [`MAX_ENDPOINTS_PER_SLICE`] endpoints. Changes are minimal:
//!
//! 1. each existing managed slice of a port set keeps the endpoints still wanted (in place,
//!    rewritten when their conditions or topology changed) and loses the others; a slice left
//!    empty is deleted, a changed one updated;
//! 2. endpoints not yet placed fill the slices being updated, then one unchanged slice that
//!    can take all of them, then new slices;
//! 3. a slice to create takes the place of a slice to delete (an update instead of a
//!    create and a delete);
//! 4. a Service without any endpoint keeps one placeholder slice with no endpoints and no
//!    ports.
//!
//! Slices not managed by `endpointslice-controller.k8s.io` are never touched. Worked example:
//! 250 endpoints of one port set → slices of 100, 100 and 50; one pod going away rewrites only
//! the slice that held it.

use super::pods::{self, PodEndpoint, ResolvedPort};
use berth_shared::k8s_openapi::api::core::v1::{Pod, Service};
use berth_shared::k8s_openapi::api::discovery::v1::{
    Endpoint, EndpointConditions, EndpointPort, EndpointSlice,
};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;

/// Upstream's default `--max-endpoints-per-slice`.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;
/// The label naming a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming a slice's manager, and this controller's value of it.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// Set on the slices (and Endpoints) of a headless Service.
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// The node label whose value is an endpoint's zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
const ADDRESS_TYPE: &str = "IPv4";

/// What one pass writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// New slices (named by `generateName`).
    pub create: Vec<EndpointSlice>,
    /// Existing slices rewritten, carrying the `resourceVersion` read.
    pub update: Vec<EndpointSlice>,
    /// Existing slices to delete.
    pub delete: Vec<EndpointSlice>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// Whether this controller manages `slice`.
pub fn is_managed(slice: &EndpointSlice) -> bool {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == CONTROLLER_NAME)
}

/// Upstream `setEndpointSliceLabels`: the Service's labels, less the two reserved ones, the
/// headless marker, then the Service's name and this controller's.
pub fn slice_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.metadata.labels.clone().unwrap_or_default();
    labels.remove(SERVICE_NAME_LABEL);
    labels.remove(MANAGED_BY_LABEL);
    labels.remove(HEADLESS_LABEL);
    if svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None") {
        labels.insert(HEADLESS_LABEL.to_string(), String::new());
    }
    let name = svc.metadata.name.clone().unwrap_or_default();
    labels.insert(SERVICE_NAME_LABEL.to_string(), name);
    labels.insert(MANAGED_BY_LABEL.to_string(), CONTROLLER_NAME.to_string());
    labels
}

fn owner(svc: &Service) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_string(),
        kind: "Service".to_string(),
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid: svc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn endpoint(e: &PodEndpoint, zones: &BTreeMap<String, String>) -> Endpoint {
    Endpoint {
        addresses: vec![e.ip.clone()],
        conditions: Some(EndpointConditions {
            ready: Some(e.ready),
            serving: Some(e.serving),
            terminating: Some(e.terminating),
        }),
        hostname: e.hostname.clone(),
        node_name: e.node_name.clone(),
        zone: e.node_name.as_ref().and_then(|n| zones.get(n)).cloned(),
        target_ref: Some(e.target_ref()),
        ..Endpoint::default()
    }
}

/// An endpoint's identity across passes (upstream hashes addresses and the target): its
/// address and pod.
fn identity(e: &Endpoint) -> (Vec<String>, Option<String>) {
    let uid = e.target_ref.as_ref().and_then(|r| r.uid.clone());
    (e.addresses.clone(), uid)
}

/// A slice's port as upstream's controller writes it: an unnamed Service port is `name: ""`
/// (kubectl 1.36+ `describe svc` dereferences it).
fn to_port(p: &ResolvedPort) -> EndpointPort {
    EndpointPort {
        name: Some(p.name.clone().unwrap_or_default()),
        port: Some(p.port),
        protocol: Some(p.protocol.clone()),
        app_protocol: p.app_protocol.clone(),
    }
}

/// A slice's port set as a key (sorted; a port without a number never matches one wanted).
fn port_key(slice: &EndpointSlice) -> Vec<ResolvedPort> {
    let mut key: Vec<ResolvedPort> = slice
        .ports
        .iter()
        .flatten()
        .map(|p| ResolvedPort {
            name: p.name.clone().filter(|n| !n.is_empty()),
            port: p.port.unwrap_or(-1),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
            app_protocol: p.app_protocol.clone(),
        })
        .collect();
    key.sort();
    key
}

/// The wanted endpoints by sorted port set, each group with its ports in the Service's order.
type Groups = BTreeMap<Vec<ResolvedPort>, (Vec<EndpointPort>, Vec<Endpoint>)>;

fn desired(svc: &Service, pods: &[&Pod], zones: &BTreeMap<String, String>) -> Groups {
    let mut groups = Groups::new();
    for e in pods::endpoints_of(svc, pods, true) {
        let mut key = e.ports.clone();
        key.sort();
        let entry = groups
            .entry(key)
            .or_insert_with(|| (e.ports.iter().map(to_port).collect(), Vec::new()));
        entry.1.push(endpoint(&e, zones));
    }
    groups
}

fn new_slice(svc: &Service, ports: Vec<EndpointPort>, endpoints: Vec<Endpoint>) -> EndpointSlice {
    let name = svc.metadata.name.clone().unwrap_or_default();
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: svc.metadata.namespace.clone(),
            labels: Some(slice_labels(svc)),
            owner_references: Some(vec![owner(svc)]),
            ..ObjectMeta::default()
        },
        address_type: ADDRESS_TYPE.to_string(),
        endpoints,
        ports: Some(ports),
    }
}

/// Whether a kept slice's metadata is what this Service wants.
fn metadata_current(svc: &Service, slice: &EndpointSlice) -> bool {
    slice.metadata.labels.as_ref() == Some(&slice_labels(svc))
        && slice
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| o.contains(&owner(svc)))
}

fn refresh_metadata(svc: &Service, slice: &mut EndpointSlice) {
    slice.metadata.labels = Some(slice_labels(svc));
    let mut owners = slice.metadata.owner_references.clone().unwrap_or_default();
    owners.retain(|o| o.controller != Some(true));
    owners.push(owner(svc));
    slice.metadata.owner_references = Some(owners);
}

/// Plans one port set: its existing slices against its wanted endpoints.
fn plan_port_set(
    svc: &Service,
    ports: Vec<EndpointPort>,
    wanted: Vec<Endpoint>,
    existing: Vec<EndpointSlice>,
    max: usize,
    plan: &mut Plan,
) {
    let mut remaining: Vec<Option<Endpoint>> = wanted.into_iter().map(Some).collect();
    let mut index: BTreeMap<_, usize> = remaining
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().map(|e| (identity(e), i)))
        .collect();
    let mut updating = Vec::new();
    let mut unchanged = Vec::new();
    for mut slice in existing {
        let mut changed = false;
        let mut kept = Vec::new();
        for ep in std::mem::take(&mut slice.endpoints) {
            match index
                .remove(&identity(&ep))
                .and_then(|i| remaining[i].take())
            {
                Some(want) => {
                    changed |= want != ep;
                    kept.push(want);
                }
                None => changed = true,
            }
        }
        slice.endpoints = kept;
        if slice.endpoints.is_empty() {
            plan.delete.push(slice);
        } else if changed || !metadata_current(svc, &slice) {
            refresh_metadata(svc, &mut slice);
            updating.push(slice);
        } else {
            unchanged.push(slice);
        }
    }
    let mut left: Vec<Endpoint> = remaining.into_iter().flatten().collect();
    left.reverse(); // popped from the back: placed in the wanted order
    // Fill the slices being written anyway, fullest first.
    updating.sort_by_key(|s| std::cmp::Reverse(s.endpoints.len()));
    for slice in &mut updating {
        while slice.endpoints.len() < max
            && let Some(e) = left.pop()
        {
            slice.endpoints.push(e);
        }
    }
    // Then one unchanged slice that takes all that is left, fullest first.
    if !left.is_empty() && left.len() < max {
        unchanged.sort_by_key(|s| std::cmp::Reverse(s.endpoints.len()));
        if let Some(i) = unchanged
            .iter()
            .position(|s| s.endpoints.len() + left.len() <= max)
        {
            let mut slice = unchanged.remove(i);
            slice.endpoints.extend(left.drain(..).rev());
            updating.push(slice);
        }
    }
    while !left.is_empty() {
        let take = left.len().min(max);
        let chunk: Vec<Endpoint> = left
            .split_off(left.len() - take)
            .into_iter()
            .rev()
            .collect();
        plan.create.push(new_slice(svc, ports.clone(), chunk));
    }
    plan.update.extend(updating);
}

/// Plans `svc`'s slices. `slices` are the slices labelled with its name (any manager);
/// `zones` maps node names to their `topology.kubernetes.io/zone`.
pub fn plan_slices(
    svc: &Service,
    pods: &[&Pod],
    slices: &[EndpointSlice],
    zones: &BTreeMap<String, String>,
    max: usize,
) -> Plan {
    let max = max.max(1);
    let mut plan = Plan::default();
    let mut existing: BTreeMap<Vec<ResolvedPort>, Vec<EndpointSlice>> = BTreeMap::new();
    let mut managed: Vec<&EndpointSlice> = slices.iter().filter(|s| is_managed(s)).collect();
    managed.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for s in managed {
        if s.address_type == ADDRESS_TYPE {
            existing.entry(port_key(s)).or_default().push(s.clone());
        } else {
            plan.delete.push(s.clone());
        }
    }
    for (key, (ports, wanted)) in desired(svc, pods, zones) {
        let have = existing.remove(&key).unwrap_or_default();
        plan_port_set(svc, ports, wanted, have, max, &mut plan);
    }
    plan.delete.extend(existing.into_values().flatten());
    let kept = slices.iter().filter(|s| is_managed(s)).count() - plan.delete.len();
    if plan.create.is_empty() && kept == 0 {
        // Upstream's placeholder: keep an empty one there is, else make one.
        let reusable = plan.delete.iter().position(|s| {
            s.endpoints.is_empty()
                && s.ports.as_ref().is_none_or(|p| p.is_empty())
                && s.address_type == ADDRESS_TYPE
        });
        match reusable {
            Some(i) => {
                let mut s = plan.delete.remove(i);
                if !metadata_current(svc, &s) {
                    refresh_metadata(svc, &mut s);
                    plan.update.push(s);
                }
            }
            None => plan.create.push(new_slice(svc, Vec::new(), Vec::new())),
        }
    }
    recycle(&mut plan);
    plan
}

/// Upstream `finalize`: a slice to create is written over a slice to delete instead.
fn recycle(plan: &mut Plan) {
    let mut i = 0;
    while i < plan.create.len() {
        let Some(j) = plan
            .delete
            .iter()
            .position(|d| d.address_type == plan.create[i].address_type)
        else {
            break;
        };
        let old = plan.delete.remove(j);
        let mut new = plan.create.remove(i);
        new.metadata = ObjectMeta {
            generate_name: old.metadata.generate_name.clone(),
            labels: new.metadata.labels,
            owner_references: new.metadata.owner_references,
            ..old.metadata
        };
        plan.update.push(new);
        i = 0;
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
pub(crate) mod tests;
