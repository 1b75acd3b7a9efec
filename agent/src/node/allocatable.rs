//! Node allocatable as the kubelet computes it: capacity less `--system-reserved`, less
//! `--kube-reserved`, less the hard eviction threshold (memory from `memory.available`,
//! ephemeral storage from `nodefs.available`), never below zero. The `kubepods` cgroup is
//! limited to capacity less the two reservations only (upstream's
//! `--enforce-node-allocatable=pods`: the eviction threshold is the eviction manager's to
//! keep, not the cgroup's).
//!
//! Worked example: 4 CPUs, 8 GiB, `--system-reserved cpu=500m,memory=1Gi`, `--kube-reserved
//! memory=256Mi` and the default `memory.available<100Mi`: allocatable cpu is `3500m`, memory
//! 8192 − 1024 − 256 − 100 = 6812 MiB (`6975488Ki`); the `kubepods` cgroup gets 8192 − 1024 −
//! 256 = 6912 MiB and `cpu.shares` 3500 × 1024 / 1000 = 3584.
//!
//! Planner: pure, no I/O.

use super::pressure::{Limit, Signal, Thresholds};
use berth_api::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use berth_api::scheduling::resources::{milli_value, value};
use std::collections::BTreeMap;

/// Amounts held back from pods, as `--system-reserved` / `--kube-reserved` give them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reserved {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub pid: i64,
}

impl Reserved {
    /// Parses the kubelet's syntax, `cpu=500m,memory=1Gi,ephemeral-storage=1Gi,pid=1000`
    /// (an empty string reserves nothing). Names it does not know and negative amounts are
    /// refused, as the kubelet refuses them.
    pub fn parse(s: &str) -> Result<Reserved, String> {
        let mut r = Reserved::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, amount) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: want name=quantity"))?;
            let (name, amount) = (name.trim(), amount.trim());
            let parsed = match name {
                "cpu" => milli_value(amount),
                _ => value(amount),
            }
            .ok_or_else(|| format!("{name}={amount}: not a quantity"))?;
            if parsed < 0 {
                return Err(format!("{name}={amount}: must not be negative"));
            }
            let slot = match name {
                "cpu" => &mut r.milli_cpu,
                "memory" => &mut r.memory,
                "ephemeral-storage" => &mut r.ephemeral_storage,
                "pid" => &mut r.pid,
                other => {
                    return Err(format!(
                        "{other}: only cpu, memory, ephemeral-storage and pid can be reserved"
                    ));
                }
            };
            *slot = parsed;
        }
        Ok(r)
    }

    fn plus(self, o: Reserved) -> Reserved {
        Reserved {
            milli_cpu: self.milli_cpu.saturating_add(o.milli_cpu),
            memory: self.memory.saturating_add(o.memory),
            ephemeral_storage: self.ephemeral_storage.saturating_add(o.ephemeral_storage),
            pid: self.pid.saturating_add(o.pid),
        }
    }
}

/// What the node holds back: the two reservations and the hard eviction thresholds resolved
/// against the node's capacity (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reservation {
    /// `--system-reserved` plus `--kube-reserved`.
    pub reserved: Reserved,
    /// The `memory.available` hard threshold, in bytes.
    pub eviction_memory: i64,
    /// The `nodefs.available` hard threshold, in bytes.
    pub eviction_ephemeral_storage: i64,
}

/// A threshold in bytes: a quantity as it is, a percentage of `capacity` (upstream's
/// `int64(float64(capacity) * percentage)`).
fn threshold_bytes(limit: Option<&Limit>, capacity: u64) -> i64 {
    match limit {
        None => 0,
        Some(Limit::Quantity(q)) => *q,
        Some(Limit::Fraction(f)) => (capacity as f64 * f) as i64,
    }
}

impl Reservation {
    pub fn new(
        system: Reserved,
        kube: Reserved,
        hard: &Thresholds,
        memory_capacity: u64,
        ephemeral_capacity: u64,
    ) -> Reservation {
        Reservation {
            reserved: system.plus(kube),
            eviction_memory: threshold_bytes(hard.0.get(&Signal::MemoryAvailable), memory_capacity),
            eviction_ephemeral_storage: threshold_bytes(
                hard.0.get(&Signal::NodeFsAvailable),
                ephemeral_capacity,
            ),
        }
    }
}

/// The node's resources in the units the cgroups and the status use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub pods: i64,
}

/// Capacity less the reservations and the hard eviction thresholds, each at least zero.
pub fn allocatable(capacity: Amounts, r: &Reservation) -> Amounts {
    Amounts {
        milli_cpu: (capacity.milli_cpu - r.reserved.milli_cpu).max(0),
        memory: (capacity.memory - r.reserved.memory - r.eviction_memory).max(0),
        ephemeral_storage: (capacity.ephemeral_storage
            - r.reserved.ephemeral_storage
            - r.eviction_ephemeral_storage)
            .max(0),
        pods: capacity.pods,
    }
}

/// What the `kubepods` cgroup is limited to: capacity less the reservations, not the eviction
/// thresholds (upstream's `getNodeAllocatableAbsolute`). `pids` is the node's pid capacity less
/// the reserved pids.
pub fn pods_cgroup_share(capacity: Amounts, pid_capacity: i64, r: &Reservation) -> (Amounts, i64) {
    (
        Amounts {
            milli_cpu: (capacity.milli_cpu - r.reserved.milli_cpu).max(0),
            memory: (capacity.memory - r.reserved.memory).max(0),
            ephemeral_storage: (capacity.ephemeral_storage - r.reserved.ephemeral_storage).max(0),
            pods: capacity.pods,
        },
        (pid_capacity - r.reserved.pid).max(0),
    )
}

