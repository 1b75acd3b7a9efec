//! CSIDriver, CSINode and VolumeAttachment admission (storage.k8s.io/v1): upstream's
//! `SetDefaults_CSIDriver` and `ValidateCSIDriver(Update)`, `ValidateCSINode(Update)` and
//! `ValidateVolumeAttachment(Update)` with `ValidateVolumeAttachmentV1`, paths and messages as
//! upstream's (including its `spec.attachedRequired` spelling). Nothing in Berth attaches CSI
//! volumes: these objects are stored for the installers and drivers that read them.

use std::collections::BTreeSet;

use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSINodeDriver, VolumeAttachment, VolumeAttachmentSpec, VolumeError,
};

use super::field::{FieldError, Path};
use super::names::{dns1123_subdomain, each_invalid, inclusive_range_error, qualified_name};

const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
const LIFECYCLE_MODES: &[&str] = &["Persistent", "Ephemeral"];
/// Upstream `csiNodeIDLongerMaxLength` (its strategy allows the longer IDs).
const MAX_NODE_ID: usize = 256;
/// Upstream `maxAttachedVolumeMetadataSize` and `maxVolumeErrorMessageSize`.
const MAX_ATTACHMENT_METADATA: usize = 256 * 1024;
const MAX_VOLUME_ERROR_MESSAGE: usize = 1024;
/// A token's shortest and longest lifetimes.
const MIN_TOKEN_SECONDS: i64 = 600;
const MAX_TOKEN_SECONDS: i64 = 1 << 32;

/// Upstream `SetDefaults_CSIDriver` with the gates of its API level on (inline volumes, the
/// FSGroup policy, SELinux mounts).
pub(crate) fn default_csi_driver(d: &mut CSIDriver) {
    let s = &mut d.spec;
    s.attach_required.get_or_insert(true);
    s.pod_info_on_mount.get_or_insert(false);
    s.storage_capacity.get_or_insert(false);
    s.fs_group_policy
        .get_or_insert_with(|| "ReadWriteOnceWithFSType".into());
    if s.volume_lifecycle_modes.as_ref().is_none_or(Vec::is_empty) {
        s.volume_lifecycle_modes = Some(vec!["Persistent".into()]);
    }
    s.requires_republish.get_or_insert(false);
    s.se_linux_mount.get_or_insert(false);
}

/// Upstream `ValidateCSIDriverName` of core validation (a driver named by another object).
fn csi_driver_name(name: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if name.len() > 63 {
        errs.push(FieldError::too_long(path, 63));
    }
    errs.extend(each_invalid(
        path,
        name,
        dns1123_subdomain(&name.to_lowercase()),
    ));
    errs
}

/// Upstream `ValidateCSIDriver` (with `old`, `ValidateCSIDriverUpdate`: `attachRequired` and
/// the lifecycle modes never change).
pub(crate) fn validate_csi_driver(d: &CSIDriver, old: Option<&CSIDriver>) -> Vec<FieldError> {
    let sp = Path::new("spec");
    let s = &d.spec;
    let mut errs = Vec::new();
    for (field, value) in [
        ("attachedRequired", s.attach_required),
        ("podInfoOnMount", s.pod_info_on_mount),
        ("storageCapacity", s.storage_capacity),
    ] {
        if value.is_none() {
            errs.push(FieldError::required(&sp.child(field), ""));
        }
    }
    if let Some(p) = s.fs_group_policy.as_deref()
        && !FS_GROUP_POLICIES.contains(&p)
    {
        errs.push(FieldError::not_supported(
            &sp.child("fsGroupPolicy"),
            p,
            FS_GROUP_POLICIES,
        ));
    }
    let mut audiences = BTreeSet::new();
    for (i, t) in s.token_requests.iter().flatten().enumerate() {
        let tp = sp.child("tokenRequests").index(i);
        if !audiences.insert(t.audience.as_str()) {
            errs.push(FieldError::duplicate(
                &tp.child("audience"),
                t.audience.as_str(),
            ));
            continue;
        }
        let Some(secs) = t.expiration_seconds else {
            continue;
        };
        let ep = tp.child("expirationSeconds");
        if secs < MIN_TOKEN_SECONDS {
            errs.push(FieldError::invalid(
                &ep,
                secs,
                "may not specify a duration less than 10 minutes",
            ));
        }
        if secs > MAX_TOKEN_SECONDS {
            errs.push(FieldError::invalid(
                &ep,
                secs,
                "may not specify a duration larger than 2^32 seconds",
            ));
        }
    }
    for mode in s.volume_lifecycle_modes.iter().flatten() {
        if !LIFECYCLE_MODES.contains(&mode.as_str()) {
            errs.push(FieldError::not_supported(
                &sp.child("volumeLifecycleModes"),
                mode.as_str(),
                LIFECYCLE_MODES,
            ));
        }
    }
    if s.se_linux_mount.is_none() {
        errs.push(FieldError::required(&sp.child("seLinuxMount"), ""));
    }
    if let Some(o) = old {
        if o.spec.attach_required != s.attach_required {
            errs.push(FieldError::immutable(
                &sp.child("attachedRequired"),
                s.attach_required,
            ));
        }
        if o.spec.volume_lifecycle_modes != s.volume_lifecycle_modes {
            errs.push(FieldError::immutable(
                &sp.child("volumeLifecycleModes"),
                s.volume_lifecycle_modes.clone(),
            ));
        }
    }
    errs
}

