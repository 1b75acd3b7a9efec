//! `berth-hollow-nodes`: simulated nodes for scale benchmarks, as Kubernetes' kubemark does.
//! Registers N Ready nodes (with hostname and zone labels), renews their Leases in
//! `kube-node-lease`, and marks the pods bound to them Running and Ready without running any
//! container; with `--run-to-completion-after D`, pods that do not restart (`restartPolicy`
//! Never or OnFailure, as a Job's) then exit 0 and end Succeeded D later. Talks to the controller over HTTPS with a kubeconfig's client certificate.
//! Benchmarks only: agent behaviour tests never use it.

use anyhow::{Context, anyhow};
use berth_shared::client::{Client, ClientError, Credentials, ListParams, WatchEvent};
use berth_shared::resource::{ResourceType, by_plural};
use clap::Parser;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

#[derive(Parser, Clone)]
#[command(name = "berth-hollow-nodes", about = "Simulated nodes for benchmarks")]
struct Cli {
    /// API server URL (default: the kubeconfig's).
    #[arg(long)]
    server: Option<String>,
    /// Admin kubeconfig with an embedded client certificate.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// How many nodes to simulate.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// Node names are PREFIX0, PREFIX1, …
    #[arg(long, default_value = "hollow-")]
    prefix: String,
    /// Nodes are spread over this many zones (`topology.kubernetes.io/zone`).
    #[arg(long, default_value_t = 3)]
    zones: usize,
    #[arg(long, default_value = "4")]
    cpu: String,
    #[arg(long, default_value = "16Gi")]
    memory: String,
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// Seconds between Lease renewals of each node.
    #[arg(long, default_value_t = 10)]
    lease_interval: u64,
    /// API writes in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Pods with `restartPolicy` Never or OnFailure exit 0 (phase Succeeded) this long after
    /// they are marked Running (`1s`, `500ms`, …), as kubemark can; unset, they run for ever.
    #[arg(long, value_parser = berth_controller::server::parse_duration)]
    run_to_completion_after: Option<Duration>,
}

fn rt(group: &str, version: &str, plural: &str) -> anyhow::Result<&'static ResourceType> {
    by_plural(group, version, plural).ok_or_else(|| anyhow!("unknown resource {plural}"))
}

/// Reads the server, CA and client certificate embedded in a kubeconfig.
fn load_kubeconfig(path: &PathBuf) -> anyhow::Result<(String, String, Credentials)> {
    use base64::Engine;
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let doc: Value = serde_saphyr::from_str(&text).context("parsing the kubeconfig")?;
    let field = |ptr: &str| -> anyhow::Result<String> {
        let b64 = doc
            .pointer(ptr)
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("kubeconfig lacks {ptr}"))?;
        let raw = base64::engine::general_purpose::STANDARD.decode(b64.trim())?;
        Ok(String::from_utf8(raw)?)
    };
    let server = doc
        .pointer("/clusters/0/cluster/server")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ca = field("/clusters/0/cluster/certificate-authority-data")?;
    let creds = Credentials::Certificate {
        cert_pem: field("/users/0/user/client-certificate-data")?,
        key_pem: field("/users/0/user/client-key-data")?,
    };
    Ok((server, ca, creds))
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn now_micro() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
}

/// The fake address block of node `i`: 10.(128 + i / 256).(i % 256).0/24.
fn node_block(i: usize) -> (u32, u32) {
    (128 + (i / 256) as u32 % 128, (i % 256) as u32)
}

fn node_object(cli: &Cli, i: usize) -> Value {
    let name = format!("{}{i}", cli.prefix);
    let (a, b) = node_block(i);
    let resources = json!({"cpu": cli.cpu, "memory": cli.memory, "pods": cli.max_pods.to_string(),
        "ephemeral-storage": "100Gi"});
    let ts = now();
    let cond = |t: &str, s: &str, reason: &str| {
        json!({"type": t, "status": s, "reason": reason, "message": "hollow node",
            "lastHeartbeatTime": ts, "lastTransitionTime": ts})
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "hollow",
            "topology.kubernetes.io/zone": format!("zone-{}", i % cli.zones.max(1))}},
        "spec": {"podCIDR": format!("10.{a}.{b}.0/24"), "podCIDRs": [format!("10.{a}.{b}.0/24")]},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID"),
                cond("Ready", "True", "KubeletReady"),
            ],
            "addresses": [{"type": "InternalIP", "address": format!("10.{a}.{b}.1")},
                {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.34.0-hollow", "containerRuntimeVersion": "hollow://0",
                "operatingSystem": "linux", "architecture": "amd64", "osImage": "hollow",
                "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "systemUUID": "",
                "bootID": ""},
        },
    })
}

