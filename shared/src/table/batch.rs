//! Printers for batch kinds: Job (status, completions, duration) and CronJob.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::duration::{age, human_nanos, nanos_between, parse_time};
use super::lookup::{
    at, condition_status, has, int_at, list_at, opt_bool, opt_int, opt_str, str_at,
};
use super::selector::format_label_selector;
use super::{ColumnDefinition, col, created, name, workload_cells, workload_columns};

/// How the Job and CronJob printers describe their selector column.
const JOB_SELECTOR: &str = "A label query over pods that should match the pod count.";

pub(crate) fn job_columns() -> Vec<ColumnDefinition> {
    let columns = vec![
        col("Status", "string", "Status of the job."),
        col(
            "Completions",
            "string",
            "The number of pods which reached phase Succeeded.",
        ),
        col("Duration", "string", "Time required to complete the job."),
    ];
    workload_columns(columns, Some(JOB_SELECTOR))
}

/// Upstream's order of precedence: a finished job says so even while being deleted.
fn job_status(job: &Value) -> &'static str {
    let is = |type_: &str| condition_status(job, type_) == Some("True");
    if is("Complete") {
        "Complete"
    } else if is("Failed") {
        "Failed"
    } else if has(job, &["metadata", "deletionTimestamp"]) {
        "Terminating"
    } else if is("Suspended") {
        "Suspended"
    } else if is("FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

/// `succeeded/completions`; a job without completions runs until one pod succeeds
/// (`succeeded/1`, or `succeeded/1 of parallelism` when more run at once).
fn completions(job: &Value) -> String {
    let succeeded = int_at(job, &["status", "succeeded"]);
    match opt_int(job, &["spec", "completions"]) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match opt_int(job, &["spec", "parallelism"]) {
            Some(p) if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    }
}

/// Completion minus start, or now minus start while running; empty before the job starts.
fn job_duration(job: &Value, now: Timestamp) -> String {
    let Some(start) = parse_time(opt_str(job, &["status", "startTime"])) else {
        return String::new();
    };
    let end = parse_time(opt_str(job, &["status", "completionTime"])).unwrap_or(now);
    human_nanos(nanos_between(start, end))
}

pub(crate) fn job_cells(job: &Value, now: Timestamp) -> Vec<Value> {
    let cells = vec![
        name(job),
        json!(job_status(job)),
        json!(completions(job)),
        json!(job_duration(job, now)),
        created(job, now),
    ];
    let selector = format_label_selector(at(job, &["spec", "selector"]));
    workload_cells(job, cells, &["spec"], Some(selector))
}

pub(crate) fn cron_job_columns() -> Vec<ColumnDefinition> {
    let columns = vec![
        col("Schedule", "string", "The schedule in Cron format."),
        col(
            "Timezone",
            "string",
            "The time zone name for the given schedule.",
        ),
        col(
            "Suspend",
            "boolean",
            "Whether subsequent executions are suspended.",
        ),
        col("Active", "integer", "Number of currently running jobs."),
        col(
            "Last Schedule",
            "string",
            "When a job was last successfully scheduled.",
        ),
    ];
    workload_columns(columns, Some(JOB_SELECTOR))
}

pub(crate) fn cron_job_cells(cj: &Value, now: Timestamp) -> Vec<Value> {
    let last_schedule = match opt_str(cj, &["status", "lastScheduleTime"]) {
        Some(t) => age(Some(t), now),
        None => "<none>".to_string(),
    };
    // The API server defaults `suspend` to false, so an absent field reads False.
    let suspend = if opt_bool(cj, &["spec", "suspend"]) == Some(true) {
        "True"
    } else {
        "False"
    };
    let cells = vec![
        name(cj),
        json!(str_at(cj, &["spec", "schedule"])),
        json!(opt_str(cj, &["spec", "timeZone"]).unwrap_or("<none>")),
        json!(suspend),
        json!(list_at(cj, &["status", "active"]).len()),
        json!(last_schedule),
        created(cj, now),
    ];
    let job_spec = ["spec", "jobTemplate", "spec"];
    let selector = format_label_selector(at(cj, &["spec", "jobTemplate", "spec", "selector"]));
    workload_cells(cj, cells, &job_spec, Some(selector))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture::now;

    fn job(spec: Value, status: Value) -> Value {
        let mut spec = spec;
        spec["template"] = json!({"spec": {"containers": [{"name": "pi", "image": "perl:5.34.0"}],
                                           "restartPolicy": "Never"}});
        json!({"kind": "Job",
               "metadata": {"name": "pi", "creationTimestamp": "2024-05-01T11:55:00Z"},
               "spec": spec, "status": status})
    }

    fn cond(type_: &str) -> Value {
        json!([{"type": type_, "status": "True"}])
    }

    #[test]
    fn job_status_follows_upstream_precedence() {
        let cases = [
            (json!({}), false, "Running"),
            (json!({"conditions": cond("Complete")}), true, "Complete"),
            (json!({"conditions": cond("Failed")}), false, "Failed"),
            (
                json!({"conditions": cond("Suspended")}),
                true,
                "Terminating",
            ),
            (json!({"conditions": cond("Suspended")}), false, "Suspended"),
            (
                json!({"conditions": cond("FailureTarget")}),
                false,
                "FailureTarget",
            ),
            (
                json!({"conditions": [{"type": "Complete", "status": "False"}]}),
                false,
                "Running",
            ),
        ];
        for (status, deleting, want) in cases {
            let mut j = job(json!({}), status.clone());
            if deleting {
                j["metadata"]["deletionTimestamp"] = json!("2024-05-01T11:59:00Z");
            }
            assert_eq!(
                job_cells(&j, now())[1],
                json!(want),
                "{status} deleting={deleting}"
            );
        }
    }

    #[test]
    fn completions_read_like_upstream() {
        let cases = [
            (json!({"completions": 3}), "1/3"),
            (json!({"parallelism": 4}), "1/1 of 4"),
            (json!({"parallelism": 1}), "1/1"),
            (json!({}), "1/1"),
        ];
        for (spec, want) in cases {
            let j = job(spec, json!({"succeeded": 1}));
            assert_eq!(job_cells(&j, now())[2], json!(want));
        }
    }

    #[test]
    fn duration_runs_until_completion() {
        let done = job(
            json!({}),
            json!({"startTime": "2024-05-01T11:55:00Z",
                                         "completionTime": "2024-05-01T11:55:09Z"}),
        );
        let running = job(json!({}), json!({"startTime": "2024-05-01T11:55:00Z"}));
        let pending = job(json!({}), json!({}));
        assert_eq!(job_cells(&done, now())[3], json!("9s"));
        assert_eq!(job_cells(&running, now())[3], json!("5m"));
        assert_eq!(job_cells(&pending, now())[3], json!(""));
    }

    #[test]
    fn job_row_has_containers_and_selector() {
        let mut j = job(
            json!({"completions": 1}),
            json!({"succeeded": 1,
            "conditions": cond("Complete")}),
        );
        j["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "abc"}});
        assert_eq!(
            job_cells(&j, now()),
            vec![
                json!("pi"),
                json!("Complete"),
                json!("1/1"),
                json!(""),
                json!("5m"),
                json!("pi"),
                json!("perl:5.34.0"),
                json!("batch.kubernetes.io/controller-uid=abc")
            ]
        );
        assert_eq!(job_columns().len(), 8);
    }

    #[test]
    fn cron_jobs_show_schedule_suspend_and_last_run() {
        let cj = json!({"kind": "CronJob",
            "metadata": {"name": "hello", "creationTimestamp": "2024-05-01T10:00:00Z"},
            "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "hello", "image": "busybox:1.28"}]}}}}},
            "status": {"active": [{"name": "hello-1"}], "lastScheduleTime": "2024-05-01T11:59:00Z"}});
        assert_eq!(
            cron_job_cells(&cj, now()),
            vec![
                json!("hello"),
                json!("*/1 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("60s"),
                json!("120m"),
                json!("hello"),
                json!("busybox:1.28"),
                json!("<none>")
            ]
        );
        let mut suspended = cj.clone();
        suspended["spec"]["suspend"] = json!(true);
        suspended["spec"]["timeZone"] = json!("Etc/UTC");
        suspended["status"] = json!({});
        let c = cron_job_cells(&suspended, now());
        assert_eq!(
            (c[2].clone(), c[3].clone(), c[4].clone(), c[5].clone()),
            (json!("Etc/UTC"), json!("True"), json!(0), json!("<none>"))
        );
        assert_eq!(cron_job_columns().len(), c.len());
    }
}
