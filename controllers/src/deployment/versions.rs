//! Read-your-writes within one pass: the `resourceVersion` each of the pass's writes produced,
//! on which its later writes of the same object are conditional (the plan's writes build on
//! each other; a concurrent change turns into a conflict and a fresh pass, never a lost write).
//!
//! Planner: pure, no I/O.

use crate::workload::version_of;
use serde_json::{Value, json};
use std::collections::HashMap;

/// The versions a pass's writes have produced so far.
#[derive(Debug)]
pub struct Versions {
    /// The Deployment's: the one read, then each write's.
    pub deployment: String,
    replica_sets: HashMap<String, String>,
}

impl Versions {
    /// Before any write: the Deployment as read.
    pub fn of(raw: &Value) -> Versions {
        Versions {
            deployment: version_of(raw),
            replica_sets: HashMap::new(),
        }
    }

    /// Notes a write of the ReplicaSet `name`.
    pub fn wrote_replica_set(&mut self, name: String, written: &Value) {
        self.replica_sets.insert(name, version_of(written));
    }

    /// Makes the replacement `body` of the ReplicaSet `name` conditional on this pass's own
    /// write of it, if any (else on the version it was read at, which it carries).
    pub fn condition_replica_set(&self, name: &str, body: &mut Value) {
        if let Some(v) = self.replica_sets.get(name) {
            body["metadata"]["resourceVersion"] = json!(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_is_conditional_on_the_pass_own_write_else_on_what_it_read() {
        let mut v = Versions::of(&json!({"metadata": {"resourceVersion": "7"}}));
        assert_eq!(v.deployment, "7");
        v.wrote_replica_set("a".into(), &json!({"metadata": {"resourceVersion": "9"}}));
        let cases = [("a", "9"), ("b", "3")];
        for (name, want) in cases {
            let mut body = json!({"metadata": {"name": name, "resourceVersion": "3"}});
            v.condition_replica_set(name, &mut body);
            assert_eq!(body["metadata"]["resourceVersion"], want, "{name}");
        }
    }
}
