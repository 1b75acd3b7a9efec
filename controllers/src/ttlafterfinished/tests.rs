//! The controller over a real registry, store and informers, its clock set by the test: a
//! finished Job waits out its TTL by the Context's clock and is deleted once that clock
//! passes it, whatever the machine's wall clock says.

use super::*;
use berth_registry::{Part, WriteOptions};
use berth_runtime::SetClock;
use berth_runtime::testing::ControlPlane;
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use std::time::Duration;

/// When the Job finished: long after any machine running this test, so a pass that read the
/// wall clock (rather than the Context's) would keep waiting and never delete it, and would
/// ask to wait far longer than the test's clock says is left.
const FINISHED: &str = "2999-01-01T00:00:00Z";

fn job() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pi", "namespace": "default"},
        "spec": {"ttlSecondsAfterFinished": 100, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "pi", "image": "perl:5.34.0"}]}}}})
}

/// Plays the Job controller: the Job completed at [`FINISHED`].
fn complete(cp: &ControlPlane) {
    cp.registry()
        .update_with(
            JOBS,
            Some("default"),
            "pi",
            Part::Status,
            &WriteOptions::default(),
            |mut j| {
                j["status"] = json!({"startTime": FINISHED, "completionTime": FINISHED,
                    "succeeded": 1, "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": FINISHED},
                    {"type": "Complete", "status": "True", "lastTransitionTime": FINISHED}]});
                Ok::<_, RegistryError>(j)
            },
        )
        .expect("job status");
}

#[tokio::test]
async fn a_finished_job_expires_by_the_context_clock_not_the_wall_clock() {
    let mut cp = ControlPlane::start();
    let finished: Timestamp = FINISHED.parse().expect("time");
    let clock = SetClock::at(finished + SignedDuration::from_secs(40));
    cp.ctx.clock = clock.clock();
    cp.registry()
        .create(JOBS, Some("default"), job(), &WriteOptions::default())
        .expect("create job");
    complete(&cp);
    let cleanup = Cleanup::new(&cp.ctx);
    cleanup.jobs.wait_synced().await;
    cp.caught_up().await;
    let key = cleanup
        .jobs
        .get(Some("default"), "pi")
        .expect("cached")
        .key()
        .clone();

    let outcome = cleanup.reconcile(&key).expect("pass at +40 s");
    assert_eq!(outcome, Outcome::RequeueAfter(Duration::from_secs(60)));
    let kept = cp.registry().get(JOBS, Some("default"), "pi").expect("job");
    assert!(
        kept.value()
            .expect("json")
            .pointer("/metadata/deletionTimestamp")
            .is_none()
    );

    clock.advance(SignedDuration::from_secs(60));
    assert_eq!(
        cleanup.reconcile(&key).expect("pass at +100 s"),
        Outcome::Done
    );
    match cp.registry().get(JOBS, Some("default"), "pi") {
        Err(RegistryError::NotFound { .. }) => {}
        Ok(o) => assert!(
            o.value()
                .expect("json")
                .pointer("/metadata/deletionTimestamp")
                .is_some(),
            "the expired Job is being deleted"
        ),
        Err(e) => panic!("reading the job: {e}"),
    }
}
