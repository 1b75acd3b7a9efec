//! The restricted level's checks of the Pod Security Standards (on top of baseline's), with
//! upstream's reasons and details.
//! Planner: pure, no I/O.

use super::checks::{
    Check, Since, Violation, containers, containers_phrase, is_windows, join_quote, pluralize,
    setters, volumes_phrase,
};
use super::level::Level;
use super::profiles::{bad_seccomp, seccomp_type_violation};
use k8s_openapi::api::core::v1::{PodSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeSet;

pub(super) const ALLOW_PRIVILEGE_ESCALATION: Check = Check {
    id: "allowPrivilegeEscalation",
    level: Level::Restricted,
    versions: &[
        Since {
            since: 8,
            check: allow_privilege_escalation,
            overrides: &[],
        },
        Since {
            since: 25,
            check: allow_privilege_escalation_1_25,
            overrides: &[],
        },
    ],
};
pub(super) const CAPABILITIES: Check = Check {
    id: "capabilities_restricted",
    level: Level::Restricted,
    versions: &[
        Since {
            since: 22,
            check: capabilities,
            overrides: &["capabilities_baseline"],
        },
        Since {
            since: 25,
            check: capabilities_1_25,
            overrides: &["capabilities_baseline"],
        },
    ],
};
pub(super) const VOLUMES: Check = Check {
    id: "restrictedVolumes",
    level: Level::Restricted,
    versions: &[Since {
        since: 0,
        check: volumes,
        overrides: &["hostPathVolumes"],
    }],
};
pub(super) const RUN_AS_NON_ROOT: Check = Check {
    id: "runAsNonRoot",
    level: Level::Restricted,
    versions: &[Since {
        since: 0,
        check: run_as_non_root,
        overrides: &[],
    }],
};
pub(super) const RUN_AS_USER: Check = Check {
    id: "runAsUser",
    level: Level::Restricted,
    versions: &[Since {
        since: 23,
        check: run_as_user,
        overrides: &[],
    }],
};
pub(super) const SECCOMP: Check = Check {
    id: "seccompProfile_restricted",
    level: Level::Restricted,
    versions: &[
        Since {
            since: 19,
            check: seccomp,
            overrides: &["seccompProfile_baseline"],
        },
        Since {
            since: 25,
            check: seccomp_1_25,
            overrides: &["seccompProfile_baseline"],
        },
    ],
};

fn allow_privilege_escalation(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let names: Vec<&str> = containers(spec)
        .iter()
        .filter(|c| {
            c.security_context
                .and_then(|s| s.allow_privilege_escalation)
                != Some(false)
        })
        .map(|c| c.name)
        .collect();
    Violation::for_containers("allowPrivilegeEscalation != false", &names, || {
        "must set securityContext.allowPrivilegeEscalation=false".to_string()
    })
}

/// From 1.25 Windows pods pass the Linux-only checks.
fn allow_privilege_escalation_1_25(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    if is_windows(spec) {
        return None;
    }
    allow_privilege_escalation(meta, spec)
}

fn capabilities(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut missing_drop_all = Vec::new();
    let mut adding = Vec::new();
    let mut forbidden = BTreeSet::new();
    for c in containers(spec) {
        let Some(caps) = c.security_context.and_then(|s| s.capabilities.as_ref()) else {
            missing_drop_all.push(c.name);
            continue;
        };
        if !caps.drop.iter().flatten().any(|d| d == "ALL") {
            missing_drop_all.push(c.name);
        }
        let mut bad = false;
        for a in caps.add.iter().flatten() {
            if a != "NET_BIND_SERVICE" {
                forbidden.insert(a.clone());
                bad = true;
            }
        }
        if bad {
            adding.push(c.name);
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&forbidden)
        ));
    }
    (!details.is_empty()).then(|| Violation::new("unrestricted capabilities", details.join("; ")))
}

fn capabilities_1_25(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    if is_windows(spec) {
        return None;
    }
    capabilities(meta, spec)
}

