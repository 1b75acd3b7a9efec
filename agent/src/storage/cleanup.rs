//! Planner: pure, no I/O.
//!
//! What to do about one PersistentVolume on this node's side of the local-path provisioner:
//! a deleted volume that still holds `storage.berth.io/local-path-cleanup`, is pinned to this
//! node and keeps its data in a directory strictly inside this agent's local-path dir gets
//! that directory removed and then the finalizer lifted. A volume that would be ours but whose
//! path is anywhere else is refused, never touched: the finalizer stays for an operator.

use berth_api::k8s_openapi::api::core::v1::PersistentVolume;
use berth_api::local_path::LOCAL_PATH_CLEANUP;
use std::path::{Component, Path, PathBuf};

/// The label nodes carry with their name, which local-path volumes are pinned with.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// The plan for one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// Not this agent's business (alive, another node's, someone else's finalizer…).
    LeaveAlone,
    /// Remove `dir` (a whole tree; a missing one is fine), then lift the finalizer.
    RemoveDirectory { dir: PathBuf },
    /// Ours by every other sign, but its path is not one we may remove; say so, keep it.
    Refuse { reason: String },
}

/// Plans the clean-up of `pv` by the agent of `node`, whose local-path dir is `storage_dir`.
pub fn plan_cleanup(pv: &PersistentVolume, node: &str, storage_dir: &Path) -> Cleanup {
    let meta = &pv.metadata;
    let held = meta
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == LOCAL_PATH_CLEANUP);
    if meta.deletion_timestamp.is_none() || !held || !pinned_to(pv, node) {
        return Cleanup::LeaveAlone;
    }
    let Some(path) = pv
        .spec
        .as_ref()
        .and_then(|s| s.host_path.as_ref())
        .map(|h| h.path.as_str())
    else {
        return Cleanup::Refuse {
            reason: "the volume has no hostPath; nothing of it is in the local-path directory"
                .to_string(),
        };
    };
    match inside(Path::new(path), storage_dir) {
        Ok(dir) => Cleanup::RemoveDirectory { dir },
        Err(why) => Cleanup::Refuse {
            reason: format!(
                "refusing to remove {path:?}: {why} (the local-path directory is {})",
                storage_dir.display()
            ),
        },
    }
}

/// Whether every term of the volume's required node affinity pins it to `node` alone
/// (`kubernetes.io/hostname In [node]`), as the provisioner writes it.
fn pinned_to(pv: &PersistentVolume, node: &str) -> bool {
    let terms = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    !terms.is_empty()
        && terms.iter().all(|t| {
            t.match_expressions.iter().flatten().any(|e| {
                e.key == HOSTNAME
                    && e.operator == "In"
                    && e.values.as_deref() == Some(&[node.to_string()][..])
            })
        })
}

/// `path` when it is absolute, has no `..` and lies strictly below `dir` (lexically; the
/// apply step checks the real directories, symlinks resolved, again).
pub fn inside(path: &Path, dir: &Path) -> Result<PathBuf, &'static str> {
    if !path.is_absolute() || !dir.is_absolute() {
        return Err("not an absolute path");
    }
    if path
        .components()
        .chain(dir.components())
        .any(|c| c == Component::ParentDir)
    {
        return Err("it has a `..` component");
    }
    // `components` drops `.` and repeated slashes, so the comparison is of normal forms.
    let path: PathBuf = path.components().collect();
    let dir: PathBuf = dir.components().collect();
    match path.strip_prefix(&dir) {
        Ok(rest) if rest.components().next().is_some() => Ok(path),
        Ok(_) => Err("it is the local-path directory itself"),
        Err(_) => Err("it is outside the local-path directory"),
    }
}

