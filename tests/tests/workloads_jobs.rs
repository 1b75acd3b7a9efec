//! Workloads acceptance: Jobs on real agents, driven with the real kubectl. The seed's `pi` Job
//! (its image a stand-in under the seed's name whose `perl` prints π to 2000 digits) completes
//! with `Completed`, `1/1` and its digits in `kubectl logs job/pi`; fixed-count, work-queue and
//! Indexed Jobs (each pod sees its own index and hostname) complete; a suspended Job runs no
//! pod until resumed and loses its pod when suspended again. Failing Jobs retry after 10 s then
//! 20 s (measured from the pods' timestamps) and fail at `backoffLimit`; the seeds' pod failure
//! policy, per-index back-off and success policy Jobs end as the seeds show; a Job over its
//! active deadline fails with `DeadlineExceeded`; `OnFailure` restarts count towards
//! `backoffLimit` (the restarting pod is deleted at the limit); a pod over its own
//! `activeDeadlineSeconds` ends `Failed` with reason `DeadlineExceeded`. A controller SIGKILLed in the middle of a
//! 20-completion Job counts exactly 20 and leaves no pod tracked; `ttlSecondsAfterFinished`
//! deletes a finished Job and its pod; a Job deleted through the API orphans its pods, `kubectl
//! delete job` takes them along.
//!
//! The seeds' `python` Jobs run the same logic in busybox `sh` (no Python stand-in exists);
//! everything else in those manifests is the seed's.

use std::time::Duration;

use berth_tests::fixtures::{BASH_5, PERL_5_34_0, pi_digits};
use berth_tests::objects::merge;
use berth_tests::pod_reading::{phase, terminated};
use berth_tests::seeds::seed;
use berth_tests::table::{assert_describes, has_normal_event};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, Req, Table, secs};
use jiff::Timestamp;
use serde_json::{Value, json};

const NS: &str = "default";
const TRACKING: &str = "batch.kubernetes.io/job-tracking";
/// Time for a short Job to run on a warm node.
const RUN: Duration = secs(60);

/// The shell command running `script` so that SIGTERM ends it at once: a shell as PID 1 ignores
/// the signal, and one in the foreground of `sleep` would only see it when the sleep ends.
fn stoppable(script: &str) -> String {
    format!("trap 'exit 143' TERM; ({script}) & wait $!")
}

/// A Job `name` of busybox pods running `script` ([`stoppable`]), `spec` merged over its spec.
fn job(name: &str, spec: Value, script: &str) -> Value {
    let mut j = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.28",
                "command": ["sh", "-c", stoppable(script)]}]}}}});
    merge(&mut j["spec"], &spec);
    j
}

/// A seed Job manifest whose python container runs `script` in busybox `sh` instead.
fn seed_in_sh(stem: &str, script: &str) -> Value {
    let mut j = seed(stem).object;
    j["metadata"]["namespace"] = json!(NS);
    let c = &mut j["spec"]["template"]["spec"]["containers"][0];
    c["image"] = json!("busybox:1.28");
    c["command"] = json!(["sh", "-c", stoppable(script)]);
    j
}

fn get_job(c: &Cluster, name: &str) -> Option<Value> {
    c.get(&format!("/apis/batch/v1/namespaces/{NS}/jobs/{name}"))
}

/// The Job's pods, oldest first.
fn pods_of(c: &Cluster, name: &str) -> Vec<Value> {
    let mut pods: Vec<Value> = c
        .get(&format!(
            "/api/v1/namespaces/{NS}/pods?labelSelector=batch.kubernetes.io%2Fjob-name%3D{name}"
        ))
        .and_then(|l| l["items"].as_array().cloned())
        .unwrap_or_default();
    pods.sort_by_key(|p| {
        (
            p["metadata"]["creationTimestamp"]
                .as_str()
                .map(String::from),
            p["metadata"]["name"].as_str().map(String::from),
        )
    });
    pods
}

fn tracked(p: &Value) -> bool {
    p["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == TRACKING))
}

fn condition<'a>(job: &'a Value, type_: &str) -> Option<&'a Value> {
    job["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn is_true(job: &Value, type_: &str) -> bool {
    condition(job, type_).is_some_and(|c| c["status"] == "True")
}

