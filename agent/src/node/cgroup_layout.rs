//! The kubelet's cgroup layout for pods (`--cgroups-per-qos`), under the agent's cgroup root
//! (`/<containerd namespace>`, so two agents on one host never share a cgroup):
//!
//! ```text
//! <root>/kubepods                      memory = capacity − reserved, cpu.shares of allocatable cpu
//! <root>/kubepods/pod<uid>/<container> Guaranteed pods
//! <root>/kubepods/burstable            cpu.shares = Σ cpu requests of its pods
//! <root>/kubepods/burstable/pod<uid>/<container>
//! <root>/kubepods/besteffort           cpu.shares = 2
//! <root>/kubepods/besteffort/pod<uid>/<container>
//! ```
//!
//! Each pod cgroup gets upstream's `ResourceConfigForPod`: cpu shares of its requests, a cfs
//! quota and a memory limit when every container sets that limit (always for Guaranteed), and
//! `pids.max` from `--pod-max-pids`. The limits render to cgroup v1 files (`memory.limit_in_bytes`,
//! `cpu.shares`, `cpu.cfs_quota_us`, `pids.max`) or v2 ones (`memory.max`, `cpu.weight`,
//! `cpu.max`, `pids.max`), shares converted to weights as runc and the kubelet convert them.
//!
//! Worked example: a Burstable pod asking 250m gets `cpu.shares` 250 × 1024 / 1000 = 256
//! (v2 `cpu.weight` 1 + (256 − 2) × 9999 / 262142 = 10); with a 500m limit, `cpu.cfs_quota_us`
//! 500 × 100000 / 1000 = 50000 per 100000 µs.
//!
//! Planner: pure, no I/O.

use super::allocatable::Amounts;
use crate::pod::qos::QosClass;
use berth_api::k8s_openapi::api::core::v1::{Container, Pod};
use berth_api::scheduling::resources::{milli_value, pod_requests, value};

/// The cgroup all pods live under.
pub const KUBEPODS: &str = "kubepods";
/// Upstream's `MinShares`, what BestEffort gets.
pub const MIN_SHARES: u64 = 2;
const MAX_SHARES: u64 = 262_144;
/// The cfs period the kubelet uses (`--cpu-cfs-quota-period`, 100 ms).
pub const CFS_PERIOD_US: u64 = 100_000;
const MIN_QUOTA_US: i64 = 1000;

/// The limits written to one cgroup; `None` leaves a value as it is (a new cgroup's default:
/// unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupLimits {
    pub memory: Option<i64>,
    pub cpu_shares: Option<u64>,
    /// cfs quota, µs per [`CFS_PERIOD_US`].
    pub cpu_quota: Option<i64>,
    /// `Some(n)`: at most n tasks; `Some(-1)`: unlimited.
    pub pids: Option<i64>,
}

/// The tier directory of a class under `kubepods` (Guaranteed pods sit in `kubepods` itself).
pub fn tier(qos: QosClass) -> Option<&'static str> {
    match qos {
        QosClass::Guaranteed => None,
        QosClass::Burstable => Some("burstable"),
        QosClass::BestEffort => Some("besteffort"),
    }
}

/// A pod's cgroup relative to the agent's root, the parent of its containers' cgroups:
/// `kubepods[/<tier>]/pod<uid>`.
pub fn pod_parent(qos: QosClass, uid: &str) -> String {
    match tier(qos) {
        Some(t) => format!("{KUBEPODS}/{t}/pod{uid}"),
        None => format!("{KUBEPODS}/pod{uid}"),
    }
}

