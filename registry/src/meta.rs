//! Server-managed metadata: type checks, namespaces, names against the URL, generated names,
//! uid and timestamps on create, the uid an update may not change, spec/status separation and
//! generation on update, and when finalizers release an object.

use super::RegistryError;
use berth_shared::resource::ResourceType;
use rand::Rng;
use serde_json::{Value, json};

/// Upstream's alphabet for generated name suffixes (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Five random characters, as `generateName` and controllers' pod names use.
pub fn random_suffix() -> String {
    let mut rng = rand::rng();
    (0..5)
        .map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char)
        .collect()
}

/// The body must be an object of this resource's kind and apiVersion (filled in when absent).
/// A `null` body is an empty object, as upstream's decoder reads it.
pub fn check_type(rt: &ResourceType, obj: &mut Value) -> Result<(), RegistryError> {
    if obj.is_null() {
        *obj = json!({});
    }
    let Some(map) = obj.as_object_mut() else {
        return Err(RegistryError::BadRequest(
            "the body of the request must be a JSON object".to_string(),
        ));
    };
    let want = rt.api_version();
    // The kind first, as upstream's decoder finds it before the version check.
    if let Some(k) = map.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != rt.kind
    {
        let data_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .unwrap_or(&want);
        return Err(RegistryError::BadRequest(wrong_kind(rt, k, data_version)));
    }
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), json!(want));
        }
        Some(v) if v == want => {}
        Some(v) => {
            return Err(RegistryError::BadRequest(format!(
                "the API version in the data ({v}) does not match the expected API version ({want})"
            )));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), json!(rt.kind));
        }
        Some(_) => {}
    }
    if !map.get("metadata").is_some_and(Value::is_object) {
        if map.get("metadata").is_some_and(|m| !m.is_null()) {
            return Err(RegistryError::BadRequest(
                "metadata must be an object".to_string(),
            ));
        }
        map.insert("metadata".into(), json!({}));
    }
    Ok(())
}

/// Upstream's answer to a body of another kind (`transformDecodeError` with the data's kind):
/// the decoder reads the other kind, then finds no conversion into the URL's. Example, a Pod
/// posted to `/api/v1/namespaces`: `Pod in version "v1" cannot be handled as a Namespace:
/// converting (v1.Pod) to (core.Namespace): unknown conversion` (`core` is the internal
/// package of the core group, else the group's first label: `apps`, `rbac`, …).
fn wrong_kind(rt: &ResourceType, kind: &str, api_version: &str) -> String {
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    let internal = match rt.group {
        "" => "core",
        g => g.split('.').next().unwrap_or(g),
    };
    format!(
        "{kind} in version \"{version}\" cannot be handled as a {want}: converting \
         ({version}.{kind}) to ({internal}.{want}): unknown conversion",
        want = rt.kind
    )
}

fn metadata(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(m) => m,
        None => unreachable!("metadata was just made an object"),
    }
}

/// Namespaced kinds take the request's namespace (a different one in the body is an error);
/// cluster-scoped kinds carry none.
pub fn set_namespace(
    rt: &ResourceType,
    ns: Option<&str>,
    obj: &mut Value,
) -> Result<(), RegistryError> {
    let meta = metadata(obj);
    if !rt.namespaced {
        meta.remove("namespace");
        return Ok(());
    }
    let Some(ns) = ns else {
        return Err(RegistryError::BadRequest(
            "the namespace of the object must be set in the request path".to_string(),
        ));
    };
    match meta.get("namespace").and_then(Value::as_str) {
        Some(body) if !body.is_empty() && body != ns => Err(RegistryError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .to_string(),
        )),
        _ => {
            meta.insert("namespace".into(), json!(ns));
            Ok(())
        }
    }
}

/// The object of an update names the object of the URL (upstream's `checkName`, in
/// endpoints/handlers/rest.go, run on PUT bodies and on patched objects).
/// Removes the owner reference to `owner_uid` from `obj` (a controller releasing an object),
/// dropping `ownerReferences` when none is left.
pub fn release_owner(obj: &mut Value, owner_uid: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let empty = match meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        Some(refs) => {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
            refs.is_empty()
        }
        None => false,
    };
    if empty {
        meta.remove("ownerReferences");
    }
}