/// Waits until the Job has the condition `type_` True; returns the Job.
fn wait_condition(c: &Cluster, name: &str, type_: &str, within: Duration) -> Value {
    c.wait_for(within, &format!("Job {name} {type_}"), || {
        let j = get_job(c, name).ok_or("no Job")?;
        if is_true(&j, type_) {
            Ok(j)
        } else {
            Err(format!("status {}", j["status"]))
        }
    })
}

fn time(v: &Value) -> Timestamp {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a time: {v}"))
}

/// The `kubectl describe job` output once it shows `want`.
fn describe_shows(c: &Cluster, name: &str, want: &[&str]) -> String {
    c.wait_for(
        secs(20),
        &format!("describe job {name} showing {want:?}"),
        || {
            let out = c.kubectl().ok(&["describe", "job", name]);
            if want.iter().all(|w| out.contains(w)) {
                Ok(out)
            } else {
                Err(out)
            }
        },
    )
}

#[test]
fn the_seed_pi_job_and_the_parallel_patterns_run_to_completion() {
    let c = Cluster::start(1);
    c.push_fixture(&PERL_5_34_0, "library/perl", "5.34.0");
    let pi = seed("pi.job");
    let out = c.kubectl().ok(&["apply", "-f", &pi.path.to_string_lossy()]);
    assert_eq!(out.trim(), "job.batch/pi created");
    c.apply(&job(
        "fixed",
        json!({"completions": 4, "parallelism": 2}),
        "echo done",
    ));
    c.apply(&job("queue", json!({"parallelism": 3}), "sleep 1"));
    let indexed = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3});
    c.apply(&job(
        "idx",
        indexed,
        "echo index=$JOB_COMPLETION_INDEX host=$(hostname)",
    ));

    // T-JOB-01: Complete, 1/1, the events, the digits.
    let j = wait_condition(&c, "pi", "Complete", RUN);
    assert!(is_true(&j, "SuccessCriteriaMet"), "{j:#}");
    assert_eq!(
        condition(&j, "Complete").unwrap()["reason"],
        "CompletionsReached"
    );
    assert_eq!(j["status"]["succeeded"], 1);
    assert!(j["status"]["completionTime"].is_string());
    assert_eq!(
        j["metadata"]["labels"]["batch.kubernetes.io/job-name"],
        "pi"
    );
    let out = c.kubectl().ok(&["get", "jobs", "pi"]);
    let t = Table::parse(&out).unwrap();
    assert_eq!(
        t.headers,
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
        "{out}"
    );
    assert_eq!(t.cell("pi", "STATUS"), Some("Complete"), "{out}");
    assert_eq!(t.cell("pi", "COMPLETIONS"), Some("1/1"), "{out}");
    let out = describe_shows(&c, "pi", &["Completed"]);
    assert_describes(
        &out,
        &[
            "Parallelism:",
            "Completions:",
            "1 Succeeded / 0 Failed",
            "Completed At:",
        ],
    );
    let line = |reason, message| has_normal_event(&out, reason, "job-controller", message);
    assert!(line("SuccessfulCreate", "Created pod: pi-"), "{out}");
    assert!(line("Completed", "Job completed"), "{out}");
    let logs = c.kubectl().ok(&["logs", "job/pi"]);
    assert_eq!(logs.trim_end(), pi_digits(2000));
    let pods = pods_of(&c, "pi");
    assert_eq!(pods.len(), 1, "the pod is kept");
    assert!(!tracked(&pods[0]));

    // T-JOB-08 / -09: fixed count, work queue, Indexed.
    let j = wait_condition(&c, "fixed", "Complete", RUN);
    assert_eq!(j["status"]["succeeded"], 4);
    assert_eq!(pods_of(&c, "fixed").len(), 4);
    let j = wait_condition(&c, "queue", "Complete", RUN);
    assert_eq!(
        j["status"]["succeeded"], 3,
        "every pod ran to its end: {j:#}"
    );
    let t = Table::parse(&c.kubectl().ok(&["get", "jobs"])).unwrap();
    assert_eq!(t.cell("queue", "COMPLETIONS"), Some("3/1 of 3"));
    assert_eq!(t.cell("fixed", "COMPLETIONS"), Some("4/4"));
    let j = wait_condition(&c, "idx", "Complete", RUN);
    assert_eq!(j["status"]["completedIndexes"], "0-2");
    let pods = pods_of(&c, "idx");
    assert_eq!(pods.len(), 3);
    let mut seen: Vec<String> = pods
        .iter()
        .map(|p| {
            let name = p["metadata"]["name"].as_str().unwrap();
            let ix = &p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"];
            assert_eq!(
                &p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"],
                ix
            );
            assert!(
                name.starts_with(&format!("idx-{}-", ix.as_str().unwrap())),
                "{name}"
            );
            c.kubectl().ok(&["logs", name]).trim().to_string()
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "index=0 host=idx-0",
            "index=1 host=idx-1",
            "index=2 host=idx-2"
        ]
    );

    // JOB-44: through the API a Job orphans its pods; `kubectl delete job` takes them along.
    let r = c.api().send(Req::delete(format!(
        "/apis/batch/v1/namespaces/{NS}/jobs/fixed"
    )));
    assert_eq!(r.status, 200, "{}", r.describe());
    c.kubectl().ok(&["delete", "job", "pi"]);
    c.wait_for(secs(30), "fixed's pods orphaned, pi's gone", || {
        let fixed = pods_of(&c, "fixed");
        let orphaned = fixed.len() == 4
            && fixed
                .iter()
                .all(|p| p["metadata"]["ownerReferences"].is_null() && !tracked(p));
        let gone = get_job(&c, "fixed").is_none() && pods_of(&c, "pi").is_empty();
        ok_if(orphaned && gone, format!("{fixed:#?}"))
    });
}

