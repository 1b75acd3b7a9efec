//! Reads what the eviction manager judges: the signals (from `/proc` and `statfs`, see
//! [`crate::node::host::signals`]; nodefs is the agent's root dir's filesystem, imagefs the
//! snapshotter's), and each pod's usage — its cgroup's working set and task count, each
//! container's working set, writable layer (the snapshotter's usage of its rootfs snapshot)
//! and log directory, and its emptyDirs on disk (walked as `du` walks them: allocated blocks,
//! one inode per entry). `allocatableMemory.available` is the pods' share of memory (the
//! `kubepods` cgroup's limit, capacity less the reservations) less that cgroup's working set,
//! as upstream observes its `pods` system container.

use super::usage::{ContainerUsage, Disk, PodUsage, Usages, local_volumes, uid};
use super::{Observer, Signals};
use crate::node::pressure::{Observed, Signal};
use crate::pod::labels;
use crate::runtime::{ContainerInfo, Runtime, TaskState, cgroup, spec};
use berth_api::k8s_openapi::api::core::v1::Pod;
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The host observer.
pub struct HostObserver {
    pub root_dir: PathBuf,
    /// The snapshotter's root (`None`: unknown, imagefs is nodefs).
    pub image_dir: Option<PathBuf>,
    pub log_dir: PathBuf,
    pub runtime: Runtime,
    /// The cgroup all pods run under, and the memory it may use (`None`: no such signal).
    pub pods_cgroup: Option<PodsCgroup>,
}

/// The `kubepods` cgroup and its memory limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodsCgroup {
    /// As a container's `linux.cgroupsPath` names it: `/<namespace>/kubepods`.
    pub path: String,
    /// Bytes: the node's memory capacity less `--system-reserved` and `--kube-reserved`.
    pub memory: i64,
}

/// `allocatableMemory.available` from the pods' share of memory and their working set.
pub fn allocatable_memory(share: i64, working_set: u64) -> Observed {
    let used = i64::try_from(working_set).unwrap_or(i64::MAX);
    Observed {
        available: share.saturating_sub(used),
        capacity: share,
    }
}

/// `du`: allocated bytes and entries under `dir` (nothing for a missing one). Does not follow
/// symlinks or cross into other filesystems.
pub fn disk_usage(dir: &Path) -> Disk {
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        return Disk::default();
    };
    let dev = top.dev();
    let mut total = Disk::default();
    let mut stack = vec![(dir.to_path_buf(), top)];
    while let Some((path, meta)) = stack.pop() {
        total = total.plus(Disk {
            bytes: i64::try_from(meta.blocks().saturating_mul(512)).unwrap_or(i64::MAX),
            inodes: 1,
        });
        if !meta.is_dir() || meta.dev() != dev {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Ok(m) = entry.metadata() {
                stack.push((entry.path(), m));
            }
        }
    }
    total
}

fn same_filesystem(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev(),
        _ => true,
    }
}

impl Observer for HostObserver {
    fn signals(&self) -> BoxFuture<'_, Signals> {
        let (root, image) = (self.root_dir.clone(), self.image_dir.clone());
        let pods = self.pods_cgroup.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut observed = crate::node::host::signals(&root, image.as_deref());
                if let Some(pods) = pods
                    && let Some(ws) = cgroup::usage(&pods.path).working_set
                {
                    observed.insert(
                        Signal::AllocatableMemoryAvailable,
                        allocatable_memory(pods.memory, ws),
                    );
                }
                Signals {
                    observed,
                    dedicated_imagefs: image.as_deref().is_some_and(|i| !same_filesystem(&root, i)),
                }
            })
            .await
            .unwrap_or_default()
        })
    }

    fn usage<'a>(&'a self, pods: &'a [Pod]) -> BoxFuture<'a, Usages> {
        Box::pin(async move {
            let infos = self.runtime.list().await.unwrap_or_default();
            let mut rootfs: BTreeMap<String, Disk> = BTreeMap::new();
            for info in latest_per_container(&infos) {
                if let Ok(Some((bytes, inodes))) =
                    self.runtime.snapshot_usage(info.id.as_str()).await
                {
                    rootfs.insert(info.id.as_str().to_string(), Disk { bytes, inodes });
                }
            }
            let namespace = self.runtime.namespace().to_string();
            let (root, logs) = (self.root_dir.clone(), self.log_dir.clone());
            let pods = pods.to_vec();
            tokio::task::spawn_blocking(move || {
                pods.iter()
                    .map(|p| {
                        let u = pod_usage(p, &infos, &rootfs, &namespace, &root, &logs);
                        (uid(p).to_string(), u)
                    })
                    .collect()
            })
            .await
            .unwrap_or_default()
        })
    }
}

