//! Pod volumes on the host: `emptyDir` (a directory, or a tmpfs for `medium: Memory`, shared by
//! the pod's containers), `hostPath` (checked and made as [`super::host_path`] plans: at set-up
//! before the sandbox, and as a bind source when each container is made), `persistentVolumeClaim`
//! (the bound volume's `hostPath` or `local` path, bind-mounted like a hostPath), and the config
//! volumes — `configMap`, `secret`, `downwardAPI`, `projected` — whose files ([`payload`]) the
//! [`atomic_writer`] keeps current (secret, projected and downwardAPI ones on a tmpfs, so their
//! values never reach the node's disk). The pod's `fsGroup` is applied as [`ownership`] says.
//! Everything but host paths and claims lives under `<root>/pods/<uid>/volumes/` and goes
//! with the pod, its tmpfs mounts unmounted first.

pub mod atomic_writer;
mod config;
pub mod ownership;
pub mod payload;
mod tmpfs;

pub use config::{
    config_volume_names, config_volumes_set_up, refresh_config_volumes, set_up_config_volumes,
};

use super::claims::HostKind;
use super::container_config::ResolvedSources;
use super::host_path::{self, Found, PathType, Step};
use berth_api::k8s_openapi::api::core::v1::{Container, Pod, Volume};
use payload::ConfigKind;
use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("volume {name:?}: {message}")]
    Invalid { name: String, message: String },
    #[error("mounting a tmpfs at {path}: {source}")]
    Mount { path: PathBuf, source: nix::Error },
    #[error("volume {name:?}: persistentvolumeclaim \"{claim}\" is not bound")]
    ClaimNotReady { name: String, claim: String },
    #[error("unmounting {path}: {source}")]
    Unmount { path: PathBuf, source: nix::Error },
}

impl VolumeError {
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            VolumeError::Io { .. }
                | VolumeError::Mount { .. }
                | VolumeError::Unmount { .. }
                | VolumeError::ClaimNotReady { .. }
        )
    }
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> VolumeError + '_ {
    move |source| VolumeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The pod's directory under the agent's root.
pub fn pod_dir(root: &Path, uid: &str) -> PathBuf {
    root.join("pods").join(uid)
}

fn relative(name: &str, p: &str) -> Result<(), VolumeError> {
    if p.is_empty() || p.starts_with('/') || p.split('/').any(|s| s == "..") {
        return Err(VolumeError::Invalid {
            name: name.to_string(),
            message: format!("invalid path {p:?}"),
        });
    }
    Ok(())
}

/// What is at `path` now, following symlinks.
fn observe_path(path: &Path) -> Found {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Found::Missing;
    };
    let t = meta.file_type();
    if t.is_dir() {
        Found::Directory
    } else if t.is_file() {
        Found::File
    } else if t.is_socket() {
        Found::Socket
    } else if t.is_char_device() {
        Found::CharDevice
    } else if t.is_block_device() {
        Found::BlockDevice
    } else {
        Found::Other
    }
}

/// Carries out `step` at `path`; a directory made here gets `dir_mode` (its missing parents
/// 0755). Something that appeared at the path meanwhile is left as it is, as upstream's
/// `MkdirAll`/`open(O_CREAT)` leave it.
fn apply_step(path: &Path, step: Step, dir_mode: u32) -> Result<(), VolumeError> {
    match step {
        Step::Use => Ok(()),
        Step::MakeDirectory => {
            match std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(path)
            {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
                Err(e) => return Err(io(path)(e)),
            }
            // The mode is the one asked for whatever the agent's umask.
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(dir_mode))
                .map_err(io(path))
        }
        Step::MakeFile => std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o644)
            .open(path)
            .map(drop)
            .map_err(io(path)),
    }
}

/// The kubelet's set-up of one hostPath of type `type_` (a directory made here gets
/// `dir_mode`); `Err` is the check's message or the I/O error.
fn set_up_host_path(path: &Path, type_: &str, dir_mode: u32) -> Result<(), String> {
    let t = PathType::parse(type_)?;
    let step = host_path::plan_set_up(&path.display().to_string(), t, observe_path(path))?;
    apply_step(path, step, dir_mode).map_err(|e| e.to_string())
}

/// Sets up the pod's typed `hostPath` volumes as the kubelet's volume manager does before the
/// sandbox is made (checking each one's type, making the *OrCreate ones); `Err` is the
/// `FailedMount` message of the first that fails.
pub fn set_up_host_paths(pod: &Pod) -> Result<(), String> {
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(h) = &v.host_path else { continue };
        set_up_host_path(Path::new(&h.path), h.type_.as_deref().unwrap_or(""), 0o755)
            .map_err(|e| host_path::failed_mount_message(&v.name, &e))?;
    }
    Ok(())
}

