//! apps/v1 Deployment and ReplicaSet: defaults (replicas, rolling-update 25%/25%, history and
//! progress deadline) and validation, with selectors immutable on update.
//!
//! Worked example of the strategy rule: maxSurge 0 with maxUnavailable 0 could never make
//! progress (no extra pod may be created and no old pod removed), so it is rejected.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::defaults::default_pod_spec;
use super::field::{FieldError, Path};
use super::workload::{
    at_most_100_percent, immutable_selector, int_or_percent, int_or_percent_number,
    int_or_string_value, nonnegative, validate_selector_and_template,
};

pub(crate) fn default_template(t: &mut PodTemplateSpec) {
    default_pod_spec(t.spec.get_or_insert_with(Default::default));
}

/// Upstream `SetDefaults_Deployment`.
pub(crate) fn default_deployment(d: &mut Deployment) {
    let spec = d.spec.get_or_insert_with(Default::default);
    spec.replicas.get_or_insert(1);
    let strategy = spec.strategy.get_or_insert_with(Default::default);
    if strategy.type_.as_deref().is_none_or(str::is_empty) {
        strategy.type_ = Some("RollingUpdate".into());
    }
    if strategy.type_.as_deref() == Some("RollingUpdate") {
        let ru = strategy.rolling_update.get_or_insert_with(Default::default);
        ru.max_unavailable
            .get_or_insert_with(|| IntOrString::String("25%".into()));
        ru.max_surge
            .get_or_insert_with(|| IntOrString::String("25%".into()));
    }
    spec.revision_history_limit.get_or_insert(10);
    spec.progress_deadline_seconds.get_or_insert(600);
    default_template(&mut spec.template);
}

/// Upstream `SetDefaults_ReplicaSet`.
pub(crate) fn default_replica_set(rs: &mut ReplicaSet) {
    let spec = rs.spec.get_or_insert_with(Default::default);
    spec.replicas.get_or_insert(1);
    default_template(spec.template.get_or_insert_with(Default::default));
}

