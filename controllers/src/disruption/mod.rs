//! The disruption controller (upstream's `disruption-controller`): keeps every
//! PodDisruptionBudget's status (`expectedPods`, `desiredHealthy`, `currentHealthy`,
//! `disruptionsAllowed`, `disruptedPods`, `observedGeneration`, the `DisruptionAllowed`
//! condition) in step with its pods and their controllers' scale ([`plan`]). The eviction
//! subresource reads that status and records the evictions it grants in `disruptedPods`.
//!
//! Keyed by budget. A pod concerns the budgets of its namespace that select it (before and
//! after the change); a workload whose `spec.replicas` changes concerns the budgets of its
//! namespace; a granted eviction's expiry requeues the budget.

pub mod plan;

use super::workload;
use crate::views::{ControllerRef, Pod};
use berth_registry::events::Recorder;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{Delta, DeltaType, Informer, Object, ObjectKey, View};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::k8s_openapi::api::policy::v1 as policy;
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{
    DEPLOYMENTS, POD_DISRUPTION_BUDGETS, PODS, REPLICA_SETS, REPLICATION_CONTROLLERS, STATEFUL_SETS,
};
use berth_shared::selector::LabelSelector;
use plan::Scales;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "controllermanager";
const WORKERS: usize = 2;
const RESYNC: Duration = Duration::from_secs(300);

/// A budget's selector, parsed once per version: a nil selector selects nothing, an empty
/// one every pod of the namespace (policy/v1), an invalid one nothing.
pub struct BudgetSelector(pub LabelSelector);

impl View for BudgetSelector {
    fn derive(obj: &Object) -> Self {
        let sel = obj
            .value()
            .ok()
            .and_then(|v| v.pointer("/spec/selector").cloned())
            .filter(|s| !s.is_null())
            .and_then(|s| serde_json::from_value(s).ok())
            .and_then(|s| LabelSelector::from_k8s(&s).ok());
        BudgetSelector(sel.unwrap_or_else(LabelSelector::nothing))
    }
}

/// A workload's `spec.replicas` (1 when unset, as defaulted) and controller reference.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Replicas {
    replicas: i32,
    controller: Option<ControllerRef>,
}

impl View for Replicas {
    fn derive(obj: &Object) -> Self {
        let v = obj.value().unwrap_or(Value::Null);
        Replicas {
            replicas: v
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(1),
            controller: crate::views::controller_of(&v),
        }
    }
}

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    budgets: Arc<Informer>,
    pods: Arc<Informer>,
    deployments: Arc<Informer>,
    replica_sets: Arc<Informer>,
    controllers: Arc<Informer>,
    stateful_sets: Arc<Informer>,
    recorder: Recorder,
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

impl Controller {
    fn record(&self, obj: &Value, warning: bool, reason: &str, message: &str) {
        let t = workload::event_type(warning);
        workload::record(&self.recorder, obj, t, reason, message);
    }

    /// `informer`'s object `name` in `ns` if it has `uid`.
    fn owner(&self, informer: &Informer, ns: &str, name: &str, uid: &str) -> Option<Arc<Object>> {
        informer.get(Some(ns), name).filter(|o| o.uid() == uid)
    }