/// Upstream `ValidateCSINode` (with `old`, `ValidateCSINodeUpdate`: a driver already listed
/// never changes).
pub(crate) fn validate_csi_node(n: &CSINode, old: Option<&CSINode>) -> Vec<FieldError> {
    let dp = Path::new("spec").child("drivers");
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, d) in n.spec.drivers.iter().enumerate() {
        errs.extend(validate_node_driver(d, &dp.index(i), &mut names));
    }
    for before in old.iter().flat_map(|o| o.spec.drivers.iter()) {
        for after in n.spec.drivers.iter().filter(|d| d.name == before.name) {
            if after != before {
                errs.push(FieldError::immutable(
                    &dp,
                    serde_json::to_value(after).unwrap_or_default(),
                ));
            }
        }
    }
    errs
}

fn validate_node_driver<'a>(
    d: &'a CSINodeDriver,
    path: &Path,
    names: &mut BTreeSet<&'a str>,
) -> Vec<FieldError> {
    let mut errs = csi_driver_name(&d.name, &path.child("name"));
    let ip = path.child("nodeID");
    if d.node_id.is_empty() {
        errs.push(FieldError::required(&ip, ""));
    }
    if d.node_id.len() > MAX_NODE_ID {
        errs.push(FieldError::invalid(
            &ip,
            d.node_id.as_str(),
            format!("must be {MAX_NODE_ID} characters or less"),
        ));
    }
    if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count)
        && count < 0
    {
        errs.push(FieldError::invalid(
            &path.child("allocatable").child("count"),
            count,
            "must be greater than or equal to 0",
        ));
    }
    if !names.insert(d.name.as_str()) {
        errs.push(FieldError::duplicate(&path.child("name"), d.name.as_str()));
    }
    let mut keys = BTreeSet::new();
    for key in d.topology_keys.iter().flatten() {
        if key.is_empty() {
            errs.push(FieldError::required(path, ""));
        }
        if !keys.insert(key.as_str()) {
            errs.push(FieldError::duplicate(path, key.as_str()));
        }
        errs.extend(each_invalid(path, key, qualified_name(key)));
    }
    errs
}

/// Upstream `ValidateVolumeAttachment` and `ValidateVolumeAttachmentV1` (with `old`,
/// `ValidateVolumeAttachmentUpdate`: the spec is read-only).
pub(crate) fn validate_volume_attachment(
    va: &VolumeAttachment,
    old: Option<&VolumeAttachment>,
) -> Vec<FieldError> {
    let sp = Path::new("spec");
    let mut errs = validate_attachment_spec(&va.spec, &sp);
    if let Some(status) = &va.status {
        let st = Path::new("status");
        let size: usize = status
            .attachment_metadata
            .iter()
            .flatten()
            .map(|(k, v)| k.len() + v.len())
            .sum();
        if size > MAX_ATTACHMENT_METADATA {
            errs.push(FieldError::too_long(
                &st.child("attachmentMetadata"),
                MAX_ATTACHMENT_METADATA,
            ));
        }
        errs.extend(validate_volume_error(
            status.attach_error.as_ref(),
            &st.child("attachError"),
        ));
        errs.extend(validate_volume_error(
            status.detach_error.as_ref(),
            &st.child("detachError"),
        ));
    }
    if let Some(o) = old
        && o.spec != va.spec
    {
        errs.push(FieldError::immutable(
            &sp,
            serde_json::to_value(&va.spec).unwrap_or_default(),
        ));
    }
    errs
}

fn validate_attachment_spec(spec: &VolumeAttachmentSpec, sp: &Path) -> Vec<FieldError> {
    let ap = sp.child("attacher");
    let mut errs = Vec::new();
    if spec.attacher.is_empty() {
        errs.push(FieldError::required(&ap, ""));
    }
    let src = sp.child("source");
    let source = &spec.source;
    let one_of = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (&source.inline_volume_spec, &source.persistent_volume_name) {
        (None, None) => errs.push(FieldError::required(&src, one_of)),
        (Some(_), Some(_)) => errs.push(FieldError::forbidden(&src, one_of)),
        (None, Some(pv)) if pv.is_empty() => errs.push(FieldError::required(
            &src.child("persistentVolumeName"),
            "must specify non empty persistentVolumeName",
        )),
        _ => {}
    }
    errs.extend(each_invalid(
        &sp.child("nodeName"),
        &spec.node_name,
        dns1123_subdomain(&spec.node_name),
    ));
    // The v1 checks upstream adds for attachments created through v1.
    errs.extend(csi_driver_name(&spec.attacher, &ap));
    if let Some(pv) = source.persistent_volume_name.as_deref() {
        errs.extend(each_invalid(
            &src.child("persistentVolumeName"),
            pv,
            dns1123_subdomain(pv),
        ));
    }
    errs
}

fn validate_volume_error(e: Option<&VolumeError>, path: &Path) -> Vec<FieldError> {
    let Some(e) = e else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    if e.message.as_deref().unwrap_or_default().len() > MAX_VOLUME_ERROR_MESSAGE {
        // Upstream reports the metadata limit here, not the message's own.
        errs.push(FieldError::too_long(
            &path.child("message"),
            MAX_ATTACHMENT_METADATA,
        ));
    }
    if let Some(code) = e.error_code
        && code < 0
    {
        errs.push(FieldError::invalid(
            &path.child("errorCode"),
            code,
            inclusive_range_error(0, i64::from(i32::MAX)),
        ));
    }
    errs
}

#[cfg(test)]
#[path = "csi_tests.rs"]
mod tests;