/// A host path as a container's bind mount source: set up as its type says (again: it may have
/// changed since the pod's set-up), then made a directory if still missing, as containerd's CRI
/// does for every bind mount. A directory made here gets `dir_mode`.
fn prepare_host_path(
    name: &str,
    path: &Path,
    type_: &str,
    dir_mode: u32,
) -> Result<(), VolumeError> {
    set_up_host_path(path, type_, dir_mode).map_err(|message| VolumeError::Invalid {
        name: name.to_string(),
        message,
    })?;
    apply_step(path, host_path::plan_bind_source(observe_path(path)), 0o755)
}

/// Makes the `subPath` directories the container's mounts name inside their volumes (with the
/// volume's mode, as the kubelet does), refusing one that leads out of its volume through a
/// symlink the pod wrote.
pub fn prepare_sub_paths(
    c: &Container,
    volumes: &BTreeMap<String, Option<PathBuf>>,
) -> Result<(), VolumeError> {
    for m in c.volume_mounts.iter().flatten() {
        let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) else {
            continue;
        };
        let Some(Some(dir)) = volumes.get(&m.name) else {
            continue;
        };
        relative(&m.name, sub)?;
        if !dir.is_dir() {
            continue;
        }
        let path = dir.join(sub);
        if !path.exists() {
            let mode = std::fs::metadata(dir)
                .map_err(io(dir))?
                .permissions()
                .mode()
                & 0o7777;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(&path)
                .map_err(io(&path))?;
        }
        let real_dir = std::fs::canonicalize(dir).map_err(io(dir))?;
        let real = std::fs::canonicalize(&path).map_err(io(&path))?;
        if !real.starts_with(&real_dir) {
            return Err(VolumeError::Invalid {
                name: m.name.clone(),
                message: format!("subPath {sub:?} leads outside the volume"),
            });
        }
    }
    Ok(())
}

/// Prepares every volume of the pod; returns volume name → host path.
pub fn prepare(
    root: &Path,
    pod: &Pod,
    sources: &ResolvedSources,
) -> Result<BTreeMap<String, Option<PathBuf>>, VolumeError> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let base = pod_dir(root, &uid).join("volumes");
    let mut out = BTreeMap::new();
    for v in pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
    {
        out.insert(v.name.clone(), Some(prepare_one(&base, pod, v, sources)?));
    }
    Ok(out)
}

fn prepare_one(
    base: &Path,
    pod: &Pod,
    v: &Volume,
    sources: &ResolvedSources,
) -> Result<PathBuf, VolumeError> {
    let invalid = |message: String| VolumeError::Invalid {
        name: v.name.clone(),
        message,
    };
    if let Some(e) = &v.empty_dir {
        let dir = base.join("empty-dir").join(&v.name);
        if e.medium.as_deref() == Some("Memory") {
            let size = e
                .size_limit
                .as_ref()
                .and_then(|q| berth_api::quantity::Quantity::parse(&q.0).ok())
                .and_then(|q| u64::try_from(q.value()).ok());
            tmpfs::mount(&dir, size)?;
        } else {
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        }
        if !fs_group_applied(base, &v.name) {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
                .map_err(io(&dir))?;
        }
        apply_fs_group_once(base, pod, &v.name, &dir)?;
        return Ok(dir);
    }
    if let Some(h) = &v.host_path {
        let path = PathBuf::from(&h.path);
        prepare_host_path(&v.name, &path, h.type_.as_deref().unwrap_or(""), 0o755)?;
        return Ok(path);
    }
    if let Some(c) = &v.persistent_volume_claim {
        let Some(host) = sources.claims.get(&v.name) else {
            return Err(VolumeError::ClaimNotReady {
                name: v.name.clone(),
                claim: c.claim_name.clone(),
            });
        };
        match &host.kind {
            // Upstream local-path makes volume directories 0777, so containers of any user
            // may write them.
            HostKind::HostPath(t) => prepare_host_path(&v.name, &host.path, t, 0o777)?,
            HostKind::Local if !host.path.exists() => {
                return Err(invalid(format!(
                    "the local volume's path {} does not exist",
                    host.path.display()
                )));
            }
            HostKind::Local => {}
        }
        // Upstream applies fsGroup to local volumes (and local-path's hostPath ones), never
        // to a pod's own hostPath volumes.
        if host.path.is_dir() && !c.read_only.unwrap_or(false) {
            apply_fs_group_once(base, pod, &v.name, &host.path)?;
        }
        return Ok(host.path.clone());
    }
    if let Some(kind) = ConfigKind::of(v) {
        let fs = ownership::fs_group(pod).map(|(g, _)| g);
        let dir = config::config_dir(base, kind, &v.name);
        let files = match payload::plan_payload(pod, v, sources, fs) {
            Ok(files) => files.unwrap_or_default(),
            // Set up once, a volume keeps its files when its object goes (upstream's remount
            // fails, the mount stays): a container restart is not held back for it.
            Err(e) if dir.join(atomic_writer::DATA_DIR).exists() => {
                tracing::warn!(volume = %v.name, error = %e, "config volume keeps its files");
                return Ok(dir);
            }
            Err(e) => return Err(invalid(e)),
        };
        config::write(&dir, kind, &files, fs)?;
        return Ok(dir);
    }
    Err(invalid("unsupported volume type (Berth supports emptyDir, hostPath, persistentVolumeClaim, configMap, secret, downwardAPI, projected)".to_string()))
}

