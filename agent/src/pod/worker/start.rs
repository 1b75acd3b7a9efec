//! Starting: the pod's sandbox (network and /etc files), then a container attempt — its
//! volumes, config and labels, create, start and postStart hook — with a start failure kept
//! for the status (`CreateContainerConfigError`, `RunContainerError`, …).

use super::{PodWorker, WorkerError, all_containers, field_path, host_network, name_of, ns_of};
use crate::network::PodRef;
use crate::pod::container_config::{self, HostSide};
use crate::pod::labels::{self, AttemptLabels};
use crate::pod::model::StartError;
use crate::pod::restart::Backoff;
use crate::pod::{hooks, volumes};
use crate::runtime::{ContainerId, RuntimeError, TaskState};
use berth_api::k8s_openapi::api::core::v1::Pod;
use std::path::PathBuf;
use std::time::Duration;

/// The ready sandbox a container starts in.
#[derive(Clone, Debug)]
pub(super) struct SandboxRef {
    /// Its generation (a label on the container).
    pub attempt: u32,
    /// The pod IP.
    pub ip: String,
    /// The netns to join; `None` for host-network pods.
    pub netns: Option<PathBuf>,
}

/// A deterministic container id: pod uid prefix, container name, sandbox and restart numbers.
pub(super) fn container_id(
    uid: &str,
    name: &str,
    sandbox: u32,
    restart: u32,
) -> Option<ContainerId> {
    let short: String = uid
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(12)
        .collect();
    let name: String = name.chars().take(40).collect();
    ContainerId::new(format!("{short}-{name}-s{sandbox}-r{restart}")).ok()
}

impl PodWorker {
    /// Sets up the pod's network (unless it uses the host's) and writes its /etc files.
    pub(super) async fn create_sandbox(&self, pod: &Pod, attempt: u32) -> Result<(), WorkerError> {
        let uid = self.uid.as_str();
        let node = &self.cx.node;
        let host_network = host_network(pod);
        let ip = if host_network {
            node.host_ip.clone()
        } else {
            let mut r = PodRef::new(uid, ns_of(pod), name_of(pod));
            r.host_ports = crate::network::host_ports(pod);
            self.cx.network.setup(&r).await?.ip.to_string()
        };
        let host_files = crate::network::files::observe_host_files().await?;
        let ip_addr = ip.parse().ok();
        let files = crate::network::files::plan_pod_files(
            pod,
            if host_network { None } else { ip_addr },
            &host_files,
            &node.dns,
        )?;
        let dir = volumes::pod_dir(&node.root_dir, uid).join("etc");
        crate::network::files::write_pod_files(&dir, &files).await?;
        tracing::debug!(pod = %uid, sandbox = attempt, %ip, "sandbox made");
        self.local_mut(|l| l.sandbox_attempt = Some(attempt));
        Ok(())
    }

    /// Starts attempt `restart` of container `name` in `sandbox`; a failure is recorded as an
    /// event and kept for the status.
    pub(super) async fn start(
        &self,
        pod: &Pod,
        name: &str,
        restart: u32,
        backoff: Option<Backoff>,
        sandbox: SandboxRef,
    ) {
        let field = field_path(pod, name);
        match self
            .create_and_start(pod, name, restart, backoff, &sandbox)
            .await
        {
            Ok(()) => {
                self.local_mut(|l| {
                    l.start_errors.remove(name);
                });
            }
            Err((reason, message)) => {
                tracing::warn!(
                    pod = %format!("{}/{}", ns_of(pod), name_of(pod)),
                    container = name,
                    restart,
                    reason,
                    "container start failed: {message}"
                );
                self.cx
                    .events
                    .record(
                        pod,
                        true,
                        "Failed",
                        &format!("Error: {message}"),
                        Some(&field),
                    )
                    .await;
                self.local_mut(|l| {
                    l.start_errors.insert(
                        name.to_string(),
                        StartError {
                            reason: reason.to_string(),
                            message,
                            at: (self.cx.clock)(),
                            backoff,
                        },
                    );
                });
            }
        }
    }

