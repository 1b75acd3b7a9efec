//! The Job controller in process over a real store, with the garbage collector and the
//! TTL-after-finished controller beside it. No agent runs: the tests play the kubelet by
//! writing pod status (Succeeded, Failed) themselves, and pods stay unbound (so a deleted pod
//! goes as soon as no finalizer holds it).

use super::*;
use crate::workload::object_meta::name;
use berth_registry::{Propagation, WriteOptions};
use berth_runtime::testing::{ControlPlane, edit_status};
use serde_json::{Value, json};

struct Cluster {
    cp: ControlPlane,
    /// Stops the Job controller alone.
    jobs_stop: CancellationToken,
}

fn tracked_pod(v: &Value) -> bool {
    v["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == view::TRACKING_FINALIZER))
}

fn condition(job: &Value, type_: &str) -> bool {
    job["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == type_ && c["status"] == "True")
    })
}

/// A Job `name` of busybox pods, `spec` merged over its spec.
fn job(name: &str, spec: Value) -> Value {
    let mut j = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.28"}]}}}});
    json_patch::merge(&mut j["spec"], &spec);
    j
}

impl Cluster {
    fn start() -> Cluster {
        let cp = ControlPlane::start();
        cp.run(berth_cluster_controllers::gc::run);
        cp.run(crate::ttlafterfinished::run);
        let mut c = Cluster {
            cp,
            jobs_stop: CancellationToken::new(),
        };
        c.start_jobs();
        c
    }

    fn start_jobs(&mut self) {
        self.jobs_stop = self.cp.stop.child_token();
        let stop = self.jobs_stop.clone();
        self.cp.run(|ctx, _| run(ctx, stop));
    }

    async fn stop(self) {
        self.cp.shut_down().await;
    }

    fn registry(&self) -> &Registry {
        self.cp.registry()
    }

    fn create(&self, j: Value) {
        self.registry()
            .create(JOBS, Some("default"), j, &WriteOptions::default())
            .unwrap();
    }

    fn job(&self, name: &str) -> Option<Value> {
        self.cp.get(JOBS, name)
    }

    fn pods(&self) -> Vec<Value> {
        self.cp.list(PODS)
    }

    /// Live pods that have not ended.
    fn running(&self) -> Vec<Value> {
        self.pods()
            .into_iter()
            .filter(|p| {
                p["metadata"]["deletionTimestamp"].is_null()
                    && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
            })
            .collect()
    }

    /// Plays the kubelet: the pod's container exited with `code`.
    fn end(&self, pod: &str, code: i32) {
        let phase = if code == 0 { "Succeeded" } else { "Failed" };
        let at = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        edit_status(self.registry(), PODS, pod, |o| {
            o["status"] = json!({"phase": phase, "containerStatuses": [{"name": "main",
                "image": "busybox:1.28", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "finishedAt": at}}}]});
        });
    }

    fn events(&self, reason: &str) -> usize {
        let counts = self.cp.events(reason).into_iter();
        counts
            .map(|e| e["count"].as_u64().unwrap_or(1) as usize)
            .sum()
    }

    async fn wait(&self, what: &str, check: impl Fn(&Cluster) -> bool) {
        self.cp
            .wait_until(
                what,
                || check(self),
                || format!("jobs: {:#?}\npods: {:#?}", self.cp.list(JOBS), self.pods()),
            )
            .await;
    }

    /// Ends every running pod with `code`, `n` pods at most; how many it ended.
    fn end_running(&self, n: usize, code: i32) -> usize {
        let running = self.running();
        for p in running.iter().take(n) {
            self.end(&name(p), code);
        }
        running.len().min(n)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_its_pods_to_completion_and_leaves_none_tracked() {
    let c = Cluster::start();
    c.create(job("sq", json!({"completions": 5, "parallelism": 2})));
    let mut ended = 0;
    while ended < 5 {
        c.wait("a pod to run", |c| !c.running().is_empty()).await;
        assert!(c.running().len() <= 2, "parallelism 2: {:#?}", c.running());
        ended += c.end_running(1, 0);
    }
    c.wait("the Job to complete", |c| {
        c.job("sq").is_some_and(|j| condition(&j, "Complete"))
    })
    .await;
    let j = c.job("sq").unwrap();
    assert_eq!(j["status"]["succeeded"], 5);
    assert!(condition(&j, "SuccessCriteriaMet"));
    assert!(j["status"]["completionTime"].is_string());
    assert_eq!(j["status"]["uncountedTerminatedPods"], json!({}));
    assert_eq!(c.pods().len(), 5);
    assert!(!c.pods().iter().any(tracked_pod), "{:#?}", c.pods());
    c.wait("the Completed event", |c| c.events("Completed") == 1)
        .await;
    assert_eq!(c.events("SuccessfulCreate"), 5);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_stopped_mid_job_counts_every_pod_once() {
    let mut c = Cluster::start();
    c.create(job("crash", json!({"completions": 6, "parallelism": 3})));
    c.wait("three pods", |c| c.running().len() == 3).await;
    c.end_running(2, 0);
    c.wait("two counted", |c| {
        c.job("crash")
            .is_some_and(|j| j["status"]["succeeded"] == 2)
    })
    .await;
    c.jobs_stop.cancel();
    // While it is down, pods end; then it comes back.
    c.end_running(3, 0);
    c.start_jobs();
    loop {
        c.wait("progress", |c| {
            !c.running().is_empty() || c.job("crash").is_some_and(|j| condition(&j, "Complete"))
        })
        .await;
        if c.end_running(3, 0) == 0 {
            break;
        }
    }
    let j = c.job("crash").unwrap();
    assert_eq!(j["status"]["succeeded"], 6, "{j:#}");
    assert!(!c.pods().iter().any(tracked_pod));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_job_orphans_its_pods_by_default_and_cascades_when_asked() {
    let c = Cluster::start();
    c.create(job("keep", json!({"parallelism": 2, "completions": 2})));
    c.create(job("drop", json!({"parallelism": 2, "completions": 2})));
    c.wait("four pods", |c| c.running().len() == 4).await;
    let delete = |n: &str, p: Option<Propagation>| c.cp.delete(JOBS, n, p);
    delete("keep", None);
    delete("drop", Some(Propagation::Background));
    c.wait(
        "both Jobs gone, the orphans untracked, the others deleted",
        |c| {
            c.job("keep").is_none()
                && c.job("drop").is_none()
                && c.pods().len() == 2
                && c.pods().iter().all(|p| {
                    p["metadata"]["ownerReferences"].is_null()
                        && !tracked_pod(p)
                        && name(p).starts_with("keep-")
                })
        },
    )
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_backs_off_then_fails_and_the_ttl_deletes_it() {
    let c = Cluster::start();
    c.create(job(
        "bad",
        json!({"backoffLimit": 0, "ttlSecondsAfterFinished": 1}),
    ));
    c.wait("a pod", |c| c.running().len() == 1).await;
    c.end_running(1, 3);
    c.wait("the Job to fail", |c| {
        c.job("bad").is_some_and(|j| condition(&j, "Failed"))
    })
    .await;
    let j = c.job("bad").unwrap();
    assert!(condition(&j, "FailureTarget"));
    assert_eq!(j["status"]["failed"], 1);
    c.wait("the event", |c| c.events("BackoffLimitExceeded") == 1)
        .await;
    c.wait("the TTL to delete it and its pod", |c| {
        c.job("bad").is_none() && c.pods().is_empty()
    })
    .await;
    c.stop().await;
}
