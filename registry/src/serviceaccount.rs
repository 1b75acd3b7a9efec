//! The ServiceAccount admission plugin, as upstream's: a new pod runs as `default` unless it
//! names an account; the account must exist (the namespace's `default` one is created here if
//! the controller has not made it yet); unless `automountServiceAccountToken` is false on the
//! pod (or else the account), the pod gets a projected `kube-api-access-<suffix>` volume (a
//! bound token, the cluster CA from `kube-root-ca.crt`, the namespace) mounted read-only at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in every container. A pod that names no
//! `imagePullSecrets` gets the account's (the kubelet reads only the pod's).

use crate::{Registry, RegistryError, WriteOptions};
use berth_shared::resource::SERVICE_ACCOUNTS;
use rand::Rng;
use serde_json::{Value, json};

pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// Upstream's token lifetime for the volume (an hour and 7 s, so it can be told apart).
const VOLUME_TOKEN_SECONDS: i64 = 3607;
const DEFAULT: &str = "default";

/// A random suffix from upstream's alphabet (no vowels, no look-alike digits).
fn suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The projected volume upstream mounts for the account's token.
pub fn api_access_volume(name: &str) -> Value {
    json!({"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": VOLUME_TOKEN_SECONDS, "path": "token"}},
        {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
    ]}})
}

/// Planner part: adds the account's volume and mounts to `pod` when it should have them.
/// `account_automount` is the account's `automountServiceAccountToken`.
pub fn add_api_access(pod: &mut Value, account_automount: Option<bool>, volume_name: &str) {
    let automount = pod
        .pointer("/spec/automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or(account_automount)
        .unwrap_or(true);
    if !automount {
        return;
    }
    let lists = ["initContainers", "containers", "ephemeralContainers"];
    let mounted = lists.iter().any(|l| {
        pod["spec"][*l].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["volumeMounts"]
                    .as_array()
                    .is_some_and(|ms| ms.iter().any(|m| m["mountPath"] == MOUNT_PATH))
            })
        })
    });
    if mounted {
        return;
    }
    let spec = &mut pod["spec"];
    match spec["volumes"].as_array_mut() {
        Some(v) => v.push(api_access_volume(volume_name)),
        None => spec["volumes"] = json!([api_access_volume(volume_name)]),
    }
    let mount = json!({"name": volume_name, "readOnly": true, "mountPath": MOUNT_PATH});
    for l in lists {
        if let Some(cs) = spec[l].as_array_mut() {
            for c in cs {
                match c["volumeMounts"].as_array_mut() {
                    Some(ms) => ms.push(mount.clone()),
                    None => c["volumeMounts"] = json!([mount.clone()]),
                }
            }
        }
    }
}

/// Planner part: copies the account's `imagePullSecrets` into a pod that has none.
pub fn add_pull_secrets(pod: &mut Value, account: &Value) {
    let has_own = pod["spec"]["imagePullSecrets"]
        .as_array()
        .is_some_and(|s| !s.is_empty());
    let Some(theirs) = account["imagePullSecrets"].as_array() else {
        return;
    };
    if has_own || theirs.is_empty() {
        return;
    }
    let refs: Vec<Value> = theirs
        .iter()
        .map(|s| json!({"name": s["name"].as_str().unwrap_or_default()}))
        .collect();
    pod["spec"]["imagePullSecrets"] = Value::Array(refs);
}

