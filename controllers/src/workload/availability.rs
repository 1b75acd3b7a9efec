//! Whether a pod counts as available (upstream's `podutil.IsPodAvailable`), as every workload
//! controller's status counts it. Pure.

use crate::views::Pod;
use jiff::{SignedDuration, Timestamp};

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
