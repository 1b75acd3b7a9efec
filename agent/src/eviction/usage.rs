//! What a pod uses, as the eviction manager ranks and limits pods by it: the memory working set
//! and process count of its cgroup, and its local ephemeral storage — each container's writable
//! layer (rootfs) and logs, and its local volumes (emptyDirs not backed by memory).
//!
//! Planner: pure, no I/O.

use berth_api::k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

/// Bytes and inodes a piece of storage holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Disk {
    pub bytes: i64,
    pub inodes: i64,
}

impl Disk {
    pub fn plus(self, other: Disk) -> Disk {
        Disk {
            bytes: self.bytes.saturating_add(other.bytes),
            inodes: self.inodes.saturating_add(other.inodes),
        }
    }
}

/// One container's usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContainerUsage {
    pub memory: Option<i64>,
    pub rootfs: Option<Disk>,
    pub logs: Option<Disk>,
}

/// One pod's usage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodUsage {
    /// The pod cgroup's working set.
    pub memory: Option<i64>,
    pub processes: Option<i64>,
    pub containers: BTreeMap<String, ContainerUsage>,
    /// Local volumes by name (emptyDirs on disk).
    pub volumes: BTreeMap<String, Disk>,
}

/// Which parts of a pod's storage a disk signal counts (upstream's `fsStatsType`s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    pub rootfs: bool,
    pub logs: bool,
    pub volumes: bool,
}

impl Measure {
    pub const ALL: Measure = Measure {
        rootfs: true,
        logs: true,
        volumes: true,
    };
}

impl PodUsage {
    /// The pod's storage as `measure` counts it.
    pub fn disk(&self, measure: Measure) -> Disk {
        let mut total = Disk::default();
        for c in self.containers.values() {
            if measure.rootfs {
                total = total.plus(c.rootfs.unwrap_or_default());
            }
            if measure.logs {
                total = total.plus(c.logs.unwrap_or_default());
            }
        }
        if measure.volumes {
            for v in self.volumes.values() {
                total = total.plus(*v);
            }
        }
        total
    }
}

/// Usage by pod uid.
pub type Usages = BTreeMap<String, PodUsage>;

/// The pod's uid.
pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// The names of the pod's local ephemeral volumes that count as its storage: emptyDirs not
/// backed by memory (a memory-backed one is memory).
pub fn local_volumes(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter(|v| {
            v.empty_dir
                .as_ref()
                .is_some_and(|e| e.medium.as_deref() != Some("Memory"))
        })
        .map(|v| v.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measure_counts_only_its_parts() {
        let d = |bytes| Disk { bytes, inodes: 1 };
        let u = PodUsage {
            containers: BTreeMap::from([(
                "app".to_string(),
                ContainerUsage {
                    memory: None,
                    rootfs: Some(d(10)),
                    logs: Some(d(100)),
                },
            )]),
            volumes: BTreeMap::from([("cache".to_string(), d(1000))]),
            ..PodUsage::default()
        };
        assert_eq!(
            u.disk(Measure::ALL),
            Disk {
                bytes: 1110,
                inodes: 3
            }
        );
        let nodefs = Measure {
            rootfs: false,
            logs: true,
            volumes: true,
        };
        assert_eq!(u.disk(nodefs).bytes, 1100);
    }
}
