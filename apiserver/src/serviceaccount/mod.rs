//! ServiceAccounts: bound tokens ([`token`]), the TokenRequest API (`serviceaccounts/token`),
//! authenticating a request by its token (the account and the pod or secret it is bound to
//! must still exist, with the same uids), and the ServiceAccount admission plugin that gives
//! every pod an account and its `kube-api-access-*` volume ([`admission`]).

pub use berth_registry::serviceaccount as admission;
pub mod token;

use berth_registry::{Registry, RegistryError};
use berth_shared::resource::{NODES, PODS, SECRETS, SERVICE_ACCOUNTS};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use token::{BoundRef, Claims, KubernetesClaims, TokenError, TokenSigner};

/// Who a verified token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The default and bounds of `expirationSeconds`, as upstream.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn uid_of(v: &Value) -> &str {
    v.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Why a token was not accepted (the client only ever sees 401).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("{0}")]
    Invalidated(String),
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// Verifies a bearer token and the objects it is bound to; blocks on the store.
pub fn authenticate(
    registry: &Registry,
    signer: &TokenSigner,
    token: &str,
) -> Result<TokenUser, AuthError> {
    let claims = signer.verify(token, now())?;
    let k = &claims.kubernetes;
    let ns = k.namespace.as_str();
    let current = |rt, name: &str, want_uid: &str, what: &str| -> Result<Value, AuthError> {
        let obj = match registry.get(rt, Some(ns), name) {
            Ok(o) => o.value().map_err(RegistryError::from)?,
            Err(RegistryError::NotFound { .. }) => {
                return Err(AuthError::Invalidated(format!(
                    "{what} {ns}/{name} has been deleted"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        if uid_of(&obj) != want_uid {
            return Err(AuthError::Invalidated(format!(
                "{what} UID ({}) does not match claim ({want_uid})",
                uid_of(&obj)
            )));
        }
        Ok(obj)
    };
    current(
        SERVICE_ACCOUNTS,
        &k.serviceaccount.name,
        &k.serviceaccount.uid,
        "service account",
    )?;
    let mut extra = BTreeMap::new();
    extra.insert(
        "authentication.kubernetes.io/credential-id".to_string(),
        vec![format!("JTI={}", claims.jti)],
    );
    if let Some(pod) = &k.pod {
        let obj = current(PODS, &pod.name, &pod.uid, "pod")?;
        // A terminating pod's token works until the pod's deletion time has passed.
        if let Some(t) = obj
            .pointer("/metadata/deletionTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            && t.as_second() < now()
        {
            return Err(AuthError::Invalidated(format!(
                "pod {ns}/{} is being deleted",
                pod.name
            )));
        }
        bound_to(&mut extra, "pod", &pod.name, &pod.uid);
    }
    if let Some(secret) = &k.secret {
        current(SECRETS, &secret.name, &secret.uid, "secret")?;
    }
    if let Some(node) = &k.node {
        bound_to(&mut extra, "node", &node.name, &node.uid);
    }
    Ok(TokenUser {
        name: claims.sub.clone(),
        uid: k.serviceaccount.uid.clone(),
        groups: vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{ns}"),
        ],
        extra,
    })
}

/// The user extras naming an object (`pod`, `node`) the token is bound to, as upstream's
/// `authentication.kubernetes.io/<kind>-name` and `-uid`.
fn bound_to(extra: &mut BTreeMap<String, Vec<String>>, kind: &str, name: &str, uid: &str) {
    for (field, value) in [("name", name), ("uid", uid)] {
        extra.insert(
            format!("authentication.kubernetes.io/{kind}-{field}"),
            vec![value.to_string()],
        );
    }
}

/// The pod a TokenRequest binds to, if any (for the node authorizer).
pub fn bound_pod(request: &Value) -> Option<&str> {
    let r = request.pointer("/spec/boundObjectRef")?;
    (r["kind"] == "Pod").then(|| r["name"].as_str()).flatten()
}

/// Serves `POST serviceaccounts/<name>/token`: checks the TokenRequest, signs a token bound to
/// the named object and answers the request with its status filled in.
pub fn request_token(
    registry: &Registry,
    signer: &TokenSigner,
    ns: &str,
    name: &str,
    mut request: Value,
) -> Result<Value, RegistryError> {
    let invalid = |field: &str, value: Value, detail: &str| {
        RegistryError::BadRequest(format!(
            "TokenRequest.authentication.k8s.io \"{name}\" is invalid: {field}: Invalid value: {value}: {detail}"
        ))
    };
    let sa = registry.get(SERVICE_ACCOUNTS, Some(ns), name)?.value()?;
    let expiration = match request.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| invalid("spec.expirationSeconds", v.clone(), "must be an integer"))?,
    };
    if expiration < MIN_EXPIRATION_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            json!(expiration),
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > MAX_EXPIRATION_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            json!(expiration),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    let audiences: Vec<String> = request
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(|| signer.api_audiences.clone());
    let mut k = KubernetesClaims {
        namespace: ns.to_string(),
        serviceaccount: BoundRef {
            name: name.to_string(),
            uid: uid_of(&sa).to_string(),
        },
        pod: None,
        secret: None,
        node: None,
    };
    if let Some(r) = request
        .pointer("/spec/boundObjectRef")
        .filter(|r| !r.is_null())
    {
        let kind = r["kind"].as_str().unwrap_or_default();
        let obj_name = r["name"].as_str().unwrap_or_default();
        let rt = match kind {
            "Pod" => PODS,
            "Secret" => SECRETS,
            other => {
                return Err(RegistryError::BadRequest(format!(
                    "cannot bind token for serviceaccount {name:?} to object of kind {other:?}"
                )));
            }
        };
        let obj = registry.get(rt, Some(ns), obj_name)?.value()?;
        if let Some(want) = r["uid"].as_str().filter(|u| !u.is_empty())
            && want != uid_of(&obj)
        {
            return Err(RegistryError::Conflict {
                resource: rt.group_resource(),
                group: rt.group.to_string(),
                name: obj_name.to_string(),
                detail: format!(
                    "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            });
        }
        let bound = BoundRef {
            name: obj_name.to_string(),
            uid: uid_of(&obj).to_string(),
        };
        if kind == "Pod" {
            let pod_sa = obj
                .pointer("/spec/serviceAccountName")
                .and_then(Value::as_str)
                .unwrap_or("default");
            if pod_sa != name {
                return Err(RegistryError::BadRequest(format!(
                    "cannot bind token for serviceaccount {name:?} to pod running with different serviceaccount name."
                )));
            }
            if let Some(node) = obj.pointer("/spec/nodeName").and_then(Value::as_str)
                && let Ok(n) = registry.get(NODES, None, node).and_then(|n| Ok(n.value()?))
            {
                k.node = Some(BoundRef {
                    name: node.to_string(),
                    uid: uid_of(&n).to_string(),
                });
            }
            k.pod = Some(bound);
        } else {
            k.secret = Some(bound);
        }
    }
    let issued = now();
    let claims = Claims {
        iss: signer.issuer.clone(),
        sub: format!("system:serviceaccount:{ns}:{name}"),
        aud: audiences.clone(),
        exp: issued + expiration,
        iat: issued,
        nbf: issued,
        jti: uuid::Uuid::new_v4().to_string(),
        kubernetes: k,
    };
    let token = signer
        .sign(&claims)
        .map_err(|e| RegistryError::Internal(e.to_string()))?;
    let expires = jiff::Timestamp::from_second(claims.exp)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"]["name"] = json!(name);
    request["metadata"]["namespace"] = json!(ns);
    request["metadata"]["creationTimestamp"] = Value::Null;
    request["spec"]["audiences"] = json!(audiences);
    request["spec"]["expirationSeconds"] = json!(expiration);
    if request["spec"].get("boundObjectRef").is_none() {
        request["spec"]["boundObjectRef"] = Value::Null;
    }
    request["status"] = json!({"token": token, "expirationTimestamp": expires});
    Ok(request)
}
