//! HorizontalPodAutoscaler admission (autoscaling/v2, the stored version; v1 bodies arrive
//! converted): upstream's `SetDefaults_HorizontalPodAutoscaler` (one minimum replica, an 80%
//! CPU utilization target when no metric is given, the behaviour's unset fields from the
//! default scale-up and scale-down rules when a behaviour is given) and
//! `ValidateHorizontalPodAutoscaler` with its field paths and messages.

use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscaler, MetricSpec, MetricTarget,
};

use super::field::{FieldError, Path, validate_optional_choice};
use super::workload::nonnegative;
use crate::quantity::Quantity;

/// Upstream `DefaultCPUUtilization`.
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;
const MAX_STABILIZATION_SECONDS: i32 = 3600;
const MAX_PERIOD_SECONDS: i32 = 1800;
const SELECT_POLICIES: &[&str] = &["Max", "Min", "Disabled"];
const POLICY_TYPES: &[&str] = &["Pods", "Percent"];
const METRIC_TYPES: &[&str] = &[
    "Object",
    "Pods",
    "Resource",
    "ContainerResource",
    "External",
];
const TARGET_TYPES: &[&str] = &["Utilization", "Value", "AverageValue"];

fn policy(type_: &str, value: i32, period_seconds: i32) -> HPAScalingPolicy {
    HPAScalingPolicy {
        type_: type_.to_string(),
        value,
        period_seconds,
    }
}

/// Upstream `GenerateHPAScaleUpRules`' defaults: no stabilization, the larger of 4 pods or
/// 100% per 15 s.
pub fn default_scale_up() -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: Some(0),
        select_policy: Some("Max".into()),
        policies: Some(vec![policy("Pods", 4, 15), policy("Percent", 100, 15)]),
        tolerance: None,
    }
}

/// Upstream `GenerateHPAScaleDownRules`' defaults: a 300 s stabilization window, 100% per 15 s.
pub fn default_scale_down() -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: Some(300),
        select_policy: Some("Max".into()),
        policies: Some(vec![policy("Percent", 100, 15)]),
        tolerance: None,
    }
}

/// Upstream `copyHPAScalingRules`: the given rules' set fields over the defaults.
fn fill_rules(given: Option<HPAScalingRules>, defaults: HPAScalingRules) -> HPAScalingRules {
    let Some(given) = given else {
        return defaults;
    };
    HPAScalingRules {
        stabilization_window_seconds: given
            .stabilization_window_seconds
            .or(defaults.stabilization_window_seconds),
        select_policy: given.select_policy.or(defaults.select_policy),
        policies: given.policies.or(defaults.policies),
        tolerance: given.tolerance.or(defaults.tolerance),
    }
}

pub(crate) fn default_hpa(hpa: &mut HorizontalPodAutoscaler) {
    let spec = hpa.spec.get_or_insert_with(Default::default);
    spec.min_replicas.get_or_insert(1);
    if spec.metrics.as_ref().is_none_or(Vec::is_empty) {
        spec.metrics = Some(vec![MetricSpec {
            type_: "Resource".into(),
            resource: Some(k8s_openapi::api::autoscaling::v2::ResourceMetricSource {
                name: "cpu".into(),
                target: MetricTarget {
                    type_: "Utilization".into(),
                    average_utilization: Some(DEFAULT_CPU_UTILIZATION),
                    ..Default::default()
                },
            }),
            ..Default::default()
        }]);
    }
    if let Some(b) = &mut spec.behavior {
        b.scale_up = Some(fill_rules(b.scale_up.take(), default_scale_up()));
        b.scale_down = Some(fill_rules(b.scale_down.take(), default_scale_down()));
    }
}

fn positive_quantity(
    q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    path: &Path,
) -> Vec<FieldError> {
    match q {
        None => vec![],
        Some(q) => match Quantity::parse(&q.0) {
            Ok(v) if v.is_positive() => vec![],
            Ok(_) => vec![FieldError::invalid(path, q.0.clone(), "must be positive")],
            Err(e) => vec![FieldError::invalid(path, q.0.clone(), e)],
        },
    }
}

/// A metric's or target's `type`: `Required` (with `missing` as the detail) when empty,
/// `NotSupported` when not one of `valid`.
fn type_error(type_: &str, valid: &[&str], missing: &str, path: &Path) -> Option<FieldError> {
    if type_.is_empty() {
        Some(FieldError::required(path, missing))
    } else {
        validate_optional_choice(Some(type_), valid, path)
    }
}

/// Upstream `validateMetricTarget`.
fn validate_target(t: &MetricTarget, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    errs.extend(type_error(
        &t.type_,
        TARGET_TYPES,
        "must specify a metric target type",
        &path.child("type"),
    ));
    errs.extend(positive_quantity(t.value.as_ref(), &path.child("value")));
    errs.extend(positive_quantity(
        t.average_value.as_ref(),
        &path.child("averageValue"),
    ));
    if let Some(u) = t.average_utilization
        && u < 1
    {
        errs.push(FieldError::invalid(
            &path.child("averageUtilization"),
            u,
            "must be greater than 0",
        ));
    }
    errs
}