/// The marker that the pod's `fsGroup` was applied to volume `name` (once per pod, as the
/// kubelet applies it when it mounts the volume, not at every container start).
fn fs_group_marker(base: &Path, name: &str) -> PathBuf {
    base.join(".fs-group").join(name)
}

fn fs_group_applied(base: &Path, name: &str) -> bool {
    fs_group_marker(base, name).exists()
}

fn apply_fs_group_once(base: &Path, pod: &Pod, name: &str, dir: &Path) -> Result<(), VolumeError> {
    let Some((gid, policy)) = ownership::fs_group(pod) else {
        return Ok(());
    };
    if fs_group_applied(base, name) {
        return Ok(());
    }
    ownership::apply(dir, gid, policy, false)?;
    let marker = fs_group_marker(base, name);
    if let Some(parent) = marker.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    std::fs::write(&marker, b"").map_err(io(&marker))
}

/// Removes the pod's directory, unmounting its tmpfs volumes first (memory-backed emptyDirs
/// and the secret, projected and downwardAPI volumes).
pub fn remove(root: &Path, uid: &str) -> Result<(), VolumeError> {
    let dir = pod_dir(root, uid);
    if !dir.exists() {
        // Removed already (a pod's clean-up runs again when its deletion is seen): nothing
        // can be mounted under a directory that is not there, so the mount table, hundreds of
        // lines on a busy node, is not read.
        return Ok(());
    }
    tmpfs::unmount_all_under(&dir)?;
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(&dir)(e)),
    }
}

