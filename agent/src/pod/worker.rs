//! One pass of a pod's worker: observe (containers from containerd by label, the sandbox, image
//! pulls, probe results), plan ([`plan_pod`]), apply the actions, report status. Everything the
//! next pass needs is in containerd labels, the network state and the API, so a restarted agent
//! picks up where the last one stopped.

use super::container_config::{self, HostSide, ResolvedSources};
use super::manager::Shared;
use super::model::{
    Attempt, ImagePull, Observed, ObservedContainer, PullFailure, Sandbox, StartError, State,
    Termination,
};
use super::plan::{Action, KillTarget, plan_pod};
use super::restart::{Backoff, image_pull_failed};
use super::{prober, volumes};
use crate::image::{PullPolicy, default_pull_policy};
use crate::network::PodRef;
use crate::runtime::{ContainerId, ContainerInfo, TaskState};
use berth_shared::k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use berth_shared::reconcile::Outcome;
use berth_shared::resource;
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;

pub const LABEL_POD_UID: &str = "io.berth.pod.uid";
pub const LABEL_POD_NAME: &str = "io.berth.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.berth.pod.namespace";
pub const LABEL_CONTAINER: &str = "io.berth.container.name";
pub const LABEL_RESTART: &str = "io.berth.container.restart";
pub const LABEL_SANDBOX: &str = "io.berth.container.sandbox";
pub const LABEL_SPEC_IMAGE: &str = "io.berth.container.spec-image";
pub const LABEL_IMAGE_ID: &str = "io.berth.container.image-id";
pub const LABEL_BACKOFF_DELAY: &str = "io.berth.backoff.delay-ms";
pub const LABEL_BACKOFF_SINCE: &str = "io.berth.backoff.since";
pub const LABEL_TERMINATION_LOG: &str = "io.berth.container.termination-log";

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
    #[error(transparent)]
    Network(#[from] crate::network::NetworkError),
    #[error(transparent)]
    Client(#[from] berth_shared::client::ClientError),
    #[error(transparent)]
    Volume(#[from] volumes::VolumeError),
}

/// A deterministic container id: pod uid prefix, container name, sandbox and restart numbers.
fn container_id(uid: &str, name: &str, sandbox: u32, restart: u32) -> Option<ContainerId> {
    let short: String = uid
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(12)
        .collect();
    let name: String = name.chars().take(40).collect();
    ContainerId::new(format!("{short}-{name}-s{sandbox}-r{restart}")).ok()
}

fn all_containers(pod: &Pod) -> Vec<Container> {
    pod.spec
        .as_ref()
        .map(|s| {
            s.init_containers
                .iter()
                .flatten()
                .chain(s.containers.iter())
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn attempt_of(
    info: &ContainerInfo,
    probes: super::model::ProbeResults,
) -> Option<(String, Attempt)> {
    let l = &info.labels;
    let name = l.get(LABEL_CONTAINER)?.clone();
    let parse = |k: &str| l.get(k).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
    let backoff = match (
        l.get(LABEL_BACKOFF_DELAY)
            .and_then(|v| v.parse::<u64>().ok()),
        l.get(LABEL_BACKOFF_SINCE)
            .and_then(|v| v.parse::<Timestamp>().ok()),
    ) {
        (Some(ms), Some(since)) => Some(Backoff {
            delay: Duration::from_millis(ms),
            since,
        }),
        _ => None,
    };
    let state = match &info.state {
        TaskState::Created => State::Waiting {
            reason: "ContainerCreating".into(),
            message: String::new(),
        },
        TaskState::Running { started_at, .. } => State::Running {
            started_at: *started_at,
        },
        TaskState::Exited(e) => {
            let message = l
                .get(LABEL_TERMINATION_LOG)
                .and_then(|p| std::fs::read_to_string(p).ok())
                .map(|m| m.chars().take(4096).collect())
                .unwrap_or_default();
            let reason = if e.oom_killed {
                "OOMKilled"
            } else if e.code == 0 {
                "Completed"
            } else {
                "Error"
            };
            State::Terminated(Termination {
                exit_code: e.code,
                reason: reason.into(),
                signal: None,
                started_at: Some(e.started_at),
                finished_at: e.finished_at,
                message,
            })
        }
        TaskState::NotFound => return None,
    };
    Some((
        name,
        Attempt {
            id: super::model::ContainerId::new(info.id.to_string()),
            restart_index: parse(LABEL_RESTART),
            sandbox_attempt: parse(LABEL_SANDBOX),
            image: info.image.clone(),
            image_id: l.get(LABEL_IMAGE_ID).cloned().unwrap_or_default(),
            spec_image: l.get(LABEL_SPEC_IMAGE).cloned().unwrap_or_default(),
            state,
            backoff,
            probes,
        },
    ))
}

impl Shared {
    /// Observes what exists for the pod now.
    async fn observe(
        &self,
        uid: &str,
        pod: &Pod,
        now: Timestamp,
    ) -> Result<(Observed, Vec<ContainerInfo>), WorkerError> {
        let infos: Vec<ContainerInfo> = self
            .runtime
            .list()
            .await?
            .into_iter()
            .filter(|c| c.labels.get(LABEL_POD_UID).map(String::as_str) == Some(uid))
            .collect();
        let mut containers: BTreeMap<String, ObservedContainer> = BTreeMap::new();
        let local = self.local(uid);
        let probe_results = self
            .probes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for info in &infos {
            let spec = all_containers(pod)
                .into_iter()
                .find(|c| Some(&c.name) == info.labels.get(LABEL_CONTAINER));
            let probes = probe_results
                .get(info.id.as_str())
                .copied()
                .unwrap_or_else(|| spec.as_ref().map(prober::initial).unwrap_or_default());
            if let Some((name, attempt)) = attempt_of(info, probes) {
                containers.entry(name).or_default().attempts.push(attempt);
            }
        }
        for c in all_containers(pod) {
            let entry = containers.entry(c.name.clone()).or_default();
            let pull = local.pulls.get(&c.name).cloned().unwrap_or_default();
            entry.image = if local.fresh_pull_failures.contains(&c.name) {
                pull
            } else {
                pull.backing_off(&c.image.clone().unwrap_or_default(), now)
            };
            entry.start_error = local.start_errors.get(&c.name).cloned();
        }
        let host_network = pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        let max_sandbox = infos
            .iter()
            .filter_map(|i| i.labels.get(LABEL_SANDBOX)?.parse::<u32>().ok())
            .max();
        let sandbox = match (&local.sandbox, host_network) {
            (Some(s), _) => s.clone(),
            (None, true) if max_sandbox.is_some() => Sandbox::Ready {
                attempt: max_sandbox.unwrap_or(1),
                ips: vec![self.host_ip.clone()],
            },
            (None, false)
                if max_sandbox.is_some() && self.network.list().await?.iter().any(|u| u == uid) =>
            {
                // A sandbox from before an agent restart: setup returns the existing one.
                let net = self
                    .network
                    .setup(&PodRef::new(uid, ns_of(pod), name_of(pod)))
                    .await?;
                let s = Sandbox::Ready {
                    attempt: max_sandbox.unwrap_or(1),
                    ips: vec![net.ip.to_string()],
                };
                self.local_mut(uid, |l| l.sandbox = Some(s.clone()));
                s
            }
            _ => Sandbox::Absent,
        };
        Ok((
            Observed {
                sandbox,
                containers,
                host_ips: vec![self.host_ip.clone()],
            },
            infos,
        ))
    }

    /// One pass for the pod with `uid`; `pod` is the latest API object (or the last seen one,
    /// marked deleted, when it vanished).
    pub async fn reconcile(&self, uid: &str, pod: Pod) -> Result<Outcome, WorkerError> {
        let now = Timestamp::now();
        let (observed, infos) = self.observe(uid, &pod, now).await?;
        self.sync_probers(uid, &pod, &observed, &infos);
        let plan = plan_pod(&pod, &observed, now);
        tracing::debug!(pod = %name_of(&pod), actions = ?plan.actions, "plan");
        let mut outcome = Outcome::RequeueAfter(Duration::from_secs(10));
        // Each pass takes one safe step; after a step, the next pass comes right away.
        let progressed = plan
            .actions
            .iter()
            .any(|a| !matches!(a, Action::WaitUntil(_) | Action::ReportStatus));
        if progressed {
            outcome = Outcome::RequeueAfter(Duration::from_millis(20));
        }
        for action in plan.actions {
            match action {
                Action::CreateSandbox { attempt } => {
                    self.create_sandbox(uid, &pod, attempt).await?
                }
                Action::PullImage { container } => self.pull(uid, &pod, &container, now).await,
                Action::StartContainer {
                    name,
                    restart_index,
                    backoff,
                    ..
                } => {
                    let sandbox = match &observed.sandbox {
                        Sandbox::Ready { attempt, ips } => {
                            (*attempt, ips.first().cloned().unwrap_or_default())
                        }
                        _ => continue,
                    };
                    self.start(uid, &pod, &name, restart_index, backoff, sandbox)
                        .await;
                }
                Action::KillContainer {
                    name,
                    id,
                    message,
                    grace,
                    pre_stop,
                    ..
                } => {
                    self.events
                        .record(
                            &pod,
                            false,
                            "Killing",
                            &message,
                            Some(&format!("spec.containers{{{name}}}")),
                        )
                        .await;
                    self.kill(&pod, &name, &id.to_string(), grace, pre_stop)
                        .await;
                }
                Action::RemoveContainer { id } => {
                    if let Ok(id) = ContainerId::new(id.to_string()) {
                        self.runtime.remove(&id).await?;
                    }
                }
                Action::KillPod {
                    grace,
                    apps,
                    sidecars,
                    ..
                } => self.kill_pod(&pod, grace, &apps, &sidecars).await,
                Action::TeardownSandbox => {
                    if !pod
                        .spec
                        .as_ref()
                        .and_then(|s| s.host_network)
                        .unwrap_or(false)
                    {
                        self.network.teardown(uid).await?;
                    }
                    self.local_mut(uid, |l| l.sandbox = None);
                }
                Action::DeletePod => {
                    if let Some(pods) = resource::by_plural("", "v1", "pods") {
                        let opts = serde_json::json!({"gracePeriodSeconds": 0, "preconditions": {"uid": uid}});
                        match self
                            .client
                            .delete(pods, Some(&ns_of(&pod)), &name_of(&pod), &opts)
                            .await
                        {
                            Ok(()) => {}
                            Err(e) if e.is_conflict() => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                    self.finish(uid).await?;
                    return Ok(Outcome::Done);
                }
                Action::WaitUntil(t) => {
                    let d = Timestamp::now()
                        .duration_until(t)
                        .unsigned_abs()
                        .max(Duration::from_millis(100));
                    if t > Timestamp::now() {
                        outcome = Outcome::RequeueAfter(d.min(Duration::from_secs(10)));
                    } else {
                        outcome = Outcome::RequeueAfter(Duration::from_millis(100));
                    }
                }
                Action::ReportStatus => {
                    // Status from a fresh observation, so what was just done shows at once.
                    let (after, _) = self.observe(uid, &pod, Timestamp::now()).await?;
                    self.report(&pod, &after).await?;
                    self.local_mut(uid, |l| l.fresh_pull_failures.clear());
                }
            }
        }
        Ok(outcome)
    }

    async fn report(&self, pod: &Pod, observed: &Observed) -> Result<(), WorkerError> {
        let status = super::status::pod_status(pod, observed, Timestamp::now());
        if pod.status.as_ref() == Some(&status) || pod.metadata.resource_version.is_none() {
            return Ok(());
        }
        let Some(pods) = resource::by_plural("", "v1", "pods") else {
            return Ok(());
        };
        let mut updated = pod.clone();
        updated.status = Some(status.clone());
        match self
            .client
            .replace(pods, Some(&ns_of(pod)), &name_of(pod), &updated, true)
            .await
        {
            Ok(p) => {
                let entered = super::status::backoff_events(pod, pod.status.as_ref(), &status);
                self.remember(p);
                for e in entered {
                    self.events
                        .record(pod, e.warning, "BackOff", &e.message, Some(&e.field_path))
                        .await;
                }
                Ok(())
            }
            // A newer pod is on its way through the watch; the next pass writes again.
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn create_sandbox(&self, uid: &str, pod: &Pod, attempt: u32) -> Result<(), WorkerError> {
        let host_network = pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        let ip = if host_network {
            self.host_ip.clone()
        } else {
            let mut r = PodRef::new(uid, ns_of(pod), name_of(pod));
            r.host_ports = crate::network::host_ports(pod);
            self.network.setup(&r).await?.ip.to_string()
        };
        let host_files = crate::network::files::observe_host_files().await?;
        let ip_addr = ip.parse().ok();
        let files = crate::network::files::plan_pod_files(
            pod,
            if host_network { None } else { ip_addr },
            &host_files,
            &self.dns,
        )?;
        let dir = volumes::pod_dir(&self.config.root_dir, uid).join("etc");
        crate::network::files::write_pod_files(&dir, &files).await?;
        self.local_mut(uid, |l| {
            l.sandbox = Some(Sandbox::Ready {
                attempt,
                ips: vec![ip.clone()],
            })
        });
        Ok(())
    }

    async fn pull(&self, uid: &str, pod: &Pod, name: &str, now: Timestamp) {
        let Some(c) = all_containers(pod).into_iter().find(|c| c.name == name) else {
            return;
        };
        let image = c.image.clone().unwrap_or_default();
        let policy = c
            .image_pull_policy
            .as_deref()
            .and_then(PullPolicy::parse)
            .unwrap_or_else(|| default_pull_policy(&image));
        let field = format!("spec.containers{{{name}}}");
        let present = matches!(self.images.get(&image).await, Ok(Some(_)));
        if policy == PullPolicy::Never && !present {
            let message =
                format!("Container image \"{image}\" is not present with pull policy of Never");
            self.events
                .record(pod, true, "ErrImageNeverPull", &message, Some(&field))
                .await;
            self.local_mut(uid, |l| {
                let prev = match l.pulls.get(name) {
                    Some(ImagePull::Failed { backoff, .. }) => Some(*backoff),
                    _ => None,
                };
                l.pulls.insert(
                    name.to_string(),
                    ImagePull::Failed {
                        reason: PullFailure::ErrImageNeverPull,
                        message: message.clone(),
                        backoff: image_pull_failed(prev, now),
                    },
                );
            });
            return;
        }
        if present && policy != PullPolicy::Always {
            self.events
                .record(
                    pod,
                    false,
                    "Pulled",
                    &format!("Container image \"{image}\" already present on machine"),
                    Some(&field),
                )
                .await;
            self.local_mut(uid, |l| {
                l.pulls.insert(name.to_string(), ImagePull::Pulled);
            });
            return;
        }
        self.events
            .record(
                pod,
                false,
                "Pulling",
                &format!("Pulling image \"{image}\""),
                Some(&field),
            )
            .await;
        match self.images.pull(&image, policy).await {
            Ok(p) => {
                let msg = format!(
                    "Successfully pulled image \"{image}\" in {:.3}s. Image size: {} bytes.",
                    p.duration.as_secs_f64(),
                    p.size_bytes
                );
                self.events
                    .record(pod, false, "Pulled", &msg, Some(&field))
                    .await;
                self.local_mut(uid, |l| {
                    l.pulls.insert(name.to_string(), ImagePull::Pulled);
                });
            }
            Err(e) => {
                let message = format!("Failed to pull image \"{image}\": {e}");
                self.events
                    .record(pod, true, "Failed", &message, Some(&field))
                    .await;
                self.events
                    .record(pod, true, "Failed", "Error: ErrImagePull", Some(&field))
                    .await;
                self.local_mut(uid, |l| {
                    let prev = match l.pulls.get(name) {
                        Some(ImagePull::Failed { backoff, .. }) => Some(*backoff),
                        _ => None,
                    };
                    l.pulls.insert(
                        name.to_string(),
                        ImagePull::Failed {
                            reason: PullFailure::ErrImagePull,
                            message: message.clone(),
                            backoff: image_pull_failed(prev, now),
                        },
                    );
                    l.fresh_pull_failures.insert(name.to_string());
                });
            }
        }
    }

    async fn sources(&self, pod: &Pod) -> ResolvedSources {
        let ns = ns_of(pod);
        let mut out = ResolvedSources::default();
        let v = serde_json::to_value(pod).unwrap_or_default();
        let mut cms = std::collections::BTreeSet::new();
        let mut secrets = std::collections::BTreeSet::new();
        collect_refs(&v["spec"], &mut cms, &mut secrets);
        if let Some(rt) = resource::by_plural("", "v1", "configmaps") {
            for name in cms {
                if let Ok(Some(cm)) = self.client.get::<ConfigMap>(rt, Some(&ns), &name).await {
                    let mut data = cm.data.unwrap_or_default();
                    for (k, b) in cm.binary_data.unwrap_or_default() {
                        data.insert(k, String::from_utf8_lossy(&b.0).into_owned());
                    }
                    out.configmaps.insert(name, data);
                }
            }
        }
        if let Some(rt) = resource::by_plural("", "v1", "secrets") {
            for name in secrets {
                if let Ok(Some(s)) = self.client.get::<Secret>(rt, Some(&ns), &name).await {
                    let mut data: BTreeMap<String, String> = s
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                        .collect();
                    data.extend(s.string_data.unwrap_or_default());
                    out.secrets.insert(name, data);
                }
            }
        }
        out
    }

    async fn start(
        &self,
        uid: &str,
        pod: &Pod,
        name: &str,
        restart: u32,
        backoff: Option<Backoff>,
        (sandbox, ip): (u32, String),
    ) {
        let field = format!("spec.containers{{{name}}}");
        match self
            .create_and_start(uid, pod, name, restart, backoff, sandbox, &ip)
            .await
        {
            Ok(()) => {
                self.local_mut(uid, |l| {
                    l.start_errors.remove(name);
                });
            }
            Err((reason, message)) => {
                self.events
                    .record(
                        pod,
                        true,
                        "Failed",
                        &format!("Error: {message}"),
                        Some(&field),
                    )
                    .await;
                self.local_mut(uid, |l| {
                    l.start_errors.insert(
                        name.to_string(),
                        StartError {
                            reason: reason.to_string(),
                            message,
                        },
                    );
                });
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn create_and_start(
        &self,
        uid: &str,
        pod: &Pod,
        name: &str,
        restart: u32,
        backoff: Option<Backoff>,
        sandbox: u32,
        ip: &str,
    ) -> Result<(), (&'static str, String)> {
        let c = all_containers(pod)
            .into_iter()
            .find(|c| c.name == name)
            .ok_or(("CreateContainerError", format!("no container {name}")))?;
        let image_ref = c.image.clone().unwrap_or_default();
        let image = match self.images.get(&image_ref).await {
            Ok(Some(i)) => i,
            _ => return Err(("ErrImagePull", format!("image {image_ref} is not present"))),
        };
        let sources = self.sources(pod).await;
        let vols = volumes::prepare(&self.config.root_dir, pod, &sources)
            .map_err(|e| ("CreateContainerConfigError", e.to_string()))?;
        let id = container_id(uid, name, sandbox, restart)
            .ok_or(("CreateContainerError", "invalid container id".to_string()))?;
        let dir = volumes::pod_dir(&self.config.root_dir, uid);
        let term_log = dir
            .join("containers")
            .join(name)
            .join(format!("{restart}-termination-log"));
        if let Some(p) = term_log.parent() {
            let _ = std::fs::create_dir_all(p);
        }
        let _ = std::fs::write(&term_log, b"");
        let log_path = self
            .config
            .log_dir
            .join(format!("{}_{}_{}", ns_of(pod), name_of(pod), uid))
            .join(name)
            .join(format!("{restart}.log"));
        let host_network = pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        let etc = dir.join("etc");
        let host = HostSide {
            volumes: vols,
            hosts_file: Some(etc.join("hosts")),
            resolv_conf: Some(etc.join("resolv.conf")),
            hostname_file: Some(etc.join("hostname")),
            termination_log: Some(term_log.clone()),
            network_namespace: if host_network {
                None
            } else {
                Some(self.network.netns_path(uid))
            },
            log_path,
            pod_ip: ip.to_string(),
            host_ip: self.host_ip.clone(),
            node_cpu_millis: i64::from(self.facts_cpus) * 1000,
            node_memory_bytes: self.facts_memory,
        };
        let mut labels = BTreeMap::new();
        labels.insert(LABEL_POD_UID.to_string(), uid.to_string());
        labels.insert(LABEL_POD_NAME.to_string(), name_of(pod));
        labels.insert(LABEL_POD_NAMESPACE.to_string(), ns_of(pod));
        labels.insert(LABEL_CONTAINER.to_string(), name.to_string());
        labels.insert(LABEL_RESTART.to_string(), restart.to_string());
        labels.insert(LABEL_SANDBOX.to_string(), sandbox.to_string());
        labels.insert(LABEL_SPEC_IMAGE.to_string(), image_ref.clone());
        labels.insert(LABEL_IMAGE_ID.to_string(), image.image_id());
        labels.insert(
            LABEL_TERMINATION_LOG.to_string(),
            term_log.display().to_string(),
        );
        if let Some(b) = backoff {
            labels.insert(
                LABEL_BACKOFF_DELAY.to_string(),
                b.delay.as_millis().to_string(),
            );
            labels.insert(LABEL_BACKOFF_SINCE.to_string(), b.since.to_string());
        }
        let oom = container_config::oom_score_adj(pod, &c, self.facts_memory);
        let config = container_config::container_config(
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
        // A leftover of a failed earlier start with the same id is replaced.
        let _ = self.runtime.remove(&id).await;
        self.runtime
            .create(&config)
            .await
            .map_err(|e| ("CreateContainerError", e.to_string()))?;
        let field = format!("spec.containers{{{name}}}");
        self.events
            .record(
                pod,
                false,
                "Created",
                &format!("Created container {name}"),
                Some(&field),
            )
            .await;
        self.runtime
            .start(&id)
            .await
            .map_err(|e| ("RunContainerError", e.to_string()))?;
        self.events
            .record(
                pod,
                false,
                "Started",
                &format!("Started container {name}"),
                Some(&field),
            )
            .await;
        if let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref())
            && let Err(msg) =
                super::hooks::run(&self.runtime, &id, hook, ip, Duration::from_secs(30)).await
        {
            self.events
                .record(pod, true, "FailedPostStartHook", &msg, Some(&field))
                .await;
            let _ = self.runtime.kill(&id, 9).await;
        }
        Ok(())
    }

    /// Stops one container: preStop, then its stop signal, then SIGKILL when `grace` is up.
    async fn kill(&self, pod: &Pod, name: &str, id: &str, grace: Duration, pre_stop: bool) {
        let Ok(cid) = ContainerId::new(id.to_string()) else {
            return;
        };
        let deadline = tokio::time::Instant::now() + grace;
        let c = all_containers(pod).into_iter().find(|c| c.name == name);
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        if pre_stop
            && let Some(hook) = c
                .as_ref()
                .and_then(|c| c.lifecycle.as_ref())
                .and_then(|l| l.pre_stop.as_ref())
            && let Err(msg) = super::hooks::run(&self.runtime, &cid, hook, &ip, grace).await
        {
            self.events
                .record(
                    pod,
                    true,
                    "FailedPreStopHook",
                    &msg,
                    Some(&format!("spec.containers{{{name}}}")),
                )
                .await;
        }
        let signal = self
            .images
            .get(&c.and_then(|c| c.image).unwrap_or_default())
            .await
            .ok()
            .flatten()
            .and_then(|i| i.config.stop_signal)
            .and_then(|s| signal_number(&s))
            .unwrap_or(15);
        let _ = self.runtime.kill(&cid, signal).await;
        let waited = tokio::time::timeout_at(deadline, self.runtime.wait_exit(&cid)).await;
        if waited.is_err() {
            let _ = self.runtime.kill(&cid, 9).await;
            let _ =
                tokio::time::timeout(Duration::from_secs(10), self.runtime.wait_exit(&cid)).await;
        }
    }

    async fn kill_pod(
        &self,
        pod: &Pod,
        grace: Duration,
        apps: &[KillTarget],
        sidecars: &[KillTarget],
    ) {
        let start = tokio::time::Instant::now();
        let ids: Vec<String> = apps.iter().map(|t| t.id.to_string()).collect();
        let kills = apps
            .iter()
            .zip(&ids)
            .map(|(t, id)| self.kill(pod, &t.name, id, grace, t.pre_stop));
        futures::future::join_all(kills).await;
        for t in sidecars {
            let left = grace
                .saturating_sub(start.elapsed())
                .max(Duration::from_secs(2));
            self.kill(pod, &t.name, &t.id.to_string(), left, t.pre_stop)
                .await;
        }
    }

    fn sync_probers(&self, uid: &str, pod: &Pod, observed: &Observed, infos: &[ContainerInfo]) {
        let running: Vec<(String, ContainerId, Timestamp)> = infos
            .iter()
            .filter_map(|i| match i.state {
                TaskState::Running { started_at, .. } => Some((
                    i.labels.get(LABEL_CONTAINER)?.clone(),
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
        // The map holds every pod's probers: only this pod's stopped attempts lose theirs.
        probers.retain(|id, (owner, handle, _)| {
            let keep = owner != uid || running.iter().any(|(_, rid, _)| rid.as_str() == id);
            if !keep {
                handle.abort();
            }
            keep
        });
        for (name, id, since) in running {
            if let Some((_, _, flag)) = probers.get(id.as_str()) {
                flag.store(deleting, std::sync::atomic::Ordering::Relaxed);
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
            let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(deleting));
            let probed = prober::Probed {
                runtime: self.runtime.clone(),
                id: id.clone(),
                container: c,
                pod_ip: pod_ip.clone(),
                running_since: since,
                deleting: flag.clone(),
            };
            let queue = self.queue.clone();
            let key = uid.to_string();
            let events = self.events.clone();
            let (pod_for_events, field) = (pod.clone(), format!("spec.containers{{{name}}}"));
            let on_failure = move |message: String| {
                let (events, pod, field) = (events.clone(), pod_for_events.clone(), field.clone());
                tokio::spawn(async move {
                    events
                        .record(&pod, true, "Unhealthy", &message, Some(&field))
                        .await
                });
            };
            let handle = tokio::spawn(prober::run(
                probed,
                self.probes.clone(),
                move || queue.add(key.clone()),
                on_failure,
            ));
            probers.insert(id.to_string(), (uid.to_string(), handle, flag));
        }
    }

    /// The pod is gone: forget it and remove what is left on the host.
    pub async fn finish(&self, uid: &str) -> Result<(), WorkerError> {
        for info in self.runtime.list().await? {
            if info.labels.get(LABEL_POD_UID).map(String::as_str) == Some(uid) {
                self.runtime.remove(&info.id).await?;
                self.probes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(info.id.as_str());
            }
        }
        self.network.teardown(uid).await?;
        volumes::remove(&self.config.root_dir, uid)?;
        self.forget(uid);
        self.events.forget(uid);
        Ok(())
    }
}

fn collect_refs(
    v: &serde_json::Value,
    cms: &mut std::collections::BTreeSet<String>,
    secrets: &mut std::collections::BTreeSet<String>,
) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                let name = child.get("name").and_then(|n| n.as_str());
                match k.as_str() {
                    "configMapKeyRef" | "configMapRef" | "configMap" => {
                        if let Some(n) = name {
                            cms.insert(n.to_string());
                        }
                    }
                    "secretKeyRef" | "secretRef" => {
                        if let Some(n) = name {
                            secrets.insert(n.to_string());
                        }
                    }
                    "secret" => {
                        if let Some(n) = child.get("secretName").and_then(|n| n.as_str()).or(name) {
                            secrets.insert(n.to_string());
                        }
                    }
                    _ => {}
                }
                collect_refs(child, cms, secrets);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_refs(x, cms, secrets)),
        _ => {}
    }
}

fn signal_number(s: &str) -> Option<i32> {
    let name = s.trim().trim_start_matches("SIG");
    if let Ok(n) = name.parse() {
        return Some(n);
    }
    Some(match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        "WINCH" => 28,
        _ => return None,
    })
}

pub fn ns_of(pod: &Pod) -> String {
    pod.metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_string())
}

pub fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
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

    #[test]
    fn stop_signals_parse_by_name_or_number() {
        assert_eq!(signal_number("SIGQUIT"), Some(3));
        assert_eq!(signal_number("15"), Some(15));
        assert_eq!(signal_number("SIGNOPE"), None);
    }

    #[test]
    fn referenced_configmaps_and_secrets_are_collected() {
        let spec = serde_json::json!({"volumes": [{"name": "v", "configMap": {"name": "cm"}}, {"name": "s", "secret": {"secretName": "sec"}}],
            "containers": [{"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}]}]});
        let (mut c, mut s) = (Default::default(), Default::default());
        collect_refs(&spec, &mut c, &mut s);
        assert!(c.contains("cm"));
        assert!(s.contains("sec") && s.contains("s2"));
    }
}
