//! The Recreate strategy (upstream `recreate.go`, DEP-14): scale every old ReplicaSet to 0,
//! wait until none of their pods is left (terminating pods count: only pods that are gone or
//! terminal do not), and only then create or scale up the new ReplicaSet to full size, so old
//! and new pods never overlap.
//!
//! Planner: pure, no I/O.

use super::history;
use super::plan::{Halt, Pass, uid};
use super::progress;
use super::status::status_replicas;
use super::sync;

/// Upstream `oldPodsRunning`: an old ReplicaSet still reports pods, or a pod controlled by an
/// old ReplicaSet is not Succeeded or Failed.
pub(super) fn old_pods_running(pass: &Pass<'_>) -> bool {
    let old = pass.old();
    if pass.sum(&old, status_replicas) > 0 {
        return true;
    }
    let old_uids: Vec<&str> = old.iter().map(|i| uid(&pass.rss[*i])).collect();
    pass.pods.iter().any(|p| {
        p.controller_uid
            .as_deref()
            .is_some_and(|u| old_uids.contains(&u))
            && !matches!(p.phase.as_deref(), Some("Succeeded" | "Failed"))
    })
}

/// Upstream `rolloutRecreate`: one step.
pub(super) fn rollout(pass: &mut Pass<'_>) -> Result<(), Halt> {
    sync::sync_new_replica_set(pass);
    let mut scaled_down = false;
    for i in pass.active(&pass.old()) {
        scaled_down |= pass.scale_and_record(i, 0);
    }
    if scaled_down || old_pods_running(pass) {
        return Ok(());
    }
    let new = match pass.new {
        Some(i) => i,
        None => sync::ensure_new_replica_set(pass)?,
    };
    let desired = pass.desired();
    pass.scale_and_record(new, desired);
    let status = pass.d.status.clone().unwrap_or_default();
    if progress::deployment_complete(&pass.d, &status) {
        history::cleanup(pass);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::plan::PodInfo;
    use berth_shared::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

    fn run(d: &Deployment, rss: &[ReplicaSet], pods: &[PodInfo]) -> Vec<String> {
        writes(&super::super::fixtures::run(d, rss, pods, t(50)))
    }

    fn pod(owner: &str, phase: &str) -> PodInfo {
        PodInfo {
            controller_uid: Some(format!("uid-{owner}")),
            phase: Some(phase.into()),
        }
    }

    #[test]
    fn recreate_steps_never_overlap_old_and_new_pods() {
        let d = recreate(deployment(3, "1", "0"));
        let old_running = rs("web-old", 1, 3).with_status(3, 3, 3).sized_for(3, 3);
        let old_scaled = rs("web-old", 1, 0).with_status(3, 3, 3).sized_for(3, 3);
        let old_drained = rs("web-old", 1, 0).with_status(0, 0, 0).sized_for(3, 3);
        let new_zero = new_rs_of(&d, "web-new", 2, 0).sized_for(3, 3);
        type Case = (
            &'static str,
            Vec<ReplicaSet>,
            Vec<PodInfo>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "first the old replica set goes to zero, nothing is created",
                vec![old_running],
                vec![pod("web-old", "Running")],
                vec!["web-old -> 0"],
            ),
            (
                "the old replica set still reports pods: wait",
                vec![old_scaled],
                vec![pod("web-old", "Running")],
                vec![],
            ),
            (
                "a terminating pod of the old replica set is still running: wait",
                vec![old_drained.clone()],
                vec![pod("web-old", "Running")],
                vec![],
            ),
            (
                "an old pod in Unknown phase counts as running",
                vec![old_drained.clone()],
                vec![pod("web-old", "Unknown")],
                vec![],
            ),
            (
                "old pods gone: the new replica set is created at full size",
                vec![old_drained.clone()],
                vec![],
                vec!["create nginx:new 3"],
            ),
            (
                "finished old pods do not block",
                vec![old_drained.clone()],
                vec![pod("web-old", "Failed"), pod("web-old", "Succeeded")],
                vec!["create nginx:new 3"],
            ),
            (
                "an existing new replica set is scaled up to full size",
                vec![old_drained, new_zero],
                vec![],
                vec!["web-new -> 3"],
            ),
        ];
        for (name, rss, pods, want) in cases {
            assert_eq!(run(&d, &rss, &pods), want, "{name}");
        }
    }

    #[test]
    fn every_old_replica_set_is_scaled_down_in_the_same_pass() {
        let d = recreate(deployment(2, "1", "0"));
        let rss = [
            rs("web-a", 1, 2).with_status(2, 2, 2).sized_for(2, 2),
            rs("web-b", 2, 1).with_status(1, 1, 1).sized_for(2, 2),
        ];
        assert_eq!(run(&d, &rss, &[]), vec!["web-a -> 0", "web-b -> 0"]);
    }
}
