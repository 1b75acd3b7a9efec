//! This node's share of the local-path provisioner: the local-path directory (made at start,
//! published on the Node), and the clean-up of deleted local-path volumes — every
//! PersistentVolume is listed and watched into a cache, each change queues the volume's name,
//! and one pass per name observes the cached volume, plans ([`cleanup::plan_cleanup`]) and
//! applies: removes the directory, then lifts `storage.berth.io/local-path-cleanup`.

pub mod cleanup;

use berth_api::client::{Client, ClientError, ListParams, ResumingWatch, WatchEvent};
use berth_api::k8s_openapi::api::core::v1::PersistentVolume;
use berth_api::reconcile::{self, Outcome, Queue};
use berth_api::resource::{EVENTS, PERSISTENT_VOLUMES};
use cleanup::Cleanup;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The local-path directory's mode: others may pass through to the volumes (0777, so
/// containers of any user can write them) but not list them.
pub const STORAGE_DIR_MODE: u32 = 0o711;
/// How often every cached volume is looked at again (missed events, failed removals).
const RESYNC: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("refusing to remove {path}: {reason}")]
    Refused { path: PathBuf, reason: String },
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl StorageError {
    pub fn is_transient(&self) -> bool {
        match self {
            StorageError::Io { .. } => true,
            StorageError::Refused { .. } => false,
            StorageError::Client(e) => e.is_transient() || e.is_conflict(),
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
    move |source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Makes the local-path directory (0711) if it is missing; returns its absolute path.
pub fn ensure_storage_dir(dir: &Path) -> Result<PathBuf, StorageError> {
    let dir = std::path::absolute(dir).map_err(io(dir))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(STORAGE_DIR_MODE)
        .create(&dir)
        .map_err(io(&dir))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(STORAGE_DIR_MODE))
        .map_err(io(&dir))?;
    Ok(dir)
}

/// Removes `dir` (a tree; missing is fine) after checking, with symlinks resolved, that its
/// parent is the storage dir or below it: a symlink planted on the way never leads out.
pub fn remove_volume_dir(dir: &Path, storage_dir: &Path) -> Result<(), StorageError> {
    let refuse = |reason: &str| StorageError::Refused {
        path: dir.to_path_buf(),
        reason: reason.to_string(),
    };
    let parent = dir.parent().ok_or_else(|| refuse("it has no parent"))?;
    let real_root = std::fs::canonicalize(storage_dir).map_err(io(storage_dir))?;
    let real_parent = match std::fs::canonicalize(parent) {
        Ok(p) => p,
        // No parent, no directory: nothing to remove.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(parent)(e)),
    };
    if !real_parent.starts_with(&real_root) {
        return Err(refuse(
            "its parent resolves outside the local-path directory",
        ));
    }
    // `remove_dir_all` removes a symlink itself, never what it points to.
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(dir)(e)),
    }
}

/// What the clean-up passes share.
struct Cleaner {
    client: Client,
    node: String,
    storage_dir: PathBuf,
    volumes: Mutex<HashMap<String, PersistentVolume>>,
    /// Volumes (by uid) already reported as refused: one event each, not one per pass.
    refused: Mutex<HashSet<String>>,
    queue: Queue<String>,
}