#[test]
fn a_suspended_job_runs_nothing_until_resumed_and_stops_when_suspended_again() {
    let c = Cluster::start(1);
    // T-JOB-11: the seed's `myjob`, created suspended.
    c.apply(&job(
        "myjob",
        json!({"suspend": true, "parallelism": 1, "completions": 5}),
        "sleep 300",
    ));
    let j = wait_condition(&c, "myjob", "Suspended", secs(20));
    assert!(j["status"]["startTime"].is_null(), "{j:#}");
    c.ensure_for(secs(2), "no pod while suspended", || {
        let n = pods_of(&c, "myjob").len();
        if n == 0 { Ok(()) } else { Err(n) }
    });
    let patch = |suspend: bool| {
        let p = format!("{{\"spec\":{{\"suspend\":{suspend}}}}}");
        c.kubectl()
            .ok(&["patch", "job/myjob", "--type=strategic", "--patch", &p]);
    };
    patch(false);
    let j = c.wait_for(RUN, "resumed, one pod running", || {
        let j = get_job(&c, "myjob").ok_or("no Job")?;
        let running = pods_of(&c, "myjob")
            .iter()
            .filter(|p| phase(p) == "Running")
            .count();
        let resumed = condition(&j, "Suspended").is_some_and(|s| s["status"] == "False");
        if resumed && running == 1 {
            Ok(j)
        } else {
            Err(format!("{running} running, {}", j["status"]))
        }
    });
    assert_eq!(condition(&j, "Suspended").unwrap()["reason"], "JobResumed");
    assert!(j["status"]["startTime"].is_string());
    patch(true);
    let j = c.wait_for(RUN, "suspended again, the pod gone", || {
        let j = get_job(&c, "myjob").ok_or("no Job")?;
        let pods = pods_of(&c, "myjob");
        if is_true(&j, "Suspended") && pods.is_empty() && j["status"]["active"].is_null() {
            Ok(j)
        } else {
            Err(format!("{} pods, {}", pods.len(), j["status"]))
        }
    });
    assert!(
        j["status"]["failed"].is_null(),
        "a suspended pod is no failure: {j:#}"
    );
    let t = Table::parse(&c.kubectl().ok(&["get", "jobs", "myjob"])).unwrap();
    assert_eq!(t.cell("myjob", "STATUS"), Some("Suspended"));
    let out = describe_shows(&c, "myjob", &["Resumed", "Suspended"]);
    for (reason, message) in [
        ("SuccessfulCreate", "Created pod: myjob-"),
        ("SuccessfulDelete", "Deleted pod: myjob-"),
        ("Suspended", "Job suspended"),
        ("Resumed", "Job resumed"),
    ] {
        assert!(
            out.lines()
                .any(|l| l.contains(reason) && l.contains(message)),
            "{reason}\n{out}"
        );
    }
}