pub fn check_name(obj: &Value, url_name: &str) -> Result<(), RegistryError> {
    match obj.pointer("/metadata/name").and_then(Value::as_str) {
        None | Some("") => Err(RegistryError::BadRequest(format!(
            "the name of the object ({url_name} based on URL) was undeterminable: name must be \
             provided"
        ))),
        Some(name) if name != url_name => Err(RegistryError::BadRequest(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        ))),
        Some(_) => Ok(()),
    }
}

/// Whether a create body carries a resourceVersion that upstream's storage refuses: one that
/// parses as a non-zero unsigned integer (`APIObjectVersioner`; an unparsable one is ignored
/// and dropped, as upstream drops it).
pub fn carries_resource_version(obj: &Value) -> bool {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| rv.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|rv| rv.parse::<u64>().ok())
        .is_some_and(|rv| rv != 0)
}

fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Where upstream keeps the object in etcd, as its storage errors name it.
fn storage_key(rt: &ResourceType, obj: &Value) -> String {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) if rt.namespaced => format!("/registry/{}/{ns}/{name}", rt.plural),
        _ => format!("/registry/{}/{name}", rt.plural),
    }
}

/// A uid in a PUT body is a precondition on the stored object (upstream's
/// `defaultUpdatedObjectInfo.Preconditions`, checked by the storage before the update): a
/// different one is a 409 Conflict carrying the storage error.
pub fn check_uid_precondition(
    rt: &ResourceType,
    name: &str,
    body: &Value,
    stored: &Value,
) -> Result<(), RegistryError> {
    let (want, have) = (uid_of(body), uid_of(stored));
    if want.is_empty() || want == have {
        return Ok(());
    }
    Err(RegistryError::conflict_because(
        rt,
        name,
        &format!(
            "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, \
             AdditionalErrorMsg: Precondition failed: UID in precondition: {want}, UID in object \
             meta: {have}",
            storage_key(rt, stored)
        ),
    ))
}

/// An update may not change the uid (upstream's `ValidateObjectMetaAccessorUpdate`; a patch
/// that does gets 422). A missing one is the stored one.
pub fn check_uid_unchanged(
    rt: &ResourceType,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), RegistryError> {
    let (was, now) = (uid_of(old), uid_of(new));
    if now.is_empty() || now == was {
        return Ok(());
    }
    Err(RegistryError::invalid(
        rt,
        name,
        vec![berth_shared::admission::FieldError {
            error_type: berth_shared::admission::FieldErrorType::Invalid,
            field: "metadata.uid".to_string(),
            bad_value: Some(json!(now)),
            detail: "field is immutable".to_string(),
        }],
    ))
}

/// The object's name: `metadata.name`, or `generateName` plus a random suffix.
pub fn assign_name(rt: &ResourceType, obj: &mut Value) -> Result<String, RegistryError> {
    let meta = metadata(obj);
    if let Some(name) = meta.get("name").and_then(Value::as_str)
        && !name.is_empty()
    {
        return Ok(name.to_string());
    }
    if let Some(base) = meta.get("generateName").and_then(Value::as_str)
        && !base.is_empty()
    {
        // Upstream truncates the base so the whole name stays within 63 characters.
        let base: String = base.chars().take(58).collect();
        let name = format!("{base}{}", random_suffix());
        meta.insert("name".into(), json!(name));
        return Ok(name);
    }
    Err(RegistryError::invalid(
        rt,
        "",
        vec![berth_shared::admission::FieldError {
            error_type: berth_shared::admission::FieldErrorType::Required,
            field: "metadata.name".to_string(),
            bad_value: None,
            detail: "name or generateName is required".to_string(),
        }],
    ))
}

/// Server-set metadata on create, and a fresh status where the kind's status is the
/// controllers' to write.
pub fn prepare_for_create(rt: &ResourceType, obj: &mut Value, generation: bool) {
    let meta = metadata(obj);
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("managedFields");
    meta.remove("selfLink");
    if generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    if rt.has_status
        && !matches!(rt.kind, "Node" | "Event")
        && let Some(map) = obj.as_object_mut()
    {
        match fresh_status(rt.kind) {
            Some(status) => map.insert("status".into(), status),
            None => map.remove("status"),
        };
    }
}