/// Frees the pod's emptyDirs (unmounting memory-backed ones), as the kubelet frees the volumes
/// of an evicted pod before the pod object goes; the rest of the pod's directory stays.
pub fn remove_empty_dirs(root: &Path, uid: &str) -> Result<(), VolumeError> {
    let dir = pod_dir(root, uid).join("volumes").join("empty-dir");
    tmpfs::unmount_all_under(&dir)?;
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(&dir)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pods_directory_removed_again_is_already_gone() {
        let root = tempfile::tempdir().unwrap();
        let dir = pod_dir(root.path(), "u1");
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        remove(root.path(), "u1").unwrap();
        assert!(!dir.exists());
        remove(root.path(), "u1").unwrap();
    }

    #[test]
    fn config_maps_secrets_and_downward_api_become_files() {
        let dir = tempfile::tempdir().unwrap();
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u1", "labels": {"a": "b"}},
            "spec": {"containers": [], "volumes": [
                {"name": "cfg", "configMap": {"name": "cm", "items": [{"key": "k", "path": "sub/file"}]}},
                {"name": "sec", "secret": {"secretName": "s", "defaultMode": 256}},
                {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                {"name": "scratch", "emptyDir": {}}]}})).unwrap();
        let mut sources = ResolvedSources::default();
        sources
            .configmaps
            .insert("cm".into(), [("k".to_string(), "v".to_string())].into());
        sources
            .secrets
            .insert("s".into(), [("pw".to_string(), "x".to_string())].into());
        let vols = prepare(dir.path(), &pod, &sources).unwrap();
        let path = |n: &str| vols[n].clone().unwrap();
        assert_eq!(
            std::fs::read_to_string(path("cfg").join("sub/file")).unwrap(),
            "v"
        );
        let sec = path("sec").join("pw");
        assert_eq!(std::fs::read_to_string(&sec).unwrap(), "x");
        assert_eq!(
            std::fs::metadata(&sec).unwrap().permissions().mode() & 0o777,
            0o400
        );
        assert_eq!(
            std::fs::read_to_string(path("info").join("labels")).unwrap(),
            "a=\"b\""
        );
        assert!(path("scratch").is_dir());
        // Written by the atomic writer: the names are links through `..data`.
        assert!(path("cfg").join(atomic_writer::DATA_DIR).is_dir());
        assert!(std::fs::read_link(path("cfg").join("sub")).is_ok());
        remove(dir.path(), "u1").unwrap();
        assert!(!pod_dir(dir.path(), "u1").exists());
    }

    /// Pod `uid` with one volume, `cfg`, of ConfigMap `name`.
    fn config_map_pod(uid: &str, name: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"uid": uid}, "spec": {"containers": [],
            "volumes": [{"name": "cfg", "configMap": {"name": name}}]}}))
        .unwrap()
    }

    #[test]
    fn a_missing_config_map_makes_the_pod_wait_with_upstreams_message() {
        let dir = tempfile::tempdir().unwrap();
        let pod = config_map_pod("u5", "nope");
        assert_eq!(
            set_up_config_volumes(dir.path(), &pod, &ResolvedSources::default()).unwrap_err(),
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"nope\" not found"
        );
    }

    #[test]
    fn a_config_map_gone_after_set_up_leaves_the_volume_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let pod = config_map_pod("u6", "cm");
        let mut sources = ResolvedSources::default();
        sources
            .configmaps
            .insert("cm".into(), [("k".to_string(), "v".to_string())].into());
        set_up_config_volumes(dir.path(), &pod, &sources).unwrap();
        let vols = prepare(dir.path(), &pod, &ResolvedSources::default()).unwrap();
        let file = vols["cfg"].clone().unwrap().join("k");
        assert_eq!(std::fs::read_to_string(file).unwrap(), "v");
    }

    #[test]
    fn a_missing_configmap_fails_unless_optional() {
        let dir = tempfile::tempdir().unwrap();
        let pod = config_map_pod("u2", "nope");
        assert!(prepare(dir.path(), &pod, &ResolvedSources::default()).is_err());
    }
}

#[cfg(test)]
mod host_path_tests {
    use super::*;
    use serde_json::json;

    fn pod_with(volumes: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"uid": "u4"},
            "spec": {"containers": [], "volumes": volumes}}))
        .unwrap()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn an_untyped_missing_host_path_becomes_a_directory_when_the_container_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("var/lib/docker/containers");
        let pod = pod_with(json!([{"name": "d", "hostPath": {"path": path}}]));
        set_up_host_paths(&pod).unwrap();
        assert!(!path.exists(), "an untyped path is not touched at set-up");
        let vols = prepare(dir.path(), &pod, &ResolvedSources::default()).unwrap();
        assert_eq!(vols["d"], Some(path.clone()));
        assert!(path.is_dir());
        assert_eq!(mode(&path), 0o755);
        assert_eq!(mode(path.parent().unwrap()), 0o755);
    }

    #[test]
    fn or_create_types_make_a_directory_or_an_empty_file_at_set_up() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("a/b");
        let f = dir.path().join("log.txt");
        let pod = pod_with(json!([
            {"name": "d", "hostPath": {"path": d, "type": "DirectoryOrCreate"}},
            {"name": "f", "hostPath": {"path": f, "type": "FileOrCreate"}}]));
        set_up_host_paths(&pod).unwrap();
        assert!(d.is_dir());
        assert_eq!(mode(&d), 0o755);
        assert_eq!(std::fs::read(&f).unwrap(), b"");
        assert_eq!(mode(&f), 0o644);
        // Again: what is there is kept.
        std::fs::write(&f, b"kept").unwrap();
        set_up_host_paths(&pod).unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"kept");
    }

    #[test]
    fn file_or_create_needs_its_parent_as_upstreams_open_does() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("no-such-dir/file");
        let pod = pod_with(json!([{"name": "f", "hostPath": {"path": f, "type": "FileOrCreate"}}]));
        let err = set_up_host_paths(&pod).unwrap_err();
        assert!(
            err.starts_with("MountVolume.SetUp failed for volume \"f\" : "),
            "{err}"
        );
        assert!(err.contains("No such file or directory"), "{err}");
        assert!(!f.parent().unwrap().exists());
    }

    #[test]
    fn typed_checks_fail_with_upstreams_message() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let cases = [
            (&file, "Directory", "is not a directory"),
            (&file, "Socket", "is not a socket file"),
            (&file, "CharDevice", "is not a character device"),
            (&file, "BlockDevice", "is not a block device"),
            (&sock, "Directory", "is not a directory"),
        ];
        for (path, t, tail) in cases {
            let pod = pod_with(json!([{"name": "v", "hostPath": {"path": path, "type": t}}]));
            let err = set_up_host_paths(&pod).unwrap_err();
            let want = format!(
                "MountVolume.SetUp failed for volume \"v\" : hostPath type check failed: {} {tail}",
                path.display()
            );
            assert_eq!(err, want, "{t}");
        }
        for (path, t) in [
            (&sock, "Socket"),
            (&sock, "File"),
            (&file, "File"),
            (&PathBuf::from("/dev/null"), "CharDevice"),
        ] {
            let pod = pod_with(json!([{"name": "v", "hostPath": {"path": path, "type": t}}]));
            set_up_host_paths(&pod).unwrap_or_else(|e| panic!("{t}: {e}"));
        }
        let missing = dir.path().join("missing");
        let pod = pod_with(json!([{"name": "v", "hostPath": {"path": missing, "type": "File"}}]));
        assert!(
            set_up_host_paths(&pod)
                .unwrap_err()
                .ends_with("is not a file")
        );
        assert!(!missing.exists());
    }
}

