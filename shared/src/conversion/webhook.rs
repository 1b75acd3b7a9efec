//! Conversion webhooks of CustomResourceDefinitions (`spec.conversion.strategy: Webhook`),
//! pure: the webhook read from a definition, the `ConversionReview` sent (only the objects not
//! already in the desired version), and its answer checked as upstream's `webhookConverter`
//! checks it: same count, desired apiVersion, same kind, name, namespace and uid; labels and
//! annotations may change (validated), every other metadata change is dropped. The HTTPS call
//! is the caller's, passed in as a function.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use serde_json::{Map, Value, json};

/// Upstream's deadline for a conversion webhook call (`defaultWebhookTimeout`).
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A definition's conversion webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversionWebhook {
    pub client: WebhookClient,
    /// `clientConfig.caBundle`, decoded (PEM).
    pub ca_bundle: Option<Vec<u8>>,
    /// `conversionReviewVersions`, as written.
    pub review_versions: Vec<String>,
}

/// Where a conversion webhook is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookClient {
    /// `clientConfig.url`.
    Url(String),
    /// `clientConfig.service` (port defaulted to 443).
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

impl ConversionWebhook {
    /// The webhook of a stored definition's `spec.conversion`, when its strategy is `Webhook`.
    pub fn parse(conversion: &Value) -> Option<ConversionWebhook> {
        if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
            return None;
        }
        let webhook = conversion.get("webhook").unwrap_or(&Value::Null);
        let cc = webhook.get("clientConfig").unwrap_or(&Value::Null);
        let s = |v: &Value, k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let client = match (cc.get("url").and_then(Value::as_str), cc.get("service")) {
            (Some(url), _) => WebhookClient::Url(url.to_string()),
            (None, Some(svc)) => WebhookClient::Service {
                namespace: s(svc, "namespace"),
                name: s(svc, "name"),
                path: s(svc, "path"),
                port: svc
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            },
            // Validation refuses it; an old stored definition fails its calls.
            (None, None) => WebhookClient::Url(String::new()),
        };
        let ca_bundle = cc
            .get("caBundle")
            .and_then(Value::as_str)
            .filter(|b| !b.is_empty())
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        let review_versions = webhook
            .get("conversionReviewVersions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Some(ConversionWebhook {
            client,
            ca_bundle,
            review_versions,
        })
    }

    /// The review version sent: the first listed one this server speaks, as upstream picks.
    pub fn review_version(&self) -> Option<ReviewVersion> {
        self.review_versions.iter().find_map(|v| match v.as_str() {
            "v1" => Some(ReviewVersion::V1),
            "v1beta1" => Some(ReviewVersion::V1beta1),
            _ => None,
        })
    }
}

/// A `ConversionReview` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "apiextensions.k8s.io/v1",
            ReviewVersion::V1beta1 => "apiextensions.k8s.io/v1beta1",
        }
    }
}

/// Why objects could not be converted; each says it as upstream's converter does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    #[error("no supported conversion review versions")]
    NoReviewVersion,
    /// The call failed, or the review answered is malformed or not a success.
    #[error("conversion webhook for {gvk} failed: {cause}")]
    Failed { gvk: String, cause: String },
    #[error("conversion webhook for {gvk} returned {got} objects, expected {expected}")]
    Count {
        gvk: String,
        got: usize,
        expected: usize,
    },
    /// A converted object of a list (`at`) or the one object converted (`None`) is wrong.
    #[error("conversion webhook for {gvk} returned invalid {}: {cause}", object_at(*.at, "converted object at index"))]
    InvalidObject {
        gvk: String,
        at: Option<usize>,
        cause: String,
    },
    #[error("conversion webhook for {gvk} returned invalid metadata{}: {cause}", at.map(|i| format!(" in object at index {i}")).unwrap_or_default())]
    InvalidMetadata {
        gvk: String,
        at: Option<usize>,
        cause: String,
    },
}

fn object_at(at: Option<usize>, list: &str) -> String {
    match at {
        Some(i) => format!("{list} {i}"),
        None => "object".to_string(),
    }
}

/// Go's `GroupVersionKind.String()` of an object (`stable.example.com/v1, Kind=CronTab`).
pub fn gvk_of(obj: &Value, kind: &str) -> String {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    format!("{api_version}, Kind={kind}")
}

fn api_version_of(obj: &Value) -> &str {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The positions of the objects that need the webhook: those not in `desired` already.
pub fn to_convert(objects: &[Value], desired: &str) -> Vec<usize> {
    (0..objects.len())
        .filter(|&i| api_version_of(&objects[i]) != desired)
        .collect()
}

/// The review sent: `objects` to convert to `desired`.
pub fn review(version: ReviewVersion, uid: &str, desired: &str, objects: &[&Value]) -> Value {
    json!({
        "kind": "ConversionReview",
        "apiVersion": version.api_version(),
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    })
}

/// One conversion: `objects` (a list's items when `list` is true, else exactly one) to
/// `desired`; `gvk` names the input in errors. `post` sends a review's body and returns the
/// answer's (or why the call failed, as the HTTP client says it).
pub struct Conversion<'a> {
    pub webhook: &'a ConversionWebhook,
    pub desired: &'a str,
    pub gvk: &'a str,
    pub list: bool,
    pub uid: &'a str,
}

