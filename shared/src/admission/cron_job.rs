//! batch/v1 CronJob: defaults (concurrency, history limits, job-template pod defaults),
//! validation of the schedule, time zone and job template, and the API warning for a
//! `TZ=`/`CRON_TZ=` schedule prefix (accepted, as the seeds and Kubernetes 1.27 do).

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobTemplateSpec};

use super::apps::default_template;
use super::batch::validate_job_spec;
use super::field::{FieldError, Path, validate_choice};
use super::meta::{validate_annotations, validate_labels};
use super::selector;
use super::workload::nonnegative;
use crate::cron::{Schedule, load_zone};

/// Upstream `SetDefaults_CronJob` plus the pod-template defaults inside `jobTemplate`.
pub(crate) fn default_cron_job(cj: &mut CronJob) {
    let spec = cj.spec.get_or_insert_with(Default::default);
    spec.concurrency_policy
        .get_or_insert_with(|| "Allow".into());
    spec.suspend.get_or_insert(false);
    spec.successful_jobs_history_limit.get_or_insert(3);
    spec.failed_jobs_history_limit.get_or_insert(1);
    let job_spec = spec.job_template.spec.get_or_insert_with(Default::default);
    default_template(&mut job_spec.template);
}

/// Upstream `ValidateCronJobCreate` / `ValidateCronJobUpdate`.
pub(crate) fn validate_cron_job(cj: &CronJob, old: Option<&CronJob>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = cj.spec.clone().unwrap_or_default();
    let old_spec = old.and_then(|o| o.spec.as_ref());
    errs.extend(validate_cron_job_spec(&spec, old_spec, &Path::new("spec")));
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    if old.is_none() && name.len() > 52 {
        errs.push(FieldError::invalid(
            &Path::new("metadata").child("name"),
            name,
            "must be no more than 52 characters",
        ));
    }
    errs
}

fn validate_cron_job_spec(
    spec: &CronJobSpec,
    old: Option<&CronJobSpec>,
    sp: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let schedule_path = sp.child("schedule");
    if spec.schedule.is_empty() {
        errs.push(FieldError::required(&schedule_path, ""));
    } else {
        if let Err(e) = Schedule::parse(&spec.schedule) {
            errs.push(FieldError::invalid(
                &schedule_path,
                spec.schedule.as_str(),
                e.to_string(),
            ));
        }
        // The seeds (and Kubernetes up to 1.28) accept a zone prefix with a warning
        // ([`warnings`]); only combining it with `timeZone` is refused.
        if spec.schedule.contains("TZ") && spec.time_zone.is_some() {
            errs.push(FieldError::invalid(
                &schedule_path,
                spec.schedule.as_str(),
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            ));
        }
    }
    errs.extend(nonnegative(
        spec.starting_deadline_seconds,
        &sp.child("startingDeadlineSeconds"),
    ));
    if old.is_none_or(|o| o.time_zone != spec.time_zone) {
        errs.extend(validate_time_zone(
            spec.time_zone.as_deref(),
            &sp.child("timeZone"),
        ));
    }
    errs.extend(validate_choice(
        spec.concurrency_policy.as_deref(),
        &["Allow", "Forbid", "Replace"],
        &sp.child("concurrencyPolicy"),
    ));
    errs.extend(validate_job_template(
        &spec.job_template,
        &sp.child("jobTemplate"),
    ));
    errs.extend(nonnegative(
        spec.successful_jobs_history_limit,
        &sp.child("successfulJobsHistoryLimit"),
    ));
    errs.extend(nonnegative(
        spec.failed_jobs_history_limit,
        &sp.child("failedJobsHistoryLimit"),
    ));
    errs
}

/// Characters upstream accepts in each `/`-separated part of a time zone name.
fn tz_part_ok(part: &str) -> bool {
    (1..=14).contains(&part.len())
        && part != "."
        && part != ".."
        && !part.starts_with('-')
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_+".contains(c))
}

fn validate_time_zone(tz: Option<&str>, path: &Path) -> Vec<FieldError> {
    let Some(tz) = tz else { return Vec::new() };
    if tz.is_empty() {
        return vec![FieldError::invalid(
            path,
            tz,
            "timeZone must be nil or non-empty string",
        )];
    }
    if !tz.split('/').all(tz_part_ok) {
        return vec![FieldError::invalid(
            path,
            tz,
            format!("unknown time zone {tz}"),
        )];
    }
    if tz.eq_ignore_ascii_case("local") {
        return vec![FieldError::invalid(
            path,
            tz,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        )];
    }
    match load_zone(tz) {
        Ok(_) => Vec::new(),
        Err(e) => vec![FieldError::invalid(path, tz, e.to_string())],
    }
}

/// The API warnings for a CronJob write (upstream's `WarningsOnCreate`/`WarningsOnUpdate` of
/// the releases that accepted a zone prefix).
pub(crate) fn warnings(cj: &CronJob) -> Vec<String> {
    let schedule = cj.spec.as_ref().map_or("", |s| s.schedule.as_str());
    if schedule.contains("TZ") {
        vec![
            "CRON_TZ or TZ used in spec.spec.schedule is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
                .to_string(),
        ]
    } else {
        Vec::new()
    }
}

fn validate_job_template(t: &JobTemplateSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(meta) = &t.metadata {
        if let Some(l) = &meta.labels {
            errs.extend(validate_labels(l, &path.child("metadata").child("labels")));
        }
        if let Some(a) = &meta.annotations {
            errs.extend(validate_annotations(
                a,
                &path.child("metadata").child("annotations"),
            ));
        }
    }
    let spec = t.spec.clone().unwrap_or_default();
    let sp = path.child("spec");
    errs.extend(validate_job_spec(&spec, &sp));
    if let Some(sel) = &spec.selector {
        errs.push(FieldError::invalid(
            &sp.child("selector"),
            selector::to_value(sel),
            "`selector` will be auto-generated",
        ));
    }
    if spec.manual_selector == Some(true) {
        errs.push(FieldError::not_supported(
            &sp.child("manualSelector"),
            true,
            &["nil", "false"],
        ));
    }
    errs
}