/// The newest attempt of each (pod, container) pair.
fn latest_per_container(infos: &[ContainerInfo]) -> Vec<&ContainerInfo> {
    let mut latest: BTreeMap<(String, String), &ContainerInfo> = BTreeMap::new();
    for info in infos {
        let (Some(uid), Some(name)) = (
            labels::pod_uid(&info.labels),
            labels::container_name(&info.labels),
        ) else {
            continue;
        };
        let key = (uid.to_string(), name.to_string());
        if latest
            .get(&key)
            .is_none_or(|l| l.created_at < info.created_at)
        {
            latest.insert(key, info);
        }
    }
    latest.into_values().collect()
}

fn pod_usage(
    pod: &Pod,
    infos: &[ContainerInfo],
    rootfs: &BTreeMap<String, Disk>,
    namespace: &str,
    root_dir: &Path,
    log_dir: &Path,
) -> PodUsage {
    let pod_uid = uid(pod);
    let parent = format!("pod{pod_uid}");
    // Each container records its cgroup at creation (the QoS layout, or the older
    // `/<ns>/pod<uid>/<id>`); the pod's is its parent.
    let cgroup_of = |info: &ContainerInfo| {
        info.labels
            .get(crate::runtime::labels::CGROUP)
            .cloned()
            .unwrap_or_else(|| spec::cgroups_path(namespace, Some(&parent), info.id.as_str()))
    };
    let mut pod_cgroup = spec::cgroups_path(namespace, None, &parent);
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let pod_logs = log_dir.join(format!("{ns}_{name}_{pod_uid}"));
    let mut containers = BTreeMap::new();
    for info in latest_per_container(infos) {
        if labels::pod_uid(&info.labels) != Some(pod_uid) {
            continue;
        }
        let Some(cname) = labels::container_name(&info.labels) else {
            continue;
        };
        let path = cgroup_of(info);
        if let Some((parent_path, _)) = path.rsplit_once('/') {
            pod_cgroup = parent_path.to_string();
        }
        let memory = matches!(info.state, TaskState::Running { .. })
            .then(|| cgroup::usage(&path).working_set)
            .flatten()
            .and_then(|b| i64::try_from(b).ok());
        containers.insert(
            cname.to_string(),
            ContainerUsage {
                memory,
                rootfs: Some(rootfs.get(info.id.as_str()).copied().unwrap_or_default()),
                logs: Some(disk_usage(&pod_logs.join(cname))),
            },
        );
    }
    let volumes_dir = crate::pod::volumes::pod_dir(root_dir, pod_uid)
        .join("volumes")
        .join("empty-dir");
    let volumes = local_volumes(pod)
        .into_iter()
        .map(|v| {
            let d = disk_usage(&volumes_dir.join(&v));
            (v, d)
        })
        .collect();
    let own = cgroup::usage(&pod_cgroup);
    PodUsage {
        memory: own.working_set.and_then(|b| i64::try_from(b).ok()),
        processes: cgroup::pids(&pod_cgroup).and_then(|n| i64::try_from(n).ok()),
        containers,
        volumes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_memory_is_the_pods_share_less_their_working_set() {
        const MI: i64 = 1 << 20;
        assert_eq!(
            allocatable_memory(1536 * MI, 1024 << 20),
            Observed {
                available: 512 * MI,
                capacity: 1536 * MI,
            }
        );
        // Over the share (the cgroup charges page cache first): negative, as upstream's.
        assert_eq!(allocatable_memory(MI, 2 << 20).available, -MI);
    }

    #[test]
    fn disk_usage_counts_allocated_blocks_and_entries() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a"), vec![1u8; 64 * 1024]).unwrap();
        let d = disk_usage(dir.path());
        assert_eq!(d.inodes, 3);
        assert!(d.bytes >= 64 * 1024, "{d:?}");
        assert_eq!(disk_usage(&dir.path().join("missing")), Disk::default());
    }
}
