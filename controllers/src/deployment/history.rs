//! `revisionHistoryLimit` clean-up (upstream `cleanupDeployment`, DEP-40): beyond the limit,
//! old ReplicaSets are deleted lowest revision first, but only those fully scaled down: 0
//! desired, 0 reported, their spec observed by the ReplicaSet controller, not already being
//! deleted, and no pod of theirs left. Worked example (T-DEP-14): limit 1 with old revisions
//! 1, 2 and 3 at 0 replicas deletes 1 and 2 and keeps 3 for `rollout undo`.
//!
//! Planner: pure, no I/O.

use super::plan::{Action, Pass, by_creation, name, uid};
use super::revision;
use super::status::{spec_replicas, status_replicas};
use berth_shared::k8s_openapi::api::apps::v1::ReplicaSet;
use std::cmp::Ordering;

/// Upstream `ReplicaSetsByRevision`: lower revision first (unparsable counts as 0), then older.
fn by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let r = |rs: &ReplicaSet| revision::revision(rs).unwrap_or(0);
    r(a).cmp(&r(b)).then_with(|| by_creation(a, b))
}

fn drained(pass: &Pass<'_>, rs: &ReplicaSet) -> bool {
    let observed = rs
        .status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .unwrap_or(0);
    spec_replicas(rs) == 0
        && status_replicas(rs) == 0
        && rs.metadata.generation.unwrap_or(0) <= observed
        && rs.metadata.deletion_timestamp.is_none()
        && !pass
            .pods
            .iter()
            .any(|p| p.controller_uid.as_deref() == Some(uid(rs)))
}

/// Plans the deletions of old ReplicaSets past the history limit.
pub(super) fn cleanup(pass: &mut Pass<'_>) {
    let Some(limit) = pass
        .d
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .filter(|l| *l != i32::MAX)
    else {
        return;
    };
    let mut cleanable: Vec<usize> = pass
        .old()
        .into_iter()
        .filter(|i| pass.rss[*i].metadata.deletion_timestamp.is_none())
        .collect();
    let excess = i64::try_from(cleanable.len()).unwrap_or(i64::MAX) - i64::from(limit);
    if excess <= 0 {
        return;
    }
    pass.sort(&mut cleanable, by_revision);
    for &i in cleanable.iter().take(usize::try_from(excess).unwrap_or(0)) {
        let rs = &pass.rss[i];
        if !drained(pass, rs) {
            continue;
        }
        let action = Action::DeleteReplicaSet {
            name: name(rs).into(),
            uid: uid(rs).into(),
        };
        pass.actions.push(action);
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::plan::PodInfo;
    use berth_shared::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn deleted(d: &Deployment, rss: &[ReplicaSet], pods: &[PodInfo]) -> Vec<String> {
        let p = super::super::fixtures::run(d, rss, pods, t(99));
        writes(&p)
            .iter()
            .filter_map(|w| w.strip_prefix("delete ").map(String::from))
            .collect()
    }

    /// A complete Deployment (status says so) with its new ReplicaSet at revision 9.
    fn complete(limit: i32) -> (Deployment, ReplicaSet) {
        let mut d = deployment(2, "1", "0");
        if let Some(s) = d.spec.as_mut() {
            s.revision_history_limit = Some(limit);
        }
        let new = new_rs_of(&d, "web-new", 9, 2)
            .with_status(2, 2, 2)
            .sized_for(2, 3)
            .with_annotations(&[("deployment.kubernetes.io/revision", "9")]);
        d.metadata.annotations =
            Some([("deployment.kubernetes.io/revision".into(), "9".into())].into());
        d.status = Some(berth_shared::k8s_openapi::api::apps::v1::DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(2),
            updated_replicas: Some(2),
            available_replicas: Some(2),
            ready_replicas: Some(2),
            ..Default::default()
        });
        (d, new)
    }

    fn old(name: &str, revision: i64) -> ReplicaSet {
        rs(name, revision, 0).with_status(0, 0, 0)
    }

    #[test]
    fn history_beyond_the_limit_is_deleted_lowest_revision_first() {
        let mut terminating = old("web-r2", 2);
        terminating.metadata.deletion_timestamp = Some(Time(t(1)));
        let mut unobserved = old("web-r2", 2);
        unobserved.metadata.generation = Some(2);
        type Case = (
            &'static str,
            i32,
            Vec<ReplicaSet>,
            Vec<PodInfo>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "limit 1 keeps the newest old revision",
                1,
                vec![old("web-r3", 3), old("web-r1", 1), old("web-r2", 2)],
                vec![],
                vec!["web-r1", "web-r2"],
            ),
            (
                "within the limit nothing goes",
                3,
                vec![old("web-r3", 3), old("web-r1", 1), old("web-r2", 2)],
                vec![],
                vec![],
            ),
            (
                "limit 0 removes all drained history",
                0,
                vec![old("web-r1", 1), old("web-r2", 2)],
                vec![],
                vec!["web-r1", "web-r2"],
            ),
            (
                "an old replica set still reporting pods is kept, the next one goes",
                1,
                vec![
                    rs("web-r1", 1, 0).with_status(1, 1, 1),
                    old("web-r2", 2),
                    old("web-r3", 3),
                ],
                vec![],
                vec!["web-r2"],
            ),
            (
                "one that still has a pod is kept",
                0,
                vec![old("web-r1", 1), old("web-r2", 2)],
                vec![PodInfo {
                    controller_uid: Some("uid-web-r1".into()),
                    phase: Some("Running".into()),
                }],
                vec!["web-r2"],
            ),
            (
                "one whose spec the replica set controller has not observed is kept",
                0,
                vec![old("web-r1", 1), unobserved],
                vec![],
                vec!["web-r1"],
            ),
            (
                "one already being deleted is not counted",
                1,
                vec![old("web-r1", 1), terminating, old("web-r3", 3)],
                vec![],
                vec!["web-r1"],
            ),
        ];
        for (name, limit, olds, pods, want) in cases {
            let (d, new) = complete(limit);
            let mut rss = olds;
            rss.push(new);
            assert_eq!(deleted(&d, &rss, &pods), want, "{name}");
        }
    }

    #[test]
    fn an_unfinished_rollout_keeps_its_history() {
        let (mut d, new) = complete(0);
        if let Some(s) = d.status.as_mut() {
            s.available_replicas = Some(1);
        }
        let rss = [old("web-r1", 1), new.with_status(2, 1, 1)];
        assert_eq!(deleted(&d, &rss, &[]), Vec::<String>::new());
    }
}
