//! apps/v1 StatefulSet, DaemonSet and ControllerRevision: defaults (update strategies, history,
//! PVC retention) and validation, including the StatefulSet fields that may not change.

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, DaemonSetUpdateStrategy, StatefulSet, StatefulSetSpec,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::apps::default_template;
use super::defaults::default_claim_template;
use super::field::{FieldError, Path};
use super::meta::{validate_annotations, validate_labels};
use super::workload::{
    at_most_100_percent, immutable_selector, int_or_percent, int_or_percent_number,
    int_or_string_value, nonnegative, present, validate_required_selector,
    validate_selector_and_template, validate_template_policies,
};

/// Upstream `SetDefaults_StatefulSet`.
pub(crate) fn default_stateful_set(s: &mut StatefulSet) {
    let spec = s.spec.get_or_insert_with(Default::default);
    if spec
        .pod_management_policy
        .as_deref()
        .is_none_or(str::is_empty)
    {
        spec.pod_management_policy = Some("OrderedReady".into());
    }
    let us = spec.update_strategy.get_or_insert_with(Default::default);
    if us.type_.as_deref().is_none_or(str::is_empty) {
        us.type_ = Some("RollingUpdate".into());
        us.rolling_update.get_or_insert_with(Default::default);
    }
    if us.type_.as_deref() == Some("RollingUpdate")
        && let Some(ru) = &mut us.rolling_update
    {
        ru.partition.get_or_insert(0);
    }
    let policy = spec
        .persistent_volume_claim_retention_policy
        .get_or_insert_with(Default::default);
    for field in [&mut policy.when_deleted, &mut policy.when_scaled] {
        if field.as_deref().is_none_or(str::is_empty) {
            *field = Some("Retain".into());
        }
    }
    spec.replicas.get_or_insert(1);
    spec.revision_history_limit.get_or_insert(10);
    default_template(&mut spec.template);
    for pvc in spec.volume_claim_templates.iter_mut().flatten() {
        default_claim_template(pvc);
    }
}

/// The annotation in which apps/v1 DaemonSets carry their template generation (upstream's
/// internal `spec.templateGeneration`); the DaemonSet controller labels pods with it.
pub const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// Upstream `SetDefaults_DaemonSet`, and the template generation its registry strategy keeps
/// ([`template_generation`]).
pub(crate) fn default_daemon_set(d: &mut DaemonSet, old: Option<&DaemonSet>) {
    let spec = d.spec.get_or_insert_with(Default::default);
    let us = spec.update_strategy.get_or_insert_with(Default::default);
    if us.type_.as_deref().is_none_or(str::is_empty) {
        us.type_ = Some("RollingUpdate".into());
    }
    if us.type_.as_deref() == Some("RollingUpdate") {
        let ru = us.rolling_update.get_or_insert_with(Default::default);
        ru.max_unavailable.get_or_insert(IntOrString::Int(1));
        ru.max_surge.get_or_insert(IntOrString::Int(0));
    }
    spec.revision_history_limit.get_or_insert(10);
    default_template(&mut spec.template);
    let generation = template_generation(d, old);
    if generation > 0 {
        d.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(TEMPLATE_GENERATION.into(), generation.to_string());
    }
}

/// Upstream's `daemonSetStrategy`: a new DaemonSet starts at the generation it asks for, at
/// least 1; an update keeps the stored one (whatever the body says), plus 1 when the pod
/// template changed. 0 (no annotation) only for one stored before generations were kept.
fn template_generation(d: &DaemonSet, old: Option<&DaemonSet>) -> i64 {
    let of = |d: &DaemonSet| {
        d.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(TEMPLATE_GENERATION))
            .and_then(|v| v.parse::<i64>().ok())
    };
    match old {
        None => of(d).unwrap_or(1).max(1),
        Some(o) => {
            let stored = of(o).unwrap_or(0);
            let template = |d: &DaemonSet| d.spec.as_ref().map(|s| s.template.clone());
            if template(d) == template(o) {
                stored
            } else {
                stored + 1
            }
        }
    }
}

