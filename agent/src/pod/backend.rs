//! The agent server's backend for this node's pods: which log file `kubectl logs` reads (and
//! whether to keep following it), exec into and attach to a running container (init, app or
//! ephemeral: they share one namespace of names), and the metrics of the agent
//! and of the running containers. Containers are found by
//! their labels ([`labels`]), pods in the manager's cache.

use super::labels;
use super::manager::PodManager;
use super::starting::Starting;
use crate::metrics::{Running, resource};
use crate::runtime::{ContainerId, ExecIo, TaskState};
use crate::server::{Backend, ExecRequest, ExecStreams, LogTarget, PodNetwork};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::{AttachIo, ContainerInfo};
use crate::server::AttachRequest;

/// How long a request for a pod's containers waits for a starting agent's manager.
const STARTUP_WAIT: Duration = Duration::from_secs(30);

/// The server's view of the pod manager, attached once the manager exists.
#[derive(Default)]
pub struct ManagerBackend {
    manager: Starting<PodManager>,
}

impl ManagerBackend {
    pub fn attach(&self, m: Arc<PodManager>) {
        self.manager.set(m);
    }
}

/// The attempt `kubectl logs --previous` reads (the container status's `lastState`, as the
/// kubelet's `validateContainerLogStatus` picks it): in back-off after an exit, the attempt
/// that exited (the restart count's); otherwise the newest attempt before the current one.
/// Without a status, the second newest log. `restarts` is sorted.
fn previous_attempt(
    pod: &berth_api::k8s_openapi::api::core::v1::Pod,
    container: &str,
    restarts: &[u32],
) -> Option<u32> {
    let status = pod.status.as_ref().and_then(|s| {
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
            .find(|c| c.name == container)
    });
    let Some(status) = status.filter(|s| {
        s.last_state
            .as_ref()
            .is_some_and(|l| l.terminated.is_some())
    }) else {
        return restarts.len().checked_sub(2).map(|i| restarts[i]);
    };
    let current = u32::try_from(status.restart_count).unwrap_or(0);
    let waiting = status.state.as_ref().is_some_and(|s| s.waiting.is_some());
    if waiting && restarts.contains(&current) {
        return Some(current);
    }
    restarts.iter().copied().filter(|r| *r < current).max()
}

