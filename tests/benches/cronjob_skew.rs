//! CronJob start-skew benchmark (issue 11; prints figures, never fails on them; takes about
//! 6 minutes by nature): 100 CronJobs (`BERTH_BENCH_CRONJOBS`) firing every minute for 5
//! minutes (`BERTH_BENCH_MINUTES`) on 10 hollow nodes whose pods exit 0 after 1 s. The skew of
//! each Job is the time from its scheduled instant (its `cronjob-scheduled-timestamp`
//! annotation) to its ADDED event reaching a watcher, stamped with the local clock; its
//! `creationTimestamp` (whole seconds) is compared as well. Baselines: upstream's controller
//! historically polled every 10 s (stated, not measured: skew uniform over 0–10 s), and, measured
//! in the same run, as many plain Jobs POSTed by one client at the half minutes in between
//! (when the CronJob controller is idle) and timed the same way: the API's own creation
//! latency for that many Jobs. `BERTH_CONTROLLER_BIN` picks the controller.

use std::collections::HashSet;
use std::time::Duration;

use berth_tests::api::Api;
use berth_tests::bench::{env_usize, start_hollow};
use berth_tests::client::Req;
use berth_tests::objects::namespace;
use berth_tests::stamped::{Stamped, StampedWatch};
use berth_tests::stats::Samples;
use jiff::{SignedDuration, Timestamp, ToSpan};
use serde_json::{Value, json};

const SCHEDULED: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
const INSTANT: &str = "bench.berth.dev/instant";

fn job_template() -> Value {
    json!({"spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "tick", "image": "busybox:1.28", "command": ["true"]}]}}}})
}

fn cronjob(name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": "cron"},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Allow",
            "jobTemplate": job_template()}})
}

/// A plain Job for the baseline: suspended (no pods), stamped with the instant it stands for.
fn plain_job(name: &str, instant: Timestamp) -> Value {
    let mut job = job_template();
    job["apiVersion"] = json!("batch/v1");
    job["kind"] = json!("Job");
    job["metadata"] = json!({"name": name, "namespace": "plain",
        "annotations": {INSTANT: instant.to_string()}});
    job["spec"]["suspend"] = json!(true);
    job
}

/// The next whole minute at least `margin` after now.
fn next_minute(margin: SignedDuration) -> Timestamp {
    let soon = Timestamp::now() + margin;
    let secs = soon.as_second().div_euclid(60) * 60 + 60;
    Timestamp::from_second(secs).unwrap_or(soon)
}

/// Sleeps until the wall clock reads `t`.
fn sleep_until(t: Timestamp) {
    if let Ok(left) = Duration::try_from(Timestamp::now().duration_until(t)) {
        // not ordering: a benchmark client waking at a wall-clock instant, as a cron would.
        std::thread::sleep(left);
    }
}

/// Skews of the ADDED events in one namespace.
struct Skews {
    /// Instant → ADDED arrival; an event stamped before its instant counts as 0 (and in
    /// `early`).
    watch: Samples,
    early: usize,
    /// `creationTimestamp` − instant, whole seconds (the timestamp is truncated to seconds).
    created: Vec<i64>,
    jobs: usize,
}