#[cfg(test)]
mod claim_tests {
    use super::*;
    use crate::pod::claims::HostVolume;
    use serde_json::json;

    fn pod_with_claim() -> Pod {
        serde_json::from_value(json!({"metadata": {"uid": "u3"}, "spec": {"containers": [],
            "volumes": [{"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0"}}]}}))
        .unwrap()
    }

    fn sources(path: &Path, kind: HostKind) -> ResolvedSources {
        let mut s = ResolvedSources::default();
        s.claims.insert(
            "www".into(),
            HostVolume {
                path: path.to_path_buf(),
                kind,
            },
        );
        s
    }

    #[test]
    fn a_bound_local_path_claim_is_its_directory_made_writable_for_all() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("storage/pvc-1_default_www-web-0");
        let s = sources(&vol, HostKind::HostPath("DirectoryOrCreate".into()));
        let vols = prepare(dir.path(), &pod_with_claim(), &s).unwrap();
        assert_eq!(vols["www"], Some(vol.clone()));
        let mode = std::fs::metadata(&vol).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o777);
        std::fs::write(vol.join("kept"), b"x").unwrap();
        remove(dir.path(), "u3").unwrap();
        assert!(
            vol.join("kept").is_file(),
            "a claim's data outlives the pod"
        );
    }

    #[test]
    fn a_claim_not_resolved_or_a_missing_local_path_fails_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let err = prepare(dir.path(), &pod_with_claim(), &ResolvedSources::default()).unwrap_err();
        assert!(err.is_transient(), "{err}");
        let s = sources(&dir.path().join("no-disk"), HostKind::Local);
        assert!(prepare(dir.path(), &pod_with_claim(), &s).is_err());
    }

    #[test]
    fn sub_paths_are_made_inside_the_volume_and_never_lead_out() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("vol");
        std::fs::create_dir_all(&vol).unwrap();
        std::fs::set_permissions(&vol, std::fs::Permissions::from_mode(0o777)).unwrap();
        let vols = BTreeMap::from([("www".to_string(), Some(vol.clone()))]);
        let c: Container = serde_json::from_value(json!({"name": "c",
            "volumeMounts": [{"name": "www", "mountPath": "/d", "subPath": "site/html"}]}))
        .unwrap();
        prepare_sub_paths(&c, &vols).unwrap();
        assert!(vol.join("site/html").is_dir());
        std::os::unix::fs::symlink("/etc", vol.join("evil")).unwrap();
        let c: Container = serde_json::from_value(json!({"name": "c",
            "volumeMounts": [{"name": "www", "mountPath": "/d", "subPath": "evil"}]}))
        .unwrap();
        assert!(prepare_sub_paths(&c, &vols).is_err());
        let c: Container = serde_json::from_value(json!({"name": "c",
            "volumeMounts": [{"name": "www", "mountPath": "/d", "subPath": "../x"}]}))
        .unwrap();
        assert!(prepare_sub_paths(&c, &vols).is_err());
    }
}