impl Backend for ManagerBackend {
    fn metrics(&self) -> BoxFuture<'static, Result<String, String>> {
        let m = self.manager.now();
        Box::pin(async move {
            let m = m?;
            let list = m.runtime().list().await.map_err(|e| e.to_string())?;
            let running: Vec<_> = list
                .iter()
                .filter(|c| matches!(c.state, TaskState::Running { .. }))
                .collect();
            let pods: std::collections::BTreeSet<&str> = running
                .iter()
                .filter_map(|c| labels::pod_uid(&c.labels))
                .collect();
            Ok(m.metrics().render(Running {
                pods: pods.len(),
                containers: running.len(),
            }))
        })
    }

    fn resource_metrics(&self) -> BoxFuture<'static, Result<String, String>> {
        let m = self.manager.now();
        Box::pin(async move {
            let m = m?;
            let list = m.runtime().list().await.map_err(|e| e.to_string())?;
            let namespace = m.runtime().namespace().to_string();
            // cgroup files live in memory (sysfs): reading a few hundred takes about a
            // millisecond and never waits on a disk, so it is done in place rather than on
            // the blocking pool, whose fresh threads each grow their own malloc arena.
            let scrape = resource::read(&namespace, &list, jiff::Timestamp::now());
            Ok(resource::render(&scrape))
        })
    }

    fn pod_netns(&self, ns: &str, pod: &str) -> BoxFuture<'static, Result<PodNetwork, String>> {
        let m = self.manager.wait(STARTUP_WAIT);
        let (ns, pod) = (ns.to_string(), pod.to_string());
        Box::pin(async move {
            let m = m.await?;
            let p = m
                .pods()
                .find(&ns, &pod)
                .ok_or_else(|| format!("pod {ns}/{pod} not found on this node"))?;
            let uid = p.metadata.uid.clone().unwrap_or_default();
            let list = m
                .runtime()
                .list_labelled(labels::LABEL_POD_UID, &uid)
                .await
                .map_err(|e| e.to_string())?;
            let pid = list
                .iter()
                .find_map(|c| match c.state {
                    TaskState::Running { pid, .. } => Some(pid),
                    _ => None,
                })
                .ok_or_else(|| format!("pod {ns}/{pod} has no running container"))?;
            Ok(PodNetwork {
                netns: format!("/proc/{pid}/ns/net").into(),
                uid,
            })
        })
    }

    fn log_target(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<LogTarget, String> {
        let m = self.manager.now()?;
        let p = m
            .pods()
            .find(ns, pod)
            .ok_or_else(|| format!("pod {ns}/{pod} not found on this node"))?;
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let dir = m
            .log_dir()
            .join(format!("{ns}_{pod}_{uid}"))
            .join(container);
        let mut restarts: Vec<u32> = std::fs::read_dir(&dir)
            .map_err(|_| format!("container \"{container}\" in pod \"{pod}\" is waiting to start"))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
            .collect();
        restarts.sort_unstable();
        let pick = if previous {
            previous_attempt(&p, container, &restarts).ok_or_else(|| {
                format!("previous terminated container \"{container}\" in pod \"{pod}\" not found")
            })?
        } else {
            *restarts.last().ok_or_else(|| {
                format!("container \"{container}\" in pod \"{pod}\" is waiting to start")
            })?
        };
        let runtime = m.runtime().clone();
        let (uid2, name) = (uid.clone(), container.to_string());
        let running = Arc::new(move || {
            // Follow ends when this attempt is no longer running.
            let rt = runtime.clone();
            let (uid, name) = (uid2.clone(), name.clone());
            let handle = tokio::runtime::Handle::current();
            std::thread::scope(|sc| {
                sc.spawn(|| {
                    handle.block_on(async {
                        rt.list_labelled(labels::LABEL_POD_UID, &uid)
                            .await
                            .map(|l| {
                                l.iter().any(|c| {
                                    labels::is_attempt(&c.labels, &uid, &name, pick)
                                        && matches!(c.state, TaskState::Running { .. })
                                })
                            })
                    })
                })
                .join()
                .ok()
                .and_then(Result::ok)
                .unwrap_or(false)
            })
        });
        Ok(LogTarget {
            path: dir.join(format!("{pick}.log")),
            running,
        })
    }

    fn exec(&self, req: ExecRequest) -> BoxFuture<'static, Result<ExecStreams, String>> {
        let m = self.manager.wait(STARTUP_WAIT);
        Box::pin(async move {
            let m = m.await?;
            let list = m.runtime().list().await.map_err(|e| e.to_string())?;
            let id = running_container(&list, &req.namespace, &req.pod, &req.container)?;
            let handle = m
                .runtime()
                .exec(
                    &id,
                    &req.command,
                    ExecIo {
                        stdin: req.stdin,
                        tty: req.tty,
                    },
                )
                .await
                .map_err(|e| e.to_string())?;
            let control = handle.control.clone();
            let resize_control = handle.control.clone();
            let stdin_control = handle.control.clone();
            let stdout: std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>> = match handle.stdout {
                Some(s) => Box::pin(s),
                None => Box::pin(tokio::io::empty()),
            };
            Ok(ExecStreams {
                stdout,
                stderr: handle
                    .stderr
                    .map(|s| Box::pin(s) as std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>),
                stdin: handle
                    .stdin
                    .map(|s| Box::pin(s) as std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>),
                resize: Some(Box::new(move |w, h| {
                    let c = resize_control.clone();
                    tokio::spawn(async move {
                        let _ = c.resize(w, h).await;
                    });
                })),
                close_stdin: Some(Box::new(move || {
                    let c = stdin_control.clone();
                    tokio::spawn(async move {
                        let _ = c.close_stdin().await;
                    });
                })),
                exit: Box::pin(async move { control.wait().await.map_err(|e| e.to_string()) }),
            })
        })
    }

    fn attach(&self, req: AttachRequest) -> BoxFuture<'static, Result<ExecStreams, String>> {
        let m = self.manager.wait(STARTUP_WAIT);
        Box::pin(async move {
            let m = m.await?;
            if req.stdin && !has_stdin(m.pods().find(&req.namespace, &req.pod), &req.container) {
                return Err(format!(
                    "cannot attach stdin: container {} of pod {} was not created with stdin: true",
                    req.container, req.pod
                ));
            }
            let list = m.runtime().list().await.map_err(|e| e.to_string())?;
            let id = running_container(&list, &req.namespace, &req.pod, &req.container)?;
            let io = AttachIo {
                stdin: req.stdin,
                stdout: req.stdout,
                stderr: req.stderr,
            };
            let handle = m
                .runtime()
                .attach(&id, io)
                .await
                .map_err(|e| e.to_string())?;
            let resize_control = handle.control.clone();
            let control = handle.control.clone();
            let stdout: Reader = match handle.stdout {
                Some(s) => Box::pin(s),
                None => Box::pin(tokio::io::empty()),
            };
            Ok(ExecStreams {
                stdout,
                stderr: handle.stderr.map(|s| Box::pin(s) as Reader),
                // Shutting it down ends this client's input (and with stdinOnce, the stdin).
                stdin: handle.stdin.map(|s| Box::pin(s) as Writer),
                resize: handle.tty.then(|| {
                    Box::new(move |w, h| {
                        let c = resize_control.clone();
                        tokio::spawn(async move {
                            let _ = c.resize(w, h).await;
                        });
                    }) as Box<dyn Fn(u16, u16) + Send + Sync>
                }),
                close_stdin: None,
                exit: Box::pin(async move {
                    control.ended().await;
                    Ok(0)
                }),
            })
        })
    }
}

/// The latest running attempt of a pod's container, or the error kubectl shows.
fn running_container(
    list: &[ContainerInfo],
    namespace: &str,
    pod: &str,
    container: &str,
) -> Result<ContainerId, String> {
    list.iter()
        .filter(|c| {
            labels::is_container_of(&c.labels, namespace, pod, container)
                && matches!(c.state, TaskState::Running { .. })
        })
        .max_by_key(|c| labels::restart_index(&c.labels))
        .map(|c| c.id.clone())
        .ok_or_else(|| format!("container {container} is not running"))
}

type Reader = std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>;
type Writer = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// Whether the pod's container (init, app or ephemeral) was created with `stdin: true`. The
/// kubelet and containerd's CRI silently drop input for one without; refusing it says why
/// nothing reaches the process.
fn has_stdin(pod: Option<berth_api::k8s_openapi::api::core::v1::Pod>, container: &str) -> bool {
    let Some(spec) = pod.and_then(|p| p.spec) else {
        return false;
    };
    let init = spec.init_containers.iter().flatten();
    let regular = init
        .chain(spec.containers.iter())
        .map(|c| (&c.name, c.stdin));
    let ephemeral = spec.ephemeral_containers.iter().flatten();
    regular
        .chain(ephemeral.map(|c| (&c.name, c.stdin)))
        .any(|(name, stdin)| name == container && stdin == Some(true))
}