/// One container status per `spec.containers` entry, made by `status(container, name, id)`
/// where `id` is the hollow container id `hollow://<pod uid>/<name>`.
fn container_statuses(pod: &Value, status: impl Fn(&Value, &str, String) -> Value) -> Vec<Value> {
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default();
            status(c, name, format!("hollow://{uid}/{name}"))
        })
        .collect()
}

/// When the pod's condition `condition` last changed; `now` when the pod has no such condition.
fn transition_time(pod: &Value, condition: &str, now: &str) -> Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == condition))
        .map_or_else(|| json!(now), |c| c["lastTransitionTime"].clone())
}

/// The status a kubelet would report for a pod whose containers all started.
fn running_status(pod: &Value, pod_ip: &str, host_ip: &str) -> Value {
    let ts = now();
    let scheduled_at = transition_time(pod, "PodScheduled", &ts);
    let containers = container_statuses(pod, |c, name, id| {
        json!({"name": name, "image": c["image"], "imageID": "", "containerID": id,
            "ready": true, "started": true, "restartCount": 0,
            "state": {"running": {"startedAt": ts}}})
    });
    let cond = |t: &str, at: &Value| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": at});
    let now_v = json!(ts);
    json!({"status": {
        "phase": "Running", "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": ts, "qosClass": pod["status"]["qosClass"],
        "conditions": [cond("PodReadyToStartContainers", &now_v), cond("Initialized", &now_v),
            cond("Ready", &now_v), cond("ContainersReady", &now_v), cond("PodScheduled", &scheduled_at)],
        "containerStatuses": containers,
    }})
}

/// The status a kubelet would report once every container of the pod exited 0: phase
/// Succeeded, each container `terminated` (reason Completed) since it started, Ready and
/// ContainersReady False with reason PodCompleted.
fn succeeded_status(pod: &Value) -> Value {
    let ts = now();
    let started_at = |name: &str| {
        pod["status"]["containerStatuses"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .map_or_else(|| json!(ts), |c| c["state"]["running"]["startedAt"].clone())
    };
    let containers = container_statuses(pod, |c, name, id| {
        json!({"name": name, "image": c["image"], "imageID": "", "containerID": id,
            "ready": false, "started": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                "startedAt": started_at(name), "finishedAt": ts, "containerID": id}}})
    });
    let kept = |t: &str| transition_time(pod, t, &ts);
    let cond = |t: &str, status: &str, at: Value, reason: Option<&str>| {
        let mut c =
            json!({"type": t, "status": status, "lastProbeTime": null, "lastTransitionTime": at});
        if let Some(r) = reason {
            c["reason"] = json!(r);
        }
        c
    };
    json!({"status": {
        "phase": "Succeeded",
        "conditions": [
            cond("PodReadyToStartContainers", "False", json!(ts), None),
            cond("Initialized", "True", kept("Initialized"), None),
            cond("Ready", "False", json!(ts), Some("PodCompleted")),
            cond("ContainersReady", "False", json!(ts), Some("PodCompleted")),
            cond("PodScheduled", "True", kept("PodScheduled"), None),
        ],
        "containerStatuses": containers,
    }})
}

/// What a hollow node does about a pod the watch shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum PodAction {
    /// Not bound to one of our nodes, or nothing left to do.
    Ignore,
    /// Deleted gracefully: no containers to stop, so finish the deletion.
    FinishDeletion,
    /// Bound and not started: report it Running and Ready.
    Start,
    /// Running and not restarting: report it Succeeded after this long.
    Complete { after: Duration },
}

