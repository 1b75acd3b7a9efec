//! Subresources beyond status: `scale` (autoscaling/v1 Scale over spec.replicas), `binding`
//! (the scheduler's write of spec.nodeName) and `eviction` (policy/v1; the registry deletes the
//! pod unless a PodDisruptionBudget forbids it).

use super::error::ApiError;
use super::patch::apply;
use super::query::Query;
use super::{SharedState, blocking, json_response};
use axum::http::StatusCode;
use axum::response::Response;
use berth_registry::{DeleteOptions, Part, Registry, RegistryError, WriteOptions, meta};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use berth_shared::patch::PatchType;
use berth_shared::resource::ResourceType;
use berth_shared::selector::LabelSelector;
use bytes::Bytes;
use serde_json::{Value, json};

fn selector_string(obj: &Value) -> String {
    let Some(sel) = obj.pointer("/spec/selector") else {
        return String::new();
    };
    // ReplicationControllers have a plain map selector; the apps kinds a LabelSelector.
    let k8s: Option<K8sSelector> =
        if sel.get("matchLabels").is_some() || sel.get("matchExpressions").is_some() {
            serde_json::from_value(sel.clone()).ok()
        } else {
            serde_json::from_value(json!({"matchLabels": sel})).ok()
        };
    k8s.and_then(|s| LabelSelector::from_k8s(&s).ok())
        .map(|s| s.to_string())
        .unwrap_or_default()
}

/// Where a custom resource keeps what its Scale shows (its definition's `scale` subresource),
/// as JSON pointers; `None` for the built-in kinds (`spec.replicas`, `status.replicas` and the
/// selector of `spec.selector`).
struct CustomScale {
    spec: String,
    status: String,
    /// A string field holding the selector in its serialized form.
    selector: Option<String>,
}

fn custom_scale(rt: &ResourceType) -> Option<CustomScale> {
    let served = berth_shared::custom::served(rt)?;
    let paths = served.version.scale.as_ref()?;
    let pointer = |p: &str| p.replace('.', "/");
    Some(CustomScale {
        spec: pointer(&paths.spec_replicas),
        status: pointer(&paths.status_replicas),
        selector: paths.label_selector.as_deref().map(pointer),
    })
}

/// Sets the value at a JSON pointer of plain object fields, making the objects on the way.
fn set_at(obj: &mut Value, pointer: &str, value: Value) {
    let mut cur = obj;
    let mut parts = pointer.trim_start_matches('/').split('/').peekable();
    while let Some(part) = parts.next() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        if parts.peek().is_none() {
            map.insert(part.to_string(), value);
            return;
        }
        cur = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
}

fn scale_of(rt: &ResourceType, obj: &Value) -> Value {
    let mut scale = builtin_scale_of(obj);
    if let Some(c) = custom_scale(rt) {
        scale["spec"]["replicas"] = obj.pointer(&c.spec).cloned().unwrap_or(json!(0));
        scale["status"]["replicas"] = obj.pointer(&c.status).cloned().unwrap_or(json!(0));
        scale["status"]["selector"] = c
            .selector
            .and_then(|p| obj.pointer(&p).cloned())
            .unwrap_or(json!(""));
    }
    scale
}

fn builtin_scale_of(obj: &Value) -> Value {
    let m = &obj["metadata"];
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"],
            "namespace": m["namespace"],
            "uid": m["uid"],
            "resourceVersion": m["resourceVersion"],
            "creationTimestamp": m["creationTimestamp"],
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector_string(obj),
        },
    })
}

fn replicas_of(scale: &Value) -> Result<i64, ApiError> {
    scale
        .pointer("/spec/replicas")
        .map(|r| {
            r.as_i64()
                .ok_or_else(|| ApiError::BadRequest("spec.replicas must be an integer".into()))
        })
        .unwrap_or(Ok(0))
}

pub async fn get_scale(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    as_table: Option<berth_shared::table::IncludeObject>,
) -> Result<Response, ApiError> {
    let obj = state.registry.get(rt, ns, name)?.value()?;
    let scale = scale_of(rt, &obj);
    if let Some(include) = as_table {
        // `kubectl get --subresource=scale`: upstream's Scale columns.
        let rv = scale
            .pointer("/metadata/resourceVersion")
            .and_then(serde_json::Value::as_str);
        let t = berth_shared::table::table_with(
            "Scale",
            std::slice::from_ref(&scale),
            rv,
            jiff::Timestamp::now(),
            include,
        );
        return Ok(json_response(StatusCode::OK, &t));
    }
    Ok(json_response(StatusCode::OK, &scale))
}

