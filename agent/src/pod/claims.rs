//! Planner: pure, no I/O.
//!
//! A pod's `persistentVolumeClaim` volumes, as the kubelet's volume manager resolves them: the
//! claim (in the pod's namespace) must be Bound to a volume that is bound back to it, and the
//! volume must be one Berth mounts — `hostPath` (a bind mount exactly like a hostPath volume,
//! `DirectoryOrCreate` made on demand) or `local` (which must exist). Until then the pod does
//! not start, with upstream's `FailedMount` message.

use berth_api::k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use std::path::PathBuf;

/// A `persistentVolumeClaim` volume of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    /// The pod's name for the volume.
    pub volume: String,
    pub claim: String,
    /// The volume source's `readOnly`: every mount of it is read-only.
    pub read_only: bool,
}

/// The claim volumes of `pod`, in its order.
pub fn claims_of(pod: &Pod) -> Vec<ClaimRef> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            let c = v.persistent_volume_claim.as_ref()?;
            Some(ClaimRef {
                volume: v.name.clone(),
                claim: c.claim_name.clone(),
                read_only: c.read_only.unwrap_or(false),
            })
        })
        .collect()
}

/// How the host side of a persistent volume is made ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKind {
    /// A `hostPath` volume of this type (`DirectoryOrCreate`, `Directory`, `""` …).
    HostPath(String),
    /// A `local` volume: the path must exist.
    Local,
}

/// Where a claim's data is on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostVolume {
    pub path: PathBuf,
    pub kind: HostKind,
}

/// Why a claim cannot be mounted (yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("persistentvolumeclaim \"{claim}\" not found")]
    ClaimNotFound { claim: String },
    #[error("persistentvolumeclaim \"{claim}\" is not bound")]
    NotBound { claim: String },
    #[error("persistentvolume \"{volume}\" not found")]
    VolumeNotFound { volume: String },
    #[error(
        "the persistentvolume \"{volume}\" is not bound to the persistentvolumeclaim \"{claim}\""
    )]
    BoundElsewhere { claim: String, volume: String },
    #[error(
        "persistentvolume \"{volume}\" has a source Berth cannot mount (Berth mounts hostPath and local volumes)"
    )]
    UnsupportedSource { volume: String },
    #[error("reading {what}: {message}")]
    Lookup { what: String, message: String },
}

impl ClaimError {
    /// Whether waiting may help (a claim being bound, a volume being made); an unsupported
    /// source stays so until the volume is replaced, but the pod waits all the same.
    pub fn is_transient(&self) -> bool {
        !matches!(self, ClaimError::UnsupportedSource { .. })
    }
}

/// The volume a claim is bound to: `spec.volumeName` once `status.phase` is Bound.
pub fn bound_volume(
    claim_name: &str,
    claim: Option<&PersistentVolumeClaim>,
) -> Result<String, ClaimError> {
    let claim_err = || ClaimError::NotBound {
        claim: claim_name.to_string(),
    };
    let Some(claim) = claim else {
        return Err(ClaimError::ClaimNotFound {
            claim: claim_name.to_string(),
        });
    };
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
    let volume = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .filter(|v| !v.is_empty());
    match (phase, volume) {
        (Some("Bound"), Some(v)) => Ok(v),
        _ => Err(claim_err()),
    }
}

/// Where the bound volume's data is, once the volume is bound back to `claim`.
pub fn host_volume(
    claim: &PersistentVolumeClaim,
    volume_name: &str,
    pv: Option<&PersistentVolume>,
) -> Result<HostVolume, ClaimError> {
    let Some(pv) = pv else {
        return Err(ClaimError::VolumeNotFound {
            volume: volume_name.to_string(),
        });
    };
    let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    // A pre-bound volume's reference may lack the uid; name and namespace must always match.
    let bound_back = claim_ref.is_some_and(|r| {
        (r.uid.is_none() || r.uid == claim.metadata.uid)
            && r.name == claim.metadata.name
            && r.namespace == claim.metadata.namespace
    });
    if !bound_back {
        return Err(ClaimError::BoundElsewhere {
            claim: claim.metadata.name.clone().unwrap_or_default(),
            volume: volume_name.to_string(),
        });
    }
    let spec = pv.spec.as_ref();
    if let Some(h) = spec.and_then(|s| s.host_path.as_ref()) {
        return Ok(HostVolume {
            path: PathBuf::from(&h.path),
            kind: HostKind::HostPath(h.type_.clone().unwrap_or_default()),
        });
    }
    if let Some(l) = spec.and_then(|s| s.local.as_ref()) {
        return Ok(HostVolume {
            path: PathBuf::from(&l.path),
            kind: HostKind::Local,
        });
    }
    Err(ClaimError::UnsupportedSource {
        volume: volume_name.to_string(),
    })
}