/// The planner of a hollow node: pure, from the pod as the watch shows it.
fn plan_pod(pod: &Value, ours: bool, run_to_completion: Option<Duration>) -> PodAction {
    if !ours {
        return PodAction::Ignore;
    }
    if pod["metadata"]["deletionTimestamp"].is_string() {
        return PodAction::FinishDeletion;
    }
    let finishes = matches!(
        pod["spec"]["restartPolicy"].as_str(),
        Some("Never" | "OnFailure")
    );
    match (pod["status"]["phase"].as_str(), run_to_completion) {
        (Some("Succeeded" | "Failed"), _) => PodAction::Ignore,
        (Some("Running"), Some(after)) if finishes => PodAction::Complete { after },
        (Some("Running"), _) => PodAction::Ignore,
        _ => PodAction::Start,
    }
}

async fn register(client: &Client, cli: &Cli, i: usize) -> anyhow::Result<()> {
    let nodes = rt("", "v1", "nodes")?;
    let node = node_object(cli, i);
    let name = node["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let created: Value = match client.create(nodes, None, &node).await {
        Ok(v) => v,
        Err(e) if e.code() == Some(409) => {
            let patch = json!({"status": node["status"]});
            client.merge_patch(nodes, None, &name, &patch, true).await?
        }
        Err(e) => return Err(e.into()),
    };
    let leases = rt("coordination.k8s.io", "v1", "leases")?;
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease", "ownerReferences": [{
            "apiVersion": "v1", "kind": "Node", "name": name, "uid": created["metadata"]["uid"]}]},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()}});
    match client
        .create::<Value>(leases, Some("kube-node-lease"), &lease)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(409) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Renews node `i`'s Lease every `interval`, starting at its slot in the interval.
async fn renew_lease(client: Client, name: String, slot: Duration, interval: Duration) {
    let Ok(leases) = rt("coordination.k8s.io", "v1", "leases") else {
        return;
    };
    tokio::time::sleep(slot).await;
    let mut tick = tokio::time::interval(interval);
    loop {
        tick.tick().await;
        let patch = json!({"spec": {"renewTime": now_micro(), "holderIdentity": name}});
        let r: Result<Value, ClientError> = client
            .merge_patch(leases, Some("kube-node-lease"), &name, &patch, false)
            .await;
        if let Err(e) = r {
            tracing::warn!(node = %name, error = %e, "lease renewal failed");
        }
    }
}

/// Per node: its index (for addresses) and the next pod address.
type Nodes = Arc<HashMap<String, (usize, AtomicU32)>>;

/// What the pod handlers share: the nodes, the completion delay, and the uids of pods whose
/// completion is already under way (a Running pod shows up on the watch more than once; a uid
/// leaves the set when its pod is deleted).
#[derive(Clone)]
struct Pods {
    nodes: Nodes,
    run_to_completion: Option<Duration>,
    completing: Arc<Mutex<HashSet<String>>>,
    /// Bounds the API writes in flight.
    gate: Arc<Semaphore>,
}

impl Pods {
    fn forget(&self, pod: &Value) {
        if let (Some(uid), Ok(mut set)) = (pod["metadata"]["uid"].as_str(), self.completing.lock())
        {
            set.remove(uid);
        }
    }

    /// True the first time it is asked about this pod's uid.
    fn claim_completion(&self, pod: &Value) -> bool {
        let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
        self.completing
            .lock()
            .is_ok_and(|mut set| set.insert(uid.to_string()))
    }
}

/// Carries out `action` for one pod seen on the watch.
async fn apply_pod(
    client: &Client,
    state: &Pods,
    pod: &Value,
    action: PodAction,
) -> Result<(), ClientError> {
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    let (Some((i, next_ip)), Some(pods)) = (state.nodes.get(node), by_plural("", "v1", "pods"))
    else {
        return Ok(());
    };
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let patch = match action {
        PodAction::Ignore => return Ok(()),
        PodAction::FinishDeletion => {
            let opts =
                json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0});
            return client.delete(pods, Some(ns), name, &opts).await;
        }
        PodAction::Start => {
            let (a, b) = node_block(*i);
            let host = next_ip.fetch_add(1, Ordering::Relaxed) % 252 + 2;
            running_status(pod, &format!("10.{a}.{b}.{host}"), &format!("10.{a}.{b}.1"))
        }
        PodAction::Complete { .. } => succeeded_status(pod),
    };
    client
        .merge_patch::<Value>(pods, Some(ns), name, &patch, true)
        .await
        .map(|_| ())
}