#[test]
fn failing_jobs_back_off_and_their_policies_decide_how_they_end() {
    let c = Cluster::start(2);
    c.push_fixture(&BASH_5, "library/bash", "5");
    // T-JOB-02: three attempts, 10 s then 20 s apart.
    c.apply(&job("retry", json!({"backoffLimit": 2}), "exit 1"));
    // T-JOB-05: the seed verbatim (its bash:5 is busybox sh).
    let pfp = seed("job-pod-failure-policy-example.job");
    c.kubectl()
        .ok(&["apply", "-f", &pfp.path.to_string_lossy()]);
    // T-JOB-06: even indexes fail, twice each.
    c.apply(&seed_in_sh(
        "job-backoff-limit-per-index-example.job",
        "echo Hello world; [ $((JOB_COMPLETION_INDEX % 2)) -ne 0 ]",
    ));
    // T-JOB-07: index 2 succeeds at once, the others would fail after a while.
    c.apply(&seed_in_sh(
        "job-success.job",
        "if [ \"$JOB_COMPLETION_INDEX\" = 2 ]; then exit 0; fi; sleep 60; exit 1",
    ));
    // T-JOB-03 with a short deadline.
    let mut deadline = seed_in_sh("pi-with-timeout.job", "sleep 300");
    deadline["spec"]["activeDeadlineSeconds"] = json!(5);
    c.apply(&deadline);
    // JOB-16 / JOB-30: OnFailure restarts count; a pod's own deadline fails the pod.
    let on_failure =
        json!({"backoffLimit": 1, "template": {"spec": {"restartPolicy": "OnFailure"}}});
    c.apply(&job("on-failure", on_failure, "exit 1"));
    let pod_deadline =
        json!({"backoffLimit": 0, "template": {"spec": {"activeDeadlineSeconds": 3}}});
    c.apply(&job("pod-deadline", pod_deadline, "sleep 300"));

    let j = wait_condition(&c, "pi-with-timeout", "Failed", RUN);
    for type_ in ["FailureTarget", "Failed"] {
        let cond = condition(&j, type_).unwrap();
        assert_eq!(cond["reason"], "DeadlineExceeded");
        assert_eq!(
            cond["message"],
            "Job was active longer than specified deadline"
        );
    }
    let started = time(&j["status"]["startTime"]);
    let target = time(&condition(&j, "FailureTarget").unwrap()["lastTransitionTime"]);
    let took = target.duration_since(started).as_secs();
    assert!((5..=7).contains(&took), "failed {took} s after its start");
    c.wait_for(secs(20), "the pod over the deadline deleted", || {
        let n = pods_of(&c, "pi-with-timeout").len();
        if n == 0 { Ok(()) } else { Err(n) }
    });

    let j = wait_condition(&c, "pod-deadline", "Failed", RUN);
    assert_eq!(
        condition(&j, "Failed").unwrap()["reason"],
        "BackoffLimitExceeded"
    );
    let pods = pods_of(&c, "pod-deadline");
    assert_eq!(pods.len(), 1, "{pods:#?}");
    assert_eq!(
        (phase(&pods[0]), &pods[0]["status"]["reason"]),
        ("Failed", &json!("DeadlineExceeded"))
    );
    let j = wait_condition(&c, "on-failure", "Failed", RUN);
    assert_eq!(
        condition(&j, "Failed").unwrap()["reason"],
        "BackoffLimitExceeded"
    );
    c.wait_for(secs(20), "the restarting pod deleted", || {
        let n = pods_of(&c, "on-failure").len();
        if n == 0 { Ok(()) } else { Err(n) }
    });

    let j = wait_condition(&c, "job-pod-failure-policy-example", "Failed", RUN);
    let target = condition(&j, "FailureTarget").expect("FailureTarget first");
    assert_eq!(target["reason"], "PodFailurePolicy");
    let msg = target["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Container main for pod default/job-pod-failure-policy-example-")
            && msg.ends_with("failed with exit code 42 matching FailJob rule at index 0"),
        "{msg}"
    );
    assert_eq!(
        condition(&j, "Failed").unwrap()["message"],
        target["message"]
    );
    assert!(j["status"]["succeeded"].is_null(), "{j:#}");
    assert!(
        pods_of(&c, "job-pod-failure-policy-example").len() <= 3,
        "no pod after the first exit 42"
    );

    let j = wait_condition(&c, "job-success", "Complete", RUN);
    let met = condition(&j, "SuccessCriteriaMet").unwrap();
    assert_eq!(
        (&met["reason"], &met["message"]),
        (&json!("SuccessPolicy"), &json!("Matched rules at index 0"))
    );
    assert_eq!(
        condition(&j, "Complete").unwrap()["reason"],
        "SuccessPolicy"
    );
    assert_eq!(j["status"]["completedIndexes"], "2");
    assert!(
        j["status"]["active"].is_null() && j["status"]["terminating"] == 0,
        "{j:#}"
    );
    let lingering = pods_of(&c, "job-success");
    assert!(lingering.iter().all(|p| !tracked(p)), "{lingering:#?}");

    let j = wait_condition(&c, "retry", "Failed", secs(90));
    assert_eq!(
        condition(&j, "Failed").unwrap()["reason"],
        "BackoffLimitExceeded"
    );
    assert_eq!(j["status"]["failed"], 3);
    let pods = pods_of(&c, "retry");
    assert_eq!(pods.len(), 3, "{pods:#?}");
    for p in &pods {
        let t = terminated(&p["status"]["containerStatuses"][0]).unwrap();
        assert_eq!(
            (phase(p), &t["exitCode"], &t["reason"]),
            ("Failed", &json!(1), &json!("Error"))
        );
    }
    let finished =
        |p: &Value| time(&terminated(&p["status"]["containerStatuses"][0]).unwrap()["finishedAt"]);
    let created = |p: &Value| time(&p["metadata"]["creationTimestamp"]);
    let gaps: Vec<i64> = (1..3)
        .map(|i| {
            created(&pods[i])
                .duration_since(finished(&pods[i - 1]))
                .as_secs()
        })
        .collect();
    assert!(
        (8..=12).contains(&gaps[0]) && (18..=22).contains(&gaps[1]),
        "re-created after {gaps:?} s"
    );
    describe_shows(
        &c,
        "retry",
        &[
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ],
    );

    let j = wait_condition(
        &c,
        "job-backoff-limit-per-index-example",
        "Failed",
        secs(120),
    );
    let s = &j["status"];
    assert_eq!(s["completedIndexes"], "1,3,5,7,9", "{s:#}");
    assert_eq!(s["failedIndexes"], "0,2,4,6,8");
    assert_eq!((&s["succeeded"], &s["failed"]), (&json!(5), &json!(10)));
    for type_ in ["FailureTarget", "Failed"] {
        let cond = condition(&j, type_).unwrap();
        assert_eq!(
            (&cond["reason"], &cond["message"]),
            (&json!("FailedIndexes"), &json!("Job has failed indexes"))
        );
    }
    for p in pods_of(&c, "job-backoff-limit-per-index-example") {
        assert!(!tracked(&p), "{p:#}");
    }
}

