//! Taint-based eviction (upstream's `taint-eviction-controller`): a pod on a node with a
//! `NoExecute` taint it does not tolerate is deleted at once; one tolerating it for
//! `tolerationSeconds` is deleted when they run out ([`plan`]). Before the deletion the pod
//! gets a `TaintManagerEviction` event ("Marking for deletion Pod ns/name") and the
//! `DisruptionTarget` condition (`DeletionByTaintManager`); a scheduled eviction the pod no
//! longer faces (the taint went, the pod now tolerates it) gets a "Cancelling deletion" event.
//!
//! Keyed by pod. A node whose `NoExecute` taints change concerns its pods; a pod concerns
//! itself when it is bound or its tolerations change. A taint's start is its `timeAdded`, else
//! when this controller first saw it (soft state, as upstream's timed queue).

pub mod plan;

#[cfg(test)]
mod tests;

use berth_registry::events;
use berth_registry::events::{EventType, Recorder};
use berth_registry::eviction::Disruption;
use berth_registry::{DeleteOptions, DeletePreconditions, Registry, RegistryError};
use berth_runtime::informer::{BY_NODE, Delta, DeltaType, Informer, Object, ObjectKey, View};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{NODES, PODS};
use berth_shared::scheduling::{Taint, TaintEffect, Toleration};
use jiff::Timestamp;
use plan::{NoExecute, Tolerating, Verdict};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "taint-eviction-controller";
const WORKERS: usize = 4;

/// A node's `NoExecute` taints and their `timeAdded`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeTaints(Vec<(Taint, Option<Timestamp>)>);

impl View for NodeTaints {
    fn derive(obj: &Object) -> Self {
        let taints: Vec<core::Taint> = obj
            .value()
            .ok()
            .and_then(|v| v.pointer("/spec/taints").cloned())
            .and_then(|t| serde_json::from_value(t).ok())
            .unwrap_or_default();
        NodeTaints(
            taints
                .iter()
                .filter_map(|t| {
                    let parsed = Taint::from_k8s(t)?;
                    (parsed.effect == TaintEffect::NoExecute)
                        .then(|| (parsed, t.time_added.as_ref().map(|a| a.0)))
                })
                .collect(),
        )
    }
}

/// What a pod's eviction depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodFacts {
    node: String,
    tolerations: Vec<Tolerating>,
    /// The PodScheduled condition's transition time.
    bound: Option<Timestamp>,
    deleting: bool,
}

/// The fields of a stored pod the facts are read from; the rest is skipped, not decoded.
#[derive(Default, Deserialize)]
#[serde(default)]
struct PodDoc {
    spec: SpecDoc,
    status: StatusDoc,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct SpecDoc {
    tolerations: Option<Vec<core::Toleration>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct StatusDoc {
    conditions: Option<Vec<core::PodCondition>>,
}

impl View for PodFacts {
    fn derive(obj: &Object) -> Self {
        let doc: PodDoc = obj.decode().unwrap_or_default();
        let bound = doc
            .status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "PodScheduled" && c.status == "True")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0);
        PodFacts {
            node: obj.field("spec.nodeName").unwrap_or_default().to_string(),
            tolerations: doc
                .spec
                .tolerations
                .iter()
                .flatten()
                .map(|t| Tolerating {
                    toleration: Toleration::from_k8s(t),
                    seconds: t.toleration_seconds,
                })
                .collect(),
            bound,
            deleting: obj.is_deleting(),
        }
    }
}

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    pods: Arc<Informer>,
    nodes: Arc<Informer>,
    recorder: Recorder,
    /// When taints without `timeAdded` were first seen, by node.
    first_seen: Mutex<HashMap<String, Vec<(Taint, Timestamp)>>>,
    /// Pods whose eviction is scheduled (for the cancel event).
    scheduled: Mutex<HashSet<ObjectKey>>,
}

impl Controller {
    fn record(&self, obj: &Value, reason: &str, message: &str) {
        events::record(&self.recorder, obj, EventType::Normal, reason, message);
    }

    /// The node's `NoExecute` taints with their start times.
    fn observe_taints(&self, node: &str, taints: &NodeTaints, now: Timestamp) -> Vec<NoExecute> {
        let mut seen = self.first_seen.lock().unwrap_or_else(|e| e.into_inner());
        let untimed: Vec<&Taint> = taints
            .0
            .iter()
            .filter(|(_, at)| at.is_none())
            .map(|(t, _)| t)
            .collect();
        if untimed.is_empty() {
            seen.remove(node);
        } else {
            let list = seen.entry(node.to_string()).or_default();
            list.retain(|(t, _)| untimed.contains(&t));
            for t in untimed {
                if !list.iter().any(|(x, _)| x == t) {
                    list.push((t.clone(), now));
                }
            }
        }
        taints
            .0
            .iter()
            .map(|(t, at)| NoExecute {
                taint: t.clone(),
                since: at.unwrap_or_else(|| {
                    seen.get(node)
                        .and_then(|l| l.iter().find(|(x, _)| x == t))
                        .map_or(now, |(_, s)| *s)
                }),
            })
            .collect()
    }