    /// For an ephemeral container with a `targetContainerName`: the PID namespace of the
    /// target's running attempt, which it joins (so `ps` shows the target's processes).
    async fn target_pid_namespace(
        &self,
        pod: &Pod,
        name: &str,
    ) -> Result<Option<PathBuf>, (&'static str, String)> {
        let target = pod
            .spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.as_ref())
            .and_then(|l| l.iter().find(|e| e.name == name))
            .and_then(|e| e.target_container_name.clone())
            .filter(|t| !t.is_empty());
        let Some(target) = target else {
            return Ok(None);
        };
        let infos = self
            .cx
            .runtime
            .list_pod(self.uid.as_str())
            .await
            .map_err(|e| ("CreateContainerError", e.to_string()))?;
        let pid = infos
            .iter()
            .filter(|i| labels::container_name(&i.labels) == Some(target.as_str()))
            .filter_map(|i| match i.state {
                TaskState::Running { pid, .. } => Some((labels::restart_index(&i.labels), pid)),
                _ => None,
            })
            .max()
            .map(|(_, pid)| pid)
            .ok_or((
                "CreateContainerConfigError",
                format!("target container \"{target}\" is not running"),
            ))?;
        Ok(Some(PathBuf::from(format!("/proc/{pid}/ns/pid"))))
    }

    async fn create_and_start(
        &self,
        pod: &Pod,
        name: &str,
        restart: u32,
        backoff: Option<Backoff>,
        sandbox_ref: &SandboxRef,
    ) -> Result<(), (&'static str, String)> {
        let uid = self.uid.as_str();
        let (sandbox, ip) = (sandbox_ref.attempt, sandbox_ref.ip.as_str());
        let node = &self.cx.node;
        let runtime = self.cx.runtime.as_ref();
        let c = all_containers(pod)
            .into_iter()
            .find(|c| c.name == name)
            .ok_or(("CreateContainerError", format!("no container {name}")))?;
        let target_pid_namespace = self.target_pid_namespace(pod, name).await?;
        let image_ref = c.image.clone().unwrap_or_default();
        let image = match self.cx.images.get(&image_ref).await {
            Ok(Some(i)) => i,
            _ => return Err(("ErrImagePull", format!("image {image_ref} is not present"))),
        };
        let sources = self.sources(pod).await;
        let vols = volumes::prepare(&node.root_dir, pod, &sources)
            .and_then(|vols| volumes::prepare_sub_paths(&c, &vols).map(|()| vols))
            .map_err(|e| ("CreateContainerConfigError", e.to_string()))?;
        let id = container_id(uid, name, sandbox, restart)
            .ok_or(("CreateContainerError", "invalid container id".to_string()))?;
        let dir = volumes::pod_dir(&node.root_dir, uid);
        let term_log = dir
            .join("containers")
            .join(name)
            .join(format!("{restart}-termination-log"));
        if let Some(p) = term_log.parent() {
            let _ = std::fs::create_dir_all(p);
        }
        let _ = std::fs::write(&term_log, b"");
        let log_path = node
            .log_dir
            .join(format!("{}_{}_{}", ns_of(pod), name_of(pod), uid))
            .join(name)
            .join(format!("{restart}.log"));
        let etc = dir.join("etc");
        let host = HostSide {
            volumes: vols,
            read_only_volumes: crate::pod::claims::claims_of(pod)
                .into_iter()
                .filter(|r| r.read_only)
                .map(|r| r.volume)
                .chain(volumes::config_volume_names(pod))
                .collect(),
            hosts_file: Some(etc.join("hosts")),
            resolv_conf: Some(etc.join("resolv.conf")),
            hostname_file: Some(etc.join("hostname")),
            termination_log: Some(term_log.clone()),
            network_namespace: if host_network(pod) {
                None
            } else {
                // A pod network always has one when its sandbox is ready; without it the
                // container would get a namespace of its own, i.e. no pod network.
                Some(sandbox_ref.netns.clone().ok_or((
                    "CreateContainerError",
                    "the pod sandbox has no network namespace".to_string(),
                ))?)
            },
            target_pid_namespace,
            log_path,
            pod_ip: ip.to_string(),
            host_ip: node.host_ip.clone(),
            node_cpu_millis: i64::from(node.cpus) * 1000,
            node_memory_bytes: node.memory_bytes,
            api_endpoint: node.api_endpoint.clone(),
            security: node.security.clone(),
        };
        let (pod_name, pod_namespace) = (name_of(pod), ns_of(pod));
        let labels = AttemptLabels {
            pod_uid: uid,
            pod_name: &pod_name,
            pod_namespace: &pod_namespace,
            container: name,
            restart,
            sandbox,
            spec_image: &image_ref,
            image_id: image.image_id(),
            termination_log: &term_log,
            backoff,
        }
        .to_labels();
        let oom = container_config::oom_score_adj(pod, &c, node.memory_bytes);
        let mut config = container_config::container_config(
            pod,
            &c,
            id.clone(),
            image.container_image(),
            labels,
            &sources,
            &host,
            Some(oom),
        )
        .map_err(|e| ("CreateContainerConfigError", e.0))?;
        crate::pod::host_security::load_profiles(&mut config.security, &node.security)
            .await
            .map_err(|e| ("CreateContainerConfigError", e.0))?;
        // A leftover of a failed earlier start with the same id is replaced.
        let _ = runtime.remove(&id).await;
        runtime.create(&config).await.map_err(|e| match e {
            RuntimeError::ContainerConfig(m) => ("CreateContainerConfigError", m),
            e => ("CreateContainerError", e.to_string()),
        })?;
        let field = field_path(pod, name);
        let events = self.cx.events.as_ref();
        let created = format!("Created container {name}");
        events
            .record(pod, false, "Created", &created, Some(&field))
            .await;
        runtime
            .start(&id)
            .await
            .map_err(|e| ("RunContainerError", e.to_string()))?;
        let started = format!("Started container {name}");
        events
            .record(pod, false, "Started", &started, Some(&field))
            .await;
        if let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref())
            && let Err(msg) = hooks::run(runtime, &id, hook, ip, Duration::from_secs(30)).await
        {
            events
                .record(pod, true, "FailedPostStartHook", &msg, Some(&field))
                .await;
            let _ = runtime.kill(&id, 9).await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_are_valid_and_distinct_per_attempt() {
        let a = container_id("0b5c2c1e-1111-2222-3333-444455556666", "web", 1, 0).unwrap();
        let b = container_id("0b5c2c1e-1111-2222-3333-444455556666", "web", 1, 1).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.to_string(), "0b5c2c1e1111-web-s1-r0");
    }
}
