//! ReplicationController, PodDisruptionBudget and Lease admission.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::apps::default_template;
use super::field::{FieldError, Path, validate_optional_choice};
use super::meta::validate_labels;
use super::selector::validate_label_selector;
use super::workload::{
    at_most_100_percent, int_or_percent, mismatch, nonnegative, template_labels,
    validate_controller_template,
};

/// Upstream `SetDefaults_ReplicationController`: selector and object labels default to the
/// template's labels; one replica.
pub(crate) fn default_replication_controller(rc: &mut ReplicationController) {
    let spec = rc.spec.get_or_insert_with(Default::default);
    if let Some(labels) = template_labels(spec.template.as_ref()).cloned() {
        if spec.selector.as_ref().is_none_or(|s| s.is_empty()) {
            spec.selector = Some(labels.clone());
        }
        if rc.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
            rc.metadata.labels = Some(labels);
        }
    }
    spec.replicas.get_or_insert(1);
    if let Some(t) = &mut spec.template {
        default_template(t);
    }
}

pub(crate) fn validate_replication_controller(rc: &ReplicationController) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    let spec = rc.spec.clone().unwrap_or_default();
    errs.extend(nonnegative(
        spec.min_ready_seconds,
        &sp.child("minReadySeconds"),
    ));
    let selector = spec.selector.clone().unwrap_or_default();
    if selector.is_empty() {
        errs.push(FieldError::required(&sp.child("selector"), ""));
    } else {
        errs.extend(validate_labels(&selector, &sp.child("selector")));
    }
    errs.extend(nonnegative(spec.replicas, &sp.child("replicas")));
    if let Some(t) = &spec.template {
        let labels = template_labels(Some(t));
        let empty = Default::default();
        let have = labels.unwrap_or(&empty);
        if !selector.is_empty() && !selector.iter().all(|(k, v)| have.get(k) == Some(v)) {
            errs.push(mismatch(labels, &sp.child("template")));
        }
    }
    errs.extend(validate_controller_template(
        spec.template.as_ref(),
        "ReplicationController",
        &sp.child("template"),
    ));
    errs
}

/// Upstream `ValidatePodDisruptionBudget` (the spec is mutable, so updates re-check it).
pub(crate) fn validate_pdb(pdb: &PodDisruptionBudget) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    let spec = pdb.spec.clone().unwrap_or_default();
    if spec.min_available.is_some() && spec.max_unavailable.is_some() {
        let v = serde_json::to_value(&spec).unwrap_or_default();
        errs.push(FieldError::invalid(
            &sp,
            v,
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (field, v) in [
        ("minAvailable", &spec.min_available),
        ("maxUnavailable", &spec.max_unavailable),
    ] {
        if let Some(v) = v {
            errs.extend(int_or_percent(v, &sp.child(field)));
            errs.extend(at_most_100_percent(v, &sp.child(field)));
        }
    }
    if let Some(sel) = &spec.selector {
        errs.extend(validate_label_selector(sel, &sp.child("selector")));
    }
    errs.extend(validate_optional_choice(
        spec.unhealthy_pod_eviction_policy.as_deref(),
        &["AlwaysAllow", "IfHealthyBudget"],
        &sp.child("unhealthyPodEvictionPolicy"),
    ));
    errs
}

/// Upstream `ValidateLease`.
pub(crate) fn validate_lease(lease: &Lease) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    if let Some(spec) = &lease.spec {
        if let Some(d) = spec.lease_duration_seconds.filter(|d| *d <= 0) {
            errs.push(FieldError::invalid(
                &sp.child("leaseDurationSeconds"),
                d,
                "must be greater than 0",
            ));
        }
        errs.extend(nonnegative(
            spec.lease_transitions,
            &sp.child("leaseTransitions"),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    #[test]
    fn replication_controllers_take_selector_and_labels_from_the_template() {
        let mut rc: ReplicationController = serde_json::from_value(json!({"metadata": {"name": "rc", "namespace": "d"},
            "spec": {"template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})).unwrap();
        default_replication_controller(&mut rc);
        let spec = rc.spec.as_ref().unwrap();
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.selector.as_ref().unwrap()["app"], "a");
        assert_eq!(rc.metadata.labels.as_ref().unwrap()["app"], "a");
        assert!(validate_replication_controller(&rc).is_empty());
    }

    #[test]
    fn replication_controllers_need_a_selector_and_a_template() {
        let mut rc: ReplicationController = serde_json::from_value(
            json!({"metadata": {"name": "rc", "namespace": "d"}, "spec": {}}),
        )
        .unwrap();
        default_replication_controller(&mut rc);
        let msgs = error_messages(&validate_replication_controller(&rc));
        assert_eq!(
            msgs,
            vec![
                "spec.selector: Required value",
                "spec.template: Required value"
            ]
        );
    }

    #[test]
    fn pdbs_take_one_bound_as_int_or_percent() {
        let pdb: PodDisruptionBudget =
            serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "d"},
            "spec": {"minAvailable": "150%", "maxUnavailable": -1}}))
            .unwrap();
        let msgs = error_messages(&validate_pdb(&pdb));
        assert_eq!(msgs.len(), 3, "{msgs:?}");
        assert!(msgs[0].ends_with(": minAvailable and maxUnavailable cannot be both set"));
        assert_eq!(
            msgs[1],
            "spec.minAvailable: Invalid value: \"150%\": must not be greater than 100%"
        );
        assert_eq!(
            msgs[2],
            "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"
        );
    }

    #[test]
    fn leases_need_a_positive_duration() {
        let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "l", "namespace": "d"}, "spec": {"leaseDurationSeconds": 0}})).unwrap();
        assert_eq!(
            validate_lease(&lease)[0].message(),
            "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
        );
    }
}
