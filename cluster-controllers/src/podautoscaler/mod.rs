//! The HorizontalPodAutoscaler controller (upstream `pkg/controller/podautoscaler`): every
//! sync period each autoscaler reads its target's scale (Deployment, ReplicaSet, StatefulSet
//! or ReplicationController), the target's pods and their usage from the resource metrics the
//! controller scrapes, decides ([`plan`], over the arithmetic of [`replicas`] and
//! [`behavior`]), writes the target's `spec.replicas` when it rescales, records
//! `SuccessfulRescale` and failure events, and writes the autoscaler's status.
//!
//! Keyed by autoscaler; requeued every sync period (upstream's
//! `--horizontal-pod-autoscaler-sync-period`, 15 s). Recommendations and rescales of the last
//! windows are kept in memory, as upstream keeps them.

pub mod behavior;
pub mod plan;
pub mod replicas;

use berth_registry::events;
use berth_registry::events::Recorder;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{Informer, Object, ObjectKey};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use berth_shared::quantity::Quantity;
use berth_shared::reconcile::{ErrorPolicy, Outcome, Retry};
use berth_shared::resource::{
    DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, PODS, REPLICA_SETS, REPLICATION_CONTROLLERS,
    ResourceType, STATEFUL_SETS,
};
use berth_shared::selector::LabelSelector;
use plan::{History, ObservedPod};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "horizontal-pod-autoscaler";
const WORKERS: usize = 1;

/// Where the autoscaler reads a pod's usage (the runtime's, so the API server's metrics scraper
/// can provide it without depending on the controllers).
pub use berth_runtime::pod_usage::PodUsage;

/// The autoscaler's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// How often each autoscaler is reconciled.
    pub sync_period: Duration,
}

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    hpas: Arc<Informer>,
    pods: Arc<Informer>,
    targets: Vec<(&'static ResourceType, Arc<Informer>)>,
    /// For custom resource targets' informers.
    informers: berth_runtime::informer::Informers,
    usage: Arc<dyn PodUsage>,
    history: Mutex<HashMap<ObjectKey, History>>,
    recorder: Recorder,
    config: Config,
}

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum AutoscalerError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
}

