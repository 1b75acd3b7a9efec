//! The Deployment controller: watches Deployments, ReplicaSets and pods, and reconciles each
//! Deployment (`namespace/name`) with [`plan::plan`]: it creates, scales, adopts, releases and
//! deletes ReplicaSets (the ReplicaSet controller makes their pods) and writes the
//! Deployment's revision annotation, status and `ScalingReplicaSet` events.

mod apply;
mod claim;
mod history;
pub mod plan;
mod progress;
mod proportional;
mod recreate;
mod revision;
mod rolling;
mod status;
mod surge;
mod sync;
mod template;
mod watch;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use crate::api::error::ApiError;
use crate::events::Recorder;
use crate::registry::{Registry, prefix};
use crate::store::StoreEvent;
use apply::{Applied, version_of};
use berth_shared::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use berth_shared::reconcile::{self, Outcome, Queue};
use berth_shared::resource::{self, ResourceType};
use berth_shared::selector::LabelSelector;
use plan::{Input, PodInfo};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "deployment-controller";

/// Errors of one pass; a pass that fails is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("decoding {key}: {source}")]
    Decode {
        key: String,
        source: serde_json::Error,
    },
    #[error("encoding a {kind}: {source}")]
    Encode {
        kind: &'static str,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
}

impl DeploymentError {
    pub fn is_transient(&self) -> bool {
        match self {
            DeploymentError::Api(e) => e.is_transient(),
            DeploymentError::Plan(e) => e.is_transient(),
            DeploymentError::Decode { .. } | DeploymentError::Encode { .. } => false,
        }
    }
}

fn deployments() -> Result<&'static ResourceType, ApiError> {
    resource::by_plural("apps", "v1", "deployments")
        .ok_or_else(|| ApiError::Internal("deployments are not registered".into()))
}

fn replica_sets() -> Result<&'static ResourceType, ApiError> {
    resource::by_plural("apps", "v1", "replicasets")
        .ok_or_else(|| ApiError::Internal("replicasets are not registered".into()))
}

fn pods() -> Result<&'static ResourceType, ApiError> {
    resource::by_plural("", "v1", "pods")
        .ok_or_else(|| ApiError::Internal("pods are not registered".into()))
}