/// The kubelet's `FailedMount` message for the volumes that are not ready.
pub fn failed_mount_message(volumes: &[String], error: &ClaimError) -> String {
    let list = volumes.join(" ");
    format!(
        "Unable to attach or mount volumes: unmounted volumes=[{list}], unattached volumes=[{list}]: {error}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(phase: &str, volume: Option<&str>) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "www-web-0", "namespace": "default", "uid": "c1"},
            "spec": {"volumeName": volume},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    fn pv(source: serde_json::Value, claim_uid: &str) -> PersistentVolume {
        let mut spec = json!({"claimRef": {"name": "www-web-0", "namespace": "default",
                                           "uid": claim_uid}});
        if let (Some(spec), Some(src)) = (spec.as_object_mut(), source.as_object()) {
            spec.extend(src.clone());
        }
        serde_json::from_value(json!({"metadata": {"name": "pvc-c1"}, "spec": spec})).unwrap()
    }

    #[test]
    fn a_pods_claim_volumes_are_listed_with_their_read_only_flag() {
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [], "volumes": [
            {"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0"}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "ro", "persistentVolumeClaim": {"claimName": "shared", "readOnly": true}}]}}))
        .unwrap();
        let refs = claims_of(&pod);
        assert_eq!(refs.len(), 2);
        assert_eq!(
            (
                refs[0].volume.as_str(),
                refs[0].claim.as_str(),
                refs[0].read_only
            ),
            ("www", "www-web-0", false)
        );
        assert!(refs[1].read_only);
    }

    #[test]
    fn a_claim_is_mountable_only_once_bound() {
        assert_eq!(
            bound_volume("www-web-0", None),
            Err(ClaimError::ClaimNotFound {
                claim: "www-web-0".into()
            })
        );
        let not_bound = Err(ClaimError::NotBound {
            claim: "www-web-0".into(),
        });
        assert_eq!(
            bound_volume("www-web-0", Some(&claim("Pending", None))),
            not_bound
        );
        // The binder sets the volume name before the phase: not bound until both say so.
        assert_eq!(
            bound_volume("www-web-0", Some(&claim("Pending", Some("pvc-c1")))),
            not_bound
        );
        assert_eq!(
            bound_volume("www-web-0", Some(&claim("Bound", Some("pvc-c1")))),
            Ok("pvc-c1".into())
        );
    }

    #[test]
    fn host_path_and_local_volumes_are_mounted_from_their_path() {
        let c = claim("Bound", Some("pvc-c1"));
        let hp = pv(
            json!({"hostPath": {"path": "/s/pvc-c1", "type": "DirectoryOrCreate"}}),
            "c1",
        );
        assert_eq!(
            host_volume(&c, "pvc-c1", Some(&hp)),
            Ok(HostVolume {
                path: "/s/pvc-c1".into(),
                kind: HostKind::HostPath("DirectoryOrCreate".into())
            })
        );
        let local = pv(json!({"local": {"path": "/mnt/disk1"}}), "c1");
        assert_eq!(
            host_volume(&c, "pvc-c1", Some(&local)).map(|h| h.kind),
            Ok(HostKind::Local)
        );
    }

    #[test]
    fn a_volume_of_another_source_or_claim_or_missing_is_not_mounted() {
        let c = claim("Bound", Some("pvc-c1"));
        let nfs = pv(json!({"nfs": {"server": "x", "path": "/"}}), "c1");
        assert!(matches!(
            host_volume(&c, "pvc-c1", Some(&nfs)),
            Err(ClaimError::UnsupportedSource { .. })
        ));
        let other = pv(json!({"hostPath": {"path": "/s"}}), "someone-else");
        assert!(matches!(
            host_volume(&c, "pvc-c1", Some(&other)),
            Err(ClaimError::BoundElsewhere { .. })
        ));
        assert!(matches!(
            host_volume(&c, "pvc-c1", None),
            Err(ClaimError::VolumeNotFound { .. })
        ));
    }

    #[test]
    fn the_failed_mount_message_is_the_kubelets() {
        let e = ClaimError::NotBound {
            claim: "www-web-0".into(),
        };
        assert_eq!(
            failed_mount_message(&["www".into()], &e),
            "Unable to attach or mount volumes: unmounted volumes=[www], unattached volumes=[www]: persistentvolumeclaim \"www-web-0\" is not bound"
        );
    }
}
