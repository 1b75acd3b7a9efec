//! Pod volumes on the host: `emptyDir` (a directory, or a tmpfs for `medium: Memory`, shared by
//! the pod's containers), `hostPath` (checked and made as [`super::host_path`] plans: at set-up
//! before the sandbox, and as a bind source when each container is made), `persistentVolumeClaim`
//! (the bound volume's `hostPath` or `local` path, bind-mounted like a hostPath), and
//! `configMap`, `secret`, `downwardAPI` and `projected` volumes written as files (refreshed
//! every pass). Everything but host paths and claims lives under `<root>/pods/<uid>/volumes/`
//! and goes with the pod.

use super::claims::HostKind;
use super::container_config::ResolvedSources;
use super::host_path::{self, Found, PathType, Step};
use berth_shared::k8s_openapi::api::core::v1::{Container, KeyToPath, Pod, Volume};
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
}

impl VolumeError {
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            VolumeError::Io { .. } | VolumeError::Mount { .. } | VolumeError::ClaimNotReady { .. }
        )
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> VolumeError + '_ {
    move |source| VolumeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The pod's directory under the agent's root.
pub fn pod_dir(root: &Path, uid: &str) -> PathBuf {
    root.join("pods").join(uid)
}

fn write_file(path: &Path, data: &[u8], mode: u32) -> Result<(), VolumeError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    // Write beside and rename, so a reader never sees half a file.
    let tmp = path.with_extension("berth-tmp");
    std::fs::write(&tmp, data).map_err(io(&tmp))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
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

/// Writes `data` as files: all keys, or the listed items (key → path, mode).
fn write_keys(
    volume: &str,
    dir: &Path,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&Vec<KeyToPath>>,
    default_mode: u32,
) -> Result<(), VolumeError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    match items {
        Some(items) if !items.is_empty() => {
            for item in items {
                relative(volume, &item.path)?;
                let Some(value) = data.get(&item.key) else {
                    continue;
                };
                let mode = item.mode.map_or(default_mode, |m| m as u32);
                write_file(&dir.join(&item.path), value, mode)?;
            }
        }
        _ => {
            for (k, v) in data {
                write_file(&dir.join(k), v, default_mode)?;
            }
        }
    }
    Ok(())
}

fn downward_value(pod: &Pod, field_path: &str) -> String {
    let m = &pod.metadata;
    let render = |map: Option<&BTreeMap<String, String>>| {
        map.map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}=\"{v}\"\n"))
                .collect::<String>()
        })
        .unwrap_or_default()
    };
    match field_path {
        "metadata.name" => m.name.clone().unwrap_or_default(),
        "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
        "metadata.uid" => m.uid.clone().unwrap_or_default(),
        "metadata.labels" => render(m.labels.as_ref()),
        "metadata.annotations" => render(m.annotations.as_ref()),
        other => {
            let key = |prefix: &str| {
                other
                    .strip_prefix(prefix)?
                    .strip_prefix("['")?
                    .strip_suffix("']")
                    .map(String::from)
            };
            if let Some(k) = key("metadata.labels") {
                m.labels
                    .as_ref()
                    .and_then(|l| l.get(&k))
                    .cloned()
                    .unwrap_or_default()
            } else if let Some(k) = key("metadata.annotations") {
                m.annotations
                    .as_ref()
                    .and_then(|l| l.get(&k))
                    .cloned()
                    .unwrap_or_default()
            } else {
                String::new()
            }
        }
    }
}

fn bytes(map: Option<&BTreeMap<String, String>>) -> BTreeMap<String, Vec<u8>> {
    map.map(|m| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
            .collect()
    })
    .unwrap_or_default()
}

