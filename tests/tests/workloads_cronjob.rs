//! CronJob acceptance (issue 11, item 4) with the real controller binary and the real kubectl.
//!
//! `clock::` tests need only the controller: Jobs are created on time whether or not anything
//! runs them, so they check the CronJob controller alone, on the wall clock: an every-minute
//! CronJob creates a Job at each of three consecutive minutes within a second of the minute;
//! `timeZone: Asia/Kolkata` fires at the instant computed there; `suspend` creates nothing and
//! resuming runs the missed minute; after a three-minute controller outage
//! `startingDeadlineSeconds: 200` runs the missed window once and `30` records a miss;
//! `kubectl create job --from=cronjob/…` works; the API refuses an unknown time zone, warns
//! about a `CRON_TZ=` prefix, and a schedule that can never fire draws `InvalidSchedule`.
//!
//! `with_jobs::` tests need Jobs that run and finish on a real agent, so they need the Job
//! controller: Forbid skips while a Job runs, Replace deletes it, history limits keep three
//! successful and one failed Job (counting Jobs it owns but did not create), `SawCompletedJob`. They use `@every` schedules (upstream's
//! parser takes them) to see several runs in seconds rather than minutes.

use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container};
use berth_tests::table::words;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, Controller, secs};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use std::time::Duration;

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

