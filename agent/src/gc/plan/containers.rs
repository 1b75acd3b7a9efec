//! Which dead containers and log directories go, as the kubelet's container GC decides it.
//!
//! The pod worker already keeps a container name's dead attempts to `maxPerPodContainer` (1)
//! on every pass and removes everything of a deleted pod; this planner covers what no worker
//! sees: the eviction manager's reclaim (every dead container, upstream's
//! `DeleteAllUnusedContainers`) and log directories of pods that are gone (upstream's
//! `evictPodLogsDirectories`).
//!
//! One deliberate difference from upstream's reclaim: the latest attempt of a container name
//! of a pod that still exists is kept even when dead. Berth rebuilds a pod's state from
//! containerd (restart count, a finished container's exit), so removing it would make the
//! worker start the container again.
//!
//! Planner: pure, no I/O.

use std::collections::{BTreeMap, BTreeSet};

/// A container as the collector sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedContainer {
    pub id: String,
    /// `None`: not a pod's container (left alone).
    pub pod_uid: Option<String>,
    pub name: String,
    pub restart_index: u32,
    /// Running or created: never removed here.
    pub alive: bool,
}

/// The dead containers to remove to reclaim space: all of pods that are gone, and of the
/// pods in `live_pods` every dead attempt but the latest of each container name.
pub fn plan_reclaim(containers: &[ObservedContainer], live_pods: &BTreeSet<String>) -> Vec<String> {
    let mut latest: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for c in containers {
        if let Some(uid) = c.pod_uid.as_deref() {
            let e = latest
                .entry((uid, c.name.as_str()))
                .or_insert(c.restart_index);
            *e = (*e).max(c.restart_index);
        }
    }
    containers
        .iter()
        .filter(|c| !c.alive)
        .filter_map(|c| {
            let uid = c.pod_uid.as_deref()?;
            let newest = latest.get(&(uid, c.name.as_str())) == Some(&c.restart_index);
            (!live_pods.contains(uid) || !newest).then(|| c.id.clone())
        })
        .collect()
}

/// The pod uid of a log directory named `<namespace>_<name>_<uid>`.
pub fn log_dir_uid(dir_name: &str) -> Option<&str> {
    let (_, uid) = dir_name.rsplit_once('_')?;
    (!uid.is_empty()).then_some(uid)
}

/// The pod log directories (by name) to remove: those of pods neither bound here nor owning a
/// container any more. Directories not named like a pod's are left alone.
pub fn plan_log_dirs<'a>(
    dir_names: impl IntoIterator<Item = &'a str>,
    live_pods: &BTreeSet<String>,
    containers: &[ObservedContainer],
) -> Vec<String> {
    let with_containers: BTreeSet<&str> = containers
        .iter()
        .filter_map(|c| c.pod_uid.as_deref())
        .collect();
    dir_names
        .into_iter()
        .filter(|d| {
            log_dir_uid(d)
                .is_some_and(|uid| !live_pods.contains(uid) && !with_containers.contains(uid))
        })
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, uid: &str, name: &str, restart: u32, alive: bool) -> ObservedContainer {
        ObservedContainer {
            id: id.into(),
            pod_uid: Some(uid.into()),
            name: name.into(),
            restart_index: restart,
            alive,
        }
    }

    #[test]
    fn reclaim_removes_every_dead_container_but_a_live_pods_latest_attempts() {
        let live = BTreeSet::from(["p".to_string()]);
        let containers = vec![
            c("p-app-0", "p", "app", 0, false),
            c("p-app-1", "p", "app", 1, false),
            c("p-app-2", "p", "app", 2, true),
            c("p-side-0", "p", "side", 0, false),
            c("p-init-0", "p", "init", 0, false),
            c("p-init-1", "p", "init", 1, false),
            c("gone-app-0", "gone", "app", 0, false),
            c("gone-app-1", "gone", "app", 1, true),
            ObservedContainer {
                id: "foreign".into(),
                pod_uid: None,
                name: String::new(),
                restart_index: 0,
                alive: false,
            },
        ];
        assert_eq!(
            plan_reclaim(&containers, &live),
            vec!["p-app-0", "p-app-1", "p-init-0", "gone-app-0"]
        );
    }

    #[test]
    fn log_directories_of_pods_that_are_gone_are_swept() {
        let live = BTreeSet::from(["u1".to_string()]);
        let containers = vec![c("x", "u3", "app", 0, false)];
        let dirs = [
            "default_web_u1",
            "default_old_u2",
            "kube-system_dying_u3",
            "not-a-pod-dir",
            "ns_trailing_",
        ];
        assert_eq!(
            plan_log_dirs(dirs, &live, &containers),
            vec!["default_old_u2"]
        );
        assert_eq!(log_dir_uid("a_b_c_d"), Some("d"));
    }
}
