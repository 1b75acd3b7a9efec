//! The workload kit: what every workload controller (ReplicaSet/ReplicationController,
//! Deployment, DaemonSet, StatefulSet, Job, CronJob) does the same way, written once (upstream's
//! `controller_utils.go` and `controller_ref_manager.go`): the controller reference
//! ([`controller_ref`]), claiming with adoption and release ([`claim`]), pod creation and
//! deletion with their events ([`pod_control`]), a new pod from its owner's template
//! ([`new_pod`]), the owner's status write and its times ([`status`]), the
//! uid-guarded edit and deletion of owned objects ([`write`]), the owner parsed once per
//! version ([`parsed`]) and the error of a pass ([`error`]). Orphan routing is the runtime
//! builder's `.adopts(kind, selector)`.

pub mod availability;
pub mod claim;
pub mod controller_ref;
pub mod error;
pub mod new_pod;
#[cfg(test)]
pub(crate) mod object_meta;
pub mod parsed;
pub mod pod_control;
pub mod scaled;
pub mod status;
pub mod write;

pub use claim::{Claim, Owner, Rules};
pub use controller_ref::ControllerRef;
pub use error::SyncError;
pub use parsed::{Parsed, Stored, Workload};
pub use pod_control::{Created, PodControl};

use serde_json::Value;
use std::time::Duration;

/// Every owner gets a pass this often, whatever the events.
pub const RESYNC: Duration = Duration::from_secs(300);
/// Passes of different owners of one kind that may run at once.
pub const WORKERS: usize = 4;
/// An owner that reads every pod of its own (ReplicaSet, DaemonSet) runs again no sooner than
/// this many times its last pass's duration, or thousands of pods reporting their status would
/// reconcile it back to back (see `Queue::set_pace`).
pub const PACE: u32 = 8;

/// Recording events (the registry's, which the cluster controllers share).
pub use berth_registry::events::{event_type, record};

/// The `resourceVersion` of a written object (empty when absent).
pub fn version_of(v: &Value) -> String {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