#[test]
fn a_controller_killed_mid_job_counts_each_pod_once_and_the_ttl_cleans_up() {
    let mut c = Cluster::start(1);
    c.push_fixture(&PERL_5_34_0, "library/perl", "5.34.0");
    c.apply(&job(
        "crash",
        json!({"completions": 20, "parallelism": 5}),
        "sleep 1",
    ));
    let mut ttl = seed("pi-with-ttl.job").object;
    ttl["spec"]["ttlSecondsAfterFinished"] = json!(5);
    c.apply(&ttl);

    // T-JOB-04: gone about 5 s after it completed, its pod with it.
    let j = wait_condition(&c, "pi-with-ttl", "Complete", RUN);
    let done = time(&condition(&j, "Complete").unwrap()["lastTransitionTime"]);
    c.wait_for(secs(30), "pi-with-ttl and its pod deleted", || {
        ok_if(
            get_job(&c, "pi-with-ttl").is_none() && pods_of(&c, "pi-with-ttl").is_empty(),
            "still there",
        )
    });
    let after = Timestamp::now().duration_since(done).as_secs_f64();
    assert!(
        (4.0..15.0).contains(&after),
        "deleted {after:.1} s after it completed"
    );

    // Acceptance 3: SIGKILL while the Job runs, then start again.
    c.wait_for(RUN, "five completions", || {
        let j = get_job(&c, "crash").ok_or("no Job")?;
        ok_if(
            j["status"]["succeeded"].as_i64().unwrap_or(0) >= 5,
            j["status"].to_string(),
        )
    });
    c.controller_mut().kill9();
    c.controller_mut().restart();
    // The connections of the old process are gone: read through a new client.
    let api = c.controller().admin_api();
    let read = |path: &str| {
        let r = api.send(Req::get(path));
        (r.status == 200).then(|| r.json())
    };
    let j = c.wait_for(secs(90), "crash Complete", || {
        let j = read(&format!("/apis/batch/v1/namespaces/{NS}/jobs/crash")).ok_or("no Job")?;
        if is_true(&j, "Complete") {
            Ok(j)
        } else {
            Err(j["status"].to_string())
        }
    });
    assert_eq!(j["status"]["succeeded"], 20, "{j:#}");
    assert!(j["status"]["failed"].is_null(), "{j:#}");
    let list = read(&format!(
        "/api/v1/namespaces/{NS}/pods?labelSelector=batch.kubernetes.io%2Fjob-name%3Dcrash"
    ));
    let pods = list
        .and_then(|l| l["items"].as_array().cloned())
        .unwrap_or_default();
    let succeeded = pods.iter().filter(|p| phase(p) == "Succeeded").count();
    assert_eq!((pods.len(), succeeded), (20, 20));
    assert!(pods.iter().all(|p| !tracked(p)), "a pod kept the finalizer");
}

