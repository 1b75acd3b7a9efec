//! Pod volume validation (upstream `ValidateVolumes`): unique DNS-label names, exactly one
//! source, and the rules of the sources Berth can run (emptyDir, hostPath, configMap, secret,
//! downwardAPI, projected, persistentVolumeClaim).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{HostPathVolumeSource, KeyToPath, Volume};

use super::container::validate_field_ref;
use super::defaults::volume_source_count;
use super::field::{FieldError, Path};
use super::names::{dns1123_label, required_name};
use crate::quantity::Quantity;

const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";

const VOLUME_FIELD_PATHS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

pub(crate) const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

/// A `hostPath` source: a path without `..` steps, of a known type. A pod's volume stops at a
/// missing path; a PersistentVolume's checks the type anyway (`type_without_path`).
pub(crate) fn validate_host_path(
    h: &HostPathVolumeSource,
    hp: &Path,
    type_without_path: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if h.path.is_empty() {
        errs.push(FieldError::required(&hp.child("path"), ""));
        if !type_without_path {
            return errs;
        }
    } else {
        errs.extend(no_backsteps(&h.path, &hp.child("path")));
    }
    let t = h.type_.as_deref().unwrap_or_default();
    if !HOST_PATH_TYPES.contains(&t) {
        errs.push(FieldError::not_supported(
            &hp.child("type"),
            t,
            HOST_PATH_TYPES,
        ));
    }
    errs
}

/// Validates the volumes and returns the names of the valid ones (mounts may only use those).
pub(crate) fn validate_volumes(
    volumes: &[Volume],
    path: &Path,
) -> (BTreeSet<String>, Vec<FieldError>) {
    let mut names = BTreeSet::new();
    let mut errs = Vec::new();
    for (i, v) in volumes.iter().enumerate() {
        let ip = path.index(i);
        let np = ip.child("name");
        let mut el = validate_source(v, &ip);
        el.extend(required_name(&np, &v.name, dns1123_label));
        if names.contains(&v.name) {
            el.push(FieldError::duplicate(&np, v.name.as_str()));
        }
        if el.is_empty() {
            names.insert(v.name.clone());
        }
        errs.extend(el);
    }
    (names, errs)
}

fn validate_source(v: &Volume, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let count = volume_source_count(v);
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a volume type"));
    } else if count > 1 {
        // Upstream reports the second source it finds; the JSON key order names it.
        let second = serde_json::to_value(v)
            .ok()
            .and_then(|j| {
                j.as_object()
                    .and_then(|m| m.keys().filter(|k| *k != "name").nth(1).cloned())
            })
            .unwrap_or_default();
        errs.push(FieldError::forbidden(
            &path.child(&second),
            "may not specify more than 1 volume type",
        ));
    }
    if let Some(e) = &v.empty_dir
        && let Some(limit) = &e.size_limit
        && Quantity::parse(&limit.0)
            .map(|q| q.is_negative())
            .unwrap_or(true)
    {
        errs.push(FieldError::forbidden(
            &path.child("emptyDir").child("sizeLimit"),
            "SizeLimit field must be a valid resource quantity",
        ));
    }
    if let Some(h) = &v.host_path {
        errs.extend(validate_host_path(h, &path.child("hostPath"), false));
    }
    if let Some(c) = &v.config_map {
        let cp = path.child("configMap");
        if c.name.is_empty() {
            errs.push(FieldError::required(&cp.child("name"), ""));
        }
        errs.extend(validate_mode(c.default_mode, &cp.child("defaultMode")));
        errs.extend(validate_items(
            c.items.as_deref().unwrap_or_default(),
            &cp.child("items"),
        ));
    }
    if let Some(s) = &v.secret {
        let sp = path.child("secret");
        if s.secret_name.as_deref().unwrap_or_default().is_empty() {
            errs.push(FieldError::required(&sp.child("secretName"), ""));
        }
        errs.extend(validate_mode(s.default_mode, &sp.child("defaultMode")));
        errs.extend(validate_items(
            s.items.as_deref().unwrap_or_default(),
            &sp.child("items"),
        ));
    }
    if let Some(p) = &v.persistent_volume_claim
        && p.claim_name.is_empty()
    {
        errs.push(FieldError::required(
            &path.child("persistentVolumeClaim").child("claimName"),
            "",
        ));
    }
    if let Some(d) = &v.downward_api {
        let dp = path.child("downwardAPI");
        errs.extend(validate_mode(d.default_mode, &dp.child("defaultMode")));
        for (i, item) in d.items.iter().flatten().enumerate() {
            let ip = dp.child("items").index(i);
            if item.path.is_empty() {
                errs.push(FieldError::required(&ip.child("path"), ""));
            }
            errs.extend(local_non_reserved_path(&item.path, &ip.child("path")));
            errs.extend(validate_mode(item.mode, &ip.child("mode")));
            if let Some(f) = &item.field_ref {
                errs.extend(validate_field_ref(
                    f,
                    VOLUME_FIELD_PATHS,
                    &ip.child("fieldRef"),
                ));
            }
        }
    }
    if let Some(p) = &v.projected {
        let pp = path.child("projected");
        errs.extend(validate_mode(p.default_mode, &pp.child("defaultMode")));
        for (i, src) in p.sources.iter().flatten().enumerate() {
            if let Some(t) = &src.service_account_token {
                let tp = pp.child("sources").index(i).child("serviceAccountToken");
                if t.expiration_seconds.is_some_and(|e| e < 600) {
                    errs.push(FieldError::invalid(
                        &tp.child("expirationSeconds"),
                        t.expiration_seconds.unwrap_or_default(),
                        "may not specify a duration less than 10 minutes",
                    ));
                }
                if t.path.is_empty() {
                    errs.push(FieldError::required(&tp.child("path"), ""));
                }
            }
        }
    }
    errs
}