    fn scheduled(&self) -> std::sync::MutexGuard<'_, HashSet<ObjectKey>> {
        self.scheduled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Upstream `addConditionAndDeletePod`, after the event.
    fn apply_eviction(
        &self,
        key: &ObjectKey,
        obj: &Object,
        name: &str,
    ) -> Result<(), RegistryError> {
        let raw = obj.value().map_err(RegistryError::from)?;
        tracing::info!(pod = %key, "deleting pod for a NoExecute taint");
        self.record(
            &raw,
            "TaintManagerEviction",
            &format!("Marking for deletion Pod {name}"),
        );
        let opts = DeleteOptions {
            preconditions: Some(DeletePreconditions {
                uid: Some(obj.uid().to_string()),
                resource_version: None,
            }),
            ..DeleteOptions::default()
        };
        let why = Disruption {
            reason: "DeletionByTaintManager",
            message: "Taint manager: deleting due to NoExecute taint",
        };
        match self
            .registry
            .disrupt(key.namespace().unwrap_or_default(), key.name(), why, &opts)
        {
            // A pod of the same name but another uid is a conflict: the next pass judges it.
            Ok(()) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        let Some(obj) = self.pods.get_key(key) else {
            self.scheduled().remove(key);
            return Ok(Outcome::Done);
        };
        let pod = obj.view::<PodFacts>();
        let node = (!pod.node.is_empty())
            .then(|| self.nodes.get(None, &pod.node))
            .flatten();
        let (Some(node), false) = (node, pod.deleting) else {
            self.scheduled().remove(key);
            return Ok(Outcome::Done);
        };
        let now = self.clock.now();
        let taints = self.observe_taints(&pod.node, &node.view::<NodeTaints>(), now);
        let verdict = plan::verdict(&taints, &pod.tolerations, pod.bound, now);
        let name = format!("{}/{}", key.namespace().unwrap_or_default(), key.name());
        match verdict {
            Verdict::Keep => {
                if self.scheduled().remove(key) {
                    let raw = obj.value().map_err(RegistryError::from)?;
                    let msg = format!("Cancelling deletion of Pod {name}");
                    self.record(&raw, "TaintManagerEviction", &msg);
                }
                Ok(Outcome::Done)
            }
            Verdict::EvictAt(at) => {
                self.scheduled().insert(key.clone());
                tracing::debug!(pod = %key, node = %pod.node, %at, "eviction scheduled");
                Ok(verdict
                    .wait(now)
                    .map_or(Outcome::Done, Outcome::RequeueAfter))
            }
            Verdict::EvictNow => {
                self.scheduled().remove(key);
                self.apply_eviction(key, &obj, &name)?;
                Ok(Outcome::Done)
            }
        }
    }
}

/// A pod change: the pod, when it is bound or its tolerations change while on a node with
/// `NoExecute` taints (or a scheduled eviction may need cancelling).
fn pod_change(nodes: &Informer, d: &Delta) -> Vec<ObjectKey> {
    let key = d.object.key().clone();
    if d.kind == DeltaType::Deleted {
        return vec![key];
    }
    let new = d.object.view::<PodFacts>();
    if new.node.is_empty() {
        return Vec::new();
    }
    if let Some(old) = d.old.as_ref().map(|o| o.view::<PodFacts>())
        && old.node == new.node
        && old.tolerations == new.tolerations
    {
        return Vec::new();
    }
    match nodes.get(None, &new.node) {
        Some(n) if !n.view::<NodeTaints>().0.is_empty() => vec![key],
        _ => Vec::new(),
    }
}

/// A node change: its pods, when its `NoExecute` taints change.
fn node_change(pods: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if d.kind == DeltaType::Deleted {
        return Vec::new();
    }
    let new = d.object.view::<NodeTaints>();
    let old = d.old.as_ref().map(|o| o.view::<NodeTaints>());
    let unchanged = match &old {
        Some(o) => **o == *new,
        None => new.0.is_empty(),
    };
    if unchanged {
        return Vec::new();
    }
    pods.by_index(BY_NODE, d.object.name())
        .iter()
        .map(|p| p.key().clone())
        .collect()
}

/// Runs the taint eviction controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let (pods, nodes) = (ctx.informer(PODS), ctx.informer(NODES));
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        pods: pods.clone(),
        nodes: nodes.clone(),
        recorder: ctx.recorder(COMPONENT),
        first_seen: Mutex::new(HashMap::new()),
        scheduled: Mutex::new(HashSet::new()),
    });
    runtime::Controller::keyed("taint-eviction", &ctx)
        .watches(PODS, move |d| pod_change(&nodes, d))
        .watches(NODES, move |d| node_change(&pods, d))
        .workers(WORKERS)
        .run(controller, shutdown)
        .await;
}
