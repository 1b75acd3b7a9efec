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

/// Visits every gated field present in `spec` (at `prefix`), with its path; `remove` drops it.
fn visit(spec: &mut Value, prefix: &str, remove: bool, found: &mut Vec<String>) {
    let mut take = |parent: &mut Value, key: &str, path: String| {
        if let Some(map) = parent.as_object_mut()
            && map.contains_key(key)
        {
            found.push(path);
            if remove {
                map.remove(key);
            }
        }
    };
    for gated in &GATED {
        match gated {
            Gated::Spec(key) => take(spec, key, format!("{prefix}.{key}")),
            Gated::Container(key) => {
                for list in CONTAINER_LISTS {
                    for (i, c) in items(spec, list) {
                        take(c, key, format!("{prefix}.{list}[{i}].{key}"));
                    }
                }
            }
            Gated::EnvSource(key) => {
                for list in CONTAINER_LISTS {
                    for (i, c) in items(spec, list) {
                        for (j, env) in items(c, "env") {
                            if let Some(source) = env.get_mut("valueFrom") {
                                let path = format!("{prefix}.{list}[{i}].env[{j}].valueFrom.{key}");
                                take(source, key, path);
                            }
                        }
                    }
                }
            }
            Gated::Projection(key) => {
                for (i, v) in items(spec, "volumes") {
                    if let Some(projected) = v.get_mut("projected") {
                        for (j, s) in items(projected, "sources") {
                            let path =
                                format!("{prefix}.volumes[{i}].projected.sources[{j}].{key}");
                            take(s, key, path);
                        }
                    }
                }
            }
        }
    }
}

/// The elements of the array `value[key]`, with their indexes.
fn items<'a>(value: &'a mut Value, key: &str) -> impl Iterator<Item = (usize, &'a mut Value)> {
    value
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flat_map(|a| a.iter_mut().enumerate())
}

fn pod_spec<'a>(kind: &str, obj: &'a mut Value) -> Option<(&'a mut Value, String)> {
    let path = pod_spec_path(kind)?;
    let mut at = obj;
    for key in path {
        at = at.get_mut(*key)?;
    }
    Some((at, path.join(".")))
}

/// The paths of the gated fields `obj` carries (`spec.hostnameOverride`, …).
pub fn paths(kind: &str, obj: &Value) -> Vec<String> {
    let mut copy = obj.clone();
    let mut found = Vec::new();
    if let Some((spec, prefix)) = pod_spec(kind, &mut copy) {
        visit(spec, &prefix, false, &mut found);
    }
    found
}

/// Drops the gated fields from `obj`, as upstream drops them with the gates off.
pub fn drop(kind: &str, obj: &mut Value) {
    if let Some((spec, prefix)) = pod_spec(kind, obj) {
        visit(spec, &prefix, true, &mut Vec::new());
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