fn warn_unless_gone(result: Result<(), ClientError>) {
    if let Err(e) = result
        && !e.is_not_found()
    {
        tracing::warn!(error = %e, "updating a hollow pod");
    }
}

/// Watches every pod and hands those bound to hollow nodes to `handle_pod`.
async fn serve_pods(client: Client, state: Pods) -> anyhow::Result<()> {
    let pods = rt("", "v1", "pods")?;
    let mut rv = String::new();
    loop {
        let mut stream = match client
            .watch::<Value>(pods, None, &ListParams::default(), &rv)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "watching pods");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(ev) = stream.next().await {
            let pod = match ev {
                Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) => p,
                Ok(WatchEvent::Deleted(p)) => {
                    state.forget(&p);
                    rv = p["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .into();
                    continue;
                }
                Ok(WatchEvent::Bookmark(v)) => {
                    rv = v;
                    continue;
                }
                Err(e) => {
                    if e.is_gone() {
                        rv.clear();
                    }
                    tracing::warn!(error = %e, "pod watch");
                    break;
                }
            };
            rv = pod["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .into();
            let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
            let ours = state.nodes.contains_key(node);
            let (c, s) = (client.clone(), state.clone());
            match plan_pod(&pod, ours, state.run_to_completion) {
                PodAction::Ignore => {}
                // Waiting out the run time holds no write permit, so the other pods go on.
                PodAction::Complete { after } => {
                    if state.claim_completion(&pod) {
                        tokio::spawn(async move {
                            tokio::time::sleep(after).await;
                            let Ok(_permit) = s.gate.clone().acquire_owned().await else {
                                return;
                            };
                            warn_unless_gone(
                                apply_pod(&c, &s, &pod, PodAction::Complete { after }).await,
                            );
                        });
                    }
                }
                action => {
                    let permit = state.gate.clone().acquire_owned().await?;
                    tokio::spawn(async move {
                        warn_unless_gone(apply_pod(&c, &s, &pod, action).await);
                        drop(permit);
                    });
                }
            }
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BERTH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let (server, ca, creds) = load_kubeconfig(&cli.kubeconfig)?;
    let server = cli.server.clone().unwrap_or(server);
    let client = Client::new(&server, &ca, creds)?;
    let gate = Arc::new(Semaphore::new(cli.concurrency.max(1)));
    let started = std::time::Instant::now();
    let mut registering = tokio::task::JoinSet::new();
    for i in 0..cli.nodes {
        let (c, cli2, g) = (client.clone(), cli.clone(), gate.clone());
        registering.spawn(async move {
            let _permit = g.acquire_owned().await?;
            register(&c, &cli2, i).await
        });
    }
    while let Some(r) = registering.join_next().await {
        r??;
    }
    eprintln!(
        "registered {} hollow nodes in {:.1}s",
        cli.nodes,
        started.elapsed().as_secs_f64()
    );
    let interval = Duration::from_secs(cli.lease_interval.max(1));
    let mut nodes = HashMap::new();
    for i in 0..cli.nodes {
        let name = format!("{}{i}", cli.prefix);
        let slot = interval * i as u32 / cli.nodes.max(1) as u32;
        tokio::spawn(renew_lease(client.clone(), name.clone(), slot, interval));
        nodes.insert(name, (i, AtomicU32::new(0)));
    }
    let state = Pods {
        nodes: Arc::new(nodes),
        run_to_completion: cli.run_to_completion_after,
        completing: Arc::default(),
        gate: Arc::new(Semaphore::new(cli.concurrency.max(1))),
    };
    let pods = tokio::spawn(serve_pods(client, state));
    tokio::select! {
        r = pods => r??,
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Cli {
        Cli::parse_from(["berth-hollow-nodes", "--kubeconfig", "k", "--zones", "3"])
    }

    #[test]
    fn nodes_are_ready_labelled_and_spread_over_zones() {
        let n = node_object(&cli(), 4);
        assert_eq!(n["metadata"]["name"], "hollow-4");
        assert_eq!(
            n["metadata"]["labels"]["kubernetes.io/hostname"],
            "hollow-4"
        );
        assert_eq!(
            n["metadata"]["labels"]["topology.kubernetes.io/zone"],
            "zone-1"
        );
        assert_eq!(n["status"]["allocatable"]["cpu"], "4");
        let ready = n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(ready);
        assert_eq!(node_block(257), (129, 1));
    }

    #[test]
    fn a_running_pod_status_keeps_the_scheduled_time_and_reports_every_container() {
        let pod = json!({"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "x"}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "T0"}]}});
        let s = running_status(&pod, "10.128.0.2", "10.128.0.1");
        assert_eq!(s["status"]["phase"], "Running");
        assert_eq!(
            s["status"]["containerStatuses"].as_array().unwrap().len(),
            2
        );
        let scheduled = s["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "PodScheduled")
            .unwrap()
            .clone();
        assert_eq!(scheduled["lastTransitionTime"], "T0");
        assert_eq!(s["status"]["podIP"], "10.128.0.2");
    }

    fn job_pod(restart: &str, phase: Option<&str>) -> Value {
        let mut pod = json!({"metadata": {"uid": "u", "name": "p"},
            "spec": {"nodeName": "hollow-0", "restartPolicy": restart,
                "containers": [{"name": "main", "image": "busybox"}]},
            "status": {}});
        if let Some(phase) = phase {
            pod["status"]["phase"] = json!(phase);
        }
        pod
    }

    #[test]
    fn pods_are_started_then_left_running_without_a_completion_delay() {
        for restart in ["Always", "Never", "OnFailure"] {
            assert_eq!(
                plan_pod(&job_pod(restart, Some("Pending")), true, None),
                PodAction::Start
            );
            assert_eq!(
                plan_pod(&job_pod(restart, None), true, None),
                PodAction::Start
            );
            assert_eq!(
                plan_pod(&job_pod(restart, Some("Running")), true, None),
                PodAction::Ignore
            );
        }
    }

    #[test]
    fn running_pods_that_do_not_restart_complete_after_the_delay() {
        let after = Duration::from_secs(1);
        for restart in ["Never", "OnFailure"] {
            assert_eq!(
                plan_pod(&job_pod(restart, Some("Running")), true, Some(after)),
                PodAction::Complete { after }
            );
        }
        assert_eq!(
            plan_pod(&job_pod("Always", Some("Running")), true, Some(after)),
            PodAction::Ignore
        );
    }

    #[test]
    fn finished_foreign_and_deleted_pods_are_never_completed() {
        let after = Some(Duration::from_secs(1));
        for phase in ["Succeeded", "Failed"] {
            assert_eq!(
                plan_pod(&job_pod("Never", Some(phase)), true, after),
                PodAction::Ignore
            );
        }
        assert_eq!(
            plan_pod(&job_pod("Never", Some("Running")), false, after),
            PodAction::Ignore
        );
        let mut deleted = job_pod("Never", Some("Running"));
        deleted["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(plan_pod(&deleted, true, after), PodAction::FinishDeletion);
    }

    #[test]
    fn a_succeeded_status_terminates_every_container_with_exit_code_zero() {
        let mut pod = job_pod("Never", Some("Running"));
        pod["status"] = running_status(&pod, "10.128.0.2", "10.128.0.1")["status"].clone();
        let started =
            pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"].clone();
        let s = succeeded_status(&pod)["status"].clone();
        assert_eq!(s["phase"], "Succeeded");
        let t = &s["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(t["exitCode"], 0);
        assert_eq!(t["reason"], "Completed");
        assert_eq!(t["startedAt"], started);
        assert_eq!(s["containerStatuses"][0]["ready"], false);
        let ready = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap()
            .clone();
        assert_eq!(
            (ready["status"].clone(), ready["reason"].clone()),
            (json!("False"), json!("PodCompleted"))
        );
    }

    #[test]
    fn the_completion_delay_is_a_duration_flag() {
        let flagged = Cli::parse_from([
            "berth-hollow-nodes",
            "--kubeconfig",
            "k",
            "--run-to-completion-after",
            "1500ms",
        ]);
        assert_eq!(
            flagged.run_to_completion_after,
            Some(Duration::from_millis(1500))
        );
        assert_eq!(cli().run_to_completion_after, None);
    }
}
