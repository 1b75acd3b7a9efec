//! Scaling without rolling out (upstream `sync` and `scale`, DEP-27, DEP-28): when
//! `spec.replicas` changes or the Deployment is paused. One active ReplicaSet simply takes the
//! new size; a saturated new ReplicaSet lets the old ones go to 0; otherwise, for rolling
//! updates, the replicas to add or remove (`spec.replicas + maxSurge − Σ spec.replicas`) are
//! spread over the active ReplicaSets in proportion to their size, biggest first, the leftover
//! to the biggest, and ReplicaSets at 0 stay at 0.
//!
//! Worked example (T-DEP-09, seed 000:625-694): 10 replicas, maxSurge 3, maxUnavailable 2, a
//! stuck rollout with the new ReplicaSet at 5 and the old one at 8 (both annotated
//! `max-replicas: 13`), scaled to 15: 18 − 13 = 5 to add; the old one gets
//! round(8 × 18 / 13) − 8 = 11 − 8 = 3, the new one round(5 × 18 / 13) − 5 = 7 − 5 = 2, no
//! leftover: old 11, new 7.
//!
//! Planner: pure, no I/O.

use super::history;
use super::plan::{Pass, by_creation};
use super::revision::{desired_replicas, max_replicas};
use super::status::{available, spec_replicas};
use super::surge;
use super::sync;
use berth_shared::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use std::cmp::Ordering;

/// Upstream `getReplicaSetFraction`: how many replicas `rs` should gain (or lose) for the
/// Deployment's new size, from the size the ReplicaSet was last scaled for.
pub(super) fn fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let replicas = spec_replicas(rs);
    let desired = surge::desired(d);
    if desired == 0 {
        return -replicas;
    }
    let max_now = desired + surge::max_surge(d);
    let before = match max_replicas(rs).filter(|m| *m != 0) {
        Some(m) => m,
        None => {
            let status = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            if status == 0 {
                return 0;
            }
            status
        }
    };
    let size = (i64::from(replicas) * i64::from(max_now)) as f64 / f64::from(before);
    // Go's math.Round: halves away from zero, as f64::round.
    let size = size.round().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32;
    size - replicas
}

/// Upstream `GetProportion`: the fraction, bounded by what is still left to add or remove.
pub(super) fn proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if spec_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let f = fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        f.min(allowed)
    } else {
        f.max(allowed)
    }
}

/// Upstream `FindActiveOrLatest`: the only active ReplicaSet, or the newest when none is.
fn active_or_latest(pass: &Pass<'_>) -> Option<usize> {
    let mut old = pass.old();
    if pass.new.is_none() && old.is_empty() {
        return None;
    }
    pass.sort(&mut old, |a, b| by_creation(b, a));
    let mut all = old.clone();
    all.extend(pass.new);
    match pass.active(&all).as_slice() {
        [] => pass.new.or(old.first().copied()),
        [only] => Some(*only),
        _ => None,
    }
}

/// Upstream `IsSaturated`: the new ReplicaSet is sized, annotated and available for
/// `spec.replicas`.
fn saturated(pass: &Pass<'_>) -> bool {
    let Some(i) = pass.new else { return false };
    let rs = &pass.rss[i];
    let desired = pass.desired();
    desired_replicas(rs) == Some(desired)
        && spec_replicas(rs) == desired
        && available(rs) == desired
}

/// Bigger first; among equals, newer first when growing and older first when shrinking.
fn by_size(grow: bool) -> impl Fn(&ReplicaSet, &ReplicaSet) -> Ordering {
    move |a, b| {
        spec_replicas(b).cmp(&spec_replicas(a)).then_with(|| {
            if grow {
                by_creation(b, a)
            } else {
                by_creation(a, b)
            }
        })
    }
}

/// Upstream `scale`.
pub(super) fn scale(pass: &mut Pass<'_>) {
    let desired = pass.desired();
    if let Some(i) = active_or_latest(pass) {
        if pass.replicas(i) != desired {
            pass.scale_and_record(i, desired);
        }
        return;
    }
    if saturated(pass) {
        for i in pass.active(&pass.old()) {
            pass.scale_and_record(i, 0);
        }
        return;
    }
    if surge::is_recreate(&pass.d) {
        return;
    }
    let mut all = pass.active(&pass.all());
    let allowed = if desired > 0 { pass.max_total() } else { 0 };
    let to_add = allowed - pass.sum(&all, spec_replicas);
    let operation = match to_add.cmp(&0) {
        Ordering::Greater => "up",
        Ordering::Less => "down",
        Ordering::Equal => "",
    };
    if to_add != 0 {
        pass.sort(&mut all, by_size(to_add > 0));
    }
    let mut added = 0;
    let mut sizes = Vec::with_capacity(all.len());
    for &i in &all {
        let p = proportion(&pass.rss[i], &pass.d, to_add, added);
        sizes.push(pass.replicas(i) + p);
        added += p;
    }
    if let Some(first) = sizes.first_mut()
        && to_add != 0
    {
        *first = (*first + to_add - added).max(0);
    }
    for (i, size) in all.into_iter().zip(sizes) {
        pass.scale(i, size, operation);
    }
}

/// Upstream `sync`: scaling (and, while paused, history clean-up) without a rollout.
pub(super) fn sync(pass: &mut Pass<'_>) -> Result<(), super::plan::Halt> {
    sync::sync_new_replica_set(pass);
    scale(pass);
    let paused = pass.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    if paused {
        history::cleanup(pass);
    }
    Ok(())
}

#[cfg(test)]
#[path = "proportional_tests.rs"]
mod tests;
