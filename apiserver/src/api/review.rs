//! The computed, never-stored kinds: access reviews (`SelfSubjectAccessReview`,
//! `SubjectAccessReview`, `LocalSubjectAccessReview`, `SelfSubjectRulesReview`, what
//! `kubectl auth can-i` asks), identity reviews (`SelfSubjectReview` for `kubectl auth whoami`,
//! `TokenReview`), and the TokenRequest subresource (`kubectl create token`).

use super::authn::Identity;
use super::error::ApiError;
use super::path::ResourcePath;
use super::{SharedState, json_response};
use crate::rbac::rules::{Attributes, User};
use axum::http::StatusCode;
use axum::response::Response;
use berth_registry::RegistryError;
use berth_shared::admission::{FieldError, FieldErrorType};
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

fn invalid(rt: &ResourcePath, field: &str, detail: &str) -> ApiError {
    RegistryError::Invalid {
        kind: rt.rt.kind.to_string(),
        group: rt.rt.group.to_string(),
        name: String::new(),
        causes: vec![FieldError {
            error_type: FieldErrorType::Required,
            field: field.to_string(),
            bad_value: None,
            detail: detail.to_string(),
        }],
    }
    .into()
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

/// The attributes a review's spec asks about.
fn spec_attributes(target: &ResourcePath, spec: &Value) -> Result<Attributes, ApiError> {
    let (res, non) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
    match (res.is_object(), non.is_object()) {
        (true, false) => Ok(Attributes::Resource {
            verb: text(res, "verb"),
            group: text(res, "group"),
            resource: text(res, "resource"),
            subresource: text(res, "subresource"),
            namespace: text(res, "namespace"),
            name: text(res, "name"),
        }),
        (false, true) => Ok(Attributes::NonResource {
            verb: text(non, "verb"),
            path: text(non, "path"),
        }),
        _ => Err(invalid(
            target,
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

fn created(mut review: Value, status: Value) -> Response {
    review["status"] = status;
    if review.get("metadata").is_none_or(|m| !m.is_object()) {
        review["metadata"] = json!({});
    }
    review["metadata"]["creationTimestamp"] = Value::Null;
    json_response(StatusCode::CREATED, &review)
}

fn user_info(id: &Identity) -> Value {
    let mut info = json!({"username": id.user, "groups": id.groups});
    if !id.uid.is_empty() {
        info["uid"] = json!(id.uid);
    }
    if !id.extra.is_empty() {
        info["extra"] = json!(id.extra);
    }
    info
}

fn access_status(allowed: Option<String>) -> Value {
    match allowed {
        Some(reason) => json!({"allowed": true, "reason": reason}),
        None => json!({"allowed": false}),
    }
}

/// Resource and non-resource rules as a rules review lists them.
fn rules_status(rules: &[PolicyRule]) -> Value {
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for r in rules {
        if r.non_resource_urls.as_ref().is_some_and(|u| !u.is_empty()) {
            non_resource_rules
                .push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
        }
        if r.resources.as_ref().is_some_and(|u| !u.is_empty()) {
            let mut rule = json!({"verbs": r.verbs, "apiGroups": r.api_groups.clone().unwrap_or_default(),
                                  "resources": r.resources});
            if let Some(names) = r.resource_names.as_ref().filter(|n| !n.is_empty()) {
                rule["resourceNames"] = json!(names);
            }
            resource_rules.push(rule);
        }
    }
    json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
           "incomplete": false})
}

/// `POST` of a review kind.
pub async fn create(
    state: &SharedState,
    id: Option<&Identity>,
    target: &ResourcePath,
    review: Value,
) -> Result<Response, ApiError> {
    let id = id.ok_or(ApiError::Unauthorized)?;
    let spec = review["spec"].clone();
    match target.rt.kind {
        "SelfSubjectAccessReview" => {
            let attrs = spec_attributes(target, &spec)?;
            let allowed = state
                .authorizer
                .allowed_fresh(&User::from(id), &attrs)
                .await;
            Ok(created(review, access_status(allowed)))
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let attrs = spec_attributes(target, &spec)?;
            if let Some(ns) = &target.namespace
                && attrs.namespace() != ns
            {
                return Err(ApiError::BadRequest(format!(
                    "spec.resourceAttributes.namespace must match namespace: {ns}"
                )));
            }
            let user = User {
                name: text(&spec, "user"),
                groups: spec["groups"]
                    .as_array()
                    .map(|g| {
                        g.iter()
                            .filter_map(|s| s.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            };
            if user.name.is_empty() && user.groups.is_empty() {
                return Err(invalid(
                    target,
                    "spec.user",
                    "at least one of user or group must be specified",
                ));
            }
            let allowed = state.authorizer.allowed_fresh(&user, &attrs).await;
            Ok(created(review, access_status(allowed)))
        }
        "SelfSubjectRulesReview" => {
            let ns = text(&spec, "namespace");
            state.authorizer.catch_up().await;
            let rules = state.authorizer.rules_for(&User::from(id), &ns);
            Ok(created(review, rules_status(&rules)))
        }
        "SelfSubjectReview" => Ok(created(review, json!({"userInfo": user_info(id)}))),
        "TokenReview" => {
            let token = text(&spec, "token");
            let st = state.clone();
            let verified = tokio::task::spawn_blocking(move || {
                crate::serviceaccount::authenticate(&st.registry, &st.tokens, &token)
            })
            .await
            .map_err(|e| ApiError::Internal(format!("token review failed: {e}")))?;
            let status = match verified {
                Ok(u) => {
                    let mut groups = u.groups;
                    groups.push(super::authn::AUTHENTICATED.to_string());
                    json!({"authenticated": true, "audiences": state.tokens.api_audiences,
                           "user": user_info(&Identity {user: u.name, uid: u.uid, groups, extra: u.extra})})
                }
                Err(e) => json!({"authenticated": false, "error": e.to_string()}),
            };
            Ok(created(review, status))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// `POST serviceaccounts/<name>/token`.
pub async fn token_request(
    state: &SharedState,
    ns: String,
    name: String,
    request: Value,
) -> Result<Response, ApiError> {
    let st = state.clone();
    let answer = super::blocking(move || {
        crate::serviceaccount::request_token(&st.registry, &st.tokens, &ns, &name, request)
    })
    .await?;
    Ok(json_response(StatusCode::CREATED, &answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_reviews_split_resource_and_url_rules() {
        let rules: Vec<PolicyRule> = serde_json::from_value(json!([
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]},
            {"verbs": ["get"], "nonResourceURLs": ["/api"]}
        ]))
        .unwrap();
        let s = rules_status(&rules);
        assert_eq!(
            s["resourceRules"],
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}])
        );
        assert_eq!(
            s["nonResourceRules"],
            json!([{"verbs": ["get"], "nonResourceURLs": ["/api"]}])
        );
    }
}
