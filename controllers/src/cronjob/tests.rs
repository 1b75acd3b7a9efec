//! The controller over a real registry, store and informers, without a Job controller: the
//! tests play it by writing the Jobs' status (`startTime`, `Complete`/`Failed`,
//! `completionTime`) themselves, and drive passes at chosen instants (`reconcile_at`), so a
//! minute of schedule takes no time.

use super::*;
use crate::workload::object_meta;
use berth_registry::{DeleteOptions, Part, WriteOptions};
use berth_runtime::testing::ControlPlane;
use jiff::SignedDuration;
use serde_json::{Value, json};
use std::time::Duration;

fn cron_job(spec: Value) -> Value {
    let mut cj = json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "hello", "namespace": "default"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {
            "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
            "spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "hello", "image": "busybox:1.28"}]}}}}},
    });
    if let (Some(base), Some(extra)) = (cj["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    cj
}

struct Fixture {
    cp: ControlPlane,
    c: Controller,
    /// The first whole minute after the CronJob's creation.
    minute: Timestamp,
}

impl Fixture {
    async fn start(spec: Value) -> Fixture {
        let cp = ControlPlane::start();
        let created = cp
            .registry()
            .create(
                CRON_JOBS,
                Some("default"),
                cron_job(spec),
                &WriteOptions::default(),
            )
            .expect("create");
        let c = Controller::new(&cp.ctx);
        c.cron_jobs.wait_synced().await;
        c.jobs.wait_synced().await;
        let t: Timestamp = created["metadata"]["creationTimestamp"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("creation time");
        let minute = Timestamp::from_second((t.as_second() / 60 + 1) * 60).expect("minute");
        Fixture { cp, c, minute }
    }

    /// A pass `minutes` whole minutes (plus `ms`) after the first minute.
    async fn pass_at(&self, minutes: i64, ms: i64) -> Outcome {
        self.cp.caught_up().await;
        let now =
            self.minute + SignedDuration::from_secs(60 * minutes) + SignedDuration::from_millis(ms);
        self.c.reconcile_at("default", "hello", now).expect("pass")
    }

    fn cron_job(&self) -> Value {
        self.cp
            .registry()
            .get(CRON_JOBS, Some("default"), "hello")
            .expect("cron job")
            .value()
            .expect("json")
    }

    fn jobs(&self) -> Vec<Value> {
        self.cp.list(JOBS)
    }

    fn job_names(&self) -> Vec<String> {
        self.jobs().iter().map(object_meta::name).collect()
    }

    fn active_names(&self) -> Vec<String> {
        self.cron_job()["status"]["active"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["name"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Asserts that the `reason` events are one: `says` and the first Job's name.
    fn assert_about_first_job(&self, reason: &str, says: &str) {
        assert_eq!(
            self.events(reason),
            vec![format!("{says}{}", self.job_at(0))]
        );
    }

    fn events(&self, reason: &str) -> Vec<String> {
        let messages = self.cp.events(reason).into_iter();
        messages
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The name of the Job for the first minute plus `minutes`.
    fn job_at(&self, minutes: i64) -> String {
        format!("hello-{}", self.minute.as_second() / 60 + minutes)
    }

    /// Starts the CronJob with `spec`, its first Job still running when the next minute's
    /// pass comes.
    async fn next_minute_while_running(spec: Value) -> Fixture {
        let f = Fixture::start(spec).await;
        f.pass_at(0, 1).await;
        f.finish(&f.job_at(0), None);
        f.pass_at(1, 1).await;
        f
    }

    /// Plays the Job controller: the Job started at its scheduled minute and, if `how` is
    /// given, finished 30 s later with that condition.
    fn finish(&self, name: &str, how: Option<&str>) {
        let minute: i64 = name
            .rsplit('-')
            .next()
            .and_then(|m| m.parse().ok())
            .expect("minute");
        let start = Timestamp::from_second(minute * 60).expect("start");
        let end = start + SignedDuration::from_secs(30);
        self.cp
            .registry()
            .update_with(
                JOBS,
                Some("default"),
                name,
                Part::Status,
                &WriteOptions::default(),
                |mut j| {
                    j["status"]["startTime"] = json!(start.to_string());
                    if let Some(how) = how {
                        j["status"]["conditions"] = json!([{"type": how, "status": "True",
                        "lastProbeTime": end.to_string(), "lastTransitionTime": end.to_string()}]);
                        if how == "Complete" {
                            j["status"]["completionTime"] = json!(end.to_string());
                        }
                    } else {
                        j["status"]["active"] = json!(1);
                    }
                    Ok::<_, RegistryError>(j)
                },
            )
            .expect("job status");
    }
}

#[tokio::test]
async fn a_due_minute_creates_its_job_as_upstream_names_and_annotates_it() {
    let f = Fixture::start(json!({})).await;
    // Just before the minute: nothing, and a wake-up for the minute.
    let early = f.pass_at(0, -300).await;
    assert_eq!(
        early,
        Outcome::RequeueAfter(Duration::from_millis(300) + missed::WAKE_PAD)
    );
    assert!(f.jobs().is_empty());
    let at_minute = f.pass_at(0, 5).await;
    assert_eq!(
        at_minute,
        Outcome::RequeueAfter(Duration::from_millis(59_995) + missed::WAKE_PAD)
    );
    let jobs = f.jobs();
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    let cj = f.cron_job();
    assert_eq!(job["metadata"]["name"], json!(f.job_at(0)));
    assert_eq!(job["metadata"]["labels"]["team"], "a");
    assert_eq!(job["metadata"]["annotations"]["note"], "x");
    assert_eq!(
        job["metadata"]["annotations"][template::SCHEDULED_TIMESTAMP],
        json!(f.minute.to_string())
    );
    let owner = &job["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], cj["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    assert_eq!(f.active_names(), vec![f.job_at(0)]);
    assert_eq!(cj["status"]["active"][0]["uid"], job["metadata"]["uid"]);
    assert_eq!(
        cj["status"]["lastScheduleTime"],
        json!(f.minute.to_string())
    );
    f.assert_about_first_job("SuccessfulCreate", "Created job ");
    // A second pass in the same minute creates nothing more.
    f.pass_at(0, 500).await;
    assert_eq!(f.jobs().len(), 1);
}

#[tokio::test]
async fn a_completed_job_leaves_the_active_list_and_sets_last_successful_time() {
    let f = Fixture::start(json!({})).await;
    f.pass_at(0, 1).await;
    f.finish(&f.job_at(0), Some("Complete"));
    f.pass_at(0, 40_000).await;
    assert!(f.active_names().is_empty());
    let end = f.minute + SignedDuration::from_secs(30);
    assert_eq!(
        f.cron_job()["status"]["lastSuccessfulTime"],
        json!(end.to_string())
    );
    assert_eq!(
        f.events("SawCompletedJob"),
        vec![format!(
            "Saw completed job: {}, condition: Complete",
            f.job_at(0)
        )]
    );
}

#[tokio::test]
async fn history_limits_keep_three_successful_and_one_failed_job() {
    let f = Fixture::start(json!({})).await;
    for m in 0..6 {
        f.pass_at(m, 1).await;
        let how = if m == 1 || m == 3 {
            "Failed"
        } else {
            "Complete"
        };
        f.finish(&f.job_at(m), Some(how));
    }
    f.pass_at(5, 40_000).await;
    let mut want = vec![f.job_at(2), f.job_at(3), f.job_at(4), f.job_at(5)];
    want.sort();
    let mut names = f.job_names();
    names.sort();
    // Successful 0, 2, 4, 5 → keep 2, 4, 5; failed 1, 3 → keep 3.
    assert_eq!(names, want);
    let mut deleted = f.events("SuccessfulDelete");
    deleted.sort();
    assert_eq!(
        deleted,
        vec![
            format!("Deleted job {}", f.job_at(0)),
            format!("Deleted job {}", f.job_at(1))
        ]
    );
}

#[tokio::test]
async fn forbid_skips_the_run_while_the_previous_job_runs() {
    let f = Fixture::next_minute_while_running(json!({"concurrencyPolicy": "Forbid"})).await;
    assert_eq!(f.job_names(), vec![f.job_at(0)]);
    assert_eq!(
        f.events("JobAlreadyActive"),
        vec![
            "Not starting job because prior execution is running and concurrency policy is Forbid"
        ]
    );
    // Once it finishes, the skipped minute runs (no starting deadline).
    f.finish(&f.job_at(0), Some("Complete"));
    f.pass_at(1, 20_000).await;
    assert_eq!(f.active_names(), vec![f.job_at(1)]);
}

#[tokio::test]
async fn replace_deletes_the_running_job_and_starts_the_new_one() {
    let f = Fixture::next_minute_while_running(json!({"concurrencyPolicy": "Replace"})).await;
    assert_eq!(f.job_names(), vec![f.job_at(1)]);
    assert_eq!(f.active_names(), vec![f.job_at(1)]);
    f.assert_about_first_job("SuccessfulDelete", "Deleted job ");
}

#[tokio::test]
async fn allow_runs_jobs_side_by_side() {
    let f = Fixture::next_minute_while_running(json!({})).await;
    assert_eq!(f.active_names(), vec![f.job_at(0), f.job_at(1)]);
}

#[tokio::test]
async fn a_deleted_active_job_is_reported_missing() {
    let f = Fixture::start(json!({})).await;
    f.pass_at(0, 1).await;
    f.cp.registry()
        .delete(
            JOBS,
            Some("default"),
            &f.job_at(0),
            // A Job deleted with no policy orphans its pods (and waits on the orphan
            // finalizer); kubectl and the controllers delete in the background.
            &DeleteOptions {
                propagation_policy: Some(berth_registry::Propagation::Background),
                ..DeleteOptions::default()
            },
        )
        .expect("delete");
    f.pass_at(0, 30_000).await;
    assert!(f.active_names().is_empty());
    f.assert_about_first_job("MissingJob", "Active job went missing: ");
}

#[tokio::test]
async fn a_job_made_from_the_cron_job_by_hand_is_reported_unexpected() {
    let f = Fixture::start(json!({})).await;
    let cj = f.cron_job();
    // What `kubectl create job --from=cronjob/hello` sends.
    let manual = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "manual", "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
            "labels": {"team": "a"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "hello",
                "uid": cj["metadata"]["uid"], "controller": true}]},
        "spec": cj["spec"]["jobTemplate"]["spec"]});
    f.cp.registry()
        .create(JOBS, Some("default"), manual, &WriteOptions::default())
        .expect("manual job");
    f.pass_at(0, -1000).await;
    assert_eq!(
        f.events("UnexpectedJob"),
        vec!["Saw a job that the controller did not create or forgot: manual"]
    );
    assert!(f.active_names().is_empty());
}

#[tokio::test]
async fn a_suspended_cron_job_creates_nothing_and_resumes_with_the_missed_run() {
    let f = Fixture::start(json!({"suspend": true})).await;
    assert_eq!(f.pass_at(2, 1).await, Outcome::Done);
    assert!(f.jobs().is_empty());
    f.cp.registry()
        .update_with(
            CRON_JOBS,
            Some("default"),
            "hello",
            Part::Main,
            &WriteOptions::default(),
            |mut c| {
                c["spec"]["suspend"] = json!(false);
                Ok::<_, RegistryError>(c)
            },
        )
        .expect("resume");
    f.pass_at(2, 30_000).await;
    assert_eq!(f.job_names(), vec![f.job_at(2)]);
}

#[tokio::test]
async fn a_time_zone_moves_the_schedule_and_the_annotation() {
    // 5:30 ahead: "30 * * * *" in Kolkata is minute 0 in UTC.
    let f = Fixture::start(json!({"schedule": "30 * * * *", "timeZone": "Asia/Kolkata"})).await;
    let hour = Timestamp::from_second((f.minute.as_second() / 3600 + 1) * 3600).expect("hour");
    f.cp.caught_up().await;
    f.c.reconcile_at("default", "hello", hour + SignedDuration::from_millis(2))
        .expect("pass");
    let jobs = f.jobs();
    assert_eq!(jobs.len(), 1);
    let kolkata = TimeZone::get("Asia/Kolkata").expect("zone");
    assert_eq!(
        jobs[0]["metadata"]["annotations"][template::SCHEDULED_TIMESTAMP],
        json!(template::rfc3339_in(hour, &kolkata))
    );
}

#[tokio::test]
async fn a_schedule_that_never_fires_draws_a_warning() {
    let f = Fixture::start(json!({"schedule": "59 23 31 2 *"})).await;
    assert_eq!(f.pass_at(0, 1).await, Outcome::Done);
    assert_eq!(
        f.events("InvalidSchedule"),
        vec![
            "invalid schedule: 59 23 31 2 * : time difference between two schedules is less than 1 second"
        ]
    );
}