/// The status a new object starts with, whatever the client sent: its kind's zero value, as
/// upstream's `PrepareForCreate` resets it (`Status = apps.DeploymentStatus{}`). On the wire
/// that is `status: {}` for a Deployment or Job, and the counters Go writes without
/// `omitempty` at 0 for the others (`status: {replicas: 0}` for a ReplicaSet). Clients read
/// `d.status.ready_replicas` straight after a create, so the stanza must be there.
/// (Pods and Namespaces get their phase from admission, which runs after this.) `None` for
/// the kinds whose status is dropped instead (custom resources with a status subresource).
pub fn fresh_status(kind: &str) -> Option<Value> {
    use berth_shared::k8s_openapi::api::{
        apps::v1 as apps, core::v1 as core, policy::v1 as policy,
    };
    let zero = match kind {
        "ReplicaSet" => serde_json::to_value(apps::ReplicaSetStatus::default()),
        "StatefulSet" => serde_json::to_value(apps::StatefulSetStatus::default()),
        "DaemonSet" => serde_json::to_value(apps::DaemonSetStatus::default()),
        "ReplicationController" => {
            serde_json::to_value(core::ReplicationControllerStatus::default())
        }
        "PodDisruptionBudget" => serde_json::to_value(policy::PodDisruptionBudgetStatus::default()),
        "HorizontalPodAutoscaler" => serde_json::to_value(
            berth_shared::k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerStatus::default(
            ),
        ),
        "Deployment"
        | "Job"
        | "CronJob"
        | "Pod"
        | "Namespace"
        | "PersistentVolume"
        | "PersistentVolumeClaim"
        | "CertificateSigningRequest" => Ok(json!({})),
        // `loadBalancer` has no `omitempty` in Go: a new Service reads `status.loadBalancer: {}`.
        "Service" => Ok(json!({"loadBalancer": {}})),
        _ => return None,
    };
    Some(zero.unwrap_or_else(|_| json!({})))
}

/// Merges an update into the stored object: server-managed metadata is kept, the part not
/// being updated (status for the main resource, everything else for `/status`) comes from the
/// stored object, and generation moves when the spec changed.
pub fn prepare_for_update(rt: &ResourceType, old: &Value, new: Value, part: super::Part) -> Value {
    let mut obj = match part {
        _ if rt.kind == "CertificateSigningRequest" => {
            crate::certificates::strategy::merge(old, new, part, &now_rfc3339())
        }
        // Only CertificateSigningRequests have it.
        super::Part::Approval => old.clone(),
        super::Part::Status => {
            // The stored object with the new status: the old status is not copied, the new
            // one is moved.
            let mut new = new;
            let mut status = new.as_object_mut().and_then(|m| m.remove("status"));
            match old.as_object() {
                Some(fields) => {
                    let mut o = serde_json::Map::new();
                    for (k, v) in fields {
                        if k != "status" {
                            o.insert(k.clone(), v.clone());
                        } else if let Some(s) = status.take() {
                            o.insert(k.clone(), s);
                        }
                    }
                    if let Some(s) = status {
                        o.insert("status".into(), s);
                    }
                    Value::Object(o)
                }
                None => old.clone(),
            }
        }
        super::Part::EphemeralContainers => {
            let mut o = old.clone();
            let ephemeral = new.pointer("/spec/ephemeralContainers").cloned();
            if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
                match ephemeral {
                    Some(e) => spec.insert("ephemeralContainers".into(), e),
                    None => spec.remove("ephemeralContainers"),
                };
            }
            o
        }
        super::Part::Main => {
            let mut o = new;
            // Ephemeral containers come only through their subresource (upstream: "cannot
            // be added by editing the pod spec"): the main resource keeps the stored ones.
            if rt.kind == "Pod" {
                let stored = old.pointer("/spec/ephemeralContainers").cloned();
                if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
                    match stored {
                        Some(e) => spec.insert("ephemeralContainers".into(), e),
                        None => spec.remove("ephemeralContainers"),
                    };
                }
            }
            if rt.has_status {
                match old.get("status") {
                    Some(s) => o["status"] = s.clone(),
                    None => {
                        if let Some(m) = o.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            o
        }
    };
    let no_meta = serde_json::Map::new();
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&no_meta);
    let meta = metadata(&mut obj);
    for key in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "name",
        "namespace",
        "generation",
    ] {
        match old_meta.get(key) {
            Some(v) => {
                meta.insert(key.into(), v.clone());
            }
            None => {
                meta.remove(key);
            }
        }
    }
    meta.remove("resourceVersion");
    meta.remove("selfLink");
    obj
}

