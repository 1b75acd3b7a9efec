//! The order pods are evicted in, upstream's: for memory, pods using more than they request
//! first, then lower priority, then the largest use above the request; for disk, the same with
//! local ephemeral storage; for pids, lower priority, then more processes. A pod without stats
//! goes first. Critical pods (priority at least `system-cluster-critical`'s 2000000000, or
//! mirror/static pods) are never evicted.
//!
//! Planner: pure, no I/O.

use super::usage::{Measure, PodUsage, Usages, uid};
use crate::node::pressure::Signal;
use berth_api::k8s_openapi::api::core::v1::Pod;
use berth_api::scheduling::resources::pod_requests;

/// Whether the kubelet refuses to evict the pod: the pod's own rule, written once.
pub use crate::pod::qos::{SYSTEM_CRITICAL_PRIORITY, is_critical};

fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// What a pod requests of memory and of ephemeral storage.
fn requests(pod: &Pod) -> (i64, i64) {
    pod.spec.as_ref().map_or((0, 0), |s| {
        let r = pod_requests(s);
        (r.memory, r.ephemeral_storage)
    })
}

/// The resource a ranking compares: the pod's use, and what it requests of it.
fn use_and_request(signal: Signal, measure: Measure, pod: &Pod, u: &PodUsage) -> (i64, i64) {
    let (memory, storage) = requests(pod);
    match signal {
        Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => {
            (u.memory.unwrap_or(0), memory)
        }
        Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => (u.disk(measure).inodes, 0),
        Signal::PidAvailable => (u.processes.unwrap_or(0), 0),
        Signal::NodeFsAvailable | Signal::ImageFsAvailable => (u.disk(measure).bytes, storage),
    }
}

/// Sorts `pods` into eviction order for `signal`, disk usage counted as `measure` says.
pub fn rank(signal: Signal, measure: Measure, pods: &mut [&Pod], usages: &Usages) {
    let key = |p: &Pod| {
        usages
            .get(uid(p))
            .map(|u| use_and_request(signal, measure, p, u))
    };
    pods.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        // No stats first.
        let (Some((ua, ra)), Some((ub, rb))) = (ka, kb) else {
            return ka.is_some().cmp(&kb.is_some());
        };
        let by_priority = priority(a).cmp(&priority(b));
        if signal == Signal::PidAvailable {
            return by_priority.then(ub.cmp(&ua));
        }
        // Over the request first (true before false).
        (ub > rb)
            .cmp(&(ua > ra))
            .then(by_priority)
            .then((ub - rb).cmp(&(ua - ra)))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::usage::{ContainerUsage, Disk};
    use serde_json::json;
    use std::collections::BTreeMap;

    const MI: i64 = 1 << 20;

    fn pod(name: &str, priority: i32, memory_request: Option<&str>) -> Pod {
        let resources = memory_request
            .map(|m| json!({"requests": {"memory": m}, "limits": {"memory": m}}))
            .unwrap_or(json!({}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": name},
            "spec": {"priority": priority, "containers": [
                {"name": "c", "image": "busybox", "resources": resources}
            ]}
        }))
        .unwrap()
    }

    fn names(pods: &[&Pod]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn memory(m: i64) -> PodUsage {
        PodUsage {
            memory: Some(m),
            processes: Some(m / MI),
            ..PodUsage::default()
        }
    }

    #[test]
    fn memory_ranks_pods_over_their_requests_then_priority_then_use_above_the_request() {
        let besteffort = pod("besteffort", 0, None);
        let guaranteed_over = pod("guaranteed-over", 0, Some("100Mi"));
        let guaranteed = pod("guaranteed", 0, Some("500Mi"));
        let important = pod("important", 1000, None);
        let unknown = pod("unknown", 5000, Some("1Gi"));
        let usages = Usages::from([
            ("besteffort".into(), memory(50 * MI)),
            ("guaranteed-over".into(), memory(300 * MI)),
            ("guaranteed".into(), memory(400 * MI)),
            ("important".into(), memory(900 * MI)),
        ]);
        let mut pods = vec![
            &guaranteed,
            &important,
            &besteffort,
            &guaranteed_over,
            &unknown,
        ];
        rank(Signal::MemoryAvailable, Measure::ALL, &mut pods, &usages);
        assert_eq!(
            names(&pods),
            [
                "unknown",
                "guaranteed-over",
                "besteffort",
                "important",
                "guaranteed"
            ],
            "no stats; over requests at priority 0 by use above the request (200Mi > 50Mi); \
             over at priority 1000; under its request"
        );
    }

    #[test]
    fn disk_ranks_by_local_storage_and_pids_by_priority_then_count() {
        let a = pod("a", 0, None);
        let b = pod("b", 0, None);
        let c = pod("c", 10, None);
        let disk = |bytes| PodUsage {
            volumes: BTreeMap::from([("v".to_string(), Disk { bytes, inodes: 1 })]),
            containers: BTreeMap::from([("c".to_string(), ContainerUsage::default())]),
            processes: Some(bytes),
            ..PodUsage::default()
        };
        let usages = Usages::from([
            ("a".into(), disk(10)),
            ("b".into(), disk(1000)),
            ("c".into(), disk(5000)),
        ]);
        let mut pods = vec![&a, &c, &b];
        rank(Signal::NodeFsAvailable, Measure::ALL, &mut pods, &usages);
        assert_eq!(names(&pods), ["b", "a", "c"]);
        let mut pods = vec![&c, &a, &b];
        rank(Signal::PidAvailable, Measure::ALL, &mut pods, &usages);
        assert_eq!(names(&pods), ["b", "a", "c"]);
    }

    #[test]
    fn system_critical_and_static_pods_are_critical() {
        assert!(is_critical(&pod("x", SYSTEM_CRITICAL_PRIORITY, None)));
        assert!(is_critical(&pod("x", 2_000_001_000, None)));
        assert!(!is_critical(&pod("x", 1_000_000_000, None)));
        let mut mirror = pod("m", 0, None);
        mirror.metadata.annotations = Some(BTreeMap::from([(
            "kubernetes.io/config.mirror".to_string(),
            "abc".to_string(),
        )]));
        assert!(is_critical(&mirror));
    }
}
