//! Small object bodies the tests create through the API (configmaps, bare pods, pods owned by a
//! ReplicaSet, Events about an object) and readers for the metadata they check.

use serde_json::{Value, json};

pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

pub fn configmap(name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_string(), Value::from(*v)))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// A bare pod with one busybox container and the given labels. No agent exists in the
/// control-plane tests, so it stays Pending.
pub fn pod(name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_string(), Value::from(*v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.28", "command": ["true"]}]}
    })
}

/// The owner reference a ReplicaSet controller would put on its pods.
pub fn controller_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true
    })
}

/// `pod(name, labels)` owned by `owner` (see [`controller_ref`]).
pub fn owned_pod(name: &str, labels: &[(&str, &str)], owner: &Value) -> Value {
    let mut p = pod(name, labels);
    p["metadata"]["ownerReferences"] = json!([owner]);
    p
}

/// A core/v1 Event about `object` (as returned by the API: kind, apiVersion, metadata with uid).
pub fn event_about(object: &Value, reason: &str, message: &str) -> Value {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or("object");
    let now = now_rfc3339();
    let mut involved = json!({
        "apiVersion": object["apiVersion"],
        "kind": object["kind"],
        "name": name,
        "uid": meta["uid"],
    });
    if let Some(ns) = meta["namespace"].as_str() {
        involved["namespace"] = Value::from(ns);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{name}.berth-test-{}", reason.to_ascii_lowercase())},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": "berth-tests"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1
    })
}

/// Now, in whole seconds, as Kubernetes writes `Time` fields (`2024-05-01T12:00:00Z`).
pub fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// `metadata.resourceVersion` as a number (Berth's revisions are a global counter); panics with
/// the object if it is missing or not a number.
pub fn rv(object: &Value) -> u64 {
    let raw = &object["metadata"]["resourceVersion"];
    raw.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("resourceVersion {raw} is not a decimal revision in {object:#}"))
}

/// `metadata.uid`, panicking with the object if missing.
pub fn uid(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no metadata.uid in {object:#}"))
}

/// A Deployment `name` of `replicas` pods labelled `app: <name>` (its selector) with pod spec
/// `spec`, in the namespace it is created in.
pub fn deployment(name: &str, replicas: usize, spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    })
}

/// A DaemonSet `name` in `ns` running `nginx:1.14.2` (container `web`, label `app: <name>`,
/// 5 s grace) on every node.
pub fn nginx_daemon_set(name: &str, ns: &str) -> Value {
    daemon_set(
        name,
        ns,
        json!({"terminationGracePeriodSeconds": 5,
            "containers": [{"name": "web", "image": "nginx:1.14.2"}]}),
    )
}

/// A DaemonSet `name` in `ns` of pods labelled `app: <name>` (its selector) with pod spec
/// `spec`.
pub fn daemon_set(name: &str, ns: &str, spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})
}

/// `key:effect` of each of a Node's taints, in order.
pub fn taint_keys(node: &Value) -> Vec<String> {
    let Some(taints) = node["spec"]["taints"].as_array() else {
        return Vec::new();
    };
    let field = |t: &Value, name: &str| t[name].as_str().unwrap_or("").to_string();
    taints
        .iter()
        .map(|t| format!("{}:{}", field(t, "key"), field(t, "effect")))
        .collect()
}

/// The `items` of a list, panicking with the body if it is not a list.
pub fn items(list: &Value) -> &Vec<Value> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list:#}"))
}

/// The names of a list's items, in order.
pub fn names(list: &Value) -> Vec<String> {
    items(list)
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Checks a `Status` error body: `status: Failure`, the HTTP `code` and `reason`. Returns the
/// message. Err carries what was wrong.
pub fn failure_status(body: &Value, code: u16, reason: &str) -> Result<String, String> {
    let message = body["message"].as_str().unwrap_or_default().to_string();
    let problems: Vec<String> = [
        (body["kind"] != "Status").then(|| format!("kind {} (want Status)", body["kind"])),
        (body["status"] != "Failure").then(|| format!("status {} (want Failure)", body["status"])),
        (body["code"] != code).then(|| format!("code {} (want {code})", body["code"])),
        (body["reason"] != reason).then(|| format!("reason {} (want {reason})", body["reason"])),
        message.is_empty().then(|| "empty message".to_string()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if problems.is_empty() {
        Ok(message)
    } else {
        Err(problems.join("; "))
    }
}

/// `patch` merged into `into` as a JSON merge patch does, without deleting on `null`: objects
/// key by key, anything else replaced.
pub fn merge(into: &mut Value, patch: &Value) {
    match (into, patch) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_has_whole_seconds_and_a_z() {
        let now = now_rfc3339();
        assert_eq!(now.len(), "2024-05-01T12:00:00Z".len(), "{now}");
        assert!(now.ends_with('Z'));
    }

    #[test]
    fn an_event_points_at_the_object_it_is_about() {
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "frontend", "namespace": "ns1", "uid": "u-1"}});
        let e = event_about(&rs, "Tested", "hello");
        assert_eq!(e["involvedObject"]["uid"], "u-1");
        assert_eq!(e["involvedObject"]["namespace"], "ns1");
        assert_eq!(e["involvedObject"]["kind"], "ReplicaSet");
        assert_eq!(e["metadata"]["name"], "frontend.berth-test-tested");
    }

    #[test]
    fn failure_status_names_every_mismatch() {
        let body = json!({"kind": "Status", "status": "Failure", "code": 409, "reason": "Conflict",
            "message": "the object has been modified"});
        assert_eq!(
            failure_status(&body, 409, "Conflict").unwrap(),
            "the object has been modified"
        );
        let err = failure_status(&body, 422, "Invalid").unwrap_err();
        assert!(
            err.contains("code 409 (want 422)") && err.contains("want Invalid"),
            "{err}"
        );
    }

    #[test]
    fn rv_reads_the_decimal_revision() {
        assert_eq!(rv(&json!({"metadata": {"resourceVersion": "42"}})), 42);
    }

    #[test]
    fn owned_pods_carry_a_controller_reference() {
        let owner = controller_ref("apps/v1", "ReplicaSet", "frontend", "u-1");
        let p = owned_pod("frontend-a", &[("tier", "frontend")], &owner);
        assert_eq!(p["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(p["metadata"]["labels"]["tier"], "frontend");
    }
}
