//! The pod's probers: one task per running attempt that has probes, started when the attempt
//! is first seen running and aborted once it no longer runs.

use super::{PodWorker, all_containers};
use crate::pod::labels;
use crate::pod::model::{Observed, Sandbox};
use crate::pod::prober;
use crate::probe::policy::{ProbeKind, ProbeResult};
use crate::runtime::{ContainerId, ContainerInfo, TaskState};
use berth_api::k8s_openapi::api::core::v1::Pod;
use jiff::Timestamp;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

impl PodWorker {
    /// Starts probers for newly running attempts, stops those of attempts that stopped, and
    /// tells the rest whether the pod is being deleted.
    pub(super) fn sync_probers(&self, pod: &Pod, observed: &Observed, infos: &[ContainerInfo]) {
        let running: Vec<(String, ContainerId, Timestamp)> = infos
            .iter()
            .filter_map(|i| match i.state {
                TaskState::Running { started_at, .. } => Some((
                    labels::container_name(&i.labels)?.to_string(),
                    i.id.clone(),
                    started_at,
                )),
                _ => None,
            })
            .collect();
        let pod_ip = match &observed.sandbox {
            Sandbox::Ready { ips, .. } => ips.first().cloned(),
            _ => None,
        };
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let mut probers = self.probers.lock().unwrap_or_else(|e| e.into_inner());
        probers.retain(|id, (handle, _)| {
            let keep = running.iter().any(|(_, rid, _)| rid.as_str() == id);
            if !keep {
                handle.abort();
            }
            keep
        });
        for (name, id, since) in running {
            if let Some((_, flag)) = probers.get(id.as_str()) {
                flag.store(deleting, Ordering::Relaxed);
                continue;
            }
            let Some(c) = all_containers(pod).into_iter().find(|c| c.name == name) else {
                continue;
            };
            if c.startup_probe.is_none()
                && c.liveness_probe.is_none()
                && c.readiness_probe.is_none()
            {
                continue;
            }
            let flag = Arc::new(AtomicBool::new(deleting));
            let probed = prober::Probed {
                runtime: self.cx.runtime.clone(),
                id: id.clone(),
                container: c,
                pod_ip: pod_ip.clone(),
                running_since: since,
                deleting: flag.clone(),
            };
            let wake = self.wake.clone();
            let events = self.cx.events.clone();
            let (pod_for_events, field) = (pod.clone(), format!("spec.containers{{{name}}}"));
            let on_failure = move |message: String| {
                let (events, pod, field) = (events.clone(), pod_for_events.clone(), field.clone());
                tokio::spawn(async move {
                    events
                        .record(&pod, true, "Unhealthy", &message, Some(&field))
                        .await
                });
            };
            let metrics = self.cx.metrics.clone();
            let (ns, pod_name, container) = (super::ns_of(pod), super::name_of(pod), name.clone());
            let on_result = move |kind: ProbeKind, result: ProbeResult| {
                let result = match result {
                    ProbeResult::Success => "successful",
                    ProbeResult::Failure => "failed",
                    ProbeResult::Unknown => "unknown",
                };
                let kind = match kind {
                    ProbeKind::Startup => "Startup",
                    ProbeKind::Liveness => "Liveness",
                    ProbeKind::Readiness => "Readiness",
                };
                metrics
                    .probes
                    .inc(&[&container, &ns, &pod_name, kind, result]);
            };
            let handle = tokio::spawn(prober::run(
                probed,
                self.probes.clone(),
                move || wake(),
                on_failure,
                on_result,
            ));
            probers.insert(id.to_string(), (handle, flag));
        }
    }

    /// Aborts every prober of the pod.
    pub(super) fn stop_probers(&self) {
        let mut probers = self.probers.lock().unwrap_or_else(|e| e.into_inner());
        for (_, (handle, _)) in probers.drain() {
            handle.abort();
        }
    }
}