/// Upstream's `MilliCPUToShares`: 1024 shares a core, at least 2, at most 262144.
pub fn milli_cpu_to_shares(milli: i64) -> u64 {
    if milli <= 0 {
        return MIN_SHARES;
    }
    ((milli as u64).saturating_mul(1024) / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// Upstream's `MilliCPUToQuota` over the default period; `None` without a limit.
pub fn milli_cpu_to_quota(milli: i64) -> Option<i64> {
    (milli > 0).then(|| (milli * CFS_PERIOD_US as i64 / 1000).max(MIN_QUOTA_US))
}

/// cgroup v2's `cpu.weight` for v1 shares (`CpuSharesToCpuWeight`): [2, 262144] → [1, 10000].
pub fn shares_to_weight(shares: u64) -> u64 {
    let s = shares.clamp(MIN_SHARES, MAX_SHARES);
    1 + ((s - 2) * 9999) / 262_142
}

/// `kubepods`: capacity less the reservations (see [`super::allocatable::pods_cgroup_share`]).
pub fn kubepods_limits(share: Amounts, pids: i64) -> CgroupLimits {
    CgroupLimits {
        memory: Some(share.memory),
        cpu_shares: Some(milli_cpu_to_shares(share.milli_cpu)),
        cpu_quota: None,
        pids: Some(pids),
    }
}

/// The Burstable tier: shares of the summed cpu requests of its pods.
pub fn burstable_limits(cpu_requests_milli: impl IntoIterator<Item = i64>) -> CgroupLimits {
    CgroupLimits {
        cpu_shares: Some(milli_cpu_to_shares(cpu_requests_milli.into_iter().sum())),
        ..CgroupLimits::default()
    }
}

/// The BestEffort tier: the minimum shares.
pub fn best_effort_limits() -> CgroupLimits {
    CgroupLimits {
        cpu_shares: Some(MIN_SHARES),
        ..CgroupLimits::default()
    }
}

/// A pod's cpu request in millicores, as the Burstable tier sums it (upstream `PodRequests`).
pub fn pod_cpu_request(pod: &Pod) -> i64 {
    pod.spec.as_ref().map_or(0, |s| pod_requests(s).milli_cpu)
}

/// The limit of `resource` a container sets, if it sets one.
fn limit(c: &Container, resource: &str) -> Option<i64> {
    let q = c.resources.as_ref()?.limits.as_ref()?.get(resource)?;
    if resource == "cpu" {
        milli_value(&q.0)
    } else {
        value(&q.0)
    }
}

/// The pod's limit of `resource` (the app containers' sum, or an init container's when larger)
/// if every container sets it.
fn pod_limit(pod: &Pod, resource: &str) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let mut sum = 0i64;
    for c in &spec.containers {
        sum = sum.saturating_add(limit(c, resource)?);
    }
    let mut init_max = 0i64;
    for c in spec.init_containers.iter().flatten() {
        let l = limit(c, resource)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sum = sum.saturating_add(l);
        } else {
            init_max = init_max.max(l);
        }
    }
    let overhead = spec
        .overhead
        .as_ref()
        .and_then(|o| o.get(resource))
        .and_then(|q| {
            if resource == "cpu" {
                milli_value(&q.0)
            } else {
                value(&q.0)
            }
        })
        .unwrap_or(0);
    Some(sum.max(init_max).saturating_add(overhead))
}

/// A pod's cgroup (upstream `ResourceConfigForPod`, cfs quota enforced) with `pod_max_pids`
/// (`-1`: no limit).
pub fn pod_limits(pod: &Pod, qos: QosClass, pod_max_pids: i64) -> CgroupLimits {
    let pids = (pod_max_pids > 0).then_some(pod_max_pids);
    let shares = milli_cpu_to_shares(pod_cpu_request(pod));
    let (cpu_limit, memory_limit) = (pod_limit(pod, "cpu"), pod_limit(pod, "memory"));
    match qos {
        QosClass::BestEffort => CgroupLimits {
            cpu_shares: Some(MIN_SHARES),
            pids,
            ..CgroupLimits::default()
        },
        QosClass::Guaranteed | QosClass::Burstable => CgroupLimits {
            memory: memory_limit,
            cpu_shares: Some(shares),
            cpu_quota: cpu_limit.and_then(milli_cpu_to_quota),
            pids,
        },
    }
}

/// One file of a cgroup v1 hierarchy: (controller, file, value).
pub type V1File = (&'static str, &'static str, String);

/// The limits as cgroup v1 files, by controller.
pub fn v1_files(l: &CgroupLimits) -> Vec<V1File> {
    let mut out = Vec::new();
    if let Some(m) = l.memory {
        out.push(("memory", "memory.limit_in_bytes", m.to_string()));
    }
    if let Some(s) = l.cpu_shares {
        out.push(("cpu", "cpu.shares", s.to_string()));
    }
    if let Some(q) = l.cpu_quota {
        out.push(("cpu", "cpu.cfs_period_us", CFS_PERIOD_US.to_string()));
        out.push(("cpu", "cpu.cfs_quota_us", q.to_string()));
    }
    if let Some(p) = l.pids {
        out.push(("pids", "pids.max", pids_value(p)));
    }
    out
}

/// The limits as cgroup v2 files.
pub fn v2_files(l: &CgroupLimits) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(m) = l.memory {
        out.push(("memory.max", m.to_string()));
    }
    if let Some(s) = l.cpu_shares {
        out.push(("cpu.weight", shares_to_weight(s).to_string()));
    }
    if let Some(q) = l.cpu_quota {
        out.push(("cpu.max", format!("{q} {CFS_PERIOD_US}")));
    }
    if let Some(p) = l.pids {
        out.push(("pids.max", pids_value(p)));
    }
    out
}