fn is_mountpoint(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|m| {
            let p = path.display().to_string();
            m.lines().any(|l| l.split(' ').nth(4) == Some(p.as_str()))
        })
        .unwrap_or(false)
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
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        if e.medium.as_deref() == Some("Memory") && !is_mountpoint(&dir) {
            let size = e
                .size_limit
                .as_ref()
                .and_then(|q| berth_shared::quantity::Quantity::parse(&q.0).ok())
                .map(|q| q.value());
            let opts = size.map(|s| format!("size={s}"));
            nix::mount::mount(
                Some("tmpfs"),
                &dir,
                Some("tmpfs"),
                nix::mount::MsFlags::empty(),
                opts.as_deref(),
            )
            .map_err(|source| VolumeError::Mount {
                path: dir.clone(),
                source,
            })?;
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).map_err(io(&dir))?;
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
        return Ok(host.path.clone());
    }
    if let Some(cm) = &v.config_map {
        let dir = base.join("configmap").join(&v.name);
        let mode = cm.default_mode.map_or(0o644, |m| m as u32);
        match sources.configmaps.get(&cm.name) {
            Some(data) => {
                let mut all = bytes(Some(data));
                if let Some(b) = sources.configmaps.get(&format!("{}\0binary", cm.name)) {
                    all.extend(bytes(Some(b)));
                }
                write_keys(&v.name, &dir, &all, cm.items.as_ref(), mode)?;
            }
            None if cm.optional.unwrap_or(false) => {
                std::fs::create_dir_all(&dir).map_err(io(&dir))?
            }
            None => return Err(invalid(format!("configmap \"{}\" not found", cm.name))),
        }
        return Ok(dir);
    }
    if let Some(s) = &v.secret {
        let dir = base.join("secret").join(&v.name);
        let name = s.secret_name.clone().unwrap_or_default();
        let mode = s.default_mode.map_or(0o644, |m| m as u32);
        match sources.secrets.get(&name) {
            Some(data) => write_keys(&v.name, &dir, &bytes(Some(data)), s.items.as_ref(), mode)?,
            None if s.optional.unwrap_or(false) => {
                std::fs::create_dir_all(&dir).map_err(io(&dir))?
            }
            None => return Err(invalid(format!("secret \"{name}\" not found"))),
        }
        return Ok(dir);
    }
    if let Some(d) = &v.downward_api {
        let dir = base.join("downward-api").join(&v.name);
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let mode = d.default_mode.map_or(0o644, |m| m as u32);
        for item in d.items.iter().flatten() {
            relative(&v.name, &item.path)?;
            let value = item
                .field_ref
                .as_ref()
                .map(|f| downward_value(pod, &f.field_path))
                .unwrap_or_default();
            write_file(
                &dir.join(&item.path),
                value.as_bytes(),
                item.mode.map_or(mode, |m| m as u32),
            )?;
        }
        return Ok(dir);
    }
    if let Some(p) = &v.projected {
        let dir = base.join("projected").join(&v.name);
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let mode = p.default_mode.map_or(0o644, |m| m as u32);
        for src in p.sources.iter().flatten() {
            if let Some(cm) = &src.config_map {
                if let Some(data) = sources.configmaps.get(&cm.name) {
                    write_keys(&v.name, &dir, &bytes(Some(data)), cm.items.as_ref(), mode)?;
                } else if !cm.optional.unwrap_or(false) {
                    return Err(invalid(format!("configmap \"{}\" not found", cm.name)));
                }
            }
            if let Some(s) = &src.secret {
                if let Some(data) = sources.secrets.get(&s.name) {
                    write_keys(&v.name, &dir, &bytes(Some(data)), s.items.as_ref(), mode)?;
                } else if !s.optional.unwrap_or(false) {
                    return Err(invalid(format!("secret \"{}\" not found", s.name)));
                }
            }
            if let Some(t) = &src.service_account_token {
                relative(&v.name, &t.path)?;
                let need = super::api_access::TokenNeed {
                    audience: t.audience.clone().filter(|a| !a.is_empty()),
                    expiration_seconds: t
                        .expiration_seconds
                        .unwrap_or(super::api_access::DEFAULT_TOKEN_SECONDS),
                };
                let token = sources.tokens.get(&need.key()).ok_or_else(|| {
                    invalid(
                        "failed to fetch token: the service account token is not available yet"
                            .to_string(),
                    )
                })?;
                write_file(&dir.join(&t.path), token.as_bytes(), mode)?;
            }
            if let Some(d) = &src.downward_api {
                for item in d.items.iter().flatten() {
                    relative(&v.name, &item.path)?;
                    let value = item
                        .field_ref
                        .as_ref()
                        .map(|f| downward_value(pod, &f.field_path))
                        .unwrap_or_default();
                    write_file(
                        &dir.join(&item.path),
                        value.as_bytes(),
                        item.mode.map_or(mode, |m| m as u32),
                    )?;
                }
            }
        }
        return Ok(dir);
    }
    Err(invalid("unsupported volume type (Berth supports emptyDir, hostPath, persistentVolumeClaim, configMap, secret, downwardAPI, projected)".to_string()))
}

/// Rewrites a renewed token in every projected volume of `pod` that carries it (the directory
/// is bind-mounted, so the containers see the new file at once).
pub fn renew_token(
    root: &Path,
    pod: &Pod,
    need: &super::api_access::TokenNeed,
    token: &str,
) -> Result<(), VolumeError> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let base = pod_dir(root, &uid).join("volumes").join("projected");
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(p) = &v.projected else { continue };
        let mode = p.default_mode.map_or(0o644, |m| m as u32);
        for t in p
            .sources
            .iter()
            .flatten()
            .filter_map(|s| s.service_account_token.as_ref())
        {
            let same = t.audience.clone().filter(|a| !a.is_empty()) == need.audience
                && t.expiration_seconds
                    .unwrap_or(super::api_access::DEFAULT_TOKEN_SECONDS)
                    == need.expiration_seconds;
            let dir = base.join(&v.name);
            if same && dir.is_dir() {
                relative(&v.name, &t.path)?;
                write_file(&dir.join(&t.path), token.as_bytes(), mode)?;
            }
        }
    }
    Ok(())
}

/// Removes the pod's directory, unmounting memory-backed emptyDirs first.
pub fn remove(root: &Path, uid: &str) -> Result<(), VolumeError> {
    let dir = pod_dir(root, uid);
    let empty = dir.join("volumes").join("empty-dir");
    if let Ok(entries) = std::fs::read_dir(&empty) {
        for e in entries.flatten() {
            if is_mountpoint(&e.path()) {
                nix::mount::umount2(&e.path(), nix::mount::MntFlags::MNT_DETACH).map_err(
                    |source| VolumeError::Mount {
                        path: e.path(),
                        source,
                    },
                )?;
            }
        }
    }
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
            "a=\"b\"\n"
        );
        assert!(path("scratch").is_dir());
        remove(dir.path(), "u1").unwrap();
        assert!(!pod_dir(dir.path(), "u1").exists());
    }

    #[test]
    fn a_missing_configmap_fails_unless_optional() {
        let dir = tempfile::tempdir().unwrap();
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"uid": "u2"}, "spec": {"containers": [],
            "volumes": [{"name": "cfg", "configMap": {"name": "nope"}}]}}))
            .unwrap();
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