/// Upstream `ValidateDeployment` (+ `ValidateDeploymentUpdate` when `old` is given).
pub(crate) fn validate_deployment(
    d: &Deployment,
    old: Option<&Deployment>,
    raw: &Value,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    let spec = d.spec.clone().unwrap_or_default();
    errs.extend(nonnegative(spec.replicas, &sp.child("replicas")));
    errs.extend(validate_selector_and_template(
        &spec.selector,
        raw,
        true,
        Some(&spec.template),
        "deployment",
        "ReplicaSet",
        &sp,
    ));
    if let Some(s) = &spec.strategy {
        errs.extend(validate_strategy(s, &sp.child("strategy")));
    }
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    errs.extend(nonnegative(Some(min_ready), &sp.child("minReadySeconds")));
    errs.extend(nonnegative(
        spec.revision_history_limit,
        &sp.child("revisionHistoryLimit"),
    ));
    if let Some(pds) = spec.progress_deadline_seconds {
        let p = sp.child("progressDeadlineSeconds");
        errs.extend(nonnegative(Some(pds), &p));
        if pds <= min_ready {
            errs.push(FieldError::invalid(
                &p,
                pds,
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs.extend(immutable_selector(
        &spec.selector,
        old.map(|o| o.spec.as_ref().map(|s| &s.selector)),
        &sp,
    ));
    errs
}

fn validate_strategy(s: &DeploymentStrategy, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match s.type_.as_deref().unwrap_or_default() {
        "Recreate" => {
            if s.rolling_update.is_some() {
                errs.push(FieldError::forbidden(
                    &path.child("rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match &s.rolling_update {
            None => errs.push(FieldError::required(
                &path.child("rollingUpdate"),
                "this should be defaulted and never be nil",
            )),
            Some(ru) => {
                let rp = path.child("rollingUpdate");
                let zero = IntOrString::Int(0);
                let mu = ru.max_unavailable.as_ref().unwrap_or(&zero);
                let ms = ru.max_surge.as_ref().unwrap_or(&zero);
                errs.extend(int_or_percent(mu, &rp.child("maxUnavailable")));
                errs.extend(int_or_percent(ms, &rp.child("maxSurge")));
                if int_or_percent_number(mu) == 0 && int_or_percent_number(ms) == 0 {
                    errs.push(FieldError::invalid(
                        &rp.child("maxUnavailable"),
                        int_or_string_value(mu),
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
                errs.extend(at_most_100_percent(mu, &rp.child("maxUnavailable")));
            }
        },
        other => errs.push(FieldError::not_supported(
            &path.child("type"),
            other,
            &["Recreate", "RollingUpdate"],
        )),
    }
    errs
}

/// Upstream `ValidateReplicaSet` (+ update rules).
pub(crate) fn validate_replica_set(
    rs: &ReplicaSet,
    old: Option<&ReplicaSet>,
    raw: &Value,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    let spec = rs.spec.clone().unwrap_or_default();
    errs.extend(nonnegative(spec.replicas, &sp.child("replicas")));
    errs.extend(nonnegative(
        spec.min_ready_seconds,
        &sp.child("minReadySeconds"),
    ));
    // Upstream reuses the Deployment wording here.
    errs.extend(validate_selector_and_template(
        &spec.selector,
        raw,
        true,
        spec.template.as_ref(),
        "deployment",
        "ReplicaSet",
        &sp,
    ));
    errs.extend(immutable_selector(
        &spec.selector,
        old.map(|o| o.spec.as_ref().map(|s| &s.selector)),
        &sp,
    ));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    fn deployment(spec: Value) -> (Deployment, Value) {
        let raw = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}, "spec": spec});
        let mut d: Deployment = serde_json::from_value(raw.clone()).unwrap();
        default_deployment(&mut d);
        (d, raw)
    }

    fn valid_spec() -> Value {
        json!({"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}})
    }

    fn errors(spec: Value) -> Vec<String> {
        let (d, raw) = deployment(spec);
        error_messages(&validate_deployment(&d, None, &raw))
    }

    fn with(mut base: Value, pointer: &str, v: Value) -> Value {
        *base.pointer_mut(pointer).unwrap() = v;
        base
    }

    #[test]
    fn deployment_defaults() {
        let (d, _) = deployment(valid_spec());
        let s = d.spec.unwrap();
        assert_eq!(s.replicas, Some(1));
        assert_eq!(s.revision_history_limit, Some(10));
        assert_eq!(s.progress_deadline_seconds, Some(600));
        let st = s.strategy.unwrap();
        assert_eq!(st.type_.as_deref(), Some("RollingUpdate"));
        let ru = st.rolling_update.unwrap();
        assert_eq!(ru.max_surge, Some(IntOrString::String("25%".into())));
        assert_eq!(ru.max_unavailable, Some(IntOrString::String("25%".into())));
        assert_eq!(
            s.template.spec.unwrap().restart_policy.as_deref(),
            Some("Always")
        );
    }

    #[test]
    fn recreate_strategies_get_no_rolling_update() {
        let (d, _) = deployment(with(
            valid_spec(),
            "/selector",
            json!({"matchLabels": {"app": "web"}}),
        ));
        assert!(d.spec.unwrap().strategy.unwrap().rolling_update.is_some());
        let mut spec = valid_spec();
        spec["strategy"] = json!({"type": "Recreate"});
        let (d, _) = deployment(spec);
        assert!(d.spec.unwrap().strategy.unwrap().rolling_update.is_none());
    }

    #[test]
    fn a_valid_deployment_passes() {
        assert_eq!(errors(valid_spec()), Vec::<String>::new());
    }

    #[test]
    fn deployment_rules_report_upstream_messages() {
        let mut both_zero = valid_spec();
        both_zero["strategy"] = json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}});
        let mut recreate = valid_spec();
        recreate["strategy"] = json!({"type": "Recreate", "rollingUpdate": {}});
        let mut too_many = valid_spec();
        too_many["strategy"] = json!({"rollingUpdate": {"maxUnavailable": "120%"}});
        let mut deadline = valid_spec();
        deadline["minReadySeconds"] = json!(700);
        let mut no_selector = valid_spec();
        no_selector.as_object_mut().unwrap().remove("selector");
        let cases = [
            (
                with(
                    valid_spec(),
                    "/template/metadata/labels/app",
                    json!("other"),
                ),
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`",
            ),
            (
                json!({"replicas": -1, "selector": {"matchLabels": {"app": "web"}}, "template": valid_spec()["template"]}),
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                with(
                    valid_spec(),
                    "/template/spec/containers",
                    json!([{"name": "nginx"}]),
                ),
                "spec.template.spec.containers[0].image: Required value",
            ),
            (
                with(
                    valid_spec(),
                    "/template/spec/containers",
                    json!([{"name": "nginx", "image": "a"}, {"name": "nginx", "image": "b"}]),
                ),
                "spec.template.spec.containers[1].name: Duplicate value: \"nginx\"",
            ),
            (
                with(
                    valid_spec(),
                    "/template/spec",
                    json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}),
                ),
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            ),
            (
                both_zero,
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
            ),
            (
                recreate,
                "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'",
            ),
            (
                too_many,
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"120%\": must not be greater than 100%",
            ),
            (
                deadline,
                "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds",
            ),
            (no_selector, "spec.selector: Required value"),
            (
                with(valid_spec(), "/selector", json!({})),
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment",
            ),
        ];
        for (spec, want) in cases {
            let errs = errors(spec.clone());
            assert!(
                errs.iter().any(|e| e == want),
                "{spec}\nwant {want}\ngot {errs:?}"
            );
        }
    }

    #[test]
    fn selectors_are_immutable_on_update() {
        let (old, _) = deployment(valid_spec());
        let spec = with(
            with(valid_spec(), "/selector/matchLabels/app", json!("web2")),
            "/template/metadata/labels/app",
            json!("web2"),
        );
        let (new, raw) = deployment(spec);
        let errs = error_messages(&validate_deployment(&new, Some(&old), &raw));
        assert_eq!(
            errs,
            vec![
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
            ]
        );
    }

    #[test]
    fn replica_sets_default_and_validate_like_deployments() {
        let raw = json!({"metadata": {"name": "rs", "namespace": "d"}, "spec": {"replicas": -2, "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        let mut rs: ReplicaSet = serde_json::from_value(raw.clone()).unwrap();
        default_replica_set(&mut rs);
        let msgs = error_messages(&validate_replica_set(&rs, None, &raw));
        assert_eq!(
            msgs,
            vec![
                "spec.replicas: Invalid value: -2: must be greater than or equal to 0",
                "spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"c\"}: `selector` does not match template `labels`",
            ]
        );
        let mut rs2: ReplicaSet =
            serde_json::from_value(json!({"spec": {"selector": {}}})).unwrap();
        default_replica_set(&mut rs2);
        assert_eq!(rs2.spec.unwrap().replicas, Some(1));
    }
}
