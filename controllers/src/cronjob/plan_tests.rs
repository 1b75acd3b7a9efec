//! Table tests of the CronJob planner: concurrency decisions, history limits, the active list,
//! missed runs, suspension and unusable schedules.

use super::plan::{Action, Deletion, Input, Plan, ScheduleProblem, plan, schedule};
use super::view::{ActiveRef, Concurrency, CronJob, Finished, Job, Status};
use berth_registry::events::EventType;
use berth_shared::cron::Schedule;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

fn at(s: &str) -> Timestamp {
    s.parse().expect("time")
}

/// [`cron_job`] with `schedule`, last scheduled at `last`.
fn last_run_at(schedule: &str, last: &str) -> CronJob {
    let mut cj = cron_job(schedule);
    cj.status.last_schedule_time = Some(at(last));
    cj
}

fn cron_job(schedule: &str) -> CronJob {
    CronJob {
        namespace: "default".into(),
        name: "hello".into(),
        uid: "cj-uid".into(),
        created: at("2024-05-01T08:00:30Z"),
        deleting: false,
        schedule: schedule.into(),
        time_zone: None,
        suspend: false,
        concurrency: Concurrency::Allow,
        starting_deadline_seconds: None,
        successful_jobs_history_limit: Some(3),
        failed_jobs_history_limit: Some(1),
        status: Status::default(),
    }
}

fn active(name: &str) -> ActiveRef {
    ActiveRef {
        name: name.into(),
        uid: format!("{name}-uid"),
        raw: json!({"kind": "Job", "name": name, "uid": format!("{name}-uid")}),
    }
}

fn job(name: &str, finished: Option<Finished>, start_minute: Option<u32>) -> Job {
    Job {
        name: name.into(),
        uid: format!("{name}-uid"),
        deleting: false,
        finished,
        start_time: start_minute.map(|m| at(&format!("2024-05-01T08:{m:02}:00Z"))),
        completion_time: start_minute.map(|m| at(&format!("2024-05-01T08:{m:02}:30Z"))),
    }
}

fn run(cj: &CronJob, jobs: &[Job], now: &str) -> Plan {
    let schedule = Schedule::parse(&cj.schedule).expect("schedule");
    plan(
        Input {
            cron_job: cj,
            jobs,
            gone: &BTreeSet::new(),
            schedule: Ok(&schedule),
        },
        at(now),
    )
}

fn reasons(p: &Plan) -> Vec<&'static str> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Event { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

fn creates(p: &Plan) -> Vec<Timestamp> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateJob { scheduled } => Some(*scheduled),
            _ => None,
        })
        .collect()
}

