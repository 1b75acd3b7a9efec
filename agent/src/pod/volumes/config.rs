//! The pod's config volumes on the host: each one's directory (a tmpfs for the in-memory
//! kinds) written by the [`super::atomic_writer`] from its [`super::payload`], at set-up
//! (before anything of the pod starts) and at every refresh; the `fsGroup` applied after
//! each write.

use super::payload::{self, ConfigKind};
use super::{VolumeError, atomic_writer, host_path, io, ownership, pod_dir, prepare_one};
use crate::pod::container_config::ResolvedSources;
use berth_api::k8s_openapi::api::core::v1::Pod;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub(super) fn config_dir(base: &Path, kind: ConfigKind, name: &str) -> PathBuf {
    base.join(kind.dir_name()).join(name)
}

/// Sets up a config volume's directory (a tmpfs for the in-memory kinds; 0777 as the
/// kubelet's wrapped emptyDir) and writes `files` into it atomically.
pub(super) fn write(
    dir: &Path,
    kind: ConfigKind,
    files: &payload::Payload,
    fs_group: Option<u32>,
) -> Result<bool, VolumeError> {
    let fresh = !dir.join(atomic_writer::DATA_DIR).exists();
    // Unit tests (root, on shared machines) keep them on disk: a tmpfs under a temporary
    // directory would outlive it. The integration tests check the mount.
    if kind.in_memory() && !cfg!(test) {
        super::tmpfs::mount(dir, None)?;
    } else {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    if fresh {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).map_err(io(dir))?;
    }
    let written = atomic_writer::write(dir, files, fs_group)?;
    if let Some(g) = fs_group.filter(|_| written || fresh) {
        ownership::apply(dir, g, ownership::ChangePolicy::Always, true)?;
    }
    Ok(written)
}

/// Sets up the pod's config volumes before anything of it starts, as the kubelet's volume
/// manager mounts them; `Err` is the `FailedMount` message of the first that fails (a missing
/// ConfigMap or Secret that is not optional: the pod waits for it).
pub fn set_up_config_volumes(
    root: &Path,
    pod: &Pod,
    sources: &ResolvedSources,
) -> Result<(), String> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let base = pod_dir(root, &uid).join("volumes");
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if ConfigKind::of(v).is_some() {
            prepare_one(&base, pod, v, sources)
                .map_err(|e| host_path::failed_mount_message(&v.name, &config_message(e)))?;
        }
    }
    Ok(())
}

fn config_message(e: VolumeError) -> String {
    match e {
        VolumeError::Invalid { message, .. } => message,
        other => other.to_string(),
    }
}

/// Rewrites the pod's config volumes that are set up, from the latest objects (a changed
/// ConfigMap or Secret, a renewed token, new labels); returns the names of the volumes that
/// changed. A volume whose payload cannot be made now (its object is gone and not optional)
/// keeps its files, as upstream's remount does; the error is returned beside the others.
pub fn refresh_config_volumes(
    root: &Path,
    pod: &Pod,
    sources: &ResolvedSources,
) -> (Vec<String>, Vec<(String, String)>) {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let base = pod_dir(root, &uid).join("volumes");
    let fs = ownership::fs_group(pod).map(|(g, _)| g);
    let (mut changed, mut failed) = (Vec::new(), Vec::new());
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(kind) = ConfigKind::of(v) else {
            continue;
        };
        let dir = config_dir(&base, kind, &v.name);
        if !dir.join(atomic_writer::DATA_DIR).exists() {
            continue;
        }
        let result = payload::plan_payload(pod, v, sources, fs)
            .map(Option::unwrap_or_default)
            .and_then(|files| write(&dir, kind, &files, fs).map_err(|e| e.to_string()));
        match result {
            Ok(true) => changed.push(v.name.clone()),
            Ok(false) => {}
            Err(e) => failed.push((v.name.clone(), e)),
        }
    }
    (changed, failed)
}

/// The names of the pod's config volumes (mounted read-only, as upstream mounts them).
pub fn config_volume_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter(|v| ConfigKind::of(v).is_some())
        .map(|v| v.name.clone())
        .collect()
}

/// Whether any of the pod's config volumes has been written.
pub fn config_volumes_set_up(root: &Path, pod: &Pod) -> bool {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let base = pod_dir(root, &uid).join("volumes");
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| Some(config_dir(&base, ConfigKind::of(v)?, &v.name)))
        .any(|d| d.join(atomic_writer::DATA_DIR).exists())
}
