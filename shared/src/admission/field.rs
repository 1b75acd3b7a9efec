//! Field errors as the Kubernetes API reports them: a type, an upstream field path, the bad
//! value and a detail, rendered exactly like apimachinery's `field.Error.Error()`.

use serde_json::Value;

/// What is wrong with a field; each maps to one Status cause `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorType {
    Required,
    Invalid,
    Duplicate,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    /// A reference to something that does not exist (a volume mount naming no volume).
    NotFound,
}

impl FieldErrorType {
    /// The human-readable type as upstream prints it (`Invalid value`, `Unsupported value`).
    fn label(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::Duplicate => "Duplicate value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::NotFound => "Not found",
        }
    }
}

/// One validation failure. `field` is the upstream path (`spec.template.spec.containers[0].name`).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub error_type: FieldErrorType,
    pub field: String,
    pub bad_value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    /// The Status cause `reason` for this error.
    pub fn reason(&self) -> &'static str {
        match self.error_type {
            FieldErrorType::Required => "FieldValueRequired",
            FieldErrorType::Invalid => "FieldValueInvalid",
            FieldErrorType::Duplicate => "FieldValueDuplicate",
            FieldErrorType::NotSupported => "FieldValueNotSupported",
            FieldErrorType::Forbidden => "FieldValueForbidden",
            FieldErrorType::TooLong => "FieldValueTooLong",
            FieldErrorType::TooMany => "FieldValueTooMany",
            FieldErrorType::NotFound => "FieldValueNotFound",
        }
    }

    /// The message without the leading field path (upstream `ErrorBody()`); Status causes carry it.
    pub fn body(&self) -> String {
        let label = self.error_type.label();
        let mut s = match (self.error_type, &self.bad_value) {
            (FieldErrorType::Required | FieldErrorType::Forbidden | FieldErrorType::TooLong, _)
            | (_, None) => label.to_string(),
            (_, Some(v)) => format!("{label}: {}", render_value(&self.field, v)),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The full upstream message: `spec.replicas: Invalid value: -1: must be greater than or equal to 0`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }

    fn new(t: FieldErrorType, path: &Path, value: Option<Value>, detail: String) -> Self {
        FieldError {
            error_type: t,
            field: path.0.clone(),
            bad_value: value,
            detail,
        }
    }

    pub(crate) fn required(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Required, path, None, detail.into())
    }

    /// Upstream `ValidateImmutableField`'s error: an update changed `path` to `value`.
    pub(crate) fn immutable(path: &Path, value: impl Into<Value>) -> Self {
        Self::invalid(path, value, "field is immutable")
    }

    pub(crate) fn invalid(path: &Path, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self::new(
            FieldErrorType::Invalid,
            path,
            Some(value.into()),
            detail.into(),
        )
    }

    pub(crate) fn forbidden(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Forbidden, path, None, detail.into())
    }

    pub(crate) fn duplicate(path: &Path, value: impl Into<Value>) -> Self {
        Self::new(
            FieldErrorType::Duplicate,
            path,
            Some(value.into()),
            String::new(),
        )
    }

    pub(crate) fn not_found(path: &Path, value: impl Into<Value>) -> Self {
        Self::new(
            FieldErrorType::NotFound,
            path,
            Some(value.into()),
            String::new(),
        )
    }

    /// `Unsupported value: "x": supported values: "A", "B"`.
    pub(crate) fn not_supported(path: &Path, value: impl Into<Value>, valid: &[&str]) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(
            FieldErrorType::NotSupported,
            path,
            Some(value.into()),
            detail,
        )
    }

    pub(crate) fn too_long(path: &Path, max_bytes: usize) -> Self {
        let detail = format!("must have at most {max_bytes} bytes");
        Self::new(FieldErrorType::TooLong, path, None, detail)
    }

    pub(crate) fn too_many(path: &Path, actual: usize, max: usize) -> Self {
        let detail = format!("must have at most {max} items");
        Self::new(
            FieldErrorType::TooMany,
            path,
            Some(Value::from(actual)),
            detail,
        )
    }
}

/// A field path under construction; renders as upstream's `field.Path.String()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path(String);

impl Path {
    pub(crate) fn new(root: &str) -> Self {
        Path(root.to_string())
    }

    /// `a.b` (or `b` at the root).
    pub(crate) fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// `a[3]`.
    pub(crate) fn index(&self, i: usize) -> Self {
        Path(format!("{}[{i}]", self.0))
    }