fn invalid_replicas(_rt: &ResourceType, name: &str, n: i64) -> ApiError {
    RegistryError::Invalid {
        kind: "Scale".to_string(),
        group: "autoscaling".to_string(),
        name: name.to_string(),
        causes: vec![berth_shared::admission::FieldError {
            error_type: berth_shared::admission::FieldErrorType::Invalid,
            field: "spec.replicas".to_string(),
            bad_value: Some(json!(n)),
            detail: "must be greater than or equal to 0".to_string(),
        }],
    }
    .into()
}

/// A Scale body: an object (`null` reads as empty, as upstream decodes it) of autoscaling/v1
/// Scale when it says what it is.
fn check_scale_type(scale: &mut Value) -> Result<(), ApiError> {
    if scale.is_null() {
        *scale = json!({});
    }
    let Some(map) = scale.as_object() else {
        return Err(ApiError::BadRequest(
            "the body of the request must be a JSON object".to_string(),
        ));
    };
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("" | "autoscaling/v1") => {}
        Some(v) => {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({v}) does not match the expected API version \
                 (autoscaling/v1)"
            )));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("" | "Scale") => Ok(()),
        Some(k) => Err(ApiError::BadRequest(format!(
            "the kind in the data ({k}) does not match the expected kind (Scale)"
        ))),
    }
}

/// Upstream's scale update (`scaleUpdatedObjectInfo`): a uid in the Scale must be the owner's.
fn scale_uid_conflict(rt: &ResourceType, name: &str, scale: &Value, owner: &Value) -> ApiError {
    let uid = |v: &Value| {
        v.pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let resource = if rt.group.is_empty() {
        format!("{}/scale", rt.plural)
    } else {
        format!("{}/scale.{}", rt.plural, rt.group)
    };
    RegistryError::Conflict {
        resource,
        group: rt.group.to_string(),
        name: name.to_string(),
        detail: format!(
            "Precondition failed: UID in precondition: {}, UID in object meta: {}",
            uid(scale),
            uid(owner)
        ),
    }
    .into()
}

/// PUT of a Scale, checked in upstream's order: the body names the URL's object (400), its uid
/// is a precondition on the owner (409), the replicas are valid (422), its resourceVersion
/// matches (409).
pub async fn put_scale(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    mut body: Value,
    opts: WriteOptions,
) -> Result<Response, ApiError> {
    check_scale_type(&mut body)?;
    meta::set_namespace(rt, ns, &mut body)?;
    meta::check_name(&body, name)?;
    let replicas = replicas_of(&body)?;
    let want_rv = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let url_name = name.to_string();
    write_scale(state, rt, ns, name, opts, move |cur| {
        let name = &url_name;
        meta::check_uid_precondition(rt, name, &body, cur)?;
        if replicas < 0 {
            return Err(invalid_replicas(rt, name, replicas));
        }
        if let Some(rv) = &want_rv
            && cur
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                != Some(rv)
        {
            return Err(ApiError::conflict(rt, name));
        }
        Ok(replicas)
    })
    .await
}

/// PATCH of a Scale: the patched Scale keeps the URL's namespace and name (400), valid replicas
/// (422) and the owner's uid (409); a resourceVersion it carries is a precondition (409).
pub async fn patch_scale(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    content_type: &str,
    raw: Bytes,
    opts: WriteOptions,
) -> Result<Response, ApiError> {
    let pt = PatchType::from_content_type(content_type).ok_or(ApiError::UnsupportedMediaType)?;
    let doc = super::body::decode("application/json", &raw)?;
    let (url_ns, url_name) = (ns.map(String::from), name.to_string());
    write_scale(state, rt, ns, name, opts, move |cur| {
        let (ns, name) = (url_ns.as_deref(), &url_name);
        let mut scale = apply("Scale", pt, scale_of(rt, cur), &doc)?;
        check_scale_type(&mut scale)?;
        meta::set_namespace(rt, ns, &mut scale)?;
        meta::check_name(&scale, name)?;
        let replicas = replicas_of(&scale)?;
        if replicas < 0 {
            return Err(invalid_replicas(rt, name, replicas));
        }
        let uid = scale.pointer("/metadata/uid").and_then(Value::as_str);
        if uid.is_some_and(|u| !u.is_empty())
            && uid != cur.pointer("/metadata/uid").and_then(Value::as_str)
        {
            return Err(scale_uid_conflict(rt, name, &scale, cur));
        }
        // The registry holds the write to a resourceVersion the object carries.
        if let Some(rv) = scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty())
        {
            cur["metadata"]["resourceVersion"] = json!(rv);
        }
        Ok(replicas)
    })
    .await
}

