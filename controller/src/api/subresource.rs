//! Subresources beyond status: `scale` (autoscaling/v1 Scale over spec.replicas), `binding`
//! (the scheduler's write of spec.nodeName) and `eviction` (policy/v1; deletes the pod).

use super::error::ApiError;
use super::patch::apply;
use super::query::Query;
use super::{SharedState, blocking, json_response};
use crate::registry::{DeleteOptions, Part};
use axum::http::StatusCode;
use axum::response::Response;
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

fn scale_of(obj: &Value) -> Value {
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
) -> Result<Response, ApiError> {
    let obj = state.registry.get(rt, ns, name)?.value()?;
    Ok(json_response(StatusCode::OK, &scale_of(&obj)))
}

fn invalid_replicas(_rt: &ResourceType, name: &str, n: i64) -> ApiError {
    ApiError::Invalid {
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
}

pub async fn put_scale(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    body: Value,
    q: &Query,
) -> Result<Response, ApiError> {
    let opts = super::query::write_options(q)?;
    let replicas = replicas_of(&body)?;
    if replicas < 0 {
        return Err(invalid_replicas(rt, name, replicas));
    }
    let want_rv = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let registry = state.registry.clone();
    let ns = ns.map(String::from);
    let name = name.to_string();
    let obj = blocking(move || {
        registry.update_with(rt, ns.as_deref(), &name, Part::Main, &opts, |mut cur| {
            if let Some(rv) = &want_rv
                && cur
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    != Some(rv)
            {
                return Err(ApiError::conflict(rt, &name));
            }
            cur["spec"]["replicas"] = json!(replicas);
            Ok(cur)
        })
    })
    .await?;
    Ok(json_response(StatusCode::OK, &scale_of(&obj)))
}

pub async fn patch_scale(
    state: &SharedState,
    rt: &'static ResourceType,
    ns: Option<&str>,
    name: &str,
    content_type: &str,
    raw: Bytes,
    q: &Query,
) -> Result<Response, ApiError> {
    let pt = PatchType::from_content_type(content_type).ok_or(ApiError::UnsupportedMediaType)?;
    let doc = super::body::decode("application/json", &raw)?;
    let opts = super::query::write_options(q)?;
    let registry = state.registry.clone();
    let ns = ns.map(String::from);
    let name = name.to_string();
    let obj = blocking(move || {
        registry.update_with(rt, ns.as_deref(), &name, Part::Main, &opts, |mut cur| {
            let scale = apply("Scale", pt, scale_of(&cur), &doc)?;
            let replicas = replicas_of(&scale)?;
            if replicas < 0 {
                return Err(invalid_replicas(rt, &name, replicas));
            }
            cur["spec"]["replicas"] = json!(replicas);
            Ok(cur)
        })
    })
    .await?;
    Ok(json_response(StatusCode::OK, &scale_of(&obj)))
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
    let registry = state.registry.clone();
    let ns = ns.unwrap_or("default").to_string();
    let name = name.to_string();
    blocking(move || registry.bind(&ns, &name, &node)).await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

pub async fn evict(
    state: &SharedState,
    ns: Option<&str>,
    name: &str,
    body: Value,
) -> Result<Response, ApiError> {
    let opts: DeleteOptions = body
        .get("deleteOptions")
        .map(|o| serde_json::from_value(o.clone()))
        .transpose()
        .map_err(|e| ApiError::BadRequest(format!("invalid deleteOptions: {e}")))?
        .unwrap_or_default();
    let registry = state.registry.clone();
    let ns = ns.map(String::from);
    let name = name.to_string();
    let Some(rt) = berth_shared::resource::by_plural("", "v1", "pods") else {
        return Err(ApiError::UnknownPath);
    };
    blocking(move || registry.delete(rt, ns.as_deref(), &name, &opts)).await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}