impl ErrorPolicy for AutoscalerError {
    fn retry(&self) -> Retry {
        match self {
            AutoscalerError::Registry(e) => e.retry(),
            AutoscalerError::Encode(_) => Retry::Never,
        }
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Where a target keeps its replicas (a JSON pointer): `spec.replicas`, or where a custom
/// resource's scale subresource says.
fn replicas_pointer(rt: &ResourceType) -> String {
    berth_shared::custom::served(rt)
        .and_then(|s| s.version.scale.clone())
        .map_or_else(
            || "/spec/replicas".to_string(),
            |scale| scale.spec_replicas.replace('.', "/"),
        )
}

/// A target's pod selector: a custom resource's serialized selector at its scale
/// subresource's `labelSelectorPath`, else the apps kinds' LabelSelector or a
/// ReplicationController's map.
fn target_selector(rt: &ResourceType, obj: &Value) -> Option<LabelSelector> {
    match berth_shared::custom::served(rt).and_then(|s| s.version.scale.clone()) {
        Some(scale) => {
            let text = obj
                .pointer(&scale.label_selector?.replace('.', "/"))?
                .as_str()?;
            LabelSelector::parse(text).ok()
        }
        None => selector_of(obj),
    }
}

/// A target's pod selector: the apps kinds' LabelSelector, or a ReplicationController's map.
fn selector_of(obj: &Value) -> Option<LabelSelector> {
    let sel = obj.pointer("/spec/selector")?;
    let k8s: K8sSelector =
        if sel.get("matchLabels").is_some() || sel.get("matchExpressions").is_some() {
            serde_json::from_value(sel.clone()).ok()?
        } else {
            serde_json::from_value(json!({"matchLabels": sel})).ok()?
        };
    LabelSelector::from_k8s(&k8s).ok()
}

/// A pod's requests summed over its containers, by resource; `None` when one lacks it.
fn requests_of(pod: &Value) -> BTreeMap<String, Option<f64>> {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for resource in ["cpu", "memory"] {
        let mut sum = Some(0.0);
        for c in &containers {
            let q = c
                .pointer(&format!("/resources/requests/{resource}"))
                .and_then(Value::as_str)
                .and_then(|q| Quantity::parse(q).ok());
            sum = match (sum, q) {
                (Some(s), Some(q)) if resource == "cpu" => Some(s + q.millis() as f64),
                (Some(s), Some(q)) => Some(s + q.value() as f64),
                _ => None,
            };
        }
        out.insert(resource.to_string(), sum.filter(|_| !containers.is_empty()));
    }
    out
}

fn observed_pod(pod: &Object) -> Option<ObservedPod> {
    let v = pod.value().ok()?;
    let ready = crate::condition::is_true(&v, "Ready");
    Some(ObservedPod {
        name: pod.name().to_string(),
        ready,
        ignored: pod.is_deleting() || v.pointer("/status/phase") == Some(&json!("Failed")),
        requests: requests_of(&v),
    })
}

/// Conditions as the status carries them, keeping a condition's `lastTransitionTime` while
/// its status stays.
fn conditions_json(old: &Value, new: &[plan::Condition], now: &str) -> Value {
    let old = old.as_array().cloned().unwrap_or_default();
    let list: Vec<Value> = new
        .iter()
        .map(|c| {
            let status = if c.status { "True" } else { "False" };
            let since = old
                .iter()
                .find(|o| o["type"] == c.type_ && o["status"] == status)
                .and_then(|o| o.get("lastTransitionTime").cloned())
                .unwrap_or_else(|| json!(now));
            json!({"type": c.type_, "status": status, "lastTransitionTime": since,
                   "reason": c.reason, "message": c.message})
        })
        .collect();
    Value::Array(list)
}

impl Controller {
    fn record(&self, obj: &Value, warning: bool, reason: &str, message: &str) {
        let t = events::event_type(warning);
        events::record(&self.recorder, obj, t, reason, message);
    }

    fn target(
        &self,
        hpa: &HorizontalPodAutoscaler,
        ns: &str,
    ) -> Result<(&'static ResourceType, Arc<Object>), String> {
        let r = hpa.spec.as_ref().map(|s| &s.scale_target_ref);
        let Some(r) = r else {
            return Err("the HPA has no scale target".to_string());
        };
        // Without an apiVersion (the seed's `hpa-rs.yaml`), the kind alone names the target.
        let api_version = r.api_version.as_deref().unwrap_or_default();
        let group = match group_of(api_version) {
            "extensions" => "apps",
            g => g,
        };
        let builtin = self
            .targets
            .iter()
            .find(|(rt, _)| rt.kind == r.kind && (api_version.is_empty() || rt.group == group));
        // A custom resource with a scale subresource: its informer joins when first named.
        let custom = || {
            let rt = berth_shared::resource::by_kind(api_version, &r.kind)
                .filter(|rt| rt.custom && rt.has_scale)?;
            let rt = berth_shared::resource::storage_of(rt);
            Some((rt, self.informers.get(rt)))
        };
        let Some((rt, informer)) = builtin.cloned().or_else(custom) else {
            return Err(format!(
                "the server could not find the requested resource: no scale subresource for {}",
                r.kind
            ));
        };
        match informer.get(Some(ns), &r.name) {
            Some(o) => Ok((rt, o)),
            None => Err(format!("{}.{} {:?} not found", rt.plural, rt.group, r.name)),
        }
    }

    /// Writes the status when it changed (conditions keep their transition times).
    #[allow(clippy::too_many_arguments)]
    fn write_status(
        &self,
        raw: &mut Value,
        hpa: &HorizontalPodAutoscaler,
        current: Option<i32>,
        conditions: &[plan::Condition],
        metrics: &[Value],
        rescaled: Option<(String, i32)>,
        now: &str,
    ) -> Result<(), AutoscalerError> {
        let old = raw.get("status").cloned().unwrap_or_else(|| json!({}));
        let mut status = json!({});
        if let Some(g) = hpa.metadata.generation {
            status["observedGeneration"] = json!(g);
        }
        match &rescaled {
            Some((at, _)) => status["lastScaleTime"] = json!(at),
            None => {
                if let Some(t) = old.get("lastScaleTime").filter(|t| !t.is_null()) {
                    status["lastScaleTime"] = t.clone();
                }
            }
        }
        let current = current.unwrap_or_else(|| {
            old.get("currentReplicas")
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(0)
        });
        status["currentReplicas"] = json!(current);
        status["desiredReplicas"] = json!(rescaled.as_ref().map_or(current, |(_, d)| *d));
        if !metrics.is_empty() {
            status["currentMetrics"] = Value::Array(metrics.to_vec());
        }
        status["conditions"] = conditions_json(&old["conditions"], conditions, now);
        if status == old {
            return Ok(());
        }
        raw["status"] = status;
        self.registry.update(
            HORIZONTAL_POD_AUTOSCALERS,
            raw.pointer("/metadata/namespace").and_then(Value::as_str),
            raw.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            raw.clone(),
            Part::Status,
            &WriteOptions::default(),
        )?;
        Ok(())
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = AutoscalerError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, AutoscalerError> {
        let requeue = Outcome::RequeueAfter(self.config.sync_period);
        let Some(obj) = self.hpas.get_key(key) else {
            self.history
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(key);
            return Ok(Outcome::Done);
        };
        if obj.is_deleting() {
            return Ok(Outcome::Done);
        }
        let hpa: HorizontalPodAutoscaler = match obj.decode() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(hpa = %key, error = %e, "ignoring an autoscaler that does not decode");
                return Ok(Outcome::Done);
            }
        };
        let ns = key.namespace().unwrap_or_default();
        let mut raw = obj.value()?;
        let now = self.clock.now();
        let now_text = now.to_string();
        let (rt, target) = match self.target(&hpa, ns) {
            Ok(t) => t,
            Err(msg) => {
                let message = format!(
                    "the HPA controller was unable to get the target's current scale: {msg}"
                );
                self.record(&raw, true, "FailedGetScale", &msg);
                let conditions = [plan::Condition {
                    type_: "AbleToScale",
                    status: false,
                    reason: "FailedGetScale",
                    message,
                }];
                self.write_status(&mut raw, &hpa, None, &conditions, &[], None, &now_text)?;
                return Ok(requeue);
            }
        };
        let target_value = target.value()?;
        let replicas_at = replicas_pointer(rt);
        let current = target_value
            .pointer(&replicas_at)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(1);
        let selector = target_selector(rt, &target_value).unwrap_or_else(LabelSelector::nothing);
        let pods: Vec<ObservedPod> = self
            .pods
            .in_namespace(ns)
            .iter()
            .filter(|p| selector.matches(p.labels()))
            .filter_map(|p| observed_pod(p))
            .collect();
        let mut usage: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for p in pods.iter().filter(|p| !p.ignored) {
            if let Some(containers) = self.usage.pod_usage(ns, &p.name) {
                let cpu: u64 = containers.iter().map(|(_, c, _)| c).sum();
                let mem: u64 = containers.iter().map(|(_, _, m)| m).sum();
                usage.insert(
                    p.name.clone(),
                    BTreeMap::from([
                        ("cpu".to_string(), cpu as f64 / 1e6),
                        ("memory".to_string(), mem as f64),
                    ]),
                );
            }
        }
        let history = self
            .history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
            .unwrap_or_default();
        let Some(spec) = hpa.spec.as_ref() else {
            return Ok(Outcome::Done);
        };
        let mut p = plan::plan(&plan::Observed {
            spec,
            current,
            pods: &pods,
            usage: &usage,
            history: &history,
            now,
        });
        // The status a pass ends with: the plan's conditions and metrics, and the rescale.
        let write = |raw: &mut Value, p: &plan::Plan, rescaled: Option<(String, i32)>| {
            let (conditions, metrics) = (&p.conditions, &p.current_metrics);
            self.write_status(
                raw,
                &hpa,
                Some(current),
                conditions,
                metrics,
                rescaled,
                &now_text,
            )
        };
        let mut last_scale = None;
        if let Some(reason) = &p.rescale {
            let mut scaled = target_value.clone();
            if let Some(replicas) = scaled.pointer_mut(&replicas_at) {
                *replicas = json!(p.desired);
            } else {
                scaled["spec"]["replicas"] = json!(p.desired);
            }
            let target_name = target.name().to_string();
            match self.registry.update(
                rt,
                Some(ns),
                &target_name,
                scaled,
                Part::Main,
                &WriteOptions::default(),
            ) {
                Ok(_) => {
                    tracing::info!(hpa = %key, target = %target_name, from = current, to = p.desired, %reason, "rescaled");
                    last_scale = Some(now_text.clone());
                }
                Err(e) => {
                    let msg = format!("New size: {}; reason: {reason}; error: {e}", p.desired);
                    self.record(&raw, true, "FailedRescale", &msg);
                    p.events.retain(|e| e.reason != "SuccessfulRescale");
                    p.conditions[0] = plan::Condition {
                        type_: "AbleToScale",
                        status: false,
                        reason: "FailedUpdateScale",
                        message: format!(
                            "the HPA controller was unable to update the target scale: {e}"
                        ),
                    };
                    write(&mut raw, &p, None)?;
                    return Err(e.into());
                }
            }
        }
        for e in &p.events {
            self.record(&raw, e.warning, e.reason, &e.message);
        }
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), p.history.clone());
        let rescaled = last_scale.map(|t| (t, p.desired));
        write(&mut raw, &p, rescaled)?;
        Ok(requeue)
    }
}

/// Runs the autoscaler controller until `shutdown`.
pub async fn run(
    ctx: Context,
    usage: Arc<dyn PodUsage>,
    config: Config,
    shutdown: CancellationToken,
) {
    let targets = [
        DEPLOYMENTS,
        REPLICA_SETS,
        STATEFUL_SETS,
        REPLICATION_CONTROLLERS,
    ]
    .into_iter()
    .map(|rt| (rt, ctx.informer(rt)))
    .collect();
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        hpas: ctx.informer(HORIZONTAL_POD_AUTOSCALERS),
        pods: ctx.informer(PODS),
        targets,
        informers: ctx.informers.clone(),
        usage,
        history: Mutex::new(HashMap::new()),
        recorder: ctx.recorder(COMPONENT),
        config,
    });
    runtime::Controller::new(
        "horizontal-pod-autoscaler",
        &ctx,
        HORIZONTAL_POD_AUTOSCALERS,
    )
    .workers(WORKERS)
    .run(controller, shutdown)
    .await;
}
