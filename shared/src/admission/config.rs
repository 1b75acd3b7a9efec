//! ConfigMap and Secret admission: key syntax, the 1 MiB size cap, `stringData` folded into
//! `data`, the well-known Secret types' required keys, and `immutable` objects.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde_json::Value;

use super::field::{FieldError, Path};
use super::names::{config_map_key, each_invalid};

/// Upstream `MaxSecretSize`, also the ConfigMap limit.
pub(crate) const MAX_SIZE: usize = 1024 * 1024;
const IMMUTABLE_SET: &str = "field is immutable when `immutable` is set";

pub(crate) fn validate_config_map(cm: &ConfigMap, old: Option<&ConfigMap>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0;
    let binary = cm.binary_data.clone().unwrap_or_default();
    for (k, v) in cm.data.iter().flatten() {
        let p = Path::new("data").key(k);
        errs.extend(each_invalid(&p, k, config_map_key(k)));
        if binary.contains_key(k) {
            errs.push(FieldError::invalid(
                &p,
                k.as_str(),
                "duplicate of key present in binaryData",
            ));
        }
        total += v.len();
    }
    total += validate_keys("binaryData", &binary, &mut errs);
    if total > MAX_SIZE {
        errs.push(FieldError::too_long(&Path::new(""), MAX_SIZE));
    }
    if let Some(o) = old.filter(|o| o.immutable == Some(true)) {
        errs.extend(stays_immutable(
            cm.immutable,
            &[
                ("data", cm.data != o.data),
                ("binaryData", cm.binary_data != o.binary_data),
            ],
        ));
    }
    errs
}

/// The key syntax of each entry of the byte map at `field` (`errs` gets the errors); returns
/// the entries' total size.
fn validate_keys(
    field: &str,
    map: &BTreeMap<String, ByteString>,
    errs: &mut Vec<FieldError>,
) -> usize {
    let mut total = 0;
    for (k, v) in map {
        errs.extend(each_invalid(&Path::new(field).key(k), k, config_map_key(k)));
        total += v.0.len();
    }
    total
}

/// An update of an object its old version marked `immutable`: it stays immutable and none of
/// the `fields` (name, whether the update changes it) change.
fn stays_immutable(immutable: Option<bool>, fields: &[(&str, bool)]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if immutable != Some(true) {
        errs.push(FieldError::forbidden(
            &Path::new("immutable"),
            IMMUTABLE_SET,
        ));
    }
    for (field, _) in fields.iter().filter(|(_, changed)| *changed) {
        errs.push(FieldError::forbidden(&Path::new(field), IMMUTABLE_SET));
    }
    errs
}

/// Secret defaults: type Opaque; `stringData` entries overwrite `data` and are dropped, as the
/// v1-to-internal conversion does.
pub(crate) fn default_secret(s: &mut Secret) {
    if s.type_.as_deref().is_none_or(str::is_empty) {
        s.type_ = Some("Opaque".into());
    }
    if let Some(sd) = s.string_data.take() {
        let data = s.data.get_or_insert_with(BTreeMap::new);
        for (k, v) in sd {
            data.insert(k, ByteString(v.into_bytes()));
        }
    }
}

fn require_key(data: &BTreeMap<String, ByteString>, key: &str, errs: &mut Vec<FieldError>) -> bool {
    let present = data.contains_key(key);
    if !present {
        errs.push(FieldError::required(&Path::new("data").key(key), ""));
    }
    present
}