/// Upstream `validateMetricSpec` (the resource and container-resource sources in full; the
/// others' sources must be present and their targets valid).
fn validate_metric(m: &MetricSpec, path: &Path) -> Vec<FieldError> {
    if let Some(e) = type_error(
        &m.type_,
        METRIC_TYPES,
        "must specify a metric source type",
        &path.child("type"),
    ) {
        return vec![e];
    }
    let mut errs = Vec::new();
    let (target, source_path, name) = match m.type_.as_str() {
        "Resource" => (
            m.resource.as_ref().map(|r| &r.target),
            path.child("resource"),
            m.resource.as_ref().map(|r| r.name.as_str()),
        ),
        "ContainerResource" => (
            m.container_resource.as_ref().map(|r| &r.target),
            path.child("containerResource"),
            m.container_resource.as_ref().map(|r| r.name.as_str()),
        ),
        "Pods" => (
            m.pods.as_ref().map(|p| &p.target),
            path.child("pods"),
            m.pods.as_ref().map(|p| p.metric.name.as_str()),
        ),
        "Object" => (
            m.object.as_ref().map(|o| &o.target),
            path.child("object"),
            m.object.as_ref().map(|o| o.metric.name.as_str()),
        ),
        _ => (
            m.external.as_ref().map(|e| &e.target),
            path.child("external"),
            m.external.as_ref().map(|e| e.metric.name.as_str()),
        ),
    };
    let Some(target) = target else {
        errs.push(FieldError::required(
            &source_path,
            format!("must populate information for the given metric source (only allowed when type is {:?})", m.type_),
        ));
        return errs;
    };
    if name.is_none_or(str::is_empty) {
        let field = if matches!(m.type_.as_str(), "Resource" | "ContainerResource") {
            source_path.child("name")
        } else {
            source_path.child("metric").child("name")
        };
        errs.push(FieldError::required(&field, "must specify a resource name"));
    }
    if matches!(m.type_.as_str(), "Resource" | "ContainerResource") {
        let tp = source_path.child("target");
        if target.average_utilization.is_none() && target.average_value.is_none() {
            errs.push(FieldError::required(
                &tp.child("averageUtilization"),
                "must set either a target raw value or a target utilization",
            ));
        }
        if target.average_utilization.is_some() && target.average_value.is_some() {
            errs.push(FieldError::forbidden(
                &tp.child("averageValue"),
                "may not set both a target raw value and a target utilization",
            ));
        }
    }
    errs.extend(validate_target(target, &source_path.child("target")));
    errs
}