/// The controller reference (kind, name, uid) in an object's JSON.
fn controller_ref(obj: &Value) -> Option<(&str, &str, &str)> {
    let r = obj
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    let s = |k: &str| r.get(k).and_then(Value::as_str);
    Some((s("kind")?, s("name")?, s("uid")?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerHead {
    uid: String,
    controller: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaHead {
    #[serde(default)]
    owner_references: Vec<OwnerHead>,
}

#[derive(Deserialize)]
struct StatusHead {
    phase: Option<String>,
}

/// The parts of a pod the planner looks at.
#[derive(Deserialize)]
struct PodHead {
    metadata: MetaHead,
    status: Option<StatusHead>,
}

/// What a pass reads.
struct Observed {
    raw: Value,
    deployment: Deployment,
    replica_sets: Vec<ReplicaSet>,
    pods: Vec<PodInfo>,
}

/// The controller: the registry it writes through and its event recorder.
pub struct Controller {
    registry: Registry,
    recorder: Recorder,
}

impl Controller {
    pub fn new(registry: Registry) -> Controller {
        let recorder = Recorder::new(registry.clone(), COMPONENT);
        Controller { registry, recorder }
    }

    fn observe(&self, ns: &str, name: &str) -> Result<Option<Observed>, DeploymentError> {
        let Ok(stored) = self.registry.get(deployments()?, Some(ns), name) else {
            return Ok(None);
        };
        let raw = stored.value().map_err(ApiError::from)?;
        let key = format!("deployment {ns}/{name}");
        let deployment: Deployment = serde_json::from_value(raw.clone())
            .map_err(|source| DeploymentError::Decode { key, source })?;
        let store = self.registry.store();
        let (_, items, _) = store.list(&prefix(replica_sets()?, Some(ns)), None, None, |_| true);
        let mut rss = Vec::with_capacity(items.len());
        for item in items {
            let v = item.value().map_err(ApiError::from)?;
            match serde_json::from_value::<ReplicaSet>(v) {
                Ok(rs) => rss.push(rs),
                Err(e) => tracing::warn!(error = %e, "skipping an undecodable ReplicaSet"),
            }
        }
        let selector = deployment
            .spec
            .as_ref()
            .map(|s| LabelSelector::from_k8s(&s.selector))
            .transpose()
            .map_err(plan::PlanError::from)?
            .unwrap_or_else(LabelSelector::nothing);
        // Pods matter only to Recreate (old pods must be gone) and to the history clean-up (a
        // scaled-down ReplicaSet goes only once no pod refers to it); reading every pod of a
        // large Deployment on each pass is skipped otherwise.
        let recreate = deployment
            .spec
            .as_ref()
            .and_then(|s| s.strategy.as_ref())
            .and_then(|s| s.type_.as_deref())
            == Some("Recreate");
        let drained_set = rss.iter().any(|rs| {
            rs.spec.as_ref().and_then(|s| s.replicas) == Some(0)
                && rs.status.as_ref().is_none_or(|s| s.replicas == 0)
        });
        let items = if recreate || drained_set {
            store
                .list(&prefix(pods()?, Some(ns)), None, None, |o| {
                    selector.matches(&o.index.labels)
                })
                .1
        } else {
            Vec::new()
        };
        let mut pod_infos = Vec::with_capacity(items.len());
        for item in items {
            // Only the owner and the phase are needed: skip the rest of the pod.
            let Ok(head) = serde_json::from_slice::<PodHead>(&item.data) else {
                continue;
            };
            pod_infos.push(PodInfo {
                controller_uid: head
                    .metadata
                    .owner_references
                    .into_iter()
                    .find(|r| r.controller == Some(true))
                    .map(|r| r.uid),
                phase: head.status.and_then(|s| s.phase),
            });
        }
        Ok(Some(Observed {
            raw,
            deployment,
            replica_sets: rss,
            pods: pod_infos,
        }))
    }

    /// One pass over the Deployment `ns/name` at `now`. Blocking.
    pub fn reconcile(
        &self,
        ns: &str,
        name: &str,
        now: jiff::Timestamp,
    ) -> Result<Outcome, DeploymentError> {
        let Some(seen) = self.observe(ns, name)? else {
            return Ok(Outcome::Done);
        };
        let plan = plan::plan(
            Input {
                deployment: &seen.deployment,
                replica_sets: &seen.replica_sets,
                pods: &seen.pods,
            },
            now,
        )?;
        let mut applied = Applied {
            deployment_version: version_of(&seen.raw),
            replica_set_versions: HashMap::new(),
        };
        for action in plan.actions {
            tracing::debug!(deployment = %format!("{ns}/{name}"), ?action, "deployment");
            self.apply(ns, name, &seen, &mut applied, action, now)?;
        }
        Ok(match plan.requeue_after {
            Some(d) => Outcome::RequeueAfter(d),
            None => Outcome::Done,
        })
    }
}

/// Starts the Deployment controller.
pub fn start(registry: Registry, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let store = registry.store().clone();
        let controller = Arc::new(Controller::new(registry.clone()));
        let queue: Queue<String> = Queue::new();
        let c = controller.clone();
        let runner = tokio::spawn(reconcile::run(
            queue.clone(),
            4,
            shutdown.clone(),
            "deployment",
            move |key: String| {
                let c = c.clone();
                async move {
                    tokio::task::spawn_blocking(move || {
                        let _span = tracing::debug_span!("deployment", key = %key).entered();
                        let (ns, name) = key.split_once('/').unwrap_or(("default", &key));
                        c.reconcile(ns, name, jiff::Timestamp::now())
                    })
                    .await
                    .map_err(|e| DeploymentError::Api(ApiError::Internal(e.to_string())))?
                }
            },
        ));
        // List, then watch; a watcher that falls behind starts over from a fresh list.
        while !shutdown.is_cancelled() {
            let (rev, items, _) = store.list("/apps/deployments/", None, None, |_| true);
            for item in items {
                if let Ok(v) = item.value()
                    && let (Some(ns), Some(n)) = (
                        v.pointer("/metadata/namespace").and_then(Value::as_str),
                        v.pointer("/metadata/name").and_then(Value::as_str),
                    )
                {
                    queue.add(format!("{ns}/{n}"));
                }
            }
            let Ok(watch) = store.watch(rev) else {
                continue;
            };
            let feed = |ev: &StoreEvent| {
                for key in watch::affected(&registry, ev) {
                    queue.add(key);
                }
            };
            for ev in &watch.backlog {
                feed(ev);
            }
            let mut live = watch.live;
            loop {
                tokio::select! {
                    r = live.recv() => match r {
                        Ok(ev) => feed(&ev),
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "deployment controller lagged; relisting");
                            break;
                        }
                        Err(_) => return,
                    },
                    _ = shutdown.cancelled() => break,
                }
            }
        }
        let _ = runner.await;
    })
}