/// The inline volume sources restricted allows; `None` when `v` is one.
fn restricted_type(v: &Volume) -> Option<&'static str> {
    let allowed = v.config_map.is_some()
        || v.csi.is_some()
        || v.downward_api.is_some()
        || v.empty_dir.is_some()
        || v.ephemeral.is_some()
        || v.image.is_some()
        || v.persistent_volume_claim.is_some()
        || v.projected.is_some()
        || v.secret.is_some();
    if allowed {
        return None;
    }
    let named = [
        (v.host_path.is_some(), "hostPath"),
        (v.gce_persistent_disk.is_some(), "gcePersistentDisk"),
        (v.aws_elastic_block_store.is_some(), "awsElasticBlockStore"),
        (v.git_repo.is_some(), "gitRepo"),
        (v.nfs.is_some(), "nfs"),
        (v.iscsi.is_some(), "iscsi"),
        (v.glusterfs.is_some(), "glusterfs"),
        (v.rbd.is_some(), "rbd"),
        (v.flex_volume.is_some(), "flexVolume"),
        (v.cinder.is_some(), "cinder"),
        (v.cephfs.is_some(), "cephfs"),
        (v.flocker.is_some(), "flocker"),
        (v.fc.is_some(), "fc"),
        (v.azure_file.is_some(), "azureFile"),
        (v.vsphere_volume.is_some(), "vsphereVolume"),
        (v.quobyte.is_some(), "quobyte"),
        (v.azure_disk.is_some(), "azureDisk"),
        (v.photon_persistent_disk.is_some(), "photonPersistentDisk"),
        (v.portworx_volume.is_some(), "portworxVolume"),
        (v.scale_io.is_some(), "scaleIO"),
        (v.storageos.is_some(), "storageos"),
    ];
    Some(
        named
            .into_iter()
            .find(|(set, _)| *set)
            .map_or("unknown", |(_, n)| n),
    )
}

fn volumes(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut names = Vec::new();
    let mut types = BTreeSet::new();
    for v in spec.volumes.iter().flatten() {
        if let Some(t) = restricted_type(v) {
            names.push(v.name.as_str());
            types.insert(t);
        }
    }
    (!names.is_empty()).then(|| {
        Violation::new(
            "restricted volume types",
            format!(
                "{} {} {} {}",
                volumes_phrase(&names),
                pluralize("uses", "use", names.len()),
                pluralize(
                    "restricted volume type",
                    "restricted volume types",
                    types.len()
                ),
                join_quote(&types)
            ),
        )
    })
}

fn run_as_non_root(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let pod = spec
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_non_root);
    let pod_bad = pod == Some(false);
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match c.security_context.and_then(|s| s.run_as_non_root) {
            Some(false) => explicit.push(c.name),
            Some(true) => {}
            None if pod != Some(true) => implicit.push(c.name),
            None => {}
        }
    }
    if pod_bad || !explicit.is_empty() {
        return Some(Violation::new(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters(pod_bad, &explicit)
            ),
        ));
    }
    (!implicit.is_empty()).then(|| {
        Violation::new(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_phrase(&implicit)
            ),
        )
    })
}

fn run_as_user(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let pod = spec.security_context.as_ref().and_then(|s| s.run_as_user) == Some(0);
    let names: Vec<&str> = containers(spec)
        .iter()
        .filter(|c| c.security_context.and_then(|s| s.run_as_user) == Some(0))
        .map(|c| c.name)
        .collect();
    (pod || !names.is_empty()).then(|| {
        Violation::new(
            "runAsUser=0",
            format!("{} must not set runAsUser=0", setters(pod, &names)),
        )
    })
}

fn seccomp(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let (pod_bad, names, types) = bad_seccomp(spec);
    if pod_bad || !names.is_empty() {
        return Some(seccomp_type_violation(pod_bad, &names, &types));
    }
    let pod_set = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
        .is_some();
    let implicit: Vec<&str> = containers(spec)
        .iter()
        .filter(|c| {
            c.security_context
                .and_then(|s| s.seccomp_profile.as_ref())
                .is_none()
                && !pod_set
        })
        .map(|c| c.name)
        .collect();
    (!implicit.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                containers_phrase(&implicit)
            ),
        )
    })
}

fn seccomp_1_25(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    if is_windows(spec) {
        return None;
    }
    seccomp(meta, spec)
}
