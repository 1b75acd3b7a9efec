//! batch/v1 Job: defaults (parallelism, completions, backoff, the generated selector and
//! labels) and validation, including what a Job update may change.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::Value;

use super::Operation;
use super::apps::default_template;
use super::field::{FieldError, Path};
use super::names::dns1123_label;
use super::pod_spec::validate_pod_template;
use super::selector::{self, is_convertible, labels_value, matches, validate_label_selector};
use super::workload::{mismatch, nonnegative, template_labels};

pub(crate) const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
pub(crate) const JOB_NAME: &str = "batch.kubernetes.io/job-name";
const LEGACY_CONTROLLER_UID: &str = "controller-uid";
const LEGACY_JOB_NAME: &str = "job-name";
const MAX_INDEXED_PARALLELISM: i32 = 100_000;
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
const MAX_SUCCESS_POLICY_RULES: usize = 20;
/// Upstream `maxJobSuccessPolicySucceededIndexesLimit`: 64 KiB.
const MAX_SUCCEEDED_INDEXES: usize = 64 * 1024;

/// Upstream `SetDefaults_Job`, then (on create) the strategy's generated selector.
pub(crate) fn default_job(job: &mut Job, op: Operation) {
    let spec = job.spec.get_or_insert_with(Default::default);
    if spec.completions.is_none() && spec.parallelism.is_none() {
        spec.completions = Some(1);
    }
    spec.parallelism.get_or_insert(1);
    if spec.backoff_limit.is_none() {
        spec.backoff_limit = Some(if spec.backoff_limit_per_index.is_some() {
            i32::MAX
        } else {
            6
        });
    }
    spec.completion_mode
        .get_or_insert_with(|| "NonIndexed".into());
    spec.suspend.get_or_insert(false);
    if let Some(pfp) = &mut spec.pod_failure_policy {
        for pattern in pfp
            .rules
            .iter_mut()
            .flat_map(|r| r.on_pod_conditions.iter_mut().flatten())
        {
            if pattern.status.is_empty() {
                pattern.status = "True".into();
            }
        }
    }
    if spec.pod_replacement_policy.is_none() {
        let p = if spec.pod_failure_policy.is_some() {
            "Failed"
        } else {
            "TerminatingOrFailed"
        };
        spec.pod_replacement_policy = Some(p.into());
    }
    default_template(&mut spec.template);
    if op == Operation::Create && spec.manual_selector != Some(true) {
        generate_selector(spec, &job.metadata);
    }
    // Job labels default to the template's (upstream re-applies this when reading from storage,
    // so the generated labels end up on the Job too).
    let tl = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone());
    if let Some(tl) = tl
        && job.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty)
    {
        job.metadata.labels = Some(tl);
    }
}

/// Labels pods with the Job's uid and name and selects on the uid.
fn generate_selector(spec: &mut JobSpec, meta: &ObjectMeta) {
    let uid = meta.uid.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let labels = spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    for key in [LEGACY_JOB_NAME, JOB_NAME] {
        labels.entry(key.into()).or_insert_with(|| name.clone());
    }
    for key in [LEGACY_CONTROLLER_UID, CONTROLLER_UID] {
        labels.entry(key.into()).or_insert_with(|| uid.clone());
    }
    let sel = spec.selector.get_or_insert_with(LabelSelector::default);
    sel.match_labels
        .get_or_insert_with(BTreeMap::new)
        .entry(CONTROLLER_UID.into())
        .or_insert(uid);
}

/// Upstream `ValidateJob` (+ `ValidateJobUpdate` when `old` is given).
pub(crate) fn validate_job(job: &Job, old: Option<&Job>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = job.spec.clone().unwrap_or_default();
    let sp = Path::new("spec");
    if spec.manual_selector != Some(true) {
        errs.extend(validate_generated_selector(&spec, &job.metadata));
    }
    errs.extend(validate_job_spec(&spec, &sp));
    if spec.selector.is_none() {
        errs.push(FieldError::required(&sp.child("selector"), ""));
    }
    if let Some(sel) = &spec.selector {
        errs.extend(validate_label_selector(sel, &sp.child("selector")));
        let labels = template_labels(Some(&spec.template));
        if is_convertible(sel) && !matches(sel, labels.unwrap_or(&BTreeMap::new())) {
            errs.push(mismatch(labels, &sp.child("template")));
        }
    }
    let name = job.metadata.name.as_deref().unwrap_or_default();
    if spec.completion_mode.as_deref() == Some("Indexed")
        && let Some(c) = spec.completions.filter(|c| *c > 0)
    {
        let hostname = format!("{name}-{}", c - 1);
        if !dns1123_label(&hostname).is_empty() {
            errs.push(FieldError::invalid(
                &Path::new("metadata").child("name"),
                name,
                format!("will not able to create pod with invalid DNS label: {hostname}"),
            ));
        }
    }
    if let Some(o) = old {
        errs.extend(validate_job_spec_update(
            &spec,
            &o.spec.clone().unwrap_or_default(),
            o,
            &sp,
        ));
    }
    errs
}

