//! Label selectors and label maps written the way the Selector and Node Selector columns show
//! them (upstream `labels.Selector.String`, `metav1.FormatLabelSelector`, `labels.FormatLabels`).

use serde_json::Value;

use super::lookup::{list_at, map_at, str_at};

/// Why a selector cannot be written out; the columns print a placeholder instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SelectorError {
    #[error("{0:?} is not a valid label selector operator")]
    UnknownOperator(String),
    #[error("operator {operator} on key {key:?} takes {expected} values, got {got}")]
    WrongValueCount {
        key: String,
        operator: &'static str,
        expected: &'static str,
        got: usize,
    },
}

/// A `metav1.LabelSelector` (as JSON) converted to selector-string form: requirements sorted by
/// key, `k=v`, `k in (a,b)` (values sorted), `k notin (a)`, `k`, `!k`, joined by `,`. A null or
/// empty selector gives `""`.
pub(crate) fn selector_string(selector: Option<&Value>) -> Result<String, SelectorError> {
    let Some(sel) = selector.filter(|s| !s.is_null()) else {
        return Ok(String::new());
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = map_at(sel, &["matchLabels"]) {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for expr in list_at(sel, &["matchExpressions"]) {
        let key = str_at(expr, &["key"]);
        let mut values: Vec<&str> = list_at(expr, &["values"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let operator = str_at(expr, &["operator"]);
        let text = match operator {
            "In" | "NotIn" => {
                let word = if operator == "In" { "in" } else { "notin" };
                if values.is_empty() {
                    return Err(count_error(key, operator, "one or more", 0));
                }
                format!("{key} {word} ({})", values.join(","))
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    return Err(count_error(key, operator, "no", values.len()));
                }
                if operator == "Exists" {
                    key.to_string()
                } else {
                    format!("!{key}")
                }
            }
            other => return Err(SelectorError::UnknownOperator(other.to_string())),
        };
        reqs.push((key.to_string(), text));
    }
    // Upstream sorts requirements by key only; a stable sort keeps ties in declaration order.
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(reqs
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(","))
}

fn count_error(key: &str, operator: &str, expected: &'static str, got: usize) -> SelectorError {
    let operator = match operator {
        "In" => "In",
        "NotIn" => "NotIn",
        "Exists" => "Exists",
        _ => "DoesNotExist",
    };
    SelectorError::WrongValueCount {
        key: key.to_string(),
        operator,
        expected,
        got,
    }
}

/// `metav1.FormatLabelSelector`: the selector string, `<none>` when it is empty, `<error>` when
/// it is malformed. Used by the ReplicaSet, DaemonSet, Job and CronJob Selector columns.
pub(crate) fn format_label_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        Ok(s) if s.is_empty() => "<none>".to_string(),
        Ok(s) => s,
        Err(_) => "<error>".to_string(),
    }
}

/// `labels.FormatLabels`: a plain label map as sorted `k=v` pairs, `<none>` when empty.
pub(crate) fn format_labels(labels: Option<&Value>) -> String {
    let mut pairs: Vec<String> = labels
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs.sort();
    pairs.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_render_like_upstream() {
        let cases = [
            (json!({"matchLabels": {"app": "nginx"}}), "app=nginx"),
            (
                json!({"matchLabels": {"tier": "web", "app": "nginx"}}),
                "app=nginx,tier=web",
            ),
            (
                json!({"matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                    {"key": "beta", "operator": "NotIn", "values": ["x"]},
                    {"key": "zone", "operator": "Exists"},
                    {"key": "canary", "operator": "DoesNotExist"}]}),
                "beta notin (x),!canary,env in (dev,prod),zone",
            ),
            (json!({}), ""),
        ];
        for (sel, want) in cases {
            assert_eq!(selector_string(Some(&sel)).unwrap(), want, "{sel}");
        }
        assert_eq!(selector_string(None).unwrap(), "");
    }

    #[test]
    fn empty_selectors_print_none_and_malformed_ones_print_error() {
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        let bad_op = json!({"matchExpressions": [{"key": "a", "operator": "Near"}]});
        assert_eq!(format_label_selector(Some(&bad_op)), "<error>");
        let no_values = json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]});
        assert_eq!(format_label_selector(Some(&no_values)), "<error>");
    }

    #[test]
    fn label_maps_are_sorted_pairs() {
        let labels = json!({"disktype": "ssd", "arch": "amd64"});
        assert_eq!(format_labels(Some(&labels)), "arch=amd64,disktype=ssd");
        assert_eq!(format_labels(Some(&json!({}))), "<none>");
        assert_eq!(format_labels(None), "<none>");
    }
}