impl Conversion<'_> {
    /// Converts `objects` in place; objects already in `desired` are not sent, and nothing is
    /// sent when none needs it.
    pub fn run(
        &self,
        objects: &mut [Value],
        post: impl FnOnce(Vec<u8>) -> Result<Vec<u8>, String>,
    ) -> Result<(), WebhookError> {
        let version = self
            .webhook
            .review_version()
            .ok_or(WebhookError::NoReviewVersion)?;
        let sent = to_convert(objects, self.desired);
        if sent.is_empty() {
            return Ok(());
        }
        let failed = |cause: String| WebhookError::Failed {
            gvk: self.gvk.to_string(),
            cause,
        };
        let body = {
            let refs: Vec<&Value> = sent.iter().map(|&i| &objects[i]).collect();
            serde_json::to_vec(&review(version, self.uid, self.desired, &refs))
                .map_err(|e| failed(e.to_string()))?
        };
        let answer = post(body).map_err(failed)?;
        let converted = converted_objects(version, self.uid, &answer).map_err(failed)?;
        if converted.len() != sent.len() {
            return Err(WebhookError::Count {
                gvk: self.gvk.to_string(),
                got: converted.len(),
                expected: sent.len(),
            });
        }
        for (n, (i, out)) in sent.into_iter().zip(converted).enumerate() {
            let at = self.list.then_some(n);
            let original = &objects[i];
            let invalid = |cause: String| WebhookError::InvalidObject {
                gvk: self.gvk.to_string(),
                at,
                cause,
            };
            let mut out = check_converted(original, out, self.desired).map_err(invalid)?;
            restore_metadata(original, &mut out).map_err(|cause| {
                WebhookError::InvalidMetadata {
                    gvk: self.gvk.to_string(),
                    at,
                    cause,
                }
            })?;
            objects[i] = out;
        }
        Ok(())
    }
}

/// The converted objects of a review's answer, or why it is not a successful one.
fn converted_objects(
    version: ReviewVersion,
    uid: &str,
    answer: &[u8],
) -> Result<Vec<Value>, String> {
    let review: Value = serde_json::from_slice(answer).map_err(|e| e.to_string())?;
    if version == ReviewVersion::V1 {
        let got = gvk_of(
            &review,
            review
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        let want = "apiextensions.k8s.io/v1, Kind=ConversionReview";
        if got != want {
            return Err(format!("expected webhook response of {want}, got {got}"));
        }
    }
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("no response provided")?;
    // v1beta1 answers were never checked for their uid: upstream keeps it so.
    let got_uid = response
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if version == ReviewVersion::V1 && got_uid != uid {
        return Err(format!(
            "expected response.uid=\"{uid}\", got \"{got_uid}\""
        ));
    }
    let result = response.get("result").unwrap_or(&Value::Null);
    let status = result
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if status != "Success" {
        let message = result
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !message.is_empty() {
            return Err(message.to_string());
        }
        return Err(format!(
            "response.result.status was '{status}', not 'Success'"
        ));
    }
    Ok(response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A converted object against the one sent: upstream's group-version and kind checks, then
/// `validateConvertedObject`.
fn check_converted(original: &Value, out: Value, desired: &str) -> Result<Value, String> {
    if !out.is_object() {
        return Err(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_type(&out)
        ));
    }
    let kind = |o: &Value| {
        o.get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    if kind(&out).is_empty() {
        return Err(format!("Object 'Kind' is missing in '{out}'"));
    }
    let got = api_version_of(&out);
    if got != desired {
        return Err(format!(
            "invalid groupVersion (expected {desired}, received {got})"
        ));
    }
    let (want_kind, got_kind) = (kind(original), kind(&out));
    if want_kind != got_kind {
        return Err(format!(
            "invalid kind (expected {want_kind}, received {got_kind})"
        ));
    }
    for (field, label) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let (e, a) = (meta_str(original, field), meta_str(&out, field));
        if e != a {
            return Err(format!("must have the same {label}: {e} != {a}"));
        }
    }
    Ok(out)
}

/// Upstream's `restoreObjectMeta`: the converted object keeps the original's metadata but for
/// labels and annotations, which the webhook may change (then they are validated).
fn restore_metadata(original: &Value, out: &mut Value) -> Result<(), String> {
    let answered = match out.get("metadata") {
        None => return Err("missing metadata in converted object".to_string()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ));
        }
    };
    let mut restored = match original.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    for field in ["labels", "annotations"] {
        let response = match answered.get(field) {
            None | Some(Value::Null) => {
                restored.remove(field);
                continue;
            }
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ));
            }
        };
        let before = match restored.get(field) {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in original object",
                    go_type(other)
                ));
            }
        };
        let mut changed = before.len() != response.len();
        let mut strings = BTreeMap::new();
        for (k, v) in response {
            let Some(s) = v.as_str() else {
                return Err(format!(
                    "metadata.{field}[{k}] must be a string, but is {} in converted object",
                    go_type(v)
                ));
            };
            changed |= before.get(k) != Some(v);
            strings.insert(k.clone(), s.to_string());
        }
        if changed {
            let errors = crate::admission::metadata_map_errors(field, &strings);
            match errors.len() {
                0 => {}
                1 => return Err(errors[0].clone()),
                _ => return Err(format!("[{}]", errors.join(", "))),
            }
        }
        restored.insert(field.to_string(), Value::Object(response.clone()));
    }
    if let Some(o) = out.as_object_mut() {
        o.insert("metadata".to_string(), Value::Object(restored));
    }
    Ok(())
}

/// Go's `%T` of a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// encoding/json's name of a JSON value's type in unmarshal errors.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests;