fn skews(events: &[Stamped], ns: &str, instant_of: impl Fn(&Value) -> Option<Timestamp>) -> Skews {
    let mut out = Skews {
        watch: Samples::new(),
        early: 0,
        created: Vec::new(),
        jobs: 0,
    };
    let mut seen = HashSet::new();
    for e in events {
        let meta = &e.object["metadata"];
        if e.kind != "ADDED" || meta["namespace"] != ns {
            continue;
        }
        let Some(instant) = instant_of(&e.object) else {
            continue;
        };
        if !seen.insert(meta["uid"].as_str().unwrap_or("").to_string()) {
            continue;
        }
        out.jobs += 1;
        match Duration::try_from(instant.duration_until(e.wall)) {
            Ok(d) => out.watch.push(d),
            Err(_) => {
                out.early += 1;
                out.watch.push(Duration::ZERO);
            }
        }
        if let Some(created) = meta["creationTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<Timestamp>().ok())
        {
            out.created.push(instant.duration_until(created).as_secs());
        }
    }
    out
}

fn annotation(o: &Value, key: &str) -> Option<Timestamp> {
    o["metadata"]["annotations"][key].as_str()?.parse().ok()
}

/// `p50 12 ms, p99 34 ms, max 56 ms`.
fn summary(s: &mut Samples) -> String {
    let ms =
        |d: Option<Duration>| d.map_or("n/a".into(), |d| format!("{:.0}", d.as_secs_f64() * 1e3));
    format!(
        "p50 {} ms, p99 {} ms, max {} ms",
        ms(s.percentile(50.0)),
        ms(s.percentile(99.0)),
        ms(s.percentile(100.0))
    )
}

/// `498 of 500 in the scheduled second, max 1 s`.
fn within_a_second(created: &[i64]) -> String {
    let same = created.iter().filter(|s| **s == 0).count();
    let max = created.iter().max().copied().unwrap_or(0);
    format!(
        "{same} of {} in the scheduled second, max {max} s",
        created.len()
    )
}

fn main() {
    let cronjobs = env_usize("BERTH_BENCH_CRONJOBS", 100);
    let minutes = env_usize("BERTH_BENCH_MINUTES", 5).max(1);
    let (c, _hollow) = start_hollow(
        "cronjob_skew",
        &format!("cronjobs={cronjobs}, minutes={minutes}"),
        10,
        &["--run-to-completion-after", "1s"],
    );
    let api = c.admin_api();
    for ns in ["cron", "plain"] {
        api.expect(Req::post("/api/v1/namespaces", &namespace(ns)), 201);
    }
    let jobs = StampedWatch::start(c.admin_endpoint(), "/apis/batch/v1/jobs");
    for i in 0..cronjobs {
        api.expect(
            Req::post(
                "/apis/batch/v1/namespaces/cron/cronjobs",
                &cronjob(&format!("tick-{i:03}")),
            ),
            201,
        );
    }
    // The first firing counted: a whole minute every CronJob existed well before.
    let first = next_minute(SignedDuration::from_secs(5));
    let last = first + (60 * (minutes as i64 - 1)).seconds();
    println!("  measuring the firings from {first} to {last}");

    // Baseline: the same number of plain Jobs at each half minute in between, one client.
    let baseline = {
        let endpoint = c.admin_endpoint();
        std::thread::spawn(move || {
            let api = Api::new(endpoint, Default::default());
            for m in 0..minutes {
                let instant = first + (60 * m as i64 + 30).seconds();
                sleep_until(instant);
                for i in 0..cronjobs {
                    let job = plain_job(&format!("plain-{m}-{i:03}"), instant);
                    api.expect(Req::post("/apis/batch/v1/namespaces/plain/jobs", &job), 201);
                }
            }
        })
    };
    let counted = |o: &Value| annotation(o, SCHEDULED).filter(|t| *t >= first && *t <= last);
    let want = cronjobs * minutes;
    let deadline = Duration::try_from(Timestamp::now().duration_until(last)).unwrap_or_default()
        + Duration::from_secs(90);
    c.wait_for(deadline, &format!("{want} Jobs from the CronJobs"), || {
        let n = skews(&jobs.events(), "cron", counted).jobs;
        if n >= want { Ok(()) } else { Err(n) }
    });
    if baseline.join().is_err() {
        panic!("the baseline client failed");
    }
    let plain_want = cronjobs * minutes;
    c.wait_for(Duration::from_secs(60), "every plain Job seen", || {
        let n = skews(&jobs.events(), "plain", |o| annotation(o, INSTANT)).jobs;
        if n >= plain_want { Ok(()) } else { Err(n) }
    });

    let events = jobs.events();
    let mut cron = skews(&events, "cron", counted);
    let mut plain = skews(&events, "plain", |o| annotation(o, INSTANT));
    println!();
    println!("| figure | result | baseline (same run unless stated) |");
    println!("|---|---|---|");
    println!(
        "| CronJob start skew, scheduled instant → Job ADDED seen by a watcher ({} Jobs: {cronjobs} CronJobs × {minutes} minutes) | {} ({} stamped before the instant) | {} plain Jobs POSTed by one client at the half minutes, instant → ADDED: {}; upstream's historic 10 s poll: p50 ≈ 5 s, p99 ≈ 9.9 s (stated) |",
        cron.jobs,
        summary(&mut cron.watch),
        cron.early,
        plain.jobs,
        summary(&mut plain.watch)
    );
    println!(
        "| the same from `creationTimestamp` (whole seconds) | {} | plain Jobs: {} |",
        within_a_second(&cron.created),
        within_a_second(&plain.created)
    );
}
