//! The words of an eviction, upstream's: the pod status message (`The node was low on resource:
//! memory. Threshold quantity: 100Mi, available: 80Mi. Container hog was using 500Mi, request
//! is 0, has larger consumption of memory. `), the local storage limit messages, and
//! quantities printed as Kubernetes prints a binary quantity (`100Mi`, `1536Ki`, `1000`).
//!
//! Planner: pure, no I/O.

use super::config::Threshold;
use super::thresholds::Observations;
use super::usage::PodUsage;
use crate::node::pressure::Signal;
use berth_api::k8s_openapi::api::core::v1::Pod;

/// The status reason and event reason of an eviction.
pub const REASON: &str = "Evicted";

/// `n` as a binary-SI quantity: the largest power-of-1024 suffix that divides it exactly,
/// else the plain number.
pub fn binary_si(n: i64) -> String {
    const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if n == 0 {
        return "0".to_string();
    }
    let (mut v, mut i) = (n, 0usize);
    while i < SUFFIXES.len() && v % 1024 == 0 {
        v /= 1024;
        i += 1;
    }
    if i == 0 {
        n.to_string()
    } else {
        format!("{v}{}", SUFFIXES[i - 1])
    }
}

/// A container's request of `resource` as the spec spells it, `0` when it has none.
fn request(pod: &Pod, container: &str, resource: &str) -> (String, i64) {
    let spec = pod.spec.as_ref();
    let c = spec
        .into_iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .find(|c| c.name == container);
    let q = c
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource));
    match q {
        Some(q) => (
            q.0.clone(),
            berth_api::scheduling::resources::value(&q.0).unwrap_or(0),
        ),
        None => ("0".to_string(), 0),
    }
}

/// The message of an eviction for `signal` (upstream's `evictionMessage`).
pub fn node_low(
    signal: Signal,
    pod: &Pod,
    usage: Option<&PodUsage>,
    thresholds: &[Threshold],
    observed: &Observations,
) -> String {
    let resource = signal.resource();
    let mut m = format!("The node was low on resource: {resource}. ");
    let met = thresholds
        .iter()
        .filter(|t| t.signal.resource() == resource)
        .find_map(|t| observed.get(&t.signal).map(|o| (t, o)));
    if let Some((t, o)) = met {
        m += &format!(
            "Threshold quantity: {}, available: {}. ",
            binary_si(t.limit.quantity(o.capacity)),
            binary_si(o.available)
        );
    }
    let Some(usage) = usage else {
        return m;
    };
    let names: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .map(|c| c.name.clone())
        .collect();
    for name in names {
        let Some(c) = usage.containers.get(&name) else {
            continue;
        };
        let used = match resource {
            "memory" => c.memory,
            "ephemeral-storage" => match (c.rootfs, c.logs) {
                (Some(r), Some(l)) => Some(r.bytes.saturating_add(l.bytes)),
                _ => None,
            },
            _ => None,
        };
        let (spelled, requested) = request(pod, &name, resource);
        if let Some(used) = used
            && used > requested
        {
            m += &format!(
                "Container {name} was using {}, request is {spelled}, has larger consumption of {resource}. ",
                binary_si(used)
            );
        }
    }
    m
}

/// An emptyDir over its `sizeLimit`.
pub fn empty_dir(volume: &str, limit: &str) -> String {
    format!("Usage of EmptyDir volume {volume:?} exceeds the limit {limit:?}. ")
}

/// A pod over the sum of its containers' `ephemeral-storage` limits.
pub fn pod_ephemeral_storage(limit: &str) -> String {
    format!("Pod ephemeral local storage usage exceeds the total limit of containers {limit}. ")
}

/// A container over its `ephemeral-storage` limit.
pub fn container_ephemeral_storage(container: &str, limit: &str) -> String {
    format!("Container {container} exceeded its local ephemeral storage limit {limit:?}. ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::usage::{ContainerUsage, Disk};
    use crate::node::pressure::{Limit, Observed};
    use jiff::SignedDuration;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[test]
    fn quantities_print_as_kubernetes_prints_binary_ones() {
        for (n, s) in [
            (0, "0"),
            (1000, "1000"),
            (1024, "1Ki"),
            (1536 * 1024, "1536Ki"),
            (100 << 20, "100Mi"),
            (3 << 30, "3Gi"),
            (524_288_123, "524288123"),
        ] {
            assert_eq!(binary_si(n), s);
        }
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": [
                {"name": "hog", "image": "busybox"},
                {"name": "calm", "image": "busybox", "resources": {"requests": {"memory": "64Mi"}}}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn a_memory_eviction_names_the_threshold_and_the_containers_over_their_requests() {
        let t = [Threshold {
            signal: Signal::MemoryAvailable,
            limit: Limit::Quantity(100 << 20),
            grace: SignedDuration::ZERO,
            min_reclaim: None,
        }];
        let observed = BTreeMap::from([(
            Signal::MemoryAvailable,
            Observed {
                available: 80 << 20,
                capacity: 1 << 30,
            },
        )]);
        let mem = |m| ContainerUsage {
            memory: Some(m),
            ..ContainerUsage::default()
        };
        let usage = PodUsage {
            containers: BTreeMap::from([
                ("hog".to_string(), mem(500 << 20)),
                ("calm".to_string(), mem(10 << 20)),
            ]),
            ..PodUsage::default()
        };
        assert_eq!(
            node_low(Signal::MemoryAvailable, &pod(), Some(&usage), &t, &observed),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. \
             Container hog was using 500Mi, request is 0, has larger consumption of memory. "
        );
        assert_eq!(
            node_low(Signal::MemoryAvailable, &pod(), None, &t, &observed),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "
        );
    }

    #[test]
    fn a_disk_eviction_counts_the_writable_layer_and_logs() {
        let t = [Threshold {
            signal: Signal::NodeFsAvailable,
            limit: Limit::Fraction(0.1),
            grace: SignedDuration::ZERO,
            min_reclaim: None,
        }];
        let observed = BTreeMap::from([(
            Signal::NodeFsAvailable,
            Observed {
                available: 50 << 20,
                capacity: 1 << 30,
            },
        )]);
        let d = |bytes| Some(Disk { bytes, inodes: 1 });
        let usage = PodUsage {
            containers: BTreeMap::from([(
                "hog".to_string(),
                ContainerUsage {
                    memory: None,
                    rootfs: d(1 << 20),
                    logs: d(1 << 20),
                },
            )]),
            ..PodUsage::default()
        };
        assert_eq!(
            node_low(Signal::NodeFsAvailable, &pod(), Some(&usage), &t, &observed),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 107374182, \
             available: 50Mi. Container hog was using 2Mi, request is 0, has larger consumption \
             of ephemeral-storage. "
        );
    }

    #[test]
    fn local_storage_messages_are_upstreams() {
        assert_eq!(
            empty_dir("cache", "1Mi"),
            "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". "
        );
        assert_eq!(
            pod_ephemeral_storage("1Mi"),
            "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. "
        );
        assert_eq!(
            container_ephemeral_storage("x", "1Mi"),
            "Container x exceeded its local ephemeral storage limit \"1Mi\". "
        );
    }
}