fn validate_generated_selector(spec: &JobSpec, meta: &ObjectMeta) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let tmp = Path::new("spec").child("template").child("metadata");
    let labels = template_labels(Some(&spec.template));
    if labels.is_none() {
        errs.push(FieldError::required(&tmp.child("labels"), ""));
    }
    let Some(sel) = &spec.selector else {
        errs.push(FieldError::required(
            &Path::new("spec").child("selector"),
            "",
        ));
        return errs;
    };
    let uid = meta.uid.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    for (key, want) in [(CONTROLLER_UID, &uid), (JOB_NAME, &name)] {
        match labels.get(key) {
            None => errs.push(FieldError::required(
                &tmp.child("labels").key(key),
                want.clone(),
            )),
            Some(v) if v != want => errs.push(FieldError::invalid(
                &tmp.child("labels").key(key),
                labels_value(Some(labels)),
                format!("must be '{want}'"),
            )),
            Some(_) => {}
        }
    }
    let expected = BTreeMap::from([(CONTROLLER_UID.to_string(), uid)]);
    if is_convertible(sel) && !matches(sel, &expected) {
        errs.push(FieldError::invalid(
            &Path::new("spec").child("selector"),
            selector::to_value(sel),
            "`selector` not auto-generated",
        ));
    }
    errs
}