/// Sets the owner's `spec.replicas` to what `decide` makes of its current version (retried
/// from a newer one on a conflicting write), off the async threads; answers with the new
/// Scale.
async fn write_scale(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    opts: WriteOptions,
    mut decide: impl FnMut(&mut Value) -> Result<i64, ApiError> + Send + 'static,
) -> Result<Response, ApiError> {
    let registry = state.registry.clone();
    let ns = ns.map(String::from);
    let name = name.to_string();
    let obj = blocking(move || {
        registry.update_with(rt, ns.as_deref(), &name, Part::Main, &opts, |mut cur| {
            let replicas = decide(&mut cur)?;
            match custom_scale(rt) {
                Some(c) => set_at(&mut cur, &c.spec, json!(replicas)),
                None => cur["spec"]["replicas"] = json!(replicas),
            }
            Ok::<_, ApiError>(cur)
        })
    })
    .await?;
    Ok(json_response(StatusCode::OK, &scale_of(rt, &obj)))
}

pub async fn bind(
    state: &SharedState,
    ns: Option<&str>,
    name: &str,
    body: Value,
) -> Result<Response, ApiError> {
    let node = body
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::BadRequest("a binding needs target.name".to_string()))?
        .to_string();
    write_pod(state, ns, name, move |r, ns, name| r.bind(ns, name, &node)).await
}

/// An Eviction names the pod of its URL, in the URL's namespace (upstream checks the namespace
/// in the create handler, then the name in `EvictionREST.Create`).
fn check_eviction(
    pods: &ResourceType,
    ns: Option<&str>,
    name: &str,
    body: &mut Value,
) -> Result<(), ApiError> {
    if body.is_null() {
        *body = json!({});
    }
    if !body.is_object() {
        return Err(ApiError::BadRequest(
            "the body of the request must be a JSON object".to_string(),
        ));
    }
    meta::set_namespace(pods, ns, body)?;
    if body.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
        return Err(ApiError::BadRequest(
            "name in URL does not match name in Eviction object".to_string(),
        ));
    }
    Ok(())
}

pub async fn evict(
    state: &SharedState,
    ns: Option<&str>,
    name: &str,
    mut body: Value,
    q: &Query,
) -> Result<Response, ApiError> {
    let Some(rt) = berth_shared::resource::by_plural("", "v1", "pods") else {
        return Err(ApiError::UnknownPath);
    };
    check_eviction(rt, ns, name, &mut body)?;
    let mut opts: DeleteOptions = body
        .get("deleteOptions")
        .filter(|o| !o.is_null())
        .map(|o| serde_json::from_value(o.clone()))
        .transpose()
        .map_err(|e| ApiError::BadRequest(format!("invalid deleteOptions: {e}")))?
        .unwrap_or_default();
    propagate_dry_run(&mut opts, super::query::write_options(q)?.dry_run)?;
    write_pod(state, ns, name, move |r, ns, name| r.evict(ns, name, &opts)).await
}