/// Moves `metadata.generation` on when the spec of `obj` (admitted: defaulted as it will be
/// stored) differs from the stored one's. Run after admission, so a body that differs only in
/// what defaulting fills in (a re-applied manifest) leaves it, as upstream's strategies do.
pub fn advance_generation(old: &Value, obj: &mut Value) {
    if spec_changed(old, obj) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        metadata(obj).insert("generation".into(), json!(g + 1));
    }
}

fn spec_changed(old: &Value, new: &Value) -> bool {
    // Everything outside metadata and status counts as spec (CronJob, ControllerRevision data…).
    !equal_fields(old, new, |k| k != "metadata" && k != "status")
}

/// Whether two versions of an object differ only in their resourceVersion.
pub fn same_ignoring_version(a: &Value, b: &Value) -> bool {
    equal_fields(a, b, |k| k != "metadata")
        && match (a.get("metadata"), b.get("metadata")) {
            (Some(ma), Some(mb)) => equal_fields(ma, mb, |k| k != "resourceVersion"),
            (ma, mb) => ma == mb,
        }
}

/// Whether `a` and `b` are equal in every top-level field `compared` names (without copying
/// either); two values that are not both objects are compared whole.
fn equal_fields(a: &Value, b: &Value, compared: impl Fn(&str) -> bool) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => a
            .keys()
            .chain(b.keys())
            .filter(|k| compared(k))
            .all(|k| a.get(k) == b.get(k)),
        _ => a == b,
    }
}

/// A terminating object with no finalizers left is removed from the store.
pub fn is_finalized(rt: &ResourceType, obj: &Value) -> bool {
    if obj.pointer("/metadata/deletionTimestamp").is_none() {
        return false;
    }
    let empty = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_array)
            .is_none_or(|a| a.is_empty())
    };
    if !empty("/metadata/finalizers") {
        return false;
    }
    if rt.kind == "Namespace" && !empty("/spec/finalizers") {
        return false;
    }
    if rt.kind == "Pod" && obj.pointer("/spec/nodeName").is_some() {
        // A pod on a node is removed by its node's agent (grace period 0), not by finalizers.
        return obj
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            == Some(0);
    }
    true
}