fn pids_value(p: i64) -> String {
    if p < 0 {
        "max".to_string()
    } else {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"uid": "u1"}, "spec": {"containers": containers}}),
        )
        .unwrap()
    }

    #[test]
    fn pods_sit_in_their_class_tier() {
        assert_eq!(pod_parent(QosClass::Guaranteed, "u1"), "kubepods/podu1");
        assert_eq!(
            pod_parent(QosClass::Burstable, "u1"),
            "kubepods/burstable/podu1"
        );
        assert_eq!(
            pod_parent(QosClass::BestEffort, "u1"),
            "kubepods/besteffort/podu1"
        );
    }

    #[test]
    fn cpu_converts_as_upstream_does() {
        let shares = [
            (0, 2),
            (1, 2),
            (250, 256),
            (1000, 1024),
            (3500, 3584),
            (1 << 40, 262_144),
        ];
        for (milli, want) in shares {
            assert_eq!(milli_cpu_to_shares(milli), want, "{milli}m");
        }
        let weights = [(2, 1), (256, 10), (1024, 39), (262_144, 10_000)];
        for (s, want) in weights {
            assert_eq!(shares_to_weight(s), want, "{s} shares");
        }
        assert_eq!(milli_cpu_to_quota(500), Some(50_000));
        assert_eq!(milli_cpu_to_quota(1), Some(1000), "the minimum quota");
        assert_eq!(milli_cpu_to_quota(0), None);
    }

    #[test]
    fn pod_cgroups_follow_resource_config_for_pod() {
        let both = json!([{"name": "a", "image": "i", "resources": {
            "requests": {"cpu": "250m", "memory": "64Mi"},
            "limits": {"cpu": "500m", "memory": "128Mi"}}}]);
        let guaranteed = json!([{"name": "a", "image": "i", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "1", "memory": "1Gi"}}}]);
        let one_unlimited = json!([
            {"name": "a", "image": "i", "resources": {"requests": {"cpu": "100m"},
                "limits": {"cpu": "200m", "memory": "64Mi"}}},
            {"name": "b", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]);
        let cases = [
            (
                "burstable with every limit",
                pod(both),
                QosClass::Burstable,
                100,
                CgroupLimits {
                    memory: Some(128 << 20),
                    cpu_shares: Some(256),
                    cpu_quota: Some(50_000),
                    pids: Some(100),
                },
            ),
            (
                "guaranteed",
                pod(guaranteed),
                QosClass::Guaranteed,
                -1,
                CgroupLimits {
                    memory: Some(1 << 30),
                    cpu_shares: Some(1024),
                    cpu_quota: Some(100_000),
                    pids: None,
                },
            ),
            (
                "a container without limits leaves the pod unlimited",
                pod(one_unlimited),
                QosClass::Burstable,
                -1,
                CgroupLimits {
                    cpu_shares: Some(204),
                    ..CgroupLimits::default()
                },
            ),
            (
                "best effort",
                pod(json!([{"name": "a", "image": "i"}])),
                QosClass::BestEffort,
                50,
                CgroupLimits {
                    cpu_shares: Some(2),
                    pids: Some(50),
                    ..CgroupLimits::default()
                },
            ),
        ];
        for (what, p, qos, pids, want) in cases {
            assert_eq!(pod_limits(&p, qos, pids), want, "{what}");
        }
    }

    #[test]
    fn tiers_and_kubepods_take_their_shares() {
        assert_eq!(burstable_limits([]).cpu_shares, Some(2));
        assert_eq!(burstable_limits([250, 750]).cpu_shares, Some(1024));
        assert_eq!(best_effort_limits().cpu_shares, Some(2));
        let share = Amounts {
            milli_cpu: 1500,
            memory: 3 << 30,
            ..Amounts::default()
        };
        assert_eq!(
            kubepods_limits(share, 4000),
            CgroupLimits {
                memory: Some(3 << 30),
                cpu_shares: Some(1536),
                cpu_quota: None,
                pids: Some(4000)
            }
        );
    }

    #[test]
    fn limits_render_for_both_cgroup_versions() {
        let l = CgroupLimits {
            memory: Some(1 << 30),
            cpu_shares: Some(1024),
            cpu_quota: Some(50_000),
            pids: Some(-1),
        };
        let v1 = v1_files(&l);
        let v1: Vec<(&str, &str, &str)> = v1.iter().map(|(c, f, v)| (*c, *f, v.as_str())).collect();
        assert_eq!(
            v1,
            [
                ("memory", "memory.limit_in_bytes", "1073741824"),
                ("cpu", "cpu.shares", "1024"),
                ("cpu", "cpu.cfs_period_us", "100000"),
                ("cpu", "cpu.cfs_quota_us", "50000"),
                ("pids", "pids.max", "max"),
            ]
        );
        let v2 = v2_files(&l);
        let v2: Vec<(&str, &str)> = v2.iter().map(|(f, v)| (*f, v.as_str())).collect();
        assert_eq!(
            v2,
            [
                ("memory.max", "1073741824"),
                ("cpu.weight", "39"),
                ("cpu.max", "50000 100000"),
                ("pids.max", "max"),
            ]
        );
        assert!(v1_files(&CgroupLimits::default()).is_empty());
    }
}