/// Admits a pod being created in `ns`.
pub fn admit_pod(
    registry: &Registry,
    ns: &str,
    pod: &mut Value,
    dry_run: bool,
) -> Result<(), RegistryError> {
    if !pod["spec"].is_object() {
        return Ok(());
    }
    let account = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| {
            pod.pointer("/spec/serviceAccount")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        })
        .unwrap_or(DEFAULT)
        .to_string();
    pod["spec"]["serviceAccountName"] = json!(account);
    pod["spec"]["serviceAccount"] = json!(account);
    let sa = match registry.get(SERVICE_ACCOUNTS, Some(ns), &account) {
        Ok(sa) => sa.value()?,
        Err(RegistryError::NotFound { .. }) if account == DEFAULT => {
            let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": DEFAULT, "namespace": ns}});
            let opts = WriteOptions {
                dry_run,
                ..Default::default()
            };
            match registry.create(SERVICE_ACCOUNTS, Some(ns), sa, &opts) {
                Ok(v) => v,
                // The controller's create of the same account is landing (it may not be
                // readable yet): an account it makes carries no automount setting.
                Err(RegistryError::AlreadyExists { .. }) => json!({}),
                Err(e) => return Err(e),
            }
        }
        Err(RegistryError::NotFound { .. }) => {
            let pod_name = pod
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Err(RegistryError::Forbidden(format!(
                "pods \"{pod_name}\" is forbidden: error looking up service account {ns}/{account}: serviceaccount \"{account}\" not found"
            )));
        }
        Err(e) => return Err(e),
    };
    add_pull_secrets(pod, &sa);
    let automount = sa["automountServiceAccountToken"].as_bool();
    add_api_access(pod, automount, &format!("kube-api-access-{}", suffix()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(extra: Value) -> Value {
        let mut p = json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}],
                                    "initContainers": [{"name": "i"}]}});
        if let (Some(spec), Some(extra)) = (p["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        p
    }

    #[test]
    fn every_container_mounts_the_api_access_volume_read_only() {
        let mut p = pod(json!({}));
        add_api_access(&mut p, None, "kube-api-access-abcde");
        assert_eq!(
            p["spec"]["volumes"][0],
            api_access_volume("kube-api-access-abcde")
        );
        for (list, i) in [("containers", 0), ("containers", 1), ("initContainers", 0)] {
            let mounts = p["spec"][list][i]["volumeMounts"].as_array().unwrap();
            let m = mounts.last().unwrap();
            assert_eq!(m["mountPath"], MOUNT_PATH, "{list}[{i}]");
            assert_eq!(m["readOnly"], true);
        }
    }

    #[test]
    fn automount_false_on_the_pod_or_the_account_leaves_the_pod_alone() {
        for (pod_says, account_says, mounted) in [
            (None, None, true),
            (Some(false), None, false),
            (None, Some(false), false),
            (Some(true), Some(false), true),
            (Some(false), Some(true), false),
        ] {
            let mut p = match pod_says {
                Some(b) => pod(json!({"automountServiceAccountToken": b})),
                None => pod(json!({})),
            };
            add_api_access(&mut p, account_says, "v");
            assert_eq!(
                p["spec"]["volumes"].is_array(),
                mounted,
                "pod {pod_says:?} account {account_says:?}"
            );
        }
    }

    #[test]
    fn a_pod_that_mounts_something_at_the_path_keeps_its_own() {
        let mut p = json!({"spec": {"containers": [{"name": "a",
            "volumeMounts": [{"name": "mine", "mountPath": MOUNT_PATH}]}]}});
        let before = p.clone();
        add_api_access(&mut p, None, "v");
        assert_eq!(p, before);
    }

    #[test]
    fn a_pod_without_pull_secrets_gets_the_accounts() {
        let account = json!({"imagePullSecrets": [{"name": "regcred"}, {"name": "other"}]});
        for (pod_says, want) in [
            (None, json!([{"name": "regcred"}, {"name": "other"}])),
            (
                Some(json!([])),
                json!([{"name": "regcred"}, {"name": "other"}]),
            ),
            (Some(json!([{"name": "mine"}])), json!([{"name": "mine"}])),
        ] {
            let mut p = match &pod_says {
                Some(s) => pod(json!({"imagePullSecrets": s})),
                None => pod(json!({})),
            };
            add_pull_secrets(&mut p, &account);
            assert_eq!(p["spec"]["imagePullSecrets"], want, "pod had {pod_says:?}");
        }
        let mut p = pod(json!({}));
        add_pull_secrets(&mut p, &json!({}));
        assert!(p["spec"]["imagePullSecrets"].is_null());
    }

    #[test]
    fn suffixes_use_upstreams_alphabet() {
        let s = suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }
}