/// T-JOB-05, the seed's second rule: a pod evicted through the Eviction API carries
/// `DisruptionTarget` and fails, and the seed's `Ignore` rule keeps it out of the count: with
/// `backoffLimit: 0` a counted failure would end the Job, instead it gets a new pod.
#[test]
fn an_evicted_pod_is_ignored_by_the_seeds_disruption_rule_and_replaced() {
    let c = Cluster::start(1);
    let mut j = seed_in_sh("job-pod-failure-policy-example.job", "sleep 3600");
    j["metadata"]["name"] = json!("evicted");
    merge(
        &mut j["spec"],
        &json!({"completions": 1, "parallelism": 1, "backoffLimit": 0}),
    );
    j["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(1);
    c.apply(&j);
    let first = c.wait_for(RUN, "the Job's pod Running", || {
        let pods = pods_of(&c, "evicted");
        match pods.as_slice() {
            [p] if phase(p) == "Running" => Ok(p.clone()),
            other => Err(format!("{} pods", other.len())),
        }
    });
    let name = first["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let uid = first["metadata"]["uid"].clone();
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": NS}});
    let r = c.api().send(Req::post(
        format!("/api/v1/namespaces/{NS}/pods/{name}/eviction"),
        &eviction,
    ));
    assert_eq!(r.status, 201, "{}", r.body);
    // The evicted pod is held by the tracking finalizer until counted: it ends Failed with
    // DisruptionTarget, and a new pod runs.
    c.wait_for(RUN, "the evicted pod Failed with DisruptionTarget", || {
        let p = c
            .get(&format!("/api/v1/namespaces/{NS}/pods/{name}"))
            .filter(|p| p["metadata"]["uid"] == uid);
        let Some(p) = p else {
            return Ok(());
        };
        let disrupted = p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "DisruptionTarget" && c["status"] == "True")
        });
        if disrupted && phase(&p) == "Failed" || !tracked(&p) {
            Ok(())
        } else {
            Err(format!(
                "phase {:?}, conditions {}",
                phase(&p),
                p["status"]["conditions"]
            ))
        }
    });
    let job = c.wait_for(RUN, "a new pod Running, the Job going on", || {
        let j = get_job(&c, "evicted").ok_or("no Job")?;
        let replaced = pods_of(&c, "evicted")
            .iter()
            .any(|p| p["metadata"]["uid"] != uid && phase(p) == "Running");
        if replaced {
            Ok(j)
        } else {
            Err(format!("status {}", j["status"]))
        }
    });
    assert!(!is_true(&job, "Failed"), "{}", job["status"]);
    assert_eq!(
        job["status"]["failed"].as_i64().unwrap_or(0),
        0,
        "{}",
        job["status"]
    );
    c.kubectl().ok(&[
        "delete",
        "job",
        "evicted",
        "--cascade=foreground",
        "--wait=false",
    ]);
}