    /// Upstream's finders (`getPodReplicaSet`, `getPodDeployment`,
    /// `getPodReplicationController`, `getPodStatefulSet`): whose scale a pod with controller
    /// `c` counts toward.
    fn observe_scale(&self, c: &ControllerRef, ns: &str) -> Option<(String, i32)> {
        let apps = matches!(group_of(&c.api_version), "apps" | "extensions");
        let scale = |o: &Object| (o.uid().to_string(), o.view::<Replicas>().replicas);
        match c.kind.as_str() {
            "ReplicaSet" if apps => {
                let rs = self.owner(&self.replica_sets, ns, &c.name, &c.uid)?;
                match &rs.view::<Replicas>().controller {
                    Some(d) if d.kind == "Deployment" => {
                        if !matches!(group_of(&d.api_version), "apps" | "extensions") {
                            return None;
                        }
                        self.owner(&self.deployments, ns, &d.name, &d.uid)
                            .map(|o| scale(&o))
                    }
                    _ => Some(scale(&rs)),
                }
            }
            "Deployment" if apps => self
                .owner(&self.deployments, ns, &c.name, &c.uid)
                .map(|o| scale(&o)),
            "ReplicationController" if group_of(&c.api_version).is_empty() => self
                .owner(&self.controllers, ns, &c.name, &c.uid)
                .map(|o| scale(&o)),
            "StatefulSet" if apps => self
                .owner(&self.stateful_sets, ns, &c.name, &c.uid)
                .map(|o| scale(&o)),
            _ => None,
        }
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        self.budgets.reconcile_cached(key, |obj| {
            if obj.is_deleting() {
                return Ok(Outcome::Done);
            }
            let Some(pdb) = obj.decoded::<policy::PodDisruptionBudget>() else {
                return Ok(Outcome::Done);
            };
            let ns = key.namespace().unwrap_or_default();
            let selector = obj.view::<BudgetSelector>();
            let selected: Vec<Arc<Object>> = self
                .pods
                .in_namespace(ns)
                .into_iter()
                .filter(|p| selector.0.matches(p.labels()))
                .collect();
            let views: Vec<Arc<Pod>> = selected.iter().map(|p| p.view::<Pod>()).collect();
            let pods: Vec<&Pod> = views.iter().map(|p| p.as_ref()).collect();
            let mut scales = Scales::new();
            for c in pods.iter().filter_map(|p| p.controller.as_ref()) {
                if !scales.contains_key(&c.uid) {
                    scales.insert(c.uid.clone(), self.observe_scale(c, ns));
                }
            }
            let plan = plan::budget(&pdb, &pods, &scales, self.clock.now());
            let mut raw = obj.value().map_err(RegistryError::from)?;
            for e in &plan.events {
                match &e.pod {
                    None => self.record(&raw, e.warning, e.reason, &e.message),
                    Some(name) => {
                        if let Some(p) = selected.iter().find(|p| p.name() == name)
                            && let Ok(v) = p.value()
                        {
                            self.record(&v, e.warning, e.reason, &e.message);
                        }
                    }
                }
            }
            if let Some(status) = plan.status {
                raw["status"] = serde_json::to_value(status).map_err(RegistryError::from)?;
                // Conditional on the version read: an eviction's grant written meanwhile wins.
                self.registry.update(
                    POD_DISRUPTION_BUDGETS,
                    Some(ns),
                    key.name(),
                    raw,
                    Part::Status,
                    &WriteOptions::default(),
                )?;
            }
            Ok(plan
                .recheck_after
                .map_or(Outcome::Done, Outcome::RequeueAfter))
        })
    }
}

/// A pod change: the budgets of its namespace selecting it, before or after.
fn pod_change(budgets: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if budgets.is_empty() {
        return Vec::new();
    }
    let ns = d.object.namespace().unwrap_or_default();
    budgets
        .in_namespace(ns)
        .into_iter()
        .filter(|b| {
            let sel = b.view::<BudgetSelector>();
            sel.0.matches(d.object.labels())
                || d.old.as_ref().is_some_and(|o| sel.0.matches(o.labels()))
        })
        .map(|b| b.key().clone())
        .collect()
}

/// A workload change: the budgets of its namespace, when its scale may have changed.
fn workload_change(budgets: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if budgets.is_empty() {
        return Vec::new();
    }
    if d.kind == DeltaType::Modified
        && let Some(old) = &d.old
        && *old.view::<Replicas>() == *d.object.view::<Replicas>()
    {
        return Vec::new();
    }
    budgets
        .in_namespace(d.object.namespace().unwrap_or_default())
        .into_iter()
        .map(|b| b.key().clone())
        .collect()
}

/// Runs the disruption controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let budgets = ctx.informer(POD_DISRUPTION_BUDGETS);
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        budgets: budgets.clone(),
        pods: ctx.informer(PODS),
        deployments: ctx.informer(DEPLOYMENTS),
        replica_sets: ctx.informer(REPLICA_SETS),
        controllers: ctx.informer(REPLICATION_CONTROLLERS),
        stateful_sets: ctx.informer(STATEFUL_SETS),
        recorder: ctx.recorder(COMPONENT),
    });
    let mut wiring = runtime::Controller::new("disruption", &ctx, POD_DISRUPTION_BUDGETS);
    let for_pods = budgets.clone();
    wiring = wiring.watches(PODS, move |d| pod_change(&for_pods, d));
    for rt in [
        DEPLOYMENTS,
        REPLICA_SETS,
        REPLICATION_CONTROLLERS,
        STATEFUL_SETS,
    ] {
        let b = budgets.clone();
        wiring = wiring.watches(rt, move |d| workload_change(&b, d));
    }
    wiring
        .resync(RESYNC)
        .workers(WORKERS)
        .run(controller, shutdown)
        .await;
}
