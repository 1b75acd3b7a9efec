//! What the EndpointSlice and Endpoints controllers read from the informers, decoded once per
//! object version ([`View`]s), and which Services a change concerns: a pod change the
//! Services of its namespace that select it before or after; a slice change the Service its
//! `kubernetes.io/service-name` label names, when this controller manages it.

use super::plan::{CONTROLLER_NAME, MANAGED_BY_LABEL, SERVICE_NAME_LABEL, ZONE_LABEL};
use berth_runtime::informer::{Delta, Informer, Object, ObjectKey, View};
use berth_shared::k8s_openapi::api::core::v1::{Pod, Service};
use berth_shared::selector::LabelSelector;
use std::collections::BTreeMap;

/// A pod decoded once per version (`None` if it does not decode).
pub struct DecodedPod(pub Option<Pod>);

impl View for DecodedPod {
    fn derive(obj: &Object) -> Self {
        DecodedPod(obj.decode().ok())
    }
}

/// A Service's pod selector, once per version (`None`: it selects no pods).
pub struct ServiceSelector(pub Option<LabelSelector>);

impl View for ServiceSelector {
    fn derive(obj: &Object) -> Self {
        let svc: Option<Service> = obj.decode().ok();
        ServiceSelector(svc.as_ref().and_then(super::pods::selector))
    }
}

/// The decoded pods of `namespace`.
pub fn pods_in(pods: &Informer, namespace: &str) -> Vec<std::sync::Arc<DecodedPod>> {
    pods.in_namespace(namespace)
        .iter()
        .map(|p| p.view::<DecodedPod>())
        .collect()
}

/// The zone of every node labelled with one.
pub fn zones(nodes: &Informer) -> BTreeMap<String, String> {
    nodes
        .list()
        .iter()
        .filter_map(|n| {
            let zone = n.labels().get(ZONE_LABEL).filter(|z| !z.is_empty())?;
            Some((n.name().to_string(), zone.clone()))
        })
        .collect()
}

/// A pod change: the Services of its namespace selecting it, before or after.
pub fn pod_change(services: &Informer, d: &Delta) -> Vec<ObjectKey> {
    let ns = d.object.namespace().unwrap_or_default();
    services
        .in_namespace(ns)
        .into_iter()
        .filter(|s| {
            let Some(sel) = &s.view::<ServiceSelector>().0 else {
                return false;
            };
            sel.matches(d.object.labels())
                || d.old.as_ref().is_some_and(|o| sel.matches(o.labels()))
        })
        .map(|s| s.key().clone())
        .collect()
}

/// A slice change: the Service named by its label, before or after, when this controller
/// manages the slice.
pub fn slice_change(d: &Delta) -> Vec<ObjectKey> {
    let mut keys = Vec::new();
    for obj in std::iter::once(&d.object).chain(d.old.iter()) {
        let labels = obj.labels();
        if labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some(CONTROLLER_NAME) {
            continue;
        }
        if let Some(name) = labels.get(SERVICE_NAME_LABEL) {
            let key = ObjectKey::new(obj.namespace(), name);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}