fn cron_job(name: &str, schedule: &str, spec: Value, script: &str) -> Value {
    let mut cj = json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": schedule, "jobTemplate": {
            "metadata": {"labels": {"cron": name}, "annotations": {"purpose": "test"}},
            "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [sh_container("hello", script)]}}}}},
    });
    if let (Some(base), Some(extra)) = (cj["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    cj
}

fn name(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn time_at(v: &Value, pointer: &str) -> Timestamp {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no time at {pointer}: {v}"))
}

/// The Jobs the CronJob `cron` controls, oldest name first.
fn jobs_of(get: impl Fn(&str) -> Option<Value>, cron: &str) -> Vec<Value> {
    let mut jobs: Vec<Value> = get(JOBS)
        .and_then(|l| l["items"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|j| {
            j["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|o| o["kind"] == "CronJob" && o["name"] == cron)
        })
        .collect();
    jobs.sort_by_key(name);
    jobs
}

/// The messages of the events about `cron` with `reason`.
fn events(get: impl Fn(&str) -> Option<Value>, cron: &str, reason: &str) -> Vec<String> {
    get("/api/v1/namespaces/default/events")
        .and_then(|l| l["items"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["involvedObject"]["name"] == cron && e["reason"] == reason)
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The minute since the epoch a CronJob's Job is named after.
fn minute_of(job: &Value, cron: &str) -> i64 {
    name(job)
        .strip_prefix(&format!("{cron}-"))
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("not a {cron} Job: {}", name(job)))
}

mod clock {
    use super::*;

    fn get(c: &Controller) -> impl Fn(&str) -> Option<Value> + '_ {
        move |p| {
            let r = c.admin_api().get(p);
            (r.status == 200).then(|| r.json())
        }
    }

    /// Blocks until the wall clock is at second `s` of a minute (at least `s` and before
    /// `s + 15`), so that a minute boundary is not crossed during the setup that follows.
    fn at_second(s: u64) {
        loop {
            let now = Timestamp::now().as_millisecond().rem_euclid(60_000) as u64;
            if (s * 1000..(s + 15) * 1000).contains(&now) {
                return;
            }
            let wait = (s * 1000 + 60_000 - now) % 60_000;
            // The schedule's input is the wall clock: wait for a second of the minute.
            std::thread::sleep(Duration::from_millis(wait.max(1))); // not ordering: wall clock
        }
    }

    /// Checks a Job of `cron` against its scheduled instant: created within seconds of it,
    /// annotated with it, named after its minute, controlled by the CronJob, carrying the
    /// template's labels and annotations.
    fn check_on_time(job: &Value, cron: &str, cron_uid: &Value, annotation: &str) {
        let scheduled = Timestamp::from_second(minute_of(job, cron) * 60).expect("minute");
        let created = time_at(job, "/metadata/creationTimestamp");
        // The controller wakes at the scheduled second; the slack is for a loaded CI host
        // (four test threads and the etcd leg on two cores), where a one-second bound failed.
        // A controller polling every ten seconds would miss it for most of the three Jobs.
        let skew = created.duration_since(scheduled);
        assert!(
            skew >= SignedDuration::ZERO && skew <= SignedDuration::from_secs(5),
            "{} created {created}, scheduled {scheduled}",
            name(job)
        );
        let a = &job["metadata"]["annotations"];
        assert_eq!(
            a["batch.kubernetes.io/cronjob-scheduled-timestamp"],
            annotation
        );
        assert_eq!(a["purpose"], "test");
        assert_eq!(job["metadata"]["labels"]["cron"], cron);
        let owner = &job["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["kind"], &owner["uid"], &owner["controller"]),
            (&json!("CronJob"), cron_uid, &json!(true))
        );
    }

    #[test]
    fn every_minute_cronjob_creates_a_job_at_each_of_three_consecutive_minutes() {
        let c = Controller::start();
        let cj = c.admin_api().create(
            "/apis/batch/v1/namespaces/default/cronjobs",
            &cron_job(
                "hello",
                "*/1 * * * *",
                json!({}),
                "date; echo Hello from the Kubernetes cluster",
            ),
        );
        let jobs = c.wait_for(secs(200), "three Jobs of hello", || {
            let jobs = jobs_of(get(&c), "hello");
            if jobs.len() >= 3 {
                Ok(jobs)
            } else {
                Err(jobs.iter().map(name).collect::<Vec<_>>())
            }
        });
        let minutes: Vec<i64> = jobs.iter().map(|j| minute_of(j, "hello")).collect();
        assert_eq!(minutes[1], minutes[0] + 1, "{minutes:?}");
        assert_eq!(minutes[2], minutes[0] + 2, "{minutes:?}");
        for job in &jobs[..3] {
            let scheduled = Timestamp::from_second(minute_of(job, "hello") * 60).expect("minute");
            let annotation = scheduled.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            check_on_time(job, "hello", &cj["metadata"]["uid"], &annotation);
        }
        // The events and the status are written after the Job; on a loaded host they may trail it.
        let wanted: Vec<String> = jobs[..3]
            .iter()
            .map(|j| format!("Created job {}", name(j)))
            .collect();
        c.wait_for(secs(20), "a SuccessfulCreate event per Job", || {
            let created = events(get(&c), "hello", "SuccessfulCreate");
            ok_if(wanted.iter().all(|w| created.contains(w)), created)
        });
        let last = jobs
            .last()
            .map(|j| minute_of(j, "hello") * 60)
            .unwrap_or_default();
        let active = c.wait_for(secs(20), "the status naming the last Job", || {
            let status = c
                .admin_api()
                .get_ok("/apis/batch/v1/namespaces/default/cronjobs/hello")["status"]
                .clone();
            let active = status["active"].as_array().map_or(0, Vec::len);
            let scheduled = status
                .pointer("/lastScheduleTime")
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<Timestamp>().ok())
                .map(|t| t.as_second());
            if active > 0 && scheduled == Some(last) {
                Ok(active)
            } else {
                Err(status)
            }
        });
        // `kubectl get cronjobs`, upstream's 1.31 columns.
        let out = c.kubectl_ok(&["get", "cronjobs"]);
        let mut lines = out.lines().map(words);
        let header = lines.next().unwrap_or_default();
        assert_eq!(
            header,
            [
                "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"
            ]
        );
        let row = lines.next().unwrap_or_default();
        assert_eq!(&row[..4], ["hello", "*/1", "*", "*"], "{out}");
        assert_eq!(&row[4..8], ["*", "*", "<none>", "False"], "{out}");
        assert_eq!(row[8], active.to_string(), "{out}");
        let wide = c.kubectl_ok(&["get", "cronjobs", "-o", "wide"]);
        assert!(
            wide.contains("CONTAINERS") && wide.contains("busybox:1.28"),
            "{wide}"
        );
    }

    #[test]
    fn a_cronjob_in_asia_kolkata_fires_at_the_next_minute_there() {
        let c = Controller::start();
        // The next minute at least 20 s away, as a wall-clock time in Kolkata (UTC+05:30).
        let soon = Timestamp::now() + SignedDuration::from_secs(20);
        let fire = Timestamp::from_second((soon.as_second() / 60 + 1) * 60).expect("minute");
        let kolkata = jiff::tz::TimeZone::get("Asia/Kolkata").expect("zone");
        let local = fire.to_zoned(kolkata);
        let schedule = format!("{} {} * * *", local.minute(), local.hour());
        let cj = c.admin_api().create(
            "/apis/batch/v1/namespaces/default/cronjobs",
            &cron_job(
                "kolkata",
                &schedule,
                json!({"timeZone": "Asia/Kolkata"}),
                "true",
            ),
        );
        let job = c.wait_for(secs(120), "the Kolkata Job", || {
            jobs_of(get(&c), "kolkata")
                .into_iter()
                .next()
                .ok_or("none yet")
        });
        assert_eq!(minute_of(&job, "kolkata") * 60, fire.as_second());
        let annotation = local.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string();
        assert!(annotation.ends_with("+05:30"), "{annotation}");
        check_on_time(&job, "kolkata", &cj["metadata"]["uid"], &annotation);
        let out = c.kubectl_ok(&["get", "cronjob", "kolkata"]);
        let row: Vec<&str> = out
            .lines()
            .nth(1)
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(row.get(6), Some(&"Asia/Kolkata"), "{out}");
    }

    #[test]
    fn a_suspended_cronjob_creates_nothing_and_resuming_runs_the_missed_minute() {
        let c = Controller::start();
        at_second(20);
        c.admin_api().create(
            "/apis/batch/v1/namespaces/default/cronjobs",
            &cron_job("sleepy", "* * * * *", json!({"suspend": true}), "true"),
        );
        // Across the next minute boundary and a little beyond.
        c.ensure_for(secs(50), "no Job while suspended", || {
            let jobs = jobs_of(get(&c), "sleepy");
            ok_if(jobs.is_empty(), jobs.iter().map(name).collect::<Vec<_>>())
        });
        let out = c.kubectl_ok(&["get", "cronjob", "sleepy"]);
        assert!(out.contains("True"), "{out}");
        c.kubectl_ok(&[
            "patch",
            "cronjob",
            "sleepy",
            "-p",
            r#"{"spec":{"suspend":false}}"#,
        ]);
        let resumed = Timestamp::now();
        let job = c.wait_for(secs(10), "the missed minute's Job", || {
            jobs_of(get(&c), "sleepy")
                .into_iter()
                .next()
                .ok_or("none yet")
        });
        // The most recent missed minute, created at once (not at the next minute).
        let missed = resumed.as_second() / 60;
        assert_eq!(minute_of(&job, "sleepy"), missed);
        let created = time_at(&job, "/metadata/creationTimestamp");
        assert!(
            created.duration_since(resumed) < SignedDuration::from_secs(5),
            "{created}"
        );
    }

    #[test]
    fn after_a_three_minute_outage_a_200s_deadline_runs_once_and_a_30s_deadline_records_a_miss() {
        let mut c = Controller::start();
        // Created in the first half of minute m, the controller down before m+1 and back at
        // m+3:40: m+1, m+2 and m+3 are missed; m+3 is 40 s old on return.
        at_second(5);
        for (cron, deadline) in [("deadline-200", 200), ("deadline-30", 30)] {
            c.admin_api().create(
                "/apis/batch/v1/namespaces/default/cronjobs",
                &cron_job(
                    cron,
                    "* * * * *",
                    json!({"startingDeadlineSeconds": deadline}),
                    "true",
                ),
            );
        }
        let m = Timestamp::now().as_second() / 60;
        c.kill9();
        let back = Timestamp::from_second((m + 3) * 60 + 40).expect("time");
        let wait = back.duration_since(Timestamp::now());
        // The outage is the test's input: three minutes of wall clock.
        std::thread::sleep(Duration::try_from(wait).unwrap_or_default()); // not ordering: outage
        c.restart();
        let job = c.wait_for(secs(15), "the missed window's Job", || {
            jobs_of(get(&c), "deadline-200")
                .into_iter()
                .next()
                .ok_or("none yet")
        });
        assert_eq!(minute_of(&job, "deadline-200"), m + 3, "{}", name(&job));
        let missed = Timestamp::from_second((m + 3) * 60).expect("time");
        let want = format!(
            "Missed scheduled time to start a job: {}",
            missed.strftime("%a, %d %b %Y %H:%M:%S +0000")
        );
        c.wait_for(secs(15), "MissSchedule for deadline-30", || {
            let e = events(get(&c), "deadline-30", "MissSchedule");
            if e.contains(&want) { Ok(()) } else { Err(e) }
        });
        assert!(jobs_of(get(&c), "deadline-30").is_empty());
        // Both run normally at the next minute; the 200 s one ran the window only once.
        let next = c.wait_for(secs(40), "both Jobs of m+4", || {
            let a = jobs_of(get(&c), "deadline-200");
            let b = jobs_of(get(&c), "deadline-30");
            if a.len() == 2 && b.len() == 1 {
                Ok((a, b))
            } else {
                Err((a.len(), b.len()))
            }
        });
        assert_eq!(minute_of(&next.0[1], "deadline-200"), m + 4);
        assert_eq!(minute_of(&next.1[0], "deadline-30"), m + 4);
    }

    #[test]
    fn create_job_from_cronjob_makes_a_manual_job_the_controller_reports() {
        let c = Controller::start();
        c.admin_api().create(
            "/apis/batch/v1/namespaces/default/cronjobs",
            &cron_job("yearly", "@yearly", json!({}), "true"),
        );
        let out = c.kubectl_ok(&["create", "job", "by-hand", "--from=cronjob/yearly"]);
        assert!(out.contains("job.batch/by-hand created"), "{out}");
        let job = c.admin_api().get_ok(&format!("{JOBS}/by-hand"));
        assert_eq!(
            job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
            "manual"
        );
        assert_eq!(job["metadata"]["labels"]["cron"], "yearly");
        assert_eq!(job["metadata"]["ownerReferences"][0]["name"], "yearly");
        c.wait_for(secs(15), "UnexpectedJob", || {
            let e = events(get(&c), "yearly", "UnexpectedJob");
            if e.is_empty() { Err(e) } else { Ok(e) }
        });
    }

    #[test]
    fn the_api_refuses_unknown_zones_warns_about_zone_prefixes_and_never_firing_schedules_warn() {
        let c = Controller::start();
        let yaml = |cj: &Value| serde_json::to_string(cj).unwrap_or_default();
        let bad = cron_job(
            "mars",
            "* * * * *",
            json!({"timeZone": "Mars/Base"}),
            "true",
        );
        let r = c.kubectl().fails_stdin(&["apply", "-f", "-"], &yaml(&bad));
        r.assert_stderr_has(
            "spec.timeZone: Invalid value: \"Mars/Base\": unknown time zone Mars/Base",
        );
        let prefixed = cron_job("prefixed", "CRON_TZ=UTC 0 0 1 1 *", json!({}), "true");
        let r = c
            .kubectl()
            .run_stdin(&["apply", "-f", "-"], &yaml(&prefixed));
        assert!(r.success(), "{}", r.stderr);
        r.assert_stderr_has(
            "Warning: CRON_TZ or TZ used in spec.spec.schedule is not officially supported",
        );
        let never = cron_job("never", "59 23 31 2 *", json!({}), "true");
        c.apply_stdin(&yaml(&never));
        c.wait_for(secs(15), "InvalidSchedule", || {
            let e = events(get(&c), "never", "InvalidSchedule");
            let want = "invalid schedule: 59 23 31 2 * : time difference between two schedules is less than 1 second";
            if e.iter().any(|m| m == want) { Ok(()) } else { Err(e) }
        });
        let described = c.kubectl_ok(&["describe", "cronjob", "never"]);
        assert!(described.contains("InvalidSchedule"), "{described}");
    }
}

mod with_jobs {
    //! These need the Job controller (issue 11's other half) to run and finish the Jobs.
    use super::*;

    fn get(c: &Cluster) -> impl Fn(&str) -> Option<Value> + '_ {
        move |p| c.get(p)
    }

    fn finished(job: &Value, how: &str) -> bool {
        job["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == how && c["status"] == "True"))
    }

    /// A one-node cluster with a CronJob `name` every 15 s under `policy` whose Jobs sleep
    /// until stopped, and its first Job.
    fn first_sleeping_job(name: &str, policy: &str) -> (Cluster, Value) {
        let c = Cluster::start(1);
        c.apply(&cron_job(
            name,
            "@every 15s",
            json!({"concurrencyPolicy": policy}),
            SLEEP_FOREVER,
        ));
        let first = c.wait_for(secs(60), "the first Job", || {
            jobs_of(get(&c), name).into_iter().next().ok_or("none yet")
        });
        (c, first)
    }

    #[test]
    fn forbid_skips_a_run_while_the_previous_job_runs() {
        let (c, first) = first_sleeping_job("forbid", "Forbid");
        c.wait_for(secs(60), "JobAlreadyActive", || {
            let e = events(get(&c), "forbid", "JobAlreadyActive");
            if e.is_empty() { Err(e) } else { Ok(()) }
        });
        let jobs = jobs_of(get(&c), "forbid");
        assert_eq!(
            jobs.iter().map(name).collect::<Vec<_>>(),
            vec![name(&first)]
        );
    }

    #[test]
    fn replace_deletes_the_running_job_at_the_next_run() {
        let (c, first) = first_sleeping_job("replace", "Replace");
        c.wait_for(secs(60), "the first Job replaced", || {
            let names: Vec<String> = jobs_of(get(&c), "replace").iter().map(name).collect();
            ok_if(names.len() == 1 && names[0] != name(&first), names)
        });
        let deleted = events(get(&c), "replace", "SuccessfulDelete");
        assert!(
            deleted.contains(&format!("Deleted job {}", name(&first))),
            "{deleted:?}"
        );
    }

    /// A finished-to-be Job owned by the CronJob `cron`, made from its template, as if an
    /// earlier run had created it: history the controller must trim along with its own runs.
    fn earlier_run(c: &Cluster, cron: &str, n: usize) -> Value {
        let cj = c
            .get(&format!(
                "/apis/batch/v1/namespaces/default/cronjobs/{cron}"
            ))
            .expect("the CronJob");
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": format!("{cron}-earlier-{n}"), "labels": {"cron": cron},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": cron,
                    "uid": cj["metadata"]["uid"], "controller": true,
                    "blockOwnerDeletion": true}]},
            "spec": cj["spec"]["jobTemplate"]["spec"],
        })
    }

    #[test]
    fn history_limits_keep_three_successful_and_one_failed_job() {
        let c = Cluster::start(1);
        c.apply(&cron_job("ok", "@every 10s", json!({}), "echo done"));
        c.apply(&cron_job("bad", "@every 10s", json!({}), "exit 1"));
        // Job names carry the scheduled minute, so `@every 10s` yields at most one Job a
        // minute (as upstream's names do): the earlier history is made by hand, three
        // successful and one failed Job, so one scheduled run of each goes past the limits.
        for n in 1..=3 {
            c.apply(&earlier_run(&c, "ok", n));
        }
        c.apply(&earlier_run(&c, "bad", 1));
        // The Jobs themselves are the evidence: the three hand-made running Jobs of `ok` are
        // `UnexpectedJob` on every pass, which can spend its 25-event budget (client-go's spam
        // filter) before the scheduled run's `SawCompletedJob` comes.
        let scheduled = |j: &Value, cron: &str| !name(j).starts_with(&format!("{cron}-earlier-"));
        c.wait_for(
            secs(150),
            "a scheduled run of each finished, history trimmed",
            || {
                let kept = |cron: &str, how: &str| -> Vec<Value> {
                    jobs_of(get(&c), cron)
                        .into_iter()
                        .filter(|j| finished(j, how))
                        .collect()
                };
                let (ok, bad) = (kept("ok", "Complete"), kept("bad", "Failed"));
                // The failed Job kept is the scheduled run's: the hand-made one, older, went.
                let ran = [(&ok, "ok"), (&bad, "bad")]
                    .map(|(js, cj)| js.iter().any(|j| scheduled(j, cj)));
                let bad_scheduled = bad.iter().all(|j| scheduled(j, "bad"));
                ok_if(
                    ok.len() == 3 && bad.len() == 1 && ran == [true, true] && bad_scheduled,
                    (ok.len(), bad.len(), ran, bad_scheduled),
                )
            },
        );
        let ok = c
            .get("/apis/batch/v1/namespaces/default/cronjobs/ok")
            .unwrap_or_default();
        assert!(
            ok["status"]["lastSuccessfulTime"].is_string(),
            "{}",
            ok["status"]
        );
        c.wait_for(secs(30), "the failed run seen", || {
            let saw = events(get(&c), "bad", "SawCompletedJob");
            ok_if(saw.iter().any(|m| m.ends_with("condition: Failed")), saw)
        });
    }
}
