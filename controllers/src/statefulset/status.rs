//! A StatefulSet's status as the controller writes it (upstream `updateStatefulSetStatus`):
//! written only when a count, a revision or the observed generation changed.
//!
//! Planner: pure, no I/O.

use super::view::{StatefulSet, Status};
use crate::workload::status::put_counts;
use serde_json::{Value, json};

/// Whether `new` differs from what is stored (upstream `inconsistentStatus`).
pub fn needs_write(set: &StatefulSet, new: &Status) -> bool {
    set.status != *new
}

/// Writes `new` into a stored StatefulSet's `status`; `collisionCount` and `conditions` are
/// kept. Optional counts are omitted when 0, as the API's `omitempty`.
pub fn apply(obj: &mut Value, new: &Status) {
    let counts = [
        ("observedGeneration", new.observed_generation, true),
        ("replicas", new.replicas.into(), false),
        ("readyReplicas", new.ready_replicas.into(), true),
        ("currentReplicas", new.current_replicas.into(), true),
        ("updatedReplicas", new.updated_replicas.into(), true),
        ("availableReplicas", new.available_replicas.into(), false),
    ];
    let Some(status) = put_counts(obj, &counts) else {
        return;
    };
    for (key, v) in [
        ("currentRevision", &new.current_revision),
        ("updateRevision", &new.update_revision),
    ] {
        if v.is_empty() {
            status.remove(key);
        } else {
            status.insert(key.into(), json!(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_keeps_the_collision_count_and_omits_optional_zeros() {
        let mut obj = json!({"status": {"collisionCount": 1, "readyReplicas": 2}});
        apply(
            &mut obj,
            &Status {
                observed_generation: 3,
                replicas: 2,
                current_replicas: 2,
                current_revision: "web-a".into(),
                update_revision: "web-a".into(),
                ..Status::default()
            },
        );
        assert_eq!(
            obj["status"],
            json!({"collisionCount": 1, "observedGeneration": 3, "replicas": 2,
                "currentReplicas": 2, "availableReplicas": 0,
                "currentRevision": "web-a", "updateRevision": "web-a"})
        );
    }
}