/// Runs `write` on the pod `name` in `ns` (`default` when none) off the async threads and
/// answers upstream's `201 Success` Status, as a pod's binding and eviction do.
async fn write_pod<T, E>(
    state: &SharedState,
    ns: Option<&str>,
    name: &str,
    write: impl FnOnce(&Registry, &str, &str) -> Result<T, E> + Send + 'static,
) -> Result<Response, ApiError>
where
    T: Send + 'static,
    E: Into<ApiError> + Send + 'static,
{
    let registry = state.registry.clone();
    let ns = ns.unwrap_or("default").to_string();
    let name = name.to_string();
    blocking(move || write(&registry, &ns, &name)).await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// Upstream `propagateDryRun`: the request's `dryRun` applies unless the Eviction's
/// `deleteOptions` say otherwise; both saying different things is a bad request.
fn propagate_dry_run(opts: &mut DeleteOptions, request: bool) -> Result<(), ApiError> {
    let asked: Vec<String> = if request {
        vec!["All".to_string()]
    } else {
        Vec::new()
    };
    match &opts.dry_run {
        None => opts.dry_run = (!asked.is_empty()).then_some(asked),
        Some(d) if d.is_empty() => opts.dry_run = (!asked.is_empty()).then_some(asked),
        Some(d) if !asked.is_empty() && *d != asked => {
            return Err(ApiError::BadRequest(format!(
                "Non-matching dry-run options in request and content: {asked:?} and {d:?}"
            )));
        }
        Some(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::resource::by_plural;

    fn pods() -> &'static ResourceType {
        by_plural("", "v1", "pods").expect("pods")
    }

    fn eviction(name: &str, ns: Option<&str>) -> Value {
        let mut e = json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name}, "deleteOptions": {}});
        if let Some(ns) = ns {
            e["metadata"]["namespace"] = json!(ns);
        }
        e
    }

    fn bad_request(r: Result<(), ApiError>) -> String {
        match r {
            // The API's own 400s and the registry's answer the same Status.
            Err(e) if e.reason() == "BadRequest" => e.to_string(),
            other => panic!("want BadRequest, got {other:?}"),
        }
    }

    #[test]
    fn an_eviction_must_name_the_pod_of_its_url() {
        let mut ok = eviction("web-1", Some("default"));
        assert!(check_eviction(pods(), Some("default"), "web-1", &mut ok).is_ok());
        let mut no_ns = eviction("web-1", None);
        assert!(check_eviction(pods(), Some("default"), "web-1", &mut no_ns).is_ok());
        for mut other in [eviction("web-2", None), json!({}), Value::Null] {
            assert_eq!(
                bad_request(check_eviction(pods(), Some("default"), "web-1", &mut other)),
                "name in URL does not match name in Eviction object"
            );
        }
    }

    #[test]
    fn an_eviction_in_another_namespace_is_refused_before_its_name_is_looked_at() {
        let mut e = eviction("web-2", Some("other"));
        assert_eq!(
            bad_request(check_eviction(pods(), Some("default"), "web-1", &mut e)),
            "the namespace of the provided object does not match the namespace sent on the request"
        );
    }

    #[test]
    fn a_scale_body_is_an_autoscaling_v1_scale_and_null_is_empty() {
        let mut null = Value::Null;
        assert!(check_scale_type(&mut null).is_ok());
        assert_eq!(null, json!({}));
        let mut scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale"});
        assert!(check_scale_type(&mut scale).is_ok());
        let mut wrong = json!({"apiVersion": "apps/v1", "kind": "Scale"});
        assert!(bad_request(check_scale_type(&mut wrong)).contains("apps/v1"));
        let mut list = json!([]);
        assert!(check_scale_type(&mut list).is_err());
    }

    #[test]
    fn a_scale_whose_uid_is_not_its_owners_conflicts_on_the_scale_resource() {
        let rt = by_plural("apps", "v1", "deployments").expect("deployments");
        let e = scale_uid_conflict(
            rt,
            "web",
            &json!({"metadata": {"uid": "forged"}}),
            &json!({"metadata": {"uid": "real"}}),
        );
        assert_eq!(e.code(), StatusCode::CONFLICT);
        assert_eq!(
            e.to_string(),
            "Operation cannot be fulfilled on deployments/scale.apps \"web\": Precondition failed: \
             UID in precondition: forged, UID in object meta: real"
        );
        assert_eq!(e.status()["details"]["kind"], "deployments/scale");
    }

    #[test]
    fn the_scale_of_an_object_carries_its_identity_and_replicas() {
        let d = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u",
            "resourceVersion": "7"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": 2}});
        let s = scale_of(
            by_plural("apps", "v1", "deployments").expect("deployments"),
            &d,
        );
        assert_eq!(s["metadata"]["uid"], "u");
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"]["selector"], "app=web");
        assert_eq!(replicas_of(&json!({})).ok(), Some(0));
    }

    #[test]
    fn a_path_is_set_through_missing_objects() {
        let mut obj = json!({"spec": {"other": 1}});
        set_at(&mut obj, "/spec/scaling/replicas", json!(4));
        assert_eq!(
            obj,
            json!({"spec": {"other": 1, "scaling": {"replicas": 4}}})
        );
    }
}