impl Cleaner {
    fn cached(&self, name: &str) -> Option<PersistentVolume> {
        self.volumes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// One pass for the volume `name`.
    async fn reconcile(&self, name: &str) -> Result<Outcome, StorageError> {
        let Some(pv) = self.cached(name) else {
            return Ok(Outcome::Done);
        };
        match cleanup::plan_cleanup(&pv, &self.node, &self.storage_dir) {
            Cleanup::LeaveAlone => Ok(Outcome::Done),
            Cleanup::Refuse { reason } => {
                let uid = pv.metadata.uid.clone().unwrap_or_default();
                let first = self
                    .refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(uid);
                if first {
                    tracing::warn!(volume = name, %reason, "not cleaning up a local-path volume");
                    self.event(&pv, "VolumeFailedDelete", &reason).await;
                }
                Ok(Outcome::Done)
            }
            Cleanup::RemoveDirectory { dir } => {
                let (d, root) = (dir.clone(), self.storage_dir.clone());
                let removed = tokio::task::spawn_blocking(move || remove_volume_dir(&d, &root))
                    .await
                    .unwrap_or_else(|e| {
                        Err(StorageError::Io {
                            path: dir.clone(),
                            source: std::io::Error::other(e.to_string()),
                        })
                    });
                if let Err(e) = removed {
                    tracing::warn!(volume = name, error = %e, "removing a local-path volume failed");
                    self.event(&pv, "VolumeFailedDelete", &e.to_string()).await;
                    return Err(e);
                }
                tracing::info!(volume = name, dir = %dir.display(), "local-path volume removed");
                let lifted = cleanup::without_finalizer(&pv);
                match self
                    .client
                    .replace::<PersistentVolume>(PERSISTENT_VOLUMES, None, name, &lifted, false)
                    .await
                {
                    Ok(_) => Ok(Outcome::Done),
                    Err(e) if e.is_not_found() => Ok(Outcome::Done),
                    // A newer version is on its way through the watch; its pass lifts it.
                    Err(e) if e.is_conflict() => Ok(Outcome::RequeueAfter(Duration::from_secs(1))),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// A Warning event on the volume (logged on failure, never fatal).
    async fn event(&self, pv: &PersistentVolume, reason: &str, message: &str) {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let event = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": format!("{name}.{:x}", jiff::Timestamp::now().as_nanosecond()),
                         "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "PersistentVolume",
                               "name": name, "uid": pv.metadata.uid},
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": "berth-agent", "host": self.node},
            "reportingComponent": "berth-agent",
            "reportingInstance": self.node,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        if let Err(e) = self
            .client
            .create::<serde_json::Value>(EVENTS, Some("default"), &event)
            .await
        {
            tracing::debug!(error = %e, reason, "recording a volume event failed");
        }
    }

    fn remember(&self, pv: PersistentVolume) {
        if let Some(name) = pv.metadata.name.clone() {
            self.volumes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone(), pv);
            self.queue.add(name);
        }
    }

    fn forget(&self, name: &str) {
        self.volumes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    fn enqueue_all(&self) {
        let names: Vec<String> = self
            .volumes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        names.into_iter().for_each(|n| self.queue.add(n));
    }
}

/// Runs the clean-up of this node's deleted local-path volumes until `shutdown`.
pub async fn run(client: Client, node: String, storage_dir: PathBuf, shutdown: CancellationToken) {
    let cleaner = Arc::new(Cleaner {
        client,
        node,
        storage_dir,
        volumes: Mutex::new(HashMap::new()),
        refused: Mutex::new(HashSet::new()),
        queue: Queue::new(),
    });
    let c = cleaner.clone();
    let passes = tokio::spawn(reconcile::run(
        cleaner.queue.clone(),
        2,
        shutdown.clone(),
        "local-path-cleanup",
        move |name: String| {
            let c = c.clone();
            async move { c.reconcile(&name).await }
        },
    ));
    watch_volumes(&cleaner, &shutdown).await;
    let _ = passes.await;
}

/// Lists and watches every PersistentVolume into the cache, relisting on a broken watch and
/// queueing every volume again each [`RESYNC`].
async fn watch_volumes(c: &Cleaner, shutdown: &CancellationToken) {
    let params = ListParams::default();
    let mut resync = tokio::time::interval(RESYNC);
    while !shutdown.is_cancelled() {
        let list = match c
            .client
            .list::<PersistentVolume>(PERSISTENT_VOLUMES, None, &params)
            .await
        {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "listing PersistentVolumes failed");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => continue,
                    _ = shutdown.cancelled() => return,
                }
            }
        };
        let listed: HashSet<String> = list
            .items
            .iter()
            .filter_map(|v| v.metadata.name.clone())
            .collect();
        c.volumes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|name, _| listed.contains(name));
        list.items.into_iter().for_each(|v| c.remember(v));
        // Resumed from its last resourceVersion when it breaks; relisted only when it cannot be.
        let mut watch = ResumingWatch::<PersistentVolume>::new(
            c.client.clone(),
            PERSISTENT_VOLUMES,
            None,
            params.clone(),
            &list.resource_version,
        );
        loop {
            let next = tokio::select! {
                n = watch.next() => n,
                _ = resync.tick() => { c.enqueue_all(); continue }
                _ = shutdown.cancelled() => return,
            };
            match next {
                Ok(WatchEvent::Added(v) | WatchEvent::Modified(v)) => c.remember(v),
                Ok(WatchEvent::Deleted(v)) => {
                    if let Some(name) = v.metadata.name.as_deref() {
                        c.forget(name);
                    }
                }
                Ok(WatchEvent::Bookmark(_)) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "PersistentVolume watch cannot resume; relisting");
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_storage_dir_is_made_passable_but_not_listable() {
        let root = tempfile::tempdir().unwrap();
        let dir = ensure_storage_dir(&root.path().join("storage")).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, STORAGE_DIR_MODE);
    }

    #[test]
    fn a_volume_directory_is_removed_with_its_contents_and_a_missing_one_is_fine() {
        let root = tempfile::tempdir().unwrap();
        let storage = ensure_storage_dir(&root.path().join("storage")).unwrap();
        let vol = storage.join("pvc-1_default_www");
        std::fs::create_dir_all(vol.join("a/b")).unwrap();
        std::fs::write(vol.join("a/b/file"), b"x").unwrap();
        remove_volume_dir(&vol, &storage).unwrap();
        assert!(!vol.exists());
        remove_volume_dir(&vol, &storage).unwrap();
    }

    #[test]
    fn a_symlink_on_the_way_out_of_the_storage_dir_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let storage = ensure_storage_dir(&root.path().join("storage")).unwrap();
        let outside = root.path().join("precious");
        std::fs::create_dir_all(outside.join("keep")).unwrap();
        std::os::unix::fs::symlink(&outside, storage.join("link")).unwrap();
        let err = remove_volume_dir(&storage.join("link/keep"), &storage).unwrap_err();
        assert!(matches!(err, StorageError::Refused { .. }), "{err}");
        assert!(outside.join("keep").is_dir());
    }

    #[test]
    fn a_symlinked_volume_directory_is_unlinked_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let storage = ensure_storage_dir(&root.path().join("storage")).unwrap();
        let outside = root.path().join("precious");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("file"), b"x").unwrap();
        let link = storage.join("pvc-1");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        // remove_dir_all on a symlink: Rust's std removes the link itself.
        let _ = remove_volume_dir(&link, &storage);
        assert!(outside.join("file").is_file());
    }
}