/// A JSON object of strings as a map; non-string values and a missing object read as empty.
pub fn string_map(v: Option<&Value>) -> std::collections::BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::resource::by_plural;

    #[test]
    fn generation_moves_only_when_the_spec_changes() {
        let rt = by_plural("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "d", "generation": 1, "uid": "u"}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let labels =
            json!({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}});
        let mut out = prepare_for_update(rt, &old, labels, crate::Part::Main);
        advance_generation(&old, &mut out);
        assert_eq!(out["metadata"]["generation"], json!(1));
        assert_eq!(
            out["status"],
            json!({"replicas": 1}),
            "status is kept from the stored object"
        );
        let scaled = json!({"metadata": {"name": "d"}, "spec": {"replicas": 3}});
        let mut out = prepare_for_update(rt, &old, scaled, crate::Part::Main);
        advance_generation(&old, &mut out);
        assert_eq!(out["metadata"]["generation"], json!(2));
        assert_eq!(out["metadata"]["uid"], json!("u"));
    }

    #[test]
    fn a_created_object_starts_with_its_kinds_zero_status_as_upstream_writes_it() {
        let table = [
            ("apps", "deployments", json!({})),
            ("batch", "jobs", json!({})),
            ("batch", "cronjobs", json!({})),
            ("apps", "replicasets", json!({"replicas": 0})),
            ("", "replicationcontrollers", json!({"replicas": 0})),
            (
                "apps",
                "daemonsets",
                json!({"currentNumberScheduled": 0, "desiredNumberScheduled": 0,
                       "numberMisscheduled": 0, "numberReady": 0}),
            ),
            (
                "policy",
                "poddisruptionbudgets",
                json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0,
                       "expectedPods": 0}),
            ),
            ("", "services", json!({"loadBalancer": {}})),
        ];
        for (group, plural, want) in table {
            let rt = by_plural(group, "v1", plural).unwrap();
            // Whatever the client sent as status is replaced.
            let mut obj = json!({"metadata": {"name": "x"}, "spec": {}, "status": {"replicas": 7}});
            prepare_for_create(rt, &mut obj, true);
            assert_eq!(obj["status"], want, "{plural}");
        }
        let rt = by_plural("apps", "v1", "statefulsets").unwrap();
        let mut obj = json!({"metadata": {"name": "x"}, "spec": {}});
        prepare_for_create(rt, &mut obj, true);
        assert_eq!(obj["status"]["replicas"], json!(0));
        // A kind without a status stanza gets none.
        let rt = by_plural("", "v1", "configmaps").unwrap();
        let mut obj = json!({"metadata": {"name": "x"}, "data": {}});
        prepare_for_create(rt, &mut obj, false);
        assert!(obj.get("status").is_none());
    }

    #[test]
    fn a_body_of_another_kind_is_refused_in_upstreams_words() {
        let ns = by_plural("", "v1", "namespaces").unwrap();
        let rs = by_plural("apps", "v1", "replicasets").unwrap();
        let table = [
            (
                ns,
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
                "Pod in version \"v1\" cannot be handled as a Namespace: converting (v1.Pod) \
                 to (core.Namespace): unknown conversion",
            ),
            (
                rs,
                json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
                "Deployment in version \"v1\" cannot be handled as a ReplicaSet: converting \
                 (v1.Deployment) to (apps.ReplicaSet): unknown conversion",
            ),
            (
                // The kind is judged before the version.
                ns,
                json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
                "Deployment in version \"v1\" cannot be handled as a Namespace: converting \
                 (v1.Deployment) to (core.Namespace): unknown conversion",
            ),
        ];
        for (rt, mut body, want) in table {
            match check_type(rt, &mut body) {
                Err(RegistryError::BadRequest(m)) => assert_eq!(m, want),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn status_updates_change_nothing_but_status() {
        let rt = by_plural("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "d", "generation": 1}, "spec": {"replicas": 1}});
        let new =
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 5}, "status": {"replicas": 1}});
        let out = prepare_for_update(rt, &old, new, crate::Part::Status);
        assert_eq!(out["spec"]["replicas"], json!(1));
        assert_eq!(out["status"]["replicas"], json!(1));
        assert_eq!(out["metadata"]["generation"], json!(1));
        // The status keeps its place among the fields, and a body without one clears it.
        let old = json!({"metadata": {"name": "d"}, "status": {"replicas": 1}, "spec": {}});
        let new = json!({"metadata": {"name": "d"}, "status": {"replicas": 2}});
        let out = prepare_for_update(rt, &old, new, crate::Part::Status);
        let keys: Vec<&String> = out
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["metadata", "status", "spec"]);
        assert_eq!(out["status"], json!({"replicas": 2}));
        let out = prepare_for_update(rt, &old, json!({"metadata": {}}), crate::Part::Status);
        assert_eq!(out, json!({"metadata": {"name": "d"}, "spec": {}}));
    }

    #[test]
    fn versions_are_the_same_when_only_the_resource_version_differs() {
        let obj = |rv: &str, replicas: i64| json!({"metadata": {"name": "d", "resourceVersion": rv}, "spec": {"replicas": replicas}});
        let table = [
            (obj("1", 1), obj("2", 1), true),
            (obj("1", 1), obj("1", 2), false),
            (
                obj("1", 1),
                json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}}),
                true,
            ),
            (
                obj("1", 1),
                json!({"metadata": {"name": "e", "resourceVersion": "1"},
                "spec": {"replicas": 1}}),
                false,
            ),
            (obj("1", 1), json!({"spec": {"replicas": 1}}), false),
            (json!({"spec": {}}), json!({"spec": {}}), true),
            (
                obj("1", 1),
                json!({"metadata": {"name": "d", "resourceVersion": "1"},
                "spec": {"replicas": 1}, "status": {}}),
                false,
            ),
        ];
        for (a, b, want) in table {
            assert_eq!(same_ignoring_version(&a, &b), want, "{a} {b}");
            assert_eq!(same_ignoring_version(&b, &a), want, "{b} {a}");
        }
        // Everything but metadata and status is spec.
        let mut moved = obj("1", 1);
        advance_generation(&obj("1", 2), &mut moved);
        assert_eq!(moved["metadata"]["generation"], json!(1));
        let mut same = obj("1", 1);
        same["status"] = json!({"replicas": 3});
        advance_generation(&obj("2", 1), &mut same);
        assert_eq!(same["metadata"].get("generation"), None);
    }

    #[test]
    fn an_updated_object_must_name_the_urls_object() {
        let named = |n: &str| json!({"metadata": {"name": n}});
        assert!(check_name(&named("web"), "web").is_ok());
        let message = |r: Result<(), RegistryError>| match r {
            Err(RegistryError::BadRequest(m)) => m,
            other => panic!("want BadRequest, got {other:?}"),
        };
        assert_eq!(
            message(check_name(&named("other"), "web")),
            "the name of the object (other) does not match the name on the URL (web)"
        );
        for nameless in [json!({}), json!({"metadata": {}}), named("")] {
            assert_eq!(
                message(check_name(&nameless, "web")),
                "the name of the object (web based on URL) was undeterminable: name must be \
                 provided"
            );
        }
    }

    #[test]
    fn only_a_numeric_non_zero_resource_version_is_refused_on_create() {
        let with = |rv: &str| json!({"metadata": {"resourceVersion": rv}});
        assert!(carries_resource_version(&with("12")));
        // Upstream parses it as an unsigned integer and ignores what it cannot parse.
        for allowed in ["", "0", "00", "-1", "+1", "abc"] {
            assert!(!carries_resource_version(&with(allowed)), "{allowed:?}");
        }
        assert!(!carries_resource_version(&json!({"metadata": {}})));
    }

    #[test]
    fn a_put_bodys_uid_is_a_precondition_on_the_stored_object() {
        let rt = by_plural("", "v1", "configmaps").unwrap();
        let stored = json!({"metadata": {"name": "cm", "namespace": "default", "uid": "real"}});
        assert!(check_uid_precondition(rt, "cm", &json!({"metadata": {}}), &stored).is_ok());
        let same = json!({"metadata": {"uid": "real"}});
        assert!(check_uid_precondition(rt, "cm", &same, &stored).is_ok());
        let other = json!({"metadata": {"uid": "other"}});
        let e = check_uid_precondition(rt, "cm", &other, &stored).unwrap_err();
        assert!(matches!(e, RegistryError::Conflict { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "Operation cannot be fulfilled on configmaps \"cm\": StorageError: invalid object, \
             Code: 4, Key: /registry/configmaps/default/cm, ResourceVersion: 0, \
             AdditionalErrorMsg: Precondition failed: UID in precondition: other, UID in object \
             meta: real"
        );
    }

    #[test]
    fn an_update_that_changes_the_uid_is_invalid_and_one_without_keeps_it() {
        let rt = by_plural("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "web", "uid": "real"}});
        assert!(check_uid_unchanged(rt, "web", &old, &json!({"metadata": {}})).is_ok());
        assert!(check_uid_unchanged(rt, "web", &old, &old).is_ok());
        let changed = json!({"metadata": {"name": "web", "uid": "forged"}});
        let e = check_uid_unchanged(rt, "web", &old, &changed).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Deployment.apps \"web\" is invalid: metadata.uid: Invalid value: \"forged\": field \
             is immutable"
        );
    }

    #[test]
    fn a_null_body_is_an_empty_object() {
        let rt = by_plural("", "v1", "configmaps").unwrap();
        let mut body = Value::Null;
        check_type(rt, &mut body).unwrap();
        assert_eq!(
            body,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
        );
    }

    #[test]
    fn terminating_objects_go_when_the_last_finalizer_does() {
        let rt = by_plural("", "v1", "configmaps").unwrap();
        let with = json!({"metadata": {"deletionTimestamp": "x", "finalizers": ["f"]}});
        let without = json!({"metadata": {"deletionTimestamp": "x", "finalizers": []}});
        let alive = json!({"metadata": {}});
        assert!(!is_finalized(rt, &with));
        assert!(is_finalized(rt, &without));
        assert!(!is_finalized(rt, &alive));
    }
}