fn validate_stateful_set_spec(spec: &StatefulSetSpec, raw: &Value, sp: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let pmp = spec.pod_management_policy.as_deref().unwrap_or_default();
    match pmp {
        "" => errs.push(FieldError::required(&sp.child("podManagementPolicy"), "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid(
            &sp.child("podManagementPolicy"),
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let us = spec.update_strategy.clone().unwrap_or_default();
    let usp = sp.child("updateStrategy");
    match us.type_.as_deref().unwrap_or_default() {
        "" => errs.push(FieldError::required(&usp, "")),
        "OnDelete" => {
            if let Some(ru) = &us.rolling_update {
                let v = serde_json::to_value(ru).unwrap_or_default();
                errs.push(FieldError::invalid(
                    &usp.child("rollingUpdate"),
                    v,
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = &us.rolling_update {
                let rp = usp.child("rollingUpdate");
                errs.extend(nonnegative(ru.partition, &rp.child("partition")));
                if let Some(mu) = &ru.max_unavailable {
                    let mp = rp.child("maxUnavailable");
                    errs.extend(int_or_percent(mu, &mp));
                    if int_or_percent_number(mu) == 0 {
                        errs.push(FieldError::invalid(
                            &mp,
                            int_or_string_value(mu),
                            "cannot be 0",
                        ));
                    }
                    errs.extend(at_most_100_percent(mu, &mp));
                }
            }
        }
        other => errs.push(FieldError::invalid(
            &usp,
            other,
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    if let Some(p) = &spec.persistent_volume_claim_retention_policy {
        let pp = sp.child("persistentVolumeClaimRetentionPolicy");
        for (field, v) in [
            ("whenDeleted", &p.when_deleted),
            ("whenScaled", &p.when_scaled),
        ] {
            let v = v.as_deref().unwrap_or_default();
            if !matches!(v, "Retain" | "Delete") {
                errs.push(FieldError::not_supported(
                    &pp.child(field),
                    v,
                    &["Retain", "Delete"],
                ));
            }
        }
    }
    errs.extend(nonnegative(spec.replicas, &sp.child("replicas")));
    errs.extend(nonnegative(
        spec.min_ready_seconds,
        &sp.child("minReadySeconds"),
    ));
    if let Some(o) = &spec.ordinals {
        errs.extend(nonnegative(o.start, &sp.child("ordinals.start")));
    }
    let has_selector = present(raw, "/spec/selector");
    errs.extend(validate_required_selector(
        &spec.selector,
        has_selector,
        true,
        Some(&spec.template),
        "statefulset",
        sp,
    ));
    let tp = sp.child("template");
    if let Some(meta) = &spec.template.metadata {
        if let Some(l) = &meta.labels {
            errs.extend(validate_labels(l, &tp.child("labels")));
        }
        if let Some(a) = &meta.annotations {
            errs.extend(validate_annotations(a, &tp.child("annotations")));
        }
    }
    errs.extend(validate_template_policies(
        &spec.template,
        "StatefulSet",
        &tp,
    ));
    errs
}

/// Upstream `ValidateStatefulSet` / `ValidateStatefulSetUpdate`.
pub(crate) fn validate_stateful_set(
    s: &StatefulSet,
    old: Option<&StatefulSet>,
    raw: &Value,
) -> Vec<FieldError> {
    let sp = Path::new("spec");
    let spec = s.spec.clone().unwrap_or_default();
    let mut errs = validate_stateful_set_spec(&spec, raw, &sp);
    if let Some(o) = old {
        let old_spec = o.spec.clone().unwrap_or_default();
        let mut clone = spec.clone();
        clone.replicas = old_spec.replicas;
        clone.template = old_spec.template.clone();
        clone.update_strategy = old_spec.update_strategy.clone();
        clone.min_ready_seconds = old_spec.min_ready_seconds;
        clone.ordinals = old_spec.ordinals.clone();
        clone.persistent_volume_claim_retention_policy =
            old_spec.persistent_volume_claim_retention_policy.clone();
        if clone != old_spec {
            errs.push(FieldError::forbidden(&sp, "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"));
        }
    }
    errs
}

/// Upstream `ValidateDaemonSet` / `ValidateDaemonSetUpdate`.
pub(crate) fn validate_daemon_set(
    d: &DaemonSet,
    old: Option<&DaemonSet>,
    raw: &Value,
) -> Vec<FieldError> {
    let sp = Path::new("spec");
    let spec = d.spec.clone().unwrap_or_default();
    let mut errs = validate_selector_and_template(
        &spec.selector,
        raw,
        false,
        Some(&spec.template),
        "daemonset",
        "DaemonSet",
        &sp,
    );
    errs.extend(nonnegative(
        spec.min_ready_seconds,
        &sp.child("minReadySeconds"),
    ));
    if let Some(us) = &spec.update_strategy {
        errs.extend(validate_daemon_strategy(us, &sp.child("updateStrategy")));
    }
    errs.extend(nonnegative(
        spec.revision_history_limit,
        &sp.child("revisionHistoryLimit"),
    ));
    errs.extend(immutable_selector(
        &spec.selector,
        old.map(|o| o.spec.as_ref().map(|s| &s.selector)),
        &sp,
    ));
    errs
}

fn validate_daemon_strategy(us: &DaemonSetUpdateStrategy, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match us.type_.as_deref().unwrap_or_default() {
        "OnDelete" => {}
        "RollingUpdate" => {
            let Some(ru) = &us.rolling_update else {
                return vec![FieldError::required(&path.child("rollingUpdate"), "")];
            };
            let rp = path.child("rollingUpdate");
            let zero = IntOrString::Int(0);
            let mu = ru.max_unavailable.as_ref().unwrap_or(&zero);
            let ms = ru.max_surge.as_ref().unwrap_or(&zero);
            errs.extend(int_or_percent(mu, &rp.child("maxUnavailable")));
            errs.extend(int_or_percent(ms, &rp.child("maxSurge")));
            errs.extend(at_most_100_percent(mu, &rp.child("maxUnavailable")));
            errs.extend(at_most_100_percent(ms, &rp.child("maxSurge")));
            match (
                int_or_percent_number(mu) != 0,
                int_or_percent_number(ms) != 0,
            ) {
                (true, true) => errs.push(FieldError::invalid(
                    &rp.child("maxSurge"),
                    int_or_string_value(ms),
                    "may not be set when maxUnavailable is non-zero",
                )),
                (false, false) => errs.push(FieldError::required(
                    &rp.child("maxUnavailable"),
                    "cannot be 0 when maxSurge is 0",
                )),
                _ => {}
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("type"),
            other,
            &["RollingUpdate", "OnDelete"],
        )),
    }
    errs
}

/// Upstream `ValidateControllerRevision` (+ data immutable on update).
pub(crate) fn validate_controller_revision(
    r: &ControllerRevision,
    old: Option<&ControllerRevision>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if r.data.is_none() {
        errs.push(FieldError::required(
            &Path::new("data"),
            "data is mandatory",
        ));
    }
    errs.extend(nonnegative(Some(r.revision), &Path::new("revision")));
    if let Some(o) = old
        && o.data != r.data
    {
        let v = r.data.as_ref().map(|d| d.0.clone()).unwrap_or_default();
        errs.push(FieldError::immutable(&Path::new("data"), v));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    }

    fn sts(spec: Value) -> (StatefulSet, Value) {
        let raw = json!({"metadata": {"name": "db", "namespace": "d"}, "spec": spec});
        let mut s: StatefulSet = serde_json::from_value(raw.clone()).unwrap();
        default_stateful_set(&mut s);
        (s, raw)
    }

    #[test]
    fn stateful_set_defaults() {
        let (s, _) = sts(
            json!({"selector": {"matchLabels": {"app": "db"}}, "template": template(), "serviceName": "db",
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}),
        );
        let spec = s.spec.unwrap();
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.pod_management_policy.as_deref(), Some("OrderedReady"));
        assert_eq!(spec.revision_history_limit, Some(10));
        let us = spec.update_strategy.unwrap();
        assert_eq!(us.type_.as_deref(), Some("RollingUpdate"));
        assert_eq!(us.rolling_update.unwrap().partition, Some(0));
        let p = spec.persistent_volume_claim_retention_policy.unwrap();
        assert_eq!(
            (p.when_deleted.as_deref(), p.when_scaled.as_deref()),
            (Some("Retain"), Some("Retain"))
        );
        assert_eq!(spec.service_name.as_deref(), Some("db"));
        let pvc = &spec.volume_claim_templates.unwrap()[0];
        assert_eq!(
            pvc.spec.as_ref().unwrap().volume_mode.as_deref(),
            Some("Filesystem")
        );
        assert_eq!(
            pvc.status.as_ref().unwrap().phase.as_deref(),
            Some("Pending")
        );
    }

    #[test]
    fn stateful_set_rules() {
        let (s, raw) = sts(
            json!({"selector": {"matchLabels": {"app": "db"}}, "template": template(), "podManagementPolicy": "Random", "replicas": -1}),
        );
        let msgs = error_messages(&validate_stateful_set(&s, None, &raw));
        assert_eq!(
            msgs,
            vec![
                "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn stateful_set_updates_may_only_touch_some_fields() {
        let (old, _) = sts(
            json!({"selector": {"matchLabels": {"app": "db"}}, "template": template(), "serviceName": "a"}),
        );
        let (mut new, raw) = sts(
            json!({"selector": {"matchLabels": {"app": "db"}}, "template": template(), "serviceName": "a", "replicas": 5}),
        );
        assert!(validate_stateful_set(&new, Some(&old), &raw).is_empty());
        new.spec.as_mut().unwrap().service_name = Some("b".into());
        let errs = validate_stateful_set(&new, Some(&old), &raw);
        assert_eq!(
            errs[0].message(),
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
        );
    }

    fn ds(spec: Value) -> (DaemonSet, Value) {
        let raw = json!({"metadata": {"name": "agent", "namespace": "d"}, "spec": spec});
        let mut d: DaemonSet = serde_json::from_value(raw.clone()).unwrap();
        default_daemon_set(&mut d, None);
        (d, raw)
    }

    fn generation(d: &DaemonSet) -> Option<&str> {
        d.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(TEMPLATE_GENERATION))
            .map(String::as_str)
    }

    #[test]
    fn the_template_generation_starts_at_one_and_moves_only_with_the_template() {
        let (created, _) =
            ds(json!({"selector": {"matchLabels": {"app": "db"}}, "template": template()}));
        assert_eq!(generation(&created), Some("1"));
        let update = |edit: &dyn Fn(&mut Value)| {
            let mut raw = json!({"metadata": {"name": "agent", "namespace": "d",
                    "annotations": {TEMPLATE_GENERATION: "7"}},
                "spec": {"selector": {"matchLabels": {"app": "db"}}, "template": template()}});
            edit(&mut raw);
            let mut d: DaemonSet = serde_json::from_value(raw).unwrap();
            default_daemon_set(&mut d, Some(&created));
            generation(&d).map(str::to_string)
        };
        assert_eq!(
            update(&|_| {}),
            Some("1".into()),
            "the body's annotation is ignored"
        );
        assert_eq!(
            update(&|v| v["spec"]["minReadySeconds"] = json!(5)),
            Some("1".into()),
            "another spec field"
        );
        assert_eq!(
            update(&|v| v["spec"]["template"]["metadata"]["annotations"] = json!({"a": "b"})),
            Some("2".into()),
            "a template change"
        );
    }

    #[test]
    fn daemon_set_defaults_and_rules() {
        let (d, raw) =
            ds(json!({"selector": {"matchLabels": {"app": "db"}}, "template": template()}));
        let us = d.spec.as_ref().unwrap().update_strategy.clone().unwrap();
        let ru = us.rolling_update.unwrap();
        assert_eq!(
            (ru.max_unavailable, ru.max_surge),
            (Some(IntOrString::Int(1)), Some(IntOrString::Int(0)))
        );
        assert_eq!(d.spec.as_ref().unwrap().revision_history_limit, Some(10));
        assert!(validate_daemon_set(&d, None, &raw).is_empty());
        let (d, raw) = ds(
            json!({"selector": {"matchLabels": {"app": "db"}}, "template": template(),
            "updateStrategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}}),
        );
        let msgs = error_messages(&validate_daemon_set(&d, None, &raw));
        assert_eq!(
            msgs,
            vec![
                "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"
            ]
        );
    }

    #[test]
    fn controller_revisions_need_data_and_a_nonnegative_revision() {
        let r: ControllerRevision = serde_json::from_value(
            json!({"metadata": {"name": "r", "namespace": "d"}, "revision": -1}),
        )
        .unwrap();
        let msgs = error_messages(&validate_controller_revision(&r, None));
        assert_eq!(
            msgs,
            vec![
                "data: Required value: data is mandatory",
                "revision: Invalid value: -1: must be greater than or equal to 0"
            ]
        );
    }
}