pub(crate) fn validate_secret(s: &Secret, old: Option<&Secret>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let data = s.data.clone().unwrap_or_default();
    if validate_keys("data", &data, &mut errs) > MAX_SIZE {
        errs.push(FieldError::too_long(&Path::new("data"), MAX_SIZE));
    }
    match s.type_.as_deref().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let key = "kubernetes.io/service-account.name";
            let name = s
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map_or("", String::as_str);
            if name.is_empty() {
                errs.push(FieldError::required(
                    &Path::new("metadata").child("annotations").key(key),
                    "",
                ));
            }
        }
        t @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
            let key = if t.ends_with("json") {
                ".dockerconfigjson"
            } else {
                ".dockercfg"
            };
            if require_key(&data, key, &mut errs) {
                let bytes = data.get(key).map(|b| b.0.as_slice()).unwrap_or_default();
                if let Err(e) = serde_json::from_slice::<serde_json::Map<String, Value>>(bytes) {
                    errs.push(FieldError::invalid(
                        &Path::new("data").key(key),
                        "<secret contents redacted>",
                        e.to_string(),
                    ));
                }
            }
        }
        "kubernetes.io/basic-auth"
            if !data.contains_key("username") && !data.contains_key("password") =>
        {
            require_key(&data, "username", &mut errs);
            require_key(&data, "password", &mut errs);
        }
        "kubernetes.io/ssh-auth" if data.get("ssh-privatekey").is_none_or(|v| v.0.is_empty()) => {
            errs.push(FieldError::required(
                &Path::new("data").key("ssh-privatekey"),
                "",
            ));
        }
        "kubernetes.io/tls" => {
            require_key(&data, "tls.crt", &mut errs);
            require_key(&data, "tls.key", &mut errs);
        }
        _ => {}
    }
    if let Some(o) = old {
        let (nt, ot) = (
            s.type_.as_deref().unwrap_or_default(),
            o.type_.as_deref().unwrap_or_default(),
        );
        if nt != ot {
            errs.push(FieldError::immutable(&Path::new("type"), nt));
        }
        if o.immutable == Some(true) {
            errs.extend(stays_immutable(s.immutable, &[("data", s.data != o.data)]));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    fn cm(v: Value) -> ConfigMap {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn config_map_keys_and_size_are_checked() {
        let c = cm(
            json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"ok.key": "v", "bad key": "v", "..": "v"}}),
        );
        let msgs = error_messages(&validate_config_map(&c, None));
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert_eq!(msgs[0], "data[..]: Invalid value: \"..\": must not be '..'");
        assert!(msgs[1].starts_with("data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters"));
        let big = cm(
            json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"a": "x".repeat(MAX_SIZE + 1)}}),
        );
        assert_eq!(
            validate_config_map(&big, None)[0].message(),
            ": Too long: must have at most 1048576 bytes"
        );
    }

    #[test]
    fn immutable_config_maps_cannot_change() {
        let old = cm(
            json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"a": "1"}, "immutable": true}),
        );
        let new = cm(
            json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"a": "2"}, "immutable": true}),
        );
        let msgs = error_messages(&validate_config_map(&new, Some(&old)));
        assert_eq!(
            msgs,
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
    }

    fn secret(v: Value) -> Secret {
        let mut s: Secret = serde_json::from_value(v).unwrap();
        default_secret(&mut s);
        s
    }

    #[test]
    fn secrets_default_to_opaque_and_fold_string_data() {
        let s = secret(
            json!({"metadata": {"name": "s", "namespace": "d"}, "data": {"a": "eA=="}, "stringData": {"a": "y", "b": "z"}}),
        );
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        assert!(s.string_data.is_none());
        let data = s.data.unwrap();
        assert_eq!(data["a"].0, b"y");
        assert_eq!(data["b"].0, b"z");
    }

    #[test]
    fn typed_secrets_need_their_keys() {
        let tls = secret(
            json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}}),
        );
        assert_eq!(
            validate_secret(&tls, None)[0].message(),
            "data[tls.key]: Required value"
        );
        let docker = secret(
            json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "nope"}}),
        );
        assert!(validate_secret(&docker, None)[0].message().starts_with(
            "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": "
        ));
        let sa = secret(
            json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/service-account-token"}),
        );
        assert_eq!(
            validate_secret(&sa, None)[0].message(),
            "metadata.annotations[kubernetes.io/service-account.name]: Required value"
        );
    }

    #[test]
    fn secret_types_are_immutable() {
        let old = secret(json!({"metadata": {"name": "s", "namespace": "d"}}));
        let new =
            secret(json!({"metadata": {"name": "s", "namespace": "d"}, "type": "example.com/x"}));
        assert_eq!(
            validate_secret(&new, Some(&old))[0].message(),
            "type: Invalid value: \"example.com/x\": field is immutable"
        );
    }
}