/// Upstream `validateScalingRules`.
fn validate_rules(rules: Option<&HPAScalingRules>, path: &Path) -> Vec<FieldError> {
    let Some(rules) = rules else {
        return vec![];
    };
    let mut errs = Vec::new();
    if let Some(w) = rules.stabilization_window_seconds
        && !(0..=MAX_STABILIZATION_SECONDS).contains(&w)
    {
        let detail = if w < 0 {
            "must be greater than or equal to zero".to_string()
        } else {
            format!("must be less than or equal to {MAX_STABILIZATION_SECONDS}")
        };
        errs.push(FieldError::invalid(
            &path.child("stabilizationWindowSeconds"),
            w,
            detail,
        ));
    }
    errs.extend(validate_optional_choice(
        rules.select_policy.as_deref(),
        SELECT_POLICIES,
        &path.child("selectPolicy"),
    ));
    let policies = rules.policies.as_deref().unwrap_or_default();
    if policies.is_empty() {
        errs.push(FieldError::required(
            &path.child("policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, p) in policies.iter().enumerate() {
        let pp = path.child("policies").index(i);
        if !POLICY_TYPES.contains(&p.type_.as_str()) {
            errs.push(FieldError::not_supported(
                &pp.child("type"),
                p.type_.clone(),
                POLICY_TYPES,
            ));
        }
        if p.value <= 0 {
            errs.push(FieldError::invalid(
                &pp.child("value"),
                p.value,
                "must be greater than zero",
            ));
        }
        if p.period_seconds <= 0 {
            errs.push(FieldError::invalid(
                &pp.child("periodSeconds"),
                p.period_seconds,
                "must be greater than zero",
            ));
        } else if p.period_seconds > MAX_PERIOD_SECONDS {
            errs.push(FieldError::invalid(
                &pp.child("periodSeconds"),
                p.period_seconds,
                format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
    errs
}

/// A scale target's kind or name, which becomes a segment of a URL path: required, and never
/// `.`, `..` or anything with a `/` (upstream words all three alike here).
fn path_segment(value: &str, path: &Path) -> Option<FieldError> {
    if value.is_empty() {
        Some(FieldError::required(path, ""))
    } else if value.contains('/') || value == "." || value == ".." {
        Some(FieldError::invalid(path, value, "may not contain '/'"))
    } else {
        None
    }
}

pub(crate) fn validate_hpa(hpa: &HorizontalPodAutoscaler) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    let spec = hpa.spec.clone().unwrap_or_default();
    let min = spec.min_replicas.unwrap_or(1);
    if min < 1 {
        errs.push(FieldError::invalid(
            &sp.child("minReplicas"),
            min,
            "must be greater than or equal to 1",
        ));
    }
    if spec.max_replicas < 1 {
        errs.push(FieldError::invalid(
            &sp.child("maxReplicas"),
            spec.max_replicas,
            "must be greater than 0",
        ));
    }
    if min > spec.max_replicas {
        errs.push(FieldError::invalid(
            &sp.child("maxReplicas"),
            spec.max_replicas,
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let rp = sp.child("scaleTargetRef");
    let r = &spec.scale_target_ref;
    for (field, value) in [("kind", &r.kind), ("name", &r.name)] {
        errs.extend(path_segment(value, &rp.child(field)));
    }
    for (i, m) in spec.metrics.iter().flatten().enumerate() {
        errs.extend(validate_metric(m, &sp.child("metrics").index(i)));
    }
    if let Some(b) = &spec.behavior {
        let bp = sp.child("behavior");
        errs.extend(validate_rules(b.scale_up.as_ref(), &bp.child("scaleUp")));
        errs.extend(validate_rules(
            b.scale_down.as_ref(),
            &bp.child("scaleDown"),
        ));
    }
    if let Some(status) = &hpa.status {
        let st = Path::new("status");
        errs.extend(nonnegative(
            status.current_replicas,
            &st.child("currentReplicas"),
        ));
        errs.extend(nonnegative(
            Some(status.desired_replicas),
            &st.child("desiredReplicas"),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use crate::admission::{AdmissionError, Operation, admit};
    use serde_json::{Value, json};

    fn hpa(spec: Value) -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
               "spec": spec})
    }

    fn fields(obj: &mut Value) -> Vec<String> {
        match admit("HorizontalPodAutoscaler", Operation::Create, obj, None) {
            Err(AdmissionError::Invalid(errs)) => errs.into_iter().map(|e| e.field).collect(),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn an_autoscaler_without_metrics_targets_80_percent_cpu_from_one_replica() {
        let mut obj = hpa(
            json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5}),
        );
        admit("HorizontalPodAutoscaler", Operation::Create, &mut obj, None).unwrap();
        assert_eq!(obj["spec"]["minReplicas"], 1);
        assert_eq!(
            obj["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
        );
        assert!(obj["spec"].get("behavior").is_none());
    }

    #[test]
    fn a_given_behaviour_has_its_unset_fields_filled_from_the_defaults() {
        let mut obj = hpa(
            json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
                                 "behavior": {"scaleDown": {"stabilizationWindowSeconds": 10}}}),
        );
        admit("HorizontalPodAutoscaler", Operation::Create, &mut obj, None).unwrap();
        let b = &obj["spec"]["behavior"];
        assert_eq!(b["scaleDown"]["stabilizationWindowSeconds"], 10);
        assert_eq!(
            b["scaleDown"]["policies"],
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
        );
        assert_eq!(b["scaleUp"]["stabilizationWindowSeconds"], 0);
        assert_eq!(b["scaleUp"]["selectPolicy"], "Max");
        assert_eq!(
            b["scaleUp"]["policies"][0],
            json!({"type": "Pods", "value": 4, "periodSeconds": 15})
        );
    }

    #[test]
    fn bounds_target_reference_metrics_and_policies_are_validated_with_upstreams_paths() {
        let mut obj = hpa(
            json!({"scaleTargetRef": {"kind": "", "name": ""}, "minReplicas": 6, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}},
                        {"type": "Bogus"}],
            "behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 1801}]}}}),
        );
        let got = fields(&mut obj);
        for want in [
            "spec.maxReplicas",
            "spec.scaleTargetRef.kind",
            "spec.scaleTargetRef.name",
            "spec.metrics[0].resource.target.averageUtilization",
            "spec.metrics[1].type",
            "spec.behavior.scaleUp.policies[0].value",
            "spec.behavior.scaleUp.policies[0].periodSeconds",
        ] {
            assert!(got.iter().any(|f| f == want), "{want} not in {got:?}");
        }
        let mut zero = hpa(
            json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 0, "maxReplicas": 5}),
        );
        assert_eq!(fields(&mut zero), ["spec.minReplicas"]);
    }
}
