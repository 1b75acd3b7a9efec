//! The RollingUpdate strategy (upstream `rolling.go`): per pass, scale the new ReplicaSet up
//! if the surge allows it; otherwise scale old ReplicaSets down as far as availability allows,
//! removing their unhealthy replicas first; once complete, clean up history (DEP-15..DEP-21).
//!
//! Worked example (T-DEP-02, 3 replicas, surge 1, unavailable 0): the new ReplicaSet starts at
//! 1 (4 pods at most); when it is available the old one goes 3 → 2 (3 available must remain),
//! the new one 1 → 2, the old one 2 → 1, the new one 2 → 3, the old one 1 → 0. Rollover
//! (DEP-20): old ReplicaSets are every other one, including one still scaling up, and are
//! scaled down oldest first.
//!
//! Planner: pure, no I/O.

use super::history;
use super::plan::{Halt, Pass, by_creation};
use super::progress;
use super::status::{available, spec_replicas, status_replicas};
use super::surge;
use super::sync;
use berth_shared::k8s_openapi::api::apps::v1::ReplicaSet;

/// What a ReplicaSet may have in pods: its size, or more while its controller has not yet
/// removed the pods of a scale-down (its `status.replicas` still counts them).
fn committed_replicas(rs: &ReplicaSet) -> i32 {
    spec_replicas(rs).max(status_replicas(rs))
}

/// Upstream `NewRSNewReplicas`: the new ReplicaSet's next size (Recreate: all at once).
///
/// Unlike upstream, which sums the ReplicaSets' sizes only, an old ReplicaSet counts with the
/// pods it still has (`status.replicas`) until its controller has removed the ones a
/// scale-down asked for. Otherwise the new ReplicaSet's controller may create its pod before
/// the old one's has deleted one, and replicas + maxSurge + 1 pods exist for a moment; more
/// so across a leader change, when the old leader's last scale-down is acted on by the new
/// one. Worked example (6 replicas, surge 2, unavailable 1): old 6→5 (still 6 pods), new stays
/// at 2 until the old ReplicaSet reports 5, then 2→3: never 9 pods.
pub(super) fn new_rs_new_replicas(pass: &Pass<'_>, new: usize) -> i32 {
    let desired = pass.desired();
    let current_new = pass.replicas(new);
    if surge::is_recreate(&pass.d) {
        return desired;
    }
    let max_total = desired + surge::max_surge(&pass.d);
    let current = pass.sum(&pass.all(), committed_replicas);
    if current >= max_total {
        return current_new;
    }
    current_new + (max_total - current).min(desired - current_new)
}

/// Upstream `reconcileNewReplicaSet`; true when it scaled.
fn reconcile_new(pass: &mut Pass<'_>, new: usize) -> bool {
    let desired = pass.desired();
    let current = pass.replicas(new);
    if current == desired {
        return false;
    }
    if current > desired {
        return pass.scale_and_record(new, desired);
    }
    let next = new_rs_new_replicas(pass, new);
    pass.scale_and_record(new, next)
}

/// Upstream `reconcileOldReplicaSets`; true when it scaled something down.
fn reconcile_old(pass: &mut Pass<'_>, new: usize) -> bool {
    let mut old = pass.active(&pass.old());
    if pass.sum(&old, spec_replicas) == 0 {
        return false;
    }
    let all_pods = pass.sum(&pass.all(), spec_replicas);
    let min_available = pass.desired() - surge::max_unavailable(&pass.d);
    let new_unavailable = pass.replicas(new) - available(&pass.rss[new]);
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return false;
    }
    pass.sort(&mut old, by_creation);
    let cleaned = cleanup_unhealthy(pass, &old, max_scaled_down);
    let scaled = scale_down_old(pass, &old, new);
    cleaned + scaled > 0
}

/// Upstream `cleanupUnhealthyReplicas`: removes replicas that are not available from old
/// ReplicaSets (oldest first), up to `max`, since they only block the rollout.
fn cleanup_unhealthy(pass: &mut Pass<'_>, old: &[usize], max: i32) -> i32 {
    let mut total = 0;
    for &i in old {
        if total >= max {
            break;
        }
        let replicas = pass.replicas(i);
        let unhealthy = replicas - available(&pass.rss[i]);
        if replicas == 0 || unhealthy <= 0 {
            continue;
        }
        let count = (max - total).min(unhealthy);
        pass.scale_and_record(i, replicas - count);
        total += count;
    }
    total
}

/// Upstream `scaleDownOldReplicaSetsForRollingUpdate`: takes `available − minAvailable`
/// replicas off the old ReplicaSets, oldest first.
fn scale_down_old(pass: &mut Pass<'_>, old: &[usize], new: usize) -> i32 {
    let min_available = pass.desired() - surge::max_unavailable(&pass.d);
    let mut counted = old.to_vec();
    counted.push(new);
    let available_pods = pass.sum(&counted, available);
    if available_pods <= min_available {
        return 0;
    }
    let to_remove = available_pods - min_available;
    let mut total = 0;
    for &i in old {
        if total >= to_remove {
            break;
        }
        let replicas = pass.replicas(i);
        if replicas == 0 {
            continue;
        }
        let count = replicas.min(to_remove - total);
        pass.scale_and_record(i, replicas - count);
        total += count;
    }
    total
}

/// Upstream `rolloutRolling`: one step of the rollout.
pub(super) fn rollout(pass: &mut Pass<'_>) -> Result<(), Halt> {
    let new = sync::ensure_new_replica_set(pass)?;
    if reconcile_new(pass, new) {
        return Ok(());
    }
    if reconcile_old(pass, new) {
        return Ok(());
    }
    let status = pass.d.status.clone().unwrap_or_default();
    if progress::deployment_complete(&pass.d, &status) {
        history::cleanup(pass);
    }
    Ok(())
}

#[cfg(test)]
#[path = "rolling_tests.rs"]
mod tests;