fn validate_mode(mode: Option<i32>, path: &Path) -> Vec<FieldError> {
    match mode {
        Some(m) if !(0..=0o777).contains(&m) => vec![FieldError::invalid(path, m, FILE_MODE_ERROR)],
        _ => Vec::new(),
    }
}

fn validate_items(items: &[KeyToPath], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, kp) in items.iter().enumerate() {
        let ip = path.index(i);
        if kp.key.is_empty() {
            errs.push(FieldError::required(&ip.child("key"), ""));
        }
        if kp.path.is_empty() {
            errs.push(FieldError::required(&ip.child("path"), ""));
        }
        errs.extend(local_non_reserved_path(&kp.path, &ip.child("path")));
        errs.extend(validate_mode(kp.mode, &ip.child("mode")));
    }
    errs
}

pub(crate) fn no_backsteps(target: &str, path: &Path) -> Vec<FieldError> {
    if target.split('/').any(|part| part == "..") {
        vec![FieldError::invalid(path, target, "must not contain '..'")]
    } else {
        Vec::new()
    }
}

/// Relative and without `..` elements (subPath, item paths).
pub(crate) fn local_descending_path(target: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if target.starts_with('/') {
        errs.push(FieldError::invalid(path, target, "must be a relative path"));
    }
    errs.extend(no_backsteps(target, path));
    errs
}

fn local_non_reserved_path(target: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = local_descending_path(target, path);
    if target.starts_with("..") && !target.starts_with("../") {
        errs.push(FieldError::invalid(
            path,
            target,
            "must not start with '..'",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: serde_json::Value) -> (BTreeSet<String>, Vec<String>) {
        let vols: Vec<Volume> = serde_json::from_value(v).unwrap();
        let (names, errs) = validate_volumes(&vols, &Path::new("spec").child("volumes"));
        (names, errs.iter().map(FieldError::message).collect())
    }

    #[test]
    fn valid_volumes_are_returned_by_name() {
        let (names, errs) = check(
            json!([{"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "cm"}}]),
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn volume_rules_report_upstream_messages() {
        let cases = [
            (
                json!([{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}]),
                "spec.volumes[1].name: Duplicate value: \"a\"",
            ),
            (
                json!([{"name": "a"}]),
                "spec.volumes[0]: Required value: must specify a volume type",
            ),
            (
                json!([{"name": "a", "emptyDir": {}, "hostPath": {"path": "/x"}}]),
                "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
            ),
            (
                json!([{"name": "a", "hostPath": {"path": ""}}]),
                "spec.volumes[0].hostPath.path: Required value",
            ),
            (
                json!([{"name": "a", "hostPath": {"path": "/x", "type": "Dir"}}]),
                "spec.volumes[0].hostPath.type: Unsupported value: \"Dir\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\"",
            ),
            (
                json!([{"name": "a", "configMap": {"name": ""}}]),
                "spec.volumes[0].configMap.name: Required value",
            ),
            (
                json!([{"name": "a", "secret": {}}]),
                "spec.volumes[0].secret.secretName: Required value",
            ),
            (
                json!([{"name": "a", "secret": {"secretName": "s", "defaultMode": 1000}}]),
                "spec.volumes[0].secret.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
            ),
            (
                json!([{"name": "a", "configMap": {"name": "c", "items": [{"key": "k", "path": "/abs"}]}}]),
                "spec.volumes[0].configMap.items[0].path: Invalid value: \"/abs\": must be a relative path",
            ),
            (
                json!([{"name": "a", "persistentVolumeClaim": {"claimName": ""}}]),
                "spec.volumes[0].persistentVolumeClaim.claimName: Required value",
            ),
            (
                json!([{"name": "A_b", "emptyDir": {}}]),
                "spec.volumes[0].name: Invalid value: \"A_b\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ),
        ];
        for (v, want) in cases {
            let (_, errs) = check(v.clone());
            assert!(errs.iter().any(|e| e == want), "{v}: {errs:?}");
        }
    }

    #[test]
    fn invalid_volumes_are_not_mountable() {
        let (names, _) = check(json!([{"name": "a", "hostPath": {"path": ""}}]));
        assert!(names.is_empty());
    }
}