/// Upstream `validateJobSpec`: counts, completion mode, policies and the pod template.
pub(crate) fn validate_job_spec(spec: &JobSpec, sp: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let counts = [
        ("parallelism", spec.parallelism.map(i64::from)),
        ("completions", spec.completions.map(i64::from)),
        ("activeDeadlineSeconds", spec.active_deadline_seconds),
        ("backoffLimit", spec.backoff_limit.map(i64::from)),
        (
            "ttlSecondsAfterFinished",
            spec.ttl_seconds_after_finished.map(i64::from),
        ),
        (
            "backoffLimitPerIndex",
            spec.backoff_limit_per_index.map(i64::from),
        ),
        ("maxFailedIndexes", spec.max_failed_indexes.map(i64::from)),
    ];
    for (field, v) in counts {
        errs.extend(nonnegative(v, &sp.child(field)));
    }
    if spec.max_failed_indexes.is_some() && spec.backoff_limit_per_index.is_none() {
        errs.push(FieldError::required(
            &sp.child("backoffLimitPerIndex"),
            "when maxFailedIndexes is specified",
        ));
    }
    let mode = spec.completion_mode.as_deref();
    match mode {
        None | Some("NonIndexed") => {
            if let Some(b) = spec.backoff_limit_per_index {
                errs.push(FieldError::invalid(
                    &sp.child("backoffLimitPerIndex"),
                    b,
                    "requires indexed completion mode",
                ));
            }
            if let Some(m) = spec.max_failed_indexes {
                errs.push(FieldError::invalid(
                    &sp.child("maxFailedIndexes"),
                    m,
                    "requires indexed completion mode",
                ));
            }
        }
        Some("Indexed") => {
            if spec.completions.is_none() {
                errs.push(FieldError::required(
                    &sp.child("completions"),
                    "when completion mode is Indexed",
                ));
            }
            if let Some(p) = spec.parallelism.filter(|p| *p > MAX_INDEXED_PARALLELISM) {
                errs.push(FieldError::invalid(&sp.child("parallelism"), p,
                    format!("must be less than or equal to {MAX_INDEXED_PARALLELISM} when completion mode is Indexed")));
            }
            if let (Some(c), Some(m)) = (spec.completions, spec.max_failed_indexes)
                && m > c
            {
                errs.push(FieldError::invalid(
                    &sp.child("maxFailedIndexes"),
                    m,
                    "must be less than or equal to completions",
                ));
            }
        }
        Some(other) => errs.push(FieldError::not_supported(
            &sp.child("completionMode"),
            other,
            &["NonIndexed", "Indexed"],
        )),
    }
    if let Some(pfp) = &spec.pod_failure_policy {
        if pfp.rules.len() > MAX_POD_FAILURE_POLICY_RULES {
            let p = sp.child("podFailurePolicy").child("rules");
            errs.push(FieldError::too_many(
                &p,
                pfp.rules.len(),
                MAX_POD_FAILURE_POLICY_RULES,
            ));
        }
        for (i, r) in pfp.rules.iter().enumerate() {
            let valid = ["Count", "FailIndex", "FailJob", "Ignore"];
            if !valid.contains(&r.action.as_str()) {
                let p = sp
                    .child("podFailurePolicy")
                    .child("rules")
                    .index(i)
                    .child("action");
                errs.push(FieldError::not_supported(&p, r.action.as_str(), &valid));
            }
        }
    }
    errs.extend(validate_success_policy(spec, &sp.child("successPolicy")));
    if let Some(p) = spec.pod_replacement_policy.as_deref() {
        let prp = sp.child("podReplacementPolicy");
        if spec.pod_failure_policy.is_some() && p != "Failed" {
            errs.push(FieldError::not_supported(&prp, p, &["Failed"]));
        } else if !matches!(p, "Failed" | "TerminatingOrFailed") {
            errs.push(FieldError::not_supported(
                &prp,
                p,
                &["Failed", "TerminatingOrFailed"],
            ));
        }
    }
    let tp = sp.child("template");
    errs.extend(validate_pod_template(&spec.template, &tp));
    let rp = tp.child("spec").child("restartPolicy");
    match spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or_default()
    {
        "Always" | "" => errs.push(FieldError::required(
            &rp,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        "OnFailure" if spec.pod_failure_policy.is_some() => {
            errs.push(FieldError::invalid(
                &rp,
                "OnFailure",
                "only \"Never\" is supported when podFailurePolicy is specified",
            ));
        }
        "OnFailure" | "Never" => {}
        other => errs.push(FieldError::not_supported(
            &rp,
            other,
            &["OnFailure", "Never"],
        )),
    }
    errs
}

/// Upstream `validateSuccessPolicy`: Indexed Jobs only, 1 to 20 rules, each with a valid index
/// list or a count within the completions.
fn validate_success_policy(spec: &JobSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(policy) = &spec.success_policy else {
        return errs;
    };
    if spec.completion_mode.as_deref() != Some("Indexed") {
        let v = serde_json::to_value(policy).unwrap_or_default();
        errs.push(FieldError::invalid(
            path,
            v,
            "requires indexed completion mode",
        ));
        return errs;
    }
    let completions = spec.completions.unwrap_or(0);
    let rp = path.child("rules");
    if policy.rules.is_empty() {
        errs.push(FieldError::required(
            &rp,
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if policy.rules.len() > MAX_SUCCESS_POLICY_RULES {
        errs.push(FieldError::too_many(
            &rp,
            policy.rules.len(),
            MAX_SUCCESS_POLICY_RULES,
        ));
    }
    for (i, rule) in policy.rules.iter().enumerate() {
        let path = rp.index(i);
        if rule.succeeded_count.is_none() && rule.succeeded_indexes.is_none() {
            errs.push(FieldError::required(
                &path,
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        let mut total = 0;
        if let Some(ix) = &rule.succeeded_indexes {
            let ip = path.child("succeededIndexes");
            if ix.len() > MAX_SUCCEEDED_INDEXES {
                errs.push(FieldError::too_long(&ip, MAX_SUCCEEDED_INDEXES));
            }
            match index_list_total(ix, completions) {
                Ok(t) => total = t,
                Err(e) => errs.push(FieldError::invalid(
                    &ip,
                    ix.as_str(),
                    format!("error parsing succeededIndexes: {e}"),
                )),
            }
        }
        if let Some(count) = rule.succeeded_count {
            let cp = path.child("succeededCount");
            errs.extend(nonnegative(Some(count), &cp));
            if count > completions {
                errs.push(FieldError::invalid(&cp, count, format!(
                    "must be less than or equal to {completions} (the number of specified completions)"
                )));
            }
            if rule.succeeded_indexes.is_some() && count > total {
                errs.push(FieldError::invalid(&cp, count, format!(
                    "must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"
                )));
            }
        }
    }
    errs
}

/// Upstream `validateIndexesFormat`: an increasing list of indexes and ranges below
/// `completions`; how many indexes it holds.
fn index_list_total(list: &str, completions: i32) -> Result<i32, String> {
    if list.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i32> = None;
    let mut total = 0;
    for piece in list.split(',') {
        let limits: Vec<&str> = piece.split('-').collect();
        if limits.len() > 2 {
            return Err(format!(
                "the fragment {piece:?} violates the requirement that an index interval can have at most two parts separated by '-'"
            ));
        }
        let parse = |s: &str| {
            s.parse::<i32>()
                .map_err(|_| format!("cannot convert string to integer for index: {s:?}"))
                .and_then(|x| {
                    if x >= completions {
                        Err(format!("too large index: {s:?}"))
                    } else {
                        Ok(x)
                    }
                })
        };
        for (k, s) in limits.iter().enumerate() {
            let x = parse(s)?;
            if let Some(prev) = last
                && prev >= x
            {
                return Err(format!(
                    "non-increasing order, previous: {prev}, current: {x}"
                ));
            }
            total += match (k, last) {
                (1, Some(prev)) => x - prev,
                _ => 1,
            };
            last = Some(x);
        }
    }
    Ok(total)
}

fn validate_job_spec_update(
    spec: &JobSpec,
    old: &JobSpec,
    old_job: &Job,
    sp: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    if spec.completions != old.completions {
        if !indexed {
            errs.push(FieldError::immutable(
                &sp.child("completions"),
                json_or_null(&spec.completions),
            ));
        } else if let Some(c) = spec.completions
            && Some(c) != spec.parallelism
        {
            errs.push(FieldError::invalid(
                &sp.child("completions"),
                c,
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    }
    if spec.selector != old.selector {
        let v = spec
            .selector
            .as_ref()
            .map_or(Value::Null, selector::to_value);
        errs.push(FieldError::immutable(&sp.child("selector"), v));
    }
    let mut old_template = old.template.clone();
    let suspended_unstarted = old.suspend == Some(true)
        && old_job
            .status
            .as_ref()
            .is_none_or(|s| s.start_time.is_none());
    if suspended_unstarted {
        // Scheduling directives of a suspended, never-started Job may change.
        let (nt, ot) = (spec.template.clone(), &mut old_template);
        let ometa = ot.metadata.get_or_insert_with(Default::default);
        let nmeta = nt.metadata.unwrap_or_default();
        ometa.labels = nmeta.labels;
        ometa.annotations = nmeta.annotations;
        if let (Some(os), Some(ns)) = (ot.spec.as_mut(), nt.spec.as_ref()) {
            os.node_selector.clone_from(&ns.node_selector);
            os.tolerations.clone_from(&ns.tolerations);
            os.scheduling_gates.clone_from(&ns.scheduling_gates);
            os.affinity.clone_from(&ns.affinity);
        }
    }
    if spec.template != old_template {
        let v = serde_json::to_value(&spec.template).unwrap_or_default();
        errs.push(FieldError::immutable(&sp.child("template"), v));
    }
    // The fields that never change, each as its JSON value (null when unset).
    let immutable = |s: &JobSpec| {
        [
            ("completionMode", json_or_null(&s.completion_mode)),
            ("podFailurePolicy", json_or_null(&s.pod_failure_policy)),
            (
                "backoffLimitPerIndex",
                json_or_null(&s.backoff_limit_per_index),
            ),
            ("managedBy", json_or_null(&s.managed_by)),
            ("successPolicy", json_or_null(&s.success_policy)),
        ]
    };
    for ((field, n), (_, o)) in immutable(spec).into_iter().zip(immutable(old)) {
        if n != o {
            errs.push(FieldError::immutable(&sp.child(field), n));
        }
    }
    errs
}

fn json_or_null<T: serde::Serialize>(v: &Option<T>) -> Value {
    v.as_ref()
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    fn job(spec: Value) -> Job {
        let mut j: Job = serde_json::from_value(
            json!({"metadata": {"name": "pi", "namespace": "d", "uid": "u1"}, "spec": spec}),
        )
        .unwrap();
        default_job(&mut j, Operation::Create);
        j
    }

    fn template() -> Value {
        json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}})
    }

    #[test]
    fn generated_selectors_keep_user_labels() {
        let mut t = template();
        t["metadata"] = json!({"labels": {"app": "pi"}});
        let j = job(json!({"template": t}));
        let labels = j
            .spec
            .as_ref()
            .unwrap()
            .template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .clone()
            .unwrap();
        assert_eq!(labels["app"], "pi");
        assert_eq!(labels[CONTROLLER_UID], "u1");
        assert_eq!(labels[JOB_NAME], "pi");
        assert_eq!(j.metadata.labels.as_ref().unwrap()["app"], "pi");
        assert!(
            validate_job(&j, None).is_empty(),
            "{:?}",
            validate_job(&j, None)
        );
    }

    #[test]
    fn a_foreign_selector_without_manual_selector_is_refused() {
        let j = job(json!({"selector": {"matchLabels": {"app": "x"}}, "template": template()}));
        let msgs = error_messages(&validate_job(&j, None));
        assert!(
            msgs.iter()
                .any(|m| m.ends_with(": `selector` not auto-generated")),
            "{msgs:?}"
        );
    }

    #[test]
    fn manual_selectors_are_left_alone() {
        let mut t = template();
        t["metadata"] = json!({"labels": {"app": "x"}});
        let j = job(
            json!({"manualSelector": true, "selector": {"matchLabels": {"app": "x"}}, "template": t}),
        );
        let spec = j.spec.as_ref().unwrap();
        assert_eq!(
            spec.selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()
                .len(),
            1
        );
        assert!(validate_job(&j, None).is_empty());
    }

    #[test]
    fn pod_failure_policies_switch_the_replacement_default() {
        let j = job(
            json!({"template": template(), "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}),
        );
        let spec = j.spec.unwrap();
        assert_eq!(spec.pod_replacement_policy.as_deref(), Some("Failed"));
        assert_eq!(
            spec.pod_failure_policy.unwrap().rules[0]
                .on_pod_conditions
                .as_ref()
                .unwrap()[0]
                .status,
            "True"
        );
    }

    #[test]
    fn success_policies_need_an_indexed_job_and_valid_rules() {
        let indexed = |rules: Value| {
            job(
                json!({"completionMode": "Indexed", "completions": 10, "parallelism": 10,
                "successPolicy": {"rules": rules}, "template": template()}),
            )
        };
        let msgs = |j: &Job| -> Vec<String> { error_messages(&validate_job(j, None)) };
        assert!(
            msgs(&indexed(
                json!([{"succeededIndexes": "0,2-3", "succeededCount": 1}])
            ))
            .is_empty()
        );
        let cases = [
            (
                json!([{}]),
                "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified",
            ),
            (
                json!([{"succeededIndexes": "3,1"}]),
                "error parsing succeededIndexes: non-increasing order, previous: 3, current: 1",
            ),
            (
                json!([{"succeededIndexes": "1-12"}]),
                "error parsing succeededIndexes: too large index: \"12\"",
            ),
            (
                json!([{"succeededIndexes": "1-2-3"}]),
                "violates the requirement that an index interval can have at most two parts",
            ),
            (
                json!([{"succeededIndexes": "0,2", "succeededCount": 3}]),
                "must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
            ),
            (
                json!([{"succeededCount": 11}]),
                "must be less than or equal to 10 (the number of specified completions)",
            ),
        ];
        for (rules, want) in cases {
            let got = msgs(&indexed(rules.clone()));
            assert!(got.iter().any(|m| m.contains(want)), "{rules}: {got:?}");
        }
        let plain = job(json!({"completions": 2, "template": template(),
            "successPolicy": {"rules": [{"succeededCount": 1}]}}));
        assert!(
            msgs(&plain)
                .iter()
                .any(|m| m.ends_with("requires indexed completion mode"))
        );
    }

    #[test]
    fn indexed_jobs_need_room_for_the_index_in_hostnames() {
        let mut j: Job = serde_json::from_value(
            json!({"metadata": {"name": "a".repeat(62), "namespace": "d", "uid": "u"},
            "spec": {"completionMode": "Indexed", "completions": 10, "template": template()}}),
        )
        .unwrap();
        default_job(&mut j, Operation::Create);
        let msgs = error_messages(&validate_job(&j, None));
        assert!(
            msgs.iter()
                .any(|m| m.starts_with("metadata.name: Invalid value:")
                    && m.contains("will not able to create pod with invalid DNS label")),
            "{msgs:?}"
        );
    }
}
