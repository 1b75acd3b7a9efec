//! Container garbage collection, applied: the eviction manager's reclaim of dead containers
//! and the sweep of log directories of pods that are gone (see [`super::plan::containers`]).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::plan::containers::{ObservedContainer, plan_log_dirs, plan_reclaim};
use super::{Freed, GcError, PodView};
use crate::pod::labels;
use crate::runtime::{ContainerId, ContainerInfo, Runtime, TaskState};

/// How often log directories are swept (the kubelet's container GC period).
pub(super) const SWEEP_PERIOD: Duration = Duration::from_secs(60);

fn observed(list: &[ContainerInfo]) -> Vec<ObservedContainer> {
    list.iter()
        .map(|c| ObservedContainer {
            id: c.id.to_string(),
            pod_uid: labels::pod_uid(&c.labels).map(str::to_string),
            name: labels::container_name(&c.labels)
                .unwrap_or_default()
                .to_string(),
            restart_index: labels::restart_index(&c.labels).unwrap_or(0),
            alive: matches!(c.state, TaskState::Running { .. } | TaskState::Created),
        })
        .collect()
}

/// Bytes of a live log and its rotated files.
fn log_bytes(log: &Path) -> u64 {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n == name || n.starts_with(&format!("{name}.")))
        })
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Removes the dead containers [`plan_reclaim`] picks (their logs go with them).
pub(super) async fn delete_dead(runtime: &Runtime, pods: &dyn PodView) -> Result<Freed, GcError> {
    let list = runtime.list().await?;
    let observed = observed(&list);
    // Before the pods are listed, every pod with containers counts as live.
    let live = pods.live_pods().unwrap_or_else(|| {
        observed
            .iter()
            .filter_map(|c| c.pod_uid.clone())
            .collect::<BTreeSet<_>>()
    });
    let mut freed = Freed::default();
    for id in plan_reclaim(&observed, &live) {
        let bytes = list
            .iter()
            .find(|c| c.id.as_str() == id)
            .and_then(|c| c.log_path.as_deref())
            .map_or(0, log_bytes);
        let Ok(id) = ContainerId::new(id) else {
            continue;
        };
        runtime.remove(&id).await?;
        freed.containers += 1;
        freed.bytes += bytes;
    }
    if freed.containers > 0 {
        tracing::info!(
            containers = freed.containers,
            bytes = freed.bytes,
            "removed dead containers"
        );
    }
    Ok(freed)
}

/// Removes the log directories of pods that are gone (nothing before the pods are listed).
pub(super) async fn sweep_log_dirs(
    runtime: &Runtime,
    pods: &dyn PodView,
    log_dir: &Path,
) -> Result<(), GcError> {
    let Some(live) = pods.live_pods() else {
        return Ok(());
    };
    // Containers first: a pod created after this list has its pod in `live` by then.
    let list = runtime.list().await?;
    let live = live
        .union(&pods.live_pods().unwrap_or_default())
        .cloned()
        .collect();
    let names = pod_log_dirs(log_dir)?;
    for dir in plan_log_dirs(names.iter().map(String::as_str), &live, &observed(&list)) {
        let path = log_dir.join(&dir);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                tracing::info!(dir = %path.display(), "removed the log directory of a pod that is gone")
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(GcError::Io { path, source }),
        }
    }
    Ok(())
}

/// The names of the pods' log directories under `log_dir` (none when it is missing).
fn pod_log_dirs(log_dir: &Path) -> Result<Vec<String>, GcError> {
    let entries = match std::fs::read_dir(log_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(GcError::Io {
                path: log_dir.to_path_buf(),
                source,
            });
        }
    };
    Ok(entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect())
}

/// Removes the log directory of pod `uid` (`<log_dir>/<ns>_<pod>_<uid>`), when the pod worker
/// has removed the last of its containers: the deleted pod's logs go at once, not at the next
/// minute's sweep. A missing directory is fine.
pub fn remove_pod_log_dir(log_dir: &Path, uid: &str) -> Result<(), GcError> {
    let suffix = format!("_{uid}");
    for name in pod_log_dirs(log_dir)? {
        if !name.ends_with(&suffix) {
            continue;
        }
        let path = log_dir.join(name);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(GcError::Io { path, source }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_log_directory_goes_and_other_pods_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mine = dir.path().join("default_web_u-1/main");
        let other = dir.path().join("default_web_u-11/main");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(mine.join("0.log"), "x").unwrap();
        remove_pod_log_dir(dir.path(), "u-1").unwrap();
        assert!(!dir.path().join("default_web_u-1").exists());
        assert!(other.exists());
        // Nothing left, or no log directory at all: not an error.
        remove_pod_log_dir(dir.path(), "u-1").unwrap();
        remove_pod_log_dir(&dir.path().join("missing"), "u-1").unwrap();
    }
}
