//! What the Deployment controller reads from the informers, each derived once per stored
//! version and shared: the Deployment with its selector parsed (also read by the runtime's
//! orphan routing, `.adopts` with the kit's `Parsed::selector`), the ReplicaSets decoded, and
//! of each pod only its owner and phase; and what one pass has read of them ([`Observed`]).
//!
//! Planner: pure, no I/O.

use super::plan::{self, Input, PodInfo};
use crate::workload::Stored;
use crate::workload::parsed::{ViewError, owner_view};
use berth_runtime::informer::Object;
use berth_shared::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use berth_shared::selector::LabelSelector;
use serde_json::Value;
use std::sync::Arc;

/// A Deployment as a pass reads it.
#[derive(Debug, Clone)]
pub struct DeploymentView {
    pub deployment: Deployment,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `spec.selector`, parsed (one without a spec selects nothing).
    pub selector: LabelSelector,
    pub deleting: bool,
}

impl DeploymentView {
    pub fn from_value(v: &Value) -> Result<DeploymentView, ViewError> {
        let deployment: Deployment = serde_json::from_value(v.clone())?;
        let selector = plan::selector(&deployment)?;
        let meta = &deployment.metadata;
        let text = |f: &Option<String>| f.clone().unwrap_or_default();
        Ok(DeploymentView {
            namespace: text(&meta.namespace),
            name: text(&meta.name),
            uid: text(&meta.uid),
            selector,
            deleting: meta.deletion_timestamp.is_some(),
            deployment,
        })
    }
}

owner_view!(DeploymentView);

/// What a pass reads: the Deployment as stored and parsed, its namespace's ReplicaSets and,
/// when the plan needs them, the pods its selector matches.
pub struct Observed {
    pub raw: Value,
    pub owner: Arc<DeploymentView>,
    pub replica_sets: Vec<ReplicaSet>,
    pub pods: Vec<PodInfo>,
}

impl Observed {
    /// The planner's input.
    pub fn input(&self) -> Input<'_> {
        Input {
            deployment: &self.owner.deployment,
            selector: &self.owner.selector,
            replica_sets: &self.replica_sets,
            pods: &self.pods,
        }
    }
}

/// A ReplicaSet, decoded once per version (as the kit's `Parsed<ReplicaSet>`).
impl Stored for ReplicaSet {
    type Error = serde_json::Error;
    fn from_value(v: &Value) -> Result<ReplicaSet, serde_json::Error> {
        serde_json::from_value(v.clone())
    }
}

impl PodInfo {
    /// What a pass reads of an informer's pod: its owner and phase, both decoded already.
    pub fn of(pod: &Object) -> PodInfo {
        PodInfo {
            controller_uid: pod.controller().map(|c| c.uid.clone()),
            phase: pod
                .field("status.phase")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_deployment_is_read_with_its_selector_and_identity() {
        let v = json!({
            "metadata": {"name": "web", "namespace": "prod", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}}}
        });
        let d = DeploymentView::from_value(&v).unwrap();
        assert_eq!((d.namespace.as_str(), d.name.as_str()), ("prod", "web"));
        assert_eq!((d.uid.as_str(), d.deleting), ("u1", false));
        let labels = [("app".to_string(), "web".to_string())].into();
        assert!(d.selector.matches(&labels));
    }

    #[test]
    fn a_deployment_without_a_spec_selects_nothing_and_a_bad_selector_is_an_error() {
        let bare = DeploymentView::from_value(&json!({"metadata": {"name": "x"}})).unwrap();
        assert!(!bare.selector.matches(&Default::default()));
        let bad = json!({"metadata": {"name": "x"}, "spec": {"selector": {"matchExpressions":
            [{"key": "app", "operator": "Bogus"}]}, "template": {}}});
        assert!(DeploymentView::from_value(&bad).is_err());
    }
}