/// The volume without the clean-up finalizer (for a conditional update).
pub fn without_finalizer(pv: &PersistentVolume) -> PersistentVolume {
    let mut pv = pv.clone();
    if let Some(f) = pv.metadata.finalizers.as_mut() {
        f.retain(|f| f != LOCAL_PATH_CLEANUP);
    }
    pv
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DIR: &str = "/var/lib/berth/agent/storage";

    fn pv(node: &str, path: &str, deleted: bool, finalizers: &[&str]) -> PersistentVolume {
        let mut v = json!({
            "metadata": {"name": "pvc-1", "finalizers": finalizers},
            "spec": {
                "hostPath": {"path": path, "type": "DirectoryOrCreate"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
            }
        });
        if deleted {
            v["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        serde_json::from_value(v).unwrap()
    }

    fn plan(v: &PersistentVolume) -> Cleanup {
        plan_cleanup(v, "n1", Path::new(DIR))
    }

    const OURS: &[&str] = &[LOCAL_PATH_CLEANUP, "kubernetes.io/pv-protection"];

    #[test]
    fn a_deleted_volume_of_this_node_inside_the_storage_dir_is_removed() {
        let path = format!("{DIR}/pvc-1_default_www");
        assert_eq!(
            plan(&pv("n1", &path, true, OURS)),
            Cleanup::RemoveDirectory { dir: path.into() }
        );
    }

    #[test]
    fn a_deleted_volume_of_another_node_is_left_alone() {
        let path = format!("{DIR}/pvc-1_default_www");
        assert_eq!(plan(&pv("n2", &path, true, OURS)), Cleanup::LeaveAlone);
    }

    #[test]
    fn a_volume_not_being_deleted_is_left_alone() {
        let path = format!("{DIR}/pvc-1_default_www");
        assert_eq!(plan(&pv("n1", &path, false, OURS)), Cleanup::LeaveAlone);
    }

    #[test]
    fn a_volume_whose_finalizer_is_already_lifted_is_left_alone() {
        let path = format!("{DIR}/pvc-1_default_www");
        let v = pv("n1", &path, true, &["kubernetes.io/pv-protection"]);
        assert_eq!(plan(&v), Cleanup::LeaveAlone);
    }

    #[test]
    fn a_volume_without_node_affinity_is_left_alone() {
        let path = format!("{DIR}/pvc-1_default_www");
        let mut v = pv("n1", &path, true, OURS);
        v.spec.as_mut().unwrap().node_affinity = None;
        assert_eq!(plan(&v), Cleanup::LeaveAlone);
    }

    #[test]
    fn a_volume_pinned_to_this_and_another_node_is_left_alone() {
        let path = format!("{DIR}/pvc-1_default_www");
        let mut v = pv("n1", &path, true, OURS);
        let terms = &mut v.spec.as_mut().unwrap().node_affinity.as_mut().unwrap();
        let expr = &mut terms.required.as_mut().unwrap().node_selector_terms[0]
            .match_expressions
            .as_mut()
            .unwrap()[0];
        expr.values = Some(vec!["n1".into(), "n2".into()]);
        assert_eq!(plan(&v), Cleanup::LeaveAlone);
    }

    #[test]
    fn a_path_outside_the_storage_dir_is_never_removed() {
        for path in [
            "/etc",
            "/",
            "/var/lib/berth/agent",
            "/var/lib/berth/agent/storage-other/pvc-1",
            "/var/lib/berth/agent/storage/../pods",
            "/var/lib/berth/agent/storage/pvc-1/../../x",
            "var/lib/berth/agent/storage/pvc-1",
            DIR,
            "/var/lib/berth/agent/storage/",
            "/var/lib/berth/agent/storage/.",
        ] {
            let got = plan(&pv("n1", path, true, OURS));
            assert!(matches!(got, Cleanup::Refuse { .. }), "{path}: {got:?}");
        }
    }

    #[test]
    fn a_path_is_compared_in_normal_form() {
        let v = pv("n1", "/var/lib/berth/agent//storage/./pvc-1", true, OURS);
        assert_eq!(
            plan(&v),
            Cleanup::RemoveDirectory {
                dir: format!("{DIR}/pvc-1").into()
            }
        );
    }

    #[test]
    fn a_volume_of_another_source_is_refused() {
        let mut v = pv("n1", "/x", true, OURS);
        v.spec.as_mut().unwrap().host_path = None;
        assert!(matches!(plan(&v), Cleanup::Refuse { .. }));
    }

    #[test]
    fn lifting_the_finalizer_keeps_the_others() {
        let v = pv("n1", "/x", true, OURS);
        assert_eq!(
            without_finalizer(&v).metadata.finalizers,
            Some(vec!["kubernetes.io/pv-protection".to_string()])
        );
    }
}
