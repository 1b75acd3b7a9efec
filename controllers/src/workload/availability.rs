//! Whether a pod counts as available (upstream's `podutil.IsPodAvailable`), as every workload
//! controller's status counts it, and when the next one will be. Pure.

use crate::views::Pod;
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// Upstream's `IsPodAvailable`: ready, and either minReadySeconds is 0 or the Ready condition
/// turned True strictly more than minReadySeconds ago.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !pod.ready {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    pod.ready_since
        .is_some_and(|t| t + SignedDuration::from_secs(i64::from(min_ready_seconds)) < now)
}

/// How long until the first ready pod that is not yet available becomes available, so a pass
/// then notices it (upstream requeues after minReadySeconds; this is the exact remainder).
/// A pod whose Ready condition has no transition time never becomes available, as upstream.
pub fn next_check<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<Duration> {
    if min_ready_seconds <= 0 {
        return None;
    }
    let min_ready = SignedDuration::from_secs(i64::from(min_ready_seconds));
    pods.into_iter()
        .filter(|p| p.ready && !is_available(p, min_ready_seconds, now))
        .filter_map(|p| p.ready_since)
        .map(|t| (t + min_ready).duration_since(now))
        .min()
        // Available only strictly after the instant: look a moment later.
        .map(|d| Duration::try_from(d).unwrap_or_default() + Duration::from_millis(50))
}
