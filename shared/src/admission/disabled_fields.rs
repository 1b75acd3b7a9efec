//! Fields of the API level Berth serves whose upstream feature gates are alpha, so off by
//! default: upstream's strategies drop them before validation (`dropDisabledPodFields`)
//! without a word. Berth implements none of them, and a field it does not implement must not
//! vanish silently: each is reported with the unknown fields (a `Warning` under
//! `fieldValidation=Warn`, the default; refused under `Strict`) and dropped.
//!
//! Planner: pure, no I/O.

use serde_json::Value;

/// A pod-spec field behind an alpha gate: where it sits below a pod spec.
enum Gated {
    /// A field of the pod spec itself.
    Spec(&'static str),
    /// A field of every container (regular, init and ephemeral).
    Container(&'static str),
    /// A field of every container's `env[].valueFrom`.
    EnvSource(&'static str),
    /// A field of every `projected` volume's `sources[]`.
    Projection(&'static str),
}

/// Kubernetes 1.34's alpha pod fields: `HostnameOverride`, `ContainerRestartRules`,
/// `EnvFiles`, `PodCertificateRequest`.
const GATED: [Gated; 4] = [
    Gated::Spec("hostnameOverride"),
    Gated::Container("restartPolicyRules"),
    Gated::EnvSource("fileKeyRef"),
    Gated::Projection("podCertificate"),
];

/// Where a kind keeps its pod spec.
fn pod_spec_path(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "Pod" => &["spec"],
        "PodTemplate" => &["template", "spec"],
        "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "Job"
        | "ReplicationController" => &["spec", "template", "spec"],
        "CronJob" => &["spec", "jobTemplate", "spec", "template", "spec"],
        _ => return None,
    })
}

const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// A gated field found: its path as warnings spell it, and where it sits (the JSON pointer of
/// the object holding it, and its key there).
struct Found {
    path: String,
    parent: String,
    key: &'static str,
}

/// Every gated field present in the pod spec at `spec`, which sits at `dotted` (warnings'
/// spelling) and `pointer` (JSON pointer) in the object. Read-only: nothing is copied.
fn find(spec: &Value, dotted: &str, pointer: &str) -> Vec<Found> {
    let mut found = Vec::new();
    let mut take = |parent: &Value, key: &'static str, path: String, at: String| {
        if parent.get(key).is_some() {
            found.push(Found {
                path,
                parent: at,
                key,
            });
        }
    };
    for gated in &GATED {
        match *gated {
            Gated::Spec(key) => take(spec, key, format!("{dotted}.{key}"), pointer.to_string()),
            Gated::Container(key) => {
                for list in CONTAINER_LISTS {
                    for (i, c) in items(spec, list) {
                        let path = format!("{dotted}.{list}[{i}].{key}");
                        take(c, key, path, format!("{pointer}/{list}/{i}"));
                    }
                }
            }
            Gated::EnvSource(key) => {
                for list in CONTAINER_LISTS {
                    for (i, c) in items(spec, list) {
                        for (j, env) in items(c, "env") {
                            if let Some(source) = env.get("valueFrom") {
                                let path = format!("{dotted}.{list}[{i}].env[{j}].valueFrom.{key}");
                                let at = format!("{pointer}/{list}/{i}/env/{j}/valueFrom");
                                take(source, key, path, at);
                            }
                        }
                    }
                }
            }
            Gated::Projection(key) => {
                for (i, v) in items(spec, "volumes") {
                    if let Some(projected) = v.get("projected") {
                        for (j, src) in items(projected, "sources") {
                            let path =
                                format!("{dotted}.volumes[{i}].projected.sources[{j}].{key}");
                            let at = format!("{pointer}/volumes/{i}/projected/sources/{j}");
                            take(src, key, path, at);
                        }
                    }
                }
            }
        }
    }
    found
}

/// The elements of the array `value[key]`, with their indexes.
fn items<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flat_map(|a| a.iter().enumerate())
}

/// The gated fields of `kind`'s object `obj`, if the kind carries a pod spec.
fn find_in(kind: &str, obj: &Value) -> Vec<Found> {
    let Some(path) = pod_spec_path(kind) else {
        return Vec::new();
    };
    let spec = path.iter().try_fold(obj, |at, key| at.get(*key));
    match spec {
        Some(spec) => find(spec, &path.join("."), &format!("/{}", path.join("/"))),
        None => Vec::new(),
    }
}

/// The paths of the gated fields `obj` carries (`spec.hostnameOverride`, …).
pub fn paths(kind: &str, obj: &Value) -> Vec<String> {
    find_in(kind, obj).into_iter().map(|f| f.path).collect()
}

/// Drops the gated fields from `obj`, as upstream drops them with the gates off.
pub fn drop(kind: &str, obj: &mut Value) {
    for f in find_in(kind, obj) {
        if let Some(parent) = obj.pointer_mut(&f.parent).and_then(Value::as_object_mut) {
            parent.remove(f.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> Value {
        json!({
            "hostnameOverride": "h",
            "containers": [{"name": "a", "restartPolicyRules": [{"action": "Restart"}],
                "env": [{"name": "X", "value": "1"},
                        {"name": "Y", "valueFrom": {"fileKeyRef": {"path": "p", "key": "k"}}}]}],
            "initContainers": [{"name": "i"}],
            "volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "c"}},
                {"podCertificate": {"signerName": "s", "keyType": "ED25519"}}]}}]
        })
    }

    #[test]
    fn gated_fields_are_found_under_every_kinds_pod_spec() {
        let want = |prefix: &str| {
            vec![
                format!("{prefix}.hostnameOverride"),
                format!("{prefix}.containers[0].restartPolicyRules"),
                format!("{prefix}.containers[0].env[1].valueFrom.fileKeyRef"),
                format!("{prefix}.volumes[0].projected.sources[1].podCertificate"),
            ]
        };
        let pod = json!({"spec": spec()});
        assert_eq!(paths("Pod", &pod), want("spec"));
        let deployment = json!({"spec": {"template": {"spec": spec()}}});
        assert_eq!(paths("Deployment", &deployment), want("spec.template.spec"));
        let cron = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": spec()}}}}});
        assert_eq!(
            paths("CronJob", &cron),
            want("spec.jobTemplate.spec.template.spec")
        );
        assert!(paths("ConfigMap", &json!({"data": {"hostnameOverride": "x"}})).is_empty());
    }

    #[test]
    fn dropping_leaves_everything_else() {
        let mut pod = json!({"spec": spec()});
        drop("Pod", &mut pod);
        assert!(paths("Pod", &pod).is_empty());
        assert_eq!(
            pod["spec"]["containers"][0]["env"][1],
            json!({"name": "Y", "valueFrom": {}})
        );
        assert_eq!(
            pod["spec"]["volumes"][0]["projected"]["sources"],
            json!([{"configMap": {"name": "c"}}, {}])
        );
        assert_eq!(pod["spec"]["initContainers"], json!([{"name": "i"}]));
    }
}