/// Bytes as the kubelet prints them: `Ki` when whole kibibytes, plain bytes otherwise.
fn bytes(n: i64) -> Quantity {
    if n % 1024 == 0 {
        Quantity(format!("{}Ki", n / 1024))
    } else {
        Quantity(n.to_string())
    }
}

/// Millicores as the API prints them: whole cores when whole, else `m`.
fn cpu(milli: i64) -> Quantity {
    if milli % 1000 == 0 {
        Quantity((milli / 1000).to_string())
    } else {
        Quantity(format!("{milli}m"))
    }
}

/// The status's `allocatable` list.
pub fn resource_list(a: Amounts) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), cpu(a.milli_cpu)),
        ("memory".to_string(), bytes(a.memory)),
        ("ephemeral-storage".to_string(), bytes(a.ephemeral_storage)),
        ("pods".to_string(), Quantity(a.pods.to_string())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: i64 = 1 << 30;
    const MI: i64 = 1 << 20;

    #[test]
    fn reservations_parse_in_the_kubelets_syntax() {
        let cases: [(&str, Result<Reserved, ()>); 6] = [
            ("", Ok(Reserved::default())),
            (
                "cpu=500m,memory=1Gi",
                Ok(Reserved {
                    milli_cpu: 500,
                    memory: GI,
                    ..Reserved::default()
                }),
            ),
            (
                " ephemeral-storage=2Gi , pid=1000,cpu=1 ",
                Ok(Reserved {
                    milli_cpu: 1000,
                    ephemeral_storage: 2 * GI,
                    pid: 1000,
                    ..Reserved::default()
                }),
            ),
            ("gpu=1", Err(())),
            ("memory", Err(())),
            ("memory=-1Gi", Err(())),
        ];
        for (text, want) in cases {
            assert_eq!(Reserved::parse(text).map_err(|_| ()), want, "{text:?}");
        }
    }

    fn capacity() -> Amounts {
        Amounts {
            milli_cpu: 4000,
            memory: 8 * GI,
            ephemeral_storage: 100 * GI,
            pods: 110,
        }
    }

    #[test]
    fn allocatable_is_capacity_less_reservations_and_hard_eviction() {
        let defaults = Thresholds::parse(super::super::pressure::DEFAULT_EVICTION_HARD).unwrap();
        let none = Thresholds::default();
        let sys = Reserved::parse("cpu=500m,memory=1Gi").unwrap();
        let kube = Reserved::parse("memory=256Mi,ephemeral-storage=1Gi").unwrap();
        let cases = [
            (
                "nothing reserved, no thresholds: capacity",
                Reservation::new(Reserved::default(), Reserved::default(), &none, 0, 0),
                capacity(),
            ),
            (
                "the default thresholds: 100Mi of memory, 10% of the disk",
                Reservation::new(
                    Reserved::default(),
                    Reserved::default(),
                    &defaults,
                    8 << 30,
                    100 << 30,
                ),
                Amounts {
                    memory: 8 * GI - 100 * MI,
                    ephemeral_storage: 90 * GI,
                    ..capacity()
                },
            ),
            (
                "system and kube reservations add up",
                Reservation::new(sys, kube, &defaults, 8 << 30, 100 << 30),
                Amounts {
                    milli_cpu: 3500,
                    memory: 8 * GI - GI - 256 * MI - 100 * MI,
                    ephemeral_storage: 100 * GI - GI - 10 * GI,
                    pods: 110,
                },
            ),
            (
                "never below zero",
                Reservation::new(
                    Reserved::parse("cpu=8,memory=16Gi").unwrap(),
                    Reserved::default(),
                    &none,
                    8 << 30,
                    0,
                ),
                Amounts {
                    milli_cpu: 0,
                    memory: 0,
                    ..capacity()
                },
            ),
        ];
        for (what, reservation, want) in cases {
            assert_eq!(allocatable(capacity(), &reservation), want, "{what}");
        }
    }

    #[test]
    fn the_pods_cgroup_leaves_out_the_eviction_threshold() {
        let defaults = Thresholds::parse(super::super::pressure::DEFAULT_EVICTION_HARD).unwrap();
        let r = Reservation::new(
            Reserved::parse("cpu=500m,memory=1Gi,pid=1000").unwrap(),
            Reserved::default(),
            &defaults,
            8 << 30,
            100 << 30,
        );
        let (share, pids) = pods_cgroup_share(capacity(), 4_194_304, &r);
        assert_eq!(share.memory, 7 * GI);
        assert_eq!(share.milli_cpu, 3500);
        assert_eq!(pids, 4_194_304 - 1000);
    }

    #[test]
    fn the_list_prints_as_the_kubelet_does() {
        let list = resource_list(Amounts {
            milli_cpu: 1500,
            memory: 7 * GI - 100 * MI,
            ephemeral_storage: 1001,
            pods: 110,
        });
        let got: Vec<(&str, &str)> = list
            .iter()
            .map(|(k, v)| (k.as_str(), v.0.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("cpu", "1500m"),
                ("ephemeral-storage", "1001"),
                ("memory", "7237632Ki"),
                ("pods", "110")
            ]
        );
        assert_eq!(resource_list(capacity())["cpu"].0, "4");
    }
}