fn deletes(p: &Plan) -> Vec<(String, Deletion)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteJob { name, why, .. } => Some((name.clone(), *why)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_due_time_creates_its_job_and_wakes_for_the_next_minute() {
    let cj = cron_job("* * * * *");
    let p = run(&cj, &[], "2024-05-01T08:01:00.004Z");
    assert_eq!(creates(&p), vec![at("2024-05-01T08:01:00Z")]);
    assert_eq!(
        p.requeue_after,
        Some(Duration::from_millis(59_996) + super::missed::WAKE_PAD)
    );
}

#[test]
fn before_the_first_time_nothing_happens_but_the_wake_up() {
    let cj = cron_job("*/5 * * * *");
    let p = run(&cj, &[], "2024-05-01T08:03:00Z");
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(
        p.requeue_after,
        Some(Duration::from_secs(120) + super::missed::WAKE_PAD)
    );
}

#[test]
fn concurrency_policies_decide_what_happens_to_a_running_job() {
    let running = [job("hello-1", None, Some(1))];
    for (policy, want_create, want_delete, want_reason) in [
        (Concurrency::Allow, true, false, None),
        (Concurrency::Forbid, false, false, Some("JobAlreadyActive")),
        (Concurrency::Replace, true, true, None),
    ] {
        let mut cj = cron_job("* * * * *");
        cj.concurrency = policy;
        cj.status.active = vec![active("hello-1")];
        cj.status.last_schedule_time = Some(at("2024-05-01T08:01:00Z"));
        let p = run(&cj, &running, "2024-05-01T08:02:00Z");
        assert_eq!(!creates(&p).is_empty(), want_create, "{policy:?}");
        assert_eq!(
            deletes(&p),
            if want_delete {
                vec![("hello-1".to_string(), Deletion::Replace)]
            } else {
                vec![]
            },
            "{policy:?}"
        );
        assert_eq!(reasons(&p).first().copied(), want_reason, "{policy:?}");
        assert!(p.requeue_after.is_some());
    }
}

#[test]
fn forbid_runs_the_skipped_time_once_the_running_job_finishes() {
    let mut cj = cron_job("* * * * *");
    cj.concurrency = Concurrency::Forbid;
    cj.status.active = vec![active("hello-1")];
    cj.status.last_schedule_time = Some(at("2024-05-01T08:01:00Z"));
    let done = [job("hello-1", Some(Finished::Complete), Some(1))];
    let p = run(&cj, &done, "2024-05-01T08:02:20Z");
    assert_eq!(reasons(&p), vec!["SawCompletedJob"]);
    assert_eq!(creates(&p), vec![at("2024-05-01T08:02:00Z")]);
    assert!(p.status.active.is_empty());
    assert_eq!(
        p.status.last_successful_time,
        Some(at("2024-05-01T08:01:30Z"))
    );
}

#[test]
fn a_time_already_in_the_active_list_is_not_created_again() {
    let mut cj = cron_job("* * * * *");
    cj.status.active = vec![active("hello-28575842")];
    let jobs = [job("hello-28575842", None, Some(2))];
    let p = run(&cj, &jobs, "2024-05-01T08:02:10Z");
    assert!(creates(&p).is_empty());
    assert!(reasons(&p).is_empty());
}

#[test]
fn history_limits_delete_the_oldest_finished_jobs_beyond_them() {
    let mut cj = last_run_at("*/30 * * * *", "2024-05-01T08:30:00Z");
    let jobs = [
        job("ok-1", Some(Finished::Complete), Some(1)),
        job("ok-2", Some(Finished::Complete), Some(2)),
        job("ok-3", Some(Finished::Complete), Some(3)),
        job("ok-4", Some(Finished::Complete), Some(4)),
        job("ok-nostart", Some(Finished::Complete), None),
        job("bad-1", Some(Finished::Failed), Some(5)),
        job("bad-2", Some(Finished::Failed), Some(6)),
        job("running", None, Some(7)),
    ];
    cj.status.active = vec![active("running")];
    let p = run(&cj, &jobs, "2024-05-01T08:40:00Z");
    assert_eq!(
        deletes(&p),
        vec![
            ("ok-1".to_string(), Deletion::History),
            ("ok-2".to_string(), Deletion::History),
            ("bad-1".to_string(), Deletion::History),
        ]
    );
    for (s, f, want) in [(0, 0, 7), (3, 1, 3), (10, 10, 0)] {
        let mut cj = cj.clone();
        cj.successful_jobs_history_limit = Some(s);
        cj.failed_jobs_history_limit = Some(f);
        assert_eq!(
            deletes(&run(&cj, &jobs, "2024-05-01T08:40:00Z")).len(),
            want,
            "{s}/{f}"
        );
    }
}

#[test]
fn finished_and_vanished_jobs_leave_the_active_list() {
    let mut cj = last_run_at("0 * * * *", "2024-05-01T08:00:00Z");
    cj.status.active = vec![
        active("done"),
        active("failed"),
        active("gone"),
        active("lagging"),
    ];
    let jobs = [
        job("done", Some(Finished::Complete), Some(1)),
        job("failed", Some(Finished::Failed), Some(2)),
        job("stray", None, Some(3)),
    ];
    let gone: BTreeSet<String> = ["gone-uid".to_string()].into();
    let schedule = Schedule::parse(&cj.schedule).expect("schedule");
    let p = plan(
        Input {
            cron_job: &cj,
            jobs: &jobs,
            gone: &gone,
            schedule: Ok(&schedule),
        },
        at("2024-05-01T08:10:00Z"),
    );
    let names: Vec<&str> = p.status.active.iter().map(|r| r.name.as_str()).collect();
    // A Job in the active list the cache has not seen yet, but the API has, stays.
    assert_eq!(names, vec!["lagging"]);
    assert_eq!(
        reasons(&p),
        vec![
            "SawCompletedJob",
            "SawCompletedJob",
            "UnexpectedJob",
            "MissingJob"
        ]
    );
    assert_eq!(
        p.status.last_successful_time,
        Some(at("2024-05-01T08:01:30Z"))
    );
}

#[test]
fn suspended_and_deleted_cron_jobs_only_update_their_status() {
    for (suspend, deleting) in [(true, false), (false, true)] {
        let mut cj = cron_job("* * * * *");
        cj.suspend = suspend;
        cj.deleting = deleting;
        let p = run(&cj, &[], "2024-05-01T08:05:00Z");
        assert!(p.actions.is_empty());
        assert_eq!(p.requeue_after, None);
    }
}

#[test]
fn resuming_without_a_deadline_runs_the_missed_time_at_once() {
    let cj = last_run_at("* * * * *", "2024-05-01T08:01:00Z");
    let p = run(&cj, &[], "2024-05-01T08:07:30Z");
    assert_eq!(creates(&p), vec![at("2024-05-01T08:07:00Z")]);
}

#[test]
fn missed_runs_after_an_outage_depend_on_the_starting_deadline() {
    // Last run 08:01; the controller is back at 08:04:40 after missing 08:02, 08:03, 08:04.
    let cases = [
        (None, Some("2024-05-01T08:04:00Z"), vec![]),
        (Some(200), Some("2024-05-01T08:04:00Z"), vec![]),
        (Some(30), None, vec!["MissSchedule"]),
    ];
    for (deadline, want_create, want_reasons) in cases {
        let mut cj = cron_job("* * * * *");
        cj.starting_deadline_seconds = deadline;
        cj.status.last_schedule_time = Some(at("2024-05-01T08:01:00Z"));
        let p = run(&cj, &[], "2024-05-01T08:04:40Z");
        assert_eq!(
            creates(&p),
            want_create.map(at).into_iter().collect::<Vec<_>>()
        );
        assert_eq!(reasons(&p), want_reasons, "{deadline:?}");
        assert!(p.requeue_after.is_some());
    }
    let mut cj = cron_job("* * * * *");
    cj.starting_deadline_seconds = Some(30);
    cj.status.last_schedule_time = Some(at("2024-05-01T08:01:00Z"));
    let p = run(&cj, &[], "2024-05-01T08:04:40Z");
    let Some(Action::Event { kind, message, .. }) = p.actions.first() else {
        panic!("{:?}", p.actions);
    };
    assert_eq!(*kind, EventType::Warning);
    assert_eq!(
        message,
        "Missed scheduled time to start a job: Wed, 01 May 2024 08:04:00 +0000"
    );
}

#[test]
fn more_than_a_hundred_missed_times_warn_and_start_nothing() {
    let mut cj = last_run_at("* * * * *", "2024-05-01T08:29:00Z");
    let p = run(&cj, &[], "2024-05-01T10:21:00Z");
    assert!(creates(&p).is_empty());
    assert_eq!(
        p.actions,
        vec![Action::Event {
            kind: EventType::Warning,
            reason: "TooManyMissedTimes",
            message: "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
        }]
    );
    cj.starting_deadline_seconds = Some(200);
    assert_eq!(
        creates(&run(&cj, &[], "2024-05-01T10:21:00Z")),
        vec![at("2024-05-01T10:21:00Z")]
    );
}

#[test]
fn unusable_schedules_warn_and_stop_waking() {
    let cj = cron_job("59 23 31 2 *");
    let p = run(&cj, &[], "2024-05-01T08:05:00Z");
    assert_eq!(
        p.actions,
        vec![Action::Event {
            kind: EventType::Warning,
            reason: "InvalidSchedule",
            message: "invalid schedule: 59 23 31 2 * : time difference between two schedules is less than 1 second".into(),
        }]
    );
    assert_eq!(p.requeue_after, None);
    for (problem, reason) in [
        (
            ScheduleProblem::UnknownTimeZone("unknown time zone Mars/Base".into()),
            "UnknownTimeZone",
        ),
        (
            ScheduleProblem::Unparseable("empty spec string".into()),
            "UnparseableSchedule",
        ),
    ] {
        let cj = cron_job("* * * * *");
        let p = plan(
            Input {
                cron_job: &cj,
                jobs: &[],
                gone: &BTreeSet::new(),
                schedule: Err(problem),
            },
            at("2024-05-01T08:05:00Z"),
        );
        assert_eq!(reasons(&p), vec![reason]);
        assert_eq!(p.requeue_after, None);
    }
}

#[test]
fn a_zone_prefix_in_the_schedule_draws_a_warning_event_and_still_runs() {
    let cj = cron_job("CRON_TZ=UTC * * * * *");
    let p = run(&cj, &[], "2024-05-01T08:05:00Z");
    assert_eq!(reasons(&p), vec!["UnsupportedSchedule"]);
    assert_eq!(creates(&p), vec![at("2024-05-01T08:05:00Z")]);
}

#[test]
fn the_schedule_takes_the_time_zone_unless_it_names_its_own() {
    let kolkata = TimeZone::fixed(jiff::tz::offset(5));
    let load = |name: &str| match name {
        "Asia/Kolkata" => Ok(kolkata.clone()),
        other => Err(format!("unknown time zone {other}")),
    };
    let with = |schedule: &str, tz: Option<&str>| CronJob {
        time_zone: tz.map(String::from),
        ..cron_job(schedule)
    };
    let local = TimeZone::UTC;
    let cases = [
        // (schedule, spec.timeZone, the problem if any)
        ("0 9 * * *", None, None),
        ("0 9 * * *", Some("Asia/Kolkata"), None),
        ("TZ=UTC 0 9 * * *", Some("Mars/Olympus"), None),
        (
            "0 9 * * *",
            Some("Mars/Olympus"),
            Some(ScheduleProblem::UnknownTimeZone(
                "unknown time zone Mars/Olympus".into(),
            )),
        ),
    ];
    for (spec, tz, problem) in cases {
        let got = schedule(&with(spec, tz), &local, load);
        assert_eq!(got.as_ref().err(), problem.as_ref(), "{spec} {tz:?}");
    }
    let bad = schedule(&cron_job("61 * * * *"), &local, load);
    assert!(
        matches!(bad, Err(ScheduleProblem::Unparseable(_))),
        "{bad:?}"
    );
    // The zone applies: 09:00 in Kolkata (UTC+5 here) is 04:00 UTC.
    let s = schedule(&with("0 9 * * *", Some("Asia/Kolkata")), &local, load).expect("schedule");
    let next = s.next(at("2024-05-01T00:00:00Z"));
    assert_eq!(next, Some(at("2024-05-01T04:00:00Z")));
}
