//! Local ephemeral storage isolation, upstream's `localStorageEviction`: a pod is evicted at
//! once, whatever the node's free space, when an emptyDir holds more than its `sizeLimit`, when
//! the pod's local storage (writable layers, logs, emptyDirs) exceeds the sum of its
//! containers' `ephemeral-storage` limits, or when a container's logs and writable layer
//! exceed its own limit (logs alone when the writable layer is on a dedicated image
//! filesystem). Checked in that order; the first breach gives the message.
//!
//! Planner: pure, no I/O.

use super::message;
use super::usage::{Measure, PodUsage};
use berth_api::k8s_openapi::api::core::v1::{Container, Pod};
use berth_api::scheduling::resources::value;

fn limit_of(c: &Container) -> Option<&str> {
    c.resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("ephemeral-storage"))
        .map(|q| q.0.as_str())
}

/// The pod's `ephemeral-storage` limit as upstream's `PodLimits` sums it (app containers
/// added, the largest init container if larger), printed as a binary quantity; `None` when no
/// container sets one.
fn pod_limit(pod: &Pod) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let apps: Vec<i64> = spec
        .containers
        .iter()
        .filter_map(|c| limit_of(c).and_then(value))
        .collect();
    let init: Option<i64> = spec
        .init_containers
        .iter()
        .flatten()
        .filter_map(|c| limit_of(c).and_then(value))
        .max();
    if apps.is_empty() && init.is_none() {
        return None;
    }
    Some(apps.iter().sum::<i64>().max(init.unwrap_or(0)))
}

/// Whether the pod sets any local storage limit (an emptyDir `sizeLimit`, a container's
/// `ephemeral-storage` limit): only such a pod can breach one, so only its usage is read when
/// the node is under no pressure.
pub fn is_limited(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.volumes
        .iter()
        .flatten()
        .any(|v| v.empty_dir.as_ref().is_some_and(|e| e.size_limit.is_some()))
        || spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .any(|c| limit_of(c).is_some())
}

/// Why the pod must be evicted for its local storage, if it must.
pub fn breach(pod: &Pod, usage: &PodUsage, dedicated_imagefs: bool) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    for v in spec.volumes.iter().flatten() {
        let Some(limit) = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref()) else {
            continue;
        };
        let (Some(bytes), Some(used)) = (value(&limit.0), usage.volumes.get(&v.name)) else {
            continue;
        };
        if bytes > 0 && used.bytes > bytes {
            return Some(message::empty_dir(&v.name, &limit.0));
        }
    }
    if let Some(limit) = pod_limit(pod)
        && usage.disk(Measure::ALL).bytes > limit
    {
        return Some(message::pod_ephemeral_storage(&message::binary_si(limit)));
    }
    for c in &spec.containers {
        let Some(spelled) = limit_of(c) else { continue };
        let Some(limit) = value(spelled).filter(|l| *l != 0) else {
            continue;
        };
        let Some(u) = usage.containers.get(&c.name) else {
            continue;
        };
        let mut used = u.logs.unwrap_or_default().bytes;
        if !dedicated_imagefs {
            used = used.saturating_add(u.rootfs.unwrap_or_default().bytes);
        }
        if used > limit {
            return Some(message::container_ephemeral_storage(&c.name, spelled));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::usage::{ContainerUsage, Disk};
    use serde_json::json;
    use std::collections::BTreeMap;

    const MI: i64 = 1 << 20;

    fn pod(containers: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {
                "containers": containers,
                "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "1Mi"}},
                            {"name": "free", "emptyDir": {}}]
            }
        }))
        .unwrap()
    }

    fn usage(cache: i64, free: i64, logs: i64, rootfs: i64) -> PodUsage {
        let d = |bytes| Disk { bytes, inodes: 1 };
        PodUsage {
            volumes: BTreeMap::from([("cache".into(), d(cache)), ("free".into(), d(free))]),
            containers: BTreeMap::from([(
                "x".into(),
                ContainerUsage {
                    memory: None,
                    rootfs: Some(d(rootfs)),
                    logs: Some(d(logs)),
                },
            )]),
            ..PodUsage::default()
        }
    }

    #[test]
    fn a_pod_is_limited_by_a_size_limit_or_any_containers_storage_limit() {
        let bare = |containers: serde_json::Value| -> Pod {
            serde_json::from_value(json!({"spec": {"containers": containers,
                "volumes": [{"name": "free", "emptyDir": {}}]}}))
            .unwrap()
        };
        let limit = json!({"limits": {"ephemeral-storage": "1Mi"}});
        for (name, p, want) in [
            ("an emptyDir sizeLimit", pod(json!([{"name": "x"}])), true),
            ("nothing", bare(json!([{"name": "x"}])), false),
            (
                "a container limit",
                bare(json!([{"name": "x"}, {"name": "y", "resources": limit}])),
                true,
            ),
            (
                "a memory limit only",
                bare(json!([{"name": "x", "resources": {"limits": {"memory": "1Mi"}}}])),
                false,
            ),
        ] {
            assert_eq!(is_limited(&p), want, "{name}");
        }
    }

    #[test]
    fn the_first_breach_in_upstreams_order_gives_the_message() {
        let unlimited = pod(json!([{"name": "x", "image": "i"}]));
        let limited = pod(json!([
            {"name": "x", "image": "i", "resources": {"limits": {"ephemeral-storage": "2Mi"}}},
            {"name": "y", "image": "i", "resources": {"limits": {"ephemeral-storage": "3Mi"}}}
        ]));
        type Case = (
            &'static str,
            &'static Pod,
            PodUsage,
            bool,
            Option<&'static str>,
        );
        let unlimited: &'static Pod = Box::leak(Box::new(unlimited));
        let limited: &'static Pod = Box::leak(Box::new(limited));
        let cases: Vec<Case> = vec![
            (
                "nothing over",
                unlimited,
                usage(MI, 100 * MI, MI, MI),
                false,
                None,
            ),
            (
                "an emptyDir over its size limit",
                unlimited,
                usage(MI + 1, 0, 0, 0),
                false,
                Some("Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". "),
            ),
            (
                "the pod over its containers' summed limits",
                limited,
                usage(0, 5 * MI + 1, 0, 0),
                false,
                Some(
                    "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. ",
                ),
            ),
            (
                "a container's logs and writable layer over its limit",
                limited,
                usage(0, 0, MI, MI + 1),
                false,
                Some("Container x exceeded its local ephemeral storage limit \"2Mi\". "),
            ),
            (
                "a writable layer on a dedicated image filesystem does not count",
                limited,
                usage(0, 0, MI, MI + 1),
                true,
                None,
            ),
        ];
        for (name, pod, u, dedicated, want) in cases {
            assert_eq!(breach(pod, &u, dedicated).as_deref(), want, "{name}");
        }
    }
}