    /// `a[key]` (map keys are not quoted upstream).
    pub(crate) fn key(&self, k: &str) -> Self {
        Path(format!("{}[{k}]", self.0))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Go `%q`-style quoting (JSON string escaping matches it for everything that matters here).
pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// Renders a bad value the way upstream's `%v`/`%q`/`%#v` would for the Go type behind the field.
/// Label maps print as `map[string]string{"k":"v"}`, label selectors as `v1.LabelSelector{...}`.
fn render_value(field: &str, v: &Value) -> String {
    match v {
        Value::Null if field.ends_with("labels") => "map[string]string(nil)".to_string(),
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Object(m) if field.ends_with("selector") && is_label_selector(m) => {
            render_label_selector(m)
        }
        Value::Object(m) if m.values().all(Value::is_string) => render_string_map(m),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            let parts: Vec<String> = items
                .iter()
                .map(|i| quote(i.as_str().unwrap_or_default()))
                .collect();
            format!("[]string{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

fn is_label_selector(m: &serde_json::Map<String, Value>) -> bool {
    m.keys()
        .all(|k| k == "matchLabels" || k == "matchExpressions")
}

fn render_string_map(m: &serde_json::Map<String, Value>) -> String {
    let mut pairs: Vec<(&String, &str)> = m
        .iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}:{}", quote(k), quote(v)))
        .collect();
    format!("map[string]string{{{}}}", body.join(", "))
}

fn render_label_selector(m: &serde_json::Map<String, Value>) -> String {
    let labels = match m.get("matchLabels") {
        Some(Value::Object(l)) => render_string_map(l),
        _ => "map[string]string(nil)".to_string(),
    };
    let exprs = match m.get("matchExpressions") {
        Some(Value::Array(list)) => {
            let items: Vec<String> = list.iter().map(render_requirement).collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
        _ => "[]v1.LabelSelectorRequirement(nil)".to_string(),
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

fn render_requirement(r: &Value) -> String {
    let s = |k: &str| quote(r.get(k).and_then(Value::as_str).unwrap_or_default());
    let values = match r.get("values") {
        Some(Value::Array(vs)) => {
            let parts: Vec<String> = vs
                .iter()
                .map(|v| quote(v.as_str().unwrap_or_default()))
                .collect();
            format!("[]string{{{}}}", parts.join(", "))
        }
        _ => "[]string(nil)".to_string(),
    };
    format!(
        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
        s("key"),
        s("operator")
    )
}

/// A required enum-like string: `Required` when empty, `NotSupported` (listing `valid` in the
/// order given) when unknown.
pub(crate) fn validate_choice(value: Option<&str>, valid: &[&str], path: &Path) -> Vec<FieldError> {
    match value.unwrap_or_default() {
        "" => vec![FieldError::required(path, "")],
        v if valid.contains(&v) => Vec::new(),
        v => vec![FieldError::not_supported(path, v, valid)],
    }
}

/// An optional enum-like string: `NotSupported` (listing `valid` in the order given) when set to
/// anything else, the empty string included.
pub(crate) fn validate_optional_choice(
    value: Option<&str>,
    valid: &[&str],
    path: &Path,
) -> Option<FieldError> {
    value
        .filter(|v| !valid.contains(v))
        .map(|v| FieldError::not_supported(path, v, valid))
}

/// The messages of `errs`, as the API's `Status` carries them (for tests).
#[cfg(test)]
pub(crate) fn error_messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(FieldError::message).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_match_upstream_rendering() {
        let p = Path::new("spec");
        let cases = [
            (
                FieldError::invalid(
                    &p.child("replicas"),
                    -1,
                    "must be greater than or equal to 0",
                ),
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                FieldError::required(&p.child("containers").index(0).child("image"), ""),
                "spec.containers[0].image: Required value",
            ),
            (
                FieldError::duplicate(&p.child("containers").index(1).child("name"), "nginx"),
                "spec.containers[1].name: Duplicate value: \"nginx\"",
            ),
            (
                FieldError::not_supported(&p.child("restartPolicy"), "Never", &["Always"]),
                "spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            ),
            (
                FieldError::forbidden(&p, "not allowed"),
                "spec: Forbidden: not allowed",
            ),
            (
                FieldError::too_long(&Path::new("metadata").child("annotations"), 262144),
                "metadata.annotations: Too long: must have at most 262144 bytes",
            ),
            (
                FieldError::not_found(&p.child("volumeMounts").index(0).child("name"), "data"),
                "spec.volumeMounts[0].name: Not found: \"data\"",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.message(), want);
        }
    }

    #[test]
    fn label_maps_render_as_sorted_go_maps() {
        let e = FieldError::invalid(
            &Path::new("spec")
                .child("template")
                .child("metadata")
                .child("labels"),
            json!({"b": "2", "a": "1"}),
            "`selector` does not match template `labels`",
        );
        assert_eq!(
            e.message(),
            "spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"1\", \"b\":\"2\"}: `selector` does not match template `labels`"
        );
    }

    #[test]
    fn label_selectors_render_as_go_structs() {
        let e = FieldError::invalid(
            &Path::new("spec").child("selector"),
            json!({"matchLabels": {"app": "x"}}),
            "field is immutable",
        );
        assert_eq!(
            e.message(),
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"x\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        );
    }

    #[test]
    fn reasons_are_status_cause_reasons() {
        let p = Path::new("x");
        assert_eq!(FieldError::required(&p, "").reason(), "FieldValueRequired");
        assert_eq!(FieldError::too_many(&p, 4, 3).reason(), "FieldValueTooMany");
        assert_eq!(
            FieldError::too_many(&p, 4, 3).message(),
            "x: Too many: 4: must have at most 3 items"
        );
    }

    #[test]
    fn map_keys_render_in_brackets() {
        let p = Path::new("data").key("a.b");
        assert_eq!(p.as_str(), "data[a.b]");
        assert_eq!(Path::new("").child("x").as_str(), "x");
    }
}
