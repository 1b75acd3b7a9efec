//! RuntimeClass admission (node.k8s.io/v1): upstream's `ValidateRuntimeClass(Update)`: the
//! handler is a DNS-1123 label that never changes, the pod overhead holds valid quantities, and
//! the scheduling constraints are valid labels and tolerations. RuntimeClass has no defaults.

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::api::node::v1::RuntimeClass;

use super::field::{FieldError, Path};
use super::meta::validate_labels;
use super::names::{dns1123_label, each_invalid};
use super::resources::validate_resources;
use super::scheduling::validate_tolerations;

/// Upstream `ValidateRuntimeClass` (with `old`, `ValidateRuntimeClassUpdate`, which checks only
/// that the handler stays).
pub(crate) fn validate_runtime_class(
    rc: &RuntimeClass,
    old: Option<&RuntimeClass>,
) -> Vec<FieldError> {
    let hp = Path::new("handler");
    if let Some(o) = old {
        return if o.handler == rc.handler {
            Vec::new()
        } else {
            vec![FieldError::immutable(&hp, rc.handler.as_str())]
        };
    }
    let mut errs = each_invalid(&hp, &rc.handler, dns1123_label(&rc.handler));
    if let Some(fixed) = rc.overhead.as_ref().and_then(|o| o.pod_fixed.clone()) {
        let limits = ResourceRequirements {
            limits: Some(fixed),
            ..Default::default()
        };
        errs.extend(validate_resources(&limits, &Path::new("overhead")));
    }
    if let Some(s) = &rc.scheduling {
        let sp = Path::new("scheduling");
        if let Some(labels) = &s.node_selector {
            errs.extend(validate_labels(labels, &sp.child("nodeSelector")));
        }
        errs.extend(validate_tolerations(
            s.tolerations.as_deref().unwrap_or_default(),
            &sp.child("tolerations"),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::admission::{AdmissionError, Operation, admit};

    fn runtime_class(extra: Value) -> Value {
        let mut rc = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "gvisor", "uid": "u1"}, "handler": "runsc"});
        if let (Some(o), Some(e)) = (rc.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        rc
    }

    fn messages(mut obj: Value, old: Option<&Value>) -> Vec<String> {
        let op = if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        };
        match admit("RuntimeClass", op, &mut obj, old) {
            Ok(()) => Vec::new(),
            Err(AdmissionError::Invalid(errs)) => errs.iter().map(|e| e.message()).collect(),
            Err(e) => vec![e.to_string()],
        }
    }

    #[test]
    fn runtime_classes_are_judged_as_upstream_judges_them() {
        let label_error = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
        let cases: Vec<(&str, Value, Vec<String>)> = vec![
            ("a plain handler", json!({}), vec![]),
            (
                "an overhead and scheduling constraints",
                json!({"overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
                       "scheduling": {"nodeSelector": {"runtime": "gvisor"},
                                      "tolerations": [{"key": "runtime", "operator": "Exists", "effect": "NoSchedule"}]}}),
                vec![],
            ),
            (
                "a handler that is not a DNS label",
                json!({"handler": "Run_SC"}),
                vec![format!("handler: Invalid value: \"Run_SC\": {label_error}")],
            ),
            (
                "an empty handler",
                json!({"handler": ""}),
                vec![format!("handler: Invalid value: \"\": {label_error}")],
            ),
            (
                "a bad node selector label",
                json!({"scheduling": {"nodeSelector": {"bad key!": "x"}}}),
                vec!["scheduling.nodeSelector: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string()],
            ),
        ];
        for (name, extra, want) in cases {
            assert_eq!(messages(runtime_class(extra), None), want, "{name}");
        }
    }

    #[test]
    fn the_handler_never_changes() {
        let mut old = runtime_class(json!({}));
        admit("RuntimeClass", Operation::Create, &mut old, None).unwrap();
        let new = runtime_class(json!({"handler": "kata"}));
        assert_eq!(
            messages(new, Some(&old)),
            ["handler: Invalid value: \"kata\": field is immutable"]
        );
    }
}
