//! Worker passes against the recording fakes: each test drives `reconcile` pass by pass, as
//! the reconcile runtime would, and asserts the calls the ports received. Time is tokio's
//! paused clock; the worker's wall clock follows it.

use super::*;
use crate::pod::fake::{Call, Fakes};
use crate::pod::labels;
use crate::pod::model::ProbeResults;
use crate::pod::model::fixtures::{container, deleted, pod};
use crate::probe::policy::ProbeResult;
use berth_api::k8s_openapi::api::core::v1::{ExecAction, Probe};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The first attempt of container `app` of pod `u1` in sandbox 0.
const APP_R0: &str = "u1-app-s0-r0";
const APP_R1: &str = "u1-app-s0-r1";
const APP_R2: &str = "u1-app-s0-r2";

/// After a pass that took a step.
const STEPPED: Pass = Pass::RequeueAfter(Duration::from_millis(20));
/// After a pass with nothing to do.
const IDLE: Pass = Pass::RequeueAfter(Duration::from_secs(10));

struct Harness {
    fakes: Fakes,
    worker: PodWorker,
    wakes: Arc<AtomicUsize>,
}

/// A pass that waits on something (a volume, a claim) and looks again in a second.
const RETRY_IN_A_SECOND: Pass = Pass::RequeueAfter(Duration::from_secs(1));

fn harness() -> Harness {
    let fakes = Fakes::new();
    let wakes = Arc::new(AtomicUsize::new(0));
    let counter = wakes.clone();
    let wake: Wake = Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let worker = PodWorker::new("u1", fakes.context(), wake);
    Harness {
        fakes,
        worker,
        wakes,
    }
}

impl Harness {
    async fn pass(&self, pod: &Pod) -> Pass {
        self.worker.reconcile(pod.clone()).await.expect("a pass")
    }

    /// Brings `pod` to a running `app` (sandbox, pull, start) and forgets those calls.
    /// A file of pod `u1`'s volumes, by its path below the volumes directory.
    fn volume_file(&self, path: &str) -> std::path::PathBuf {
        let volumes = self.fakes.root.path().join("agent/pods/u1/volumes");
        volumes.join(path)
    }

    async fn running(&self, pod: &Pod) {
        for _ in 0..3 {
            assert_eq!(self.pass(pod).await, STEPPED);
        }
        assert!(self.fakes.runtime.is_running(APP_R0));
        self.fakes.take_calls();
    }

    /// Nothing has started since the last look: the pod is held back (`why`).
    fn assert_held_back(&self, why: &str) {
        let calls = self.fakes.take_calls();
        let started = calls.iter().any(|c| matches!(c, Call::SetupNetwork(_)));
        assert!(!started, "{why}");
    }

    fn start_calls(id: &str) -> Vec<Call> {
        // A leftover of an earlier failed start with the same id is removed first.
        vec![
            Call::Remove(id.into()),
            Call::Create(id.into()),
            Call::Start(id.into()),
        ]
    }
}

/// Pod `web` of [`app_pod`] (`Always`) with one volume.
fn app_pod_with_volume(volume: serde_json::Value) -> Pod {
    let mut pod = app_pod("Always");
    let volume = serde_json::from_value(volume).expect("a volume");
    pod.spec.as_mut().expect("a spec").volumes = Some(vec![volume]);
    pod
}

/// A harness whose pod `web` (restart policy `policy`, one container `app`) runs.
async fn running_app(policy: &str) -> (Harness, Pod) {
    let h = harness();
    let pod = app_pod(policy);
    h.running(&pod).await;
    (h, pod)
}

fn app_pod(policy: &str) -> Pod {
    pod(policy, vec![], vec![container("app")])
}

#[tokio::test(start_paused = true)]
async fn a_pass_looks_again_before_reporting_only_when_it_did_something() {
    let fresh = harness();
    assert_eq!(fresh.pass(&app_pod("Always")).await, STEPPED);
    let listings = fresh.fakes.runtime.pod_listings();
    assert_eq!(listings, 2, "the sandbox made: a fresh look");

    let (h, pod) = running_app("Always").await;
    let before = h.fakes.runtime.pod_listings();
    assert_eq!(h.pass(&pod).await, IDLE);
    let listings = h.fakes.runtime.pod_listings() - before;
    assert_eq!(listings, 1, "nothing done: the pass's own look");
}

#[tokio::test(start_paused = true)]
async fn a_new_pod_gets_its_sandbox_then_its_image_then_a_started_container() {
    let h = harness();
    let pod = app_pod("Always");

    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(h.fakes.take_calls(), vec![Call::SetupNetwork("u1".into())]);
    let etc = volumes::pod_dir(&h.worker.cx.node.root_dir, "u1").join("etc");
    assert!(etc.join("hosts").exists() && etc.join("resolv.conf").exists());

    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(
        h.fakes.take_calls(),
        vec![Call::Pull("busybox:1.28".into())]
    );

    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(h.fakes.take_calls(), Harness::start_calls(APP_R0));
    let l = h.fakes.runtime.labels(APP_R0);
    assert_eq!(labels::pod_uid(&l), Some("u1"));
    assert_eq!(labels::container_name(&l), Some("app"));
    assert_eq!(labels::restart_index(&l), Some(0));
    assert_eq!(
        labels::backoff(&l),
        None,
        "the first start has no back-off entry"
    );
    assert_eq!(
        h.fakes.event_reasons(),
        vec!["Pulling", "Pulled", "Created", "Started"]
    );

    assert_eq!(h.pass(&pod).await, IDLE, "converged");
    assert_eq!(h.fakes.take_calls(), vec![]);
}

#[tokio::test(start_paused = true)]
async fn an_exited_container_restarts_at_once_then_only_after_its_back_off() {
    let (h, pod) = running_app("Always").await;

    h.fakes.runtime.exit(APP_R0, 1);
    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(h.fakes.take_calls(), Harness::start_calls(APP_R1));
    let entry = labels::backoff(&h.fakes.runtime.labels(APP_R1)).expect("an entry");
    assert_eq!(entry.delay, Duration::from_secs(10));

    // The second exit falls in the entry's window: 10 s from the exit before a new start.
    h.fakes.runtime.exit(APP_R1, 1);
    assert_eq!(
        h.pass(&pod).await,
        Pass::RequeueAfter(Duration::from_secs(10))
    );
    assert_eq!(
        h.fakes.take_calls(),
        vec![Call::Remove(APP_R0.into())],
        "one dead attempt is kept: the older one goes"
    );
    tokio::time::advance(Duration::from_secs(9)).await;
    assert_eq!(h.pass(&pod).await, RETRY_IN_A_SECOND);
    assert_eq!(h.fakes.take_calls(), vec![], "nothing starts in back-off");

    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(h.fakes.take_calls(), Harness::start_calls(APP_R2));
    let entry = labels::backoff(&h.fakes.runtime.labels(APP_R2)).expect("an entry");
    assert_eq!(entry.delay, Duration::from_secs(20), "the entry doubled");
}

#[tokio::test(start_paused = true)]
async fn a_container_that_completed_under_never_is_not_started_again() {
    let (h, pod) = running_app("Never").await;

    h.fakes.runtime.exit(APP_R0, 0);
    h.pass(&pod).await;
    let calls = h.fakes.take_calls();
    assert!(
        !calls.iter().any(|c| matches!(c, Call::Create(_))),
        "{calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_liveness_probe_kills_the_container_and_the_next_pass_restarts_it() {
    let h = harness();
    let mut app = container("app");
    app.liveness_probe = Some(Probe {
        exec: Some(ExecAction {
            command: Some(vec!["true".into()]),
        }),
        // The prober task stays idle; the test sets the result the prober would publish.
        initial_delay_seconds: Some(3600),
        ..Probe::default()
    });
    let pod = pod("Always", vec![], vec![app]);
    h.running(&pod).await;
    assert_eq!(h.pass(&pod).await, IDLE);
    assert!(h.worker.probers.lock().unwrap().contains_key(APP_R0));

    h.worker.probes.lock().unwrap().insert(
        APP_R0.to_string(),
        ProbeResults {
            startup: ProbeResult::Success,
            liveness: ProbeResult::Failure,
            readiness: ProbeResult::Success,
        },
    );
    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(h.fakes.take_calls(), vec![Call::Kill(APP_R0.into(), 15)]);
    let (reason, message) = h.fakes.events().pop().expect("an event");
    assert_eq!(reason, "Killing");
    assert!(message.contains("failed liveness probe"), "{message}");

    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(h.fakes.take_calls(), Harness::start_calls(APP_R1));
    assert!(
        !h.worker.probers.lock().unwrap().contains_key(APP_R0),
        "the stopped attempt's prober is gone"
    );
    assert_eq!(h.wakes.load(Ordering::SeqCst), 0, "no prober ran");
}

#[tokio::test(start_paused = true)]
async fn a_deleted_pod_gets_its_grace_period_then_loses_containers_network_and_object() {
    let (h, pod) = running_app("Always").await;
    h.fakes.runtime.ignore_signal(15);
    let mut gone = deleted(pod, 5);
    gone.metadata.resource_version = Some("2".into());

    let began = tokio::time::Instant::now();
    assert_eq!(h.pass(&gone).await, STEPPED);
    assert_eq!(
        began.elapsed(),
        Duration::from_secs(5),
        "SIGKILL exactly when the grace period is up"
    );
    assert_eq!(
        h.fakes.take_calls(),
        vec![
            Call::Kill(APP_R0.into(), 15),
            Call::Kill(APP_R0.into(), 9),
            Call::WriteStatus,
        ]
    );

    assert_eq!(h.pass(&gone).await, Pass::Finished);
    assert_eq!(
        h.fakes.take_calls(),
        vec![
            Call::WriteStatus,
            Call::Remove(APP_R0.into()),
            Call::TeardownNetwork("u1".into()),
            Call::DeletePod("default/web".into()),
            // The clean-up after the object is gone (idempotent).
            Call::TeardownNetwork("u1".into()),
        ]
    );
    assert!(!volumes::pod_dir(&h.worker.cx.node.root_dir, "u1").exists());
}

#[tokio::test(start_paused = true)]
async fn a_pod_gone_from_the_api_has_its_containers_network_and_files_removed() {
    let h = harness();
    h.running(&app_pod("Always")).await;

    h.worker.finish().await.expect("clean-up");
    assert_eq!(
        h.fakes.take_calls(),
        vec![
            Call::Remove(APP_R0.into()),
            Call::TeardownNetwork("u1".into()),
        ]
    );
    assert!(!volumes::pod_dir(&h.worker.cx.node.root_dir, "u1").exists());
}

/// Passes until one creates a container (at most `n`); returns the calls of them all.
async fn passes_until_a_start(h: &Harness, pod: &Pod, n: usize) -> Vec<Call> {
    let mut calls = Vec::new();
    for _ in 0..n {
        assert_eq!(h.pass(pod).await, STEPPED);
        calls.extend(h.fakes.take_calls());
        if calls.iter().any(|c| matches!(c, Call::Create(_))) {
            break;
        }
    }
    calls
}

#[tokio::test(start_paused = true)]
async fn a_pod_whose_netns_vanished_is_killed_and_restarted_in_a_new_sandbox() {
    let (h, pod) = running_app("Always").await;
    assert_eq!(h.fakes.network.ip("u1").as_deref(), Some("10.42.0.5"));

    h.fakes.network.delete_netns("u1");
    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(
        h.fakes.take_calls(),
        vec![
            Call::Kill(APP_R0.into(), 15),
            Call::TeardownNetwork("u1".into())
        ],
        "killed and torn down in one pass"
    );
    assert_eq!(
        h.fakes.events().last(),
        Some(&("SandboxChanged".to_string(), SANDBOX_CHANGED.to_string()))
    );

    let calls = passes_until_a_start(&h, &pod, 3).await;
    assert_eq!(calls.first(), Some(&Call::SetupNetwork("u1".into())));
    const APP_S1_R1: &str = "u1-app-s1-r1";
    assert!(
        calls.ends_with(&Harness::start_calls(APP_S1_R1)),
        "{calls:?}"
    );
    let l = h.fakes.runtime.labels(APP_S1_R1);
    assert_eq!(
        (labels::sandbox_attempt(&l), labels::restart_index(&l)),
        (Some(1), Some(1))
    );
    let seen = h.worker.observe(&pod, h.worker.now()).await.expect("seen");
    assert_eq!(
        seen.observed.sandbox,
        Sandbox::Ready {
            attempt: 1,
            ips: vec!["10.42.0.6".into()]
        }
    );
    assert_eq!(seen.netns, Some("/run/netns/fake-u1-1".into()));
    let status = crate::pod::status::pod_status(&pod, &seen.observed, h.worker.now());
    assert_eq!(status.pod_ip.as_deref(), Some("10.42.0.6"));
    let app = &status.container_statuses.unwrap_or_default()[0];
    assert_eq!(app.restart_count, 1);

    assert_eq!(h.pass(&pod).await, IDLE, "converged");
    assert_eq!(h.fakes.take_calls(), vec![]);
    let changed = h.fakes.event_reasons();
    assert_eq!(
        changed.iter().filter(|r| *r == "SandboxChanged").count(),
        1,
        "{changed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_restarted_agent_kills_containers_whose_netns_vanished_instead_of_adopting_them() {
    let (h, pod) = running_app("Always").await;
    h.fakes.network.delete_netns("u1");

    // A new worker, as after an agent restart: nothing local, only containerd and the network.
    let fresh = PodWorker::new("u1", h.fakes.context(), Arc::new(|| {}));
    assert_eq!(fresh.reconcile(pod.clone()).await.expect("a pass"), STEPPED);
    assert_eq!(
        h.fakes.take_calls(),
        vec![
            Call::Kill(APP_R0.into(), 15),
            Call::TeardownNetwork("u1".into())
        ]
    );
    assert_eq!(fresh.reconcile(pod.clone()).await.expect("a pass"), STEPPED);
    assert_eq!(
        h.fakes.take_calls(),
        vec![Call::SetupNetwork("u1".into())],
        "a new sandbox, not the old one rebuilt around the running container"
    );
}

#[tokio::test(start_paused = true)]
async fn a_netns_lost_while_nothing_runs_is_still_a_sandbox_change() {
    let (h, pod) = running_app("Always").await;
    h.fakes.runtime.exit(APP_R0, 1);
    assert_eq!(
        h.pass(&pod).await,
        STEPPED,
        "the first restart is immediate"
    );
    h.fakes.runtime.exit(APP_R1, 1);
    assert_eq!(
        h.pass(&pod).await,
        Pass::RequeueAfter(Duration::from_secs(10)),
        "in back-off"
    );
    h.fakes.take_calls();

    h.fakes.network.delete_netns("u1");
    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(
        h.fakes.take_calls(),
        vec![Call::TeardownNetwork("u1".into())],
        "nothing to kill"
    );
    assert_eq!(
        h.fakes.event_reasons().last().map(String::as_str),
        Some("SandboxChanged")
    );
    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(h.fakes.take_calls(), vec![Call::SetupNetwork("u1".into())]);
    // The container's back-off still holds in the new sandbox, as the kubelet's does.
    assert_eq!(
        h.pass(&pod).await,
        Pass::RequeueAfter(Duration::from_secs(10))
    );
    assert_eq!(h.fakes.take_calls(), vec![]);
}

#[tokio::test(start_paused = true)]
async fn a_projected_token_is_written_at_start_and_renewed_after_four_fifths_of_its_life() {
    let h = harness();
    let mut p = app_pod("Always");
    if let Some(spec) = p.spec.as_mut() {
        spec.volumes = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "kube-api-access-x", "projected": {
                "sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}}))
            .expect("a volume"),
        ]);
    }
    h.running(&p).await;
    let file = h.volume_file("projected/kube-api-access-x/token");
    let first = std::fs::read_to_string(&file).expect("the token file");
    assert!(first.starts_with("token-0-"), "{first}");
    // Before 80% of the hour nothing changes; after it, the next pass renews in place.
    tokio::time::advance(Duration::from_secs(2_800)).await;
    h.pass(&p).await;
    assert_eq!(
        std::fs::read_to_string(&file).expect("the token file"),
        first
    );
    tokio::time::advance(Duration::from_secs(100)).await;
    h.pass(&p).await;
    let renewed = std::fs::read_to_string(&file).expect("the token file");
    assert!(renewed.starts_with("token-1-"), "{renewed}");
    assert!(
        h.fakes.runtime.is_running(APP_R0),
        "no restart for a renewal"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pods_start_is_recorded_once_in_the_start_latency_metrics() {
    let h = harness();
    let mut pod = app_pod("Always");
    pod.metadata.resource_version = Some("1".into());
    pod.metadata.creation_timestamp =
        Some(berth_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(h.worker.now()));
    h.running(&pod).await;
    for _ in 0..3 {
        h.pass(&pod).await;
    }
    let text = h
        .worker
        .cx
        .metrics
        .render(crate::metrics::Running::default());
    for family in [
        "kubelet_pod_start_sli_duration_seconds",
        "kubelet_pod_start_duration_seconds",
    ] {
        assert!(
            text.contains(&format!("\n{family}_count 1\n")),
            "{family} once in\n{text}"
        );
    }
    assert!(
        text.contains("berth_agent_image_pulls_total{result=\"success\"} 1\n"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_waits_for_its_claim_to_be_bound_then_starts_on_the_volume() {
    let h = harness();
    let www =
        serde_json::json!({"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0"}});
    let mut pod = app_pod_with_volume(www);
    let spec = pod.spec.as_mut().unwrap();
    spec.containers[0].volume_mounts = Some(vec![
        serde_json::from_value(serde_json::json!({"name": "www", "mountPath": "/data"})).unwrap(),
    ]);
    let not_bound = "Unable to attach or mount volumes: unmounted volumes=[www], unattached volumes=[www]: persistentvolumeclaim \"www-web-0\" is not bound";

    // No claim yet, then a claim not bound yet: no sandbox, a FailedMount, a quick retry.
    assert_eq!(h.pass(&pod).await, RETRY_IN_A_SECOND);
    let claim = |phase: &str| {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "www-web-0", "namespace": "default", "uid": "c1"},
            "spec": {"volumeName": "pvc-c1"}, "status": {"phase": phase}}))
        .unwrap()
    };
    let claims = || h.fakes.api.claims.lock().unwrap();
    claims().insert("default/www-web-0".into(), claim("Pending"));
    assert_eq!(h.pass(&pod).await, RETRY_IN_A_SECOND);
    assert_eq!(h.pass(&pod).await, RETRY_IN_A_SECOND);
    h.assert_held_back("nothing starts before the claim is bound");
    assert!(
        h.fakes.events().is_empty(),
        "a claim being provisioned is no failure: {:?}",
        h.fakes.events()
    );
    // Past the kubelet's 2m3s wait for attach and mount, FailedMount says why.
    tokio::time::advance(Duration::from_secs(124)).await;
    claims().remove("default/www-web-0");
    assert_eq!(h.pass(&pod).await, RETRY_IN_A_SECOND);
    claims().insert("default/www-web-0".into(), claim("Pending"));
    for _ in 0..2 {
        assert_eq!(h.pass(&pod).await, RETRY_IN_A_SECOND);
    }
    let events = h.fakes.events();
    assert_eq!(events[0].0, "FailedMount");
    assert!(
        events[0]
            .1
            .ends_with("persistentvolumeclaim \"www-web-0\" not found")
    );
    assert_eq!(
        events[1..].to_vec(),
        vec![("FailedMount".to_string(), not_bound.to_string())],
        "a repeated message is not recorded on every retry"
    );

    // Bound: the pod starts, its volume the directory the volume names (made 0777).
    let dir = h.fakes.root.path().join("storage/pvc-c1_default_www-web-0");
    claims().insert("default/www-web-0".into(), claim("Bound"));
    h.fakes.api.volumes.lock().unwrap().insert(
        "pvc-c1".into(),
        serde_json::from_value(serde_json::json!({"metadata": {"name": "pvc-c1"},
            "spec": {"hostPath": {"path": dir, "type": "DirectoryOrCreate"},
                     "claimRef": {"name": "www-web-0", "namespace": "default", "uid": "c1"}}}))
        .unwrap(),
    );
    for _ in 0..3 {
        assert_eq!(h.pass(&pod).await, STEPPED);
    }
    assert!(h.fakes.runtime.is_running(APP_R0));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o777);
}

#[tokio::test(start_paused = true)]
async fn a_host_path_of_the_wrong_type_holds_the_pod_back_with_failed_mount_until_fixed() {
    let h = harness();
    let dir = h.fakes.root.path().join("srv-data");
    std::fs::write(&dir, b"a file, not a directory").unwrap();
    let made = h.fakes.root.path().join("made/here");
    let mut pod = app_pod("Always");
    let spec = pod.spec.as_mut().unwrap();
    spec.volumes = Some(vec![
        serde_json::from_value(serde_json::json!(
            {"name": "made", "hostPath": {"path": made, "type": "DirectoryOrCreate"}}))
        .unwrap(),
        serde_json::from_value(serde_json::json!(
            {"name": "data", "hostPath": {"path": dir, "type": "Directory"}}))
        .unwrap(),
    ]);
    spec.containers[0].volume_mounts = Some(vec![
        serde_json::from_value(serde_json::json!({"name": "data", "mountPath": "/data"})).unwrap(),
    ]);

    // No sandbox, a FailedMount with the kubelet's message, a quick retry; the
    // DirectoryOrCreate volume before it was made (0755).
    for _ in 0..2 {
        assert_eq!(h.pass(&pod).await, RETRY_IN_A_SECOND);
    }
    h.assert_held_back("nothing starts before the volumes are set up");
    let message = format!(
        "MountVolume.SetUp failed for volume \"data\" : hostPath type check failed: {} is not a directory",
        dir.display()
    );
    assert_eq!(
        h.fakes.events(),
        vec![("FailedMount".to_string(), message)],
        "one event for a repeated message"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&made).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755);

    // The path becomes a directory: the pod starts.
    std::fs::remove_file(&dir).unwrap();
    std::fs::create_dir(&dir).unwrap();
    for _ in 0..3 {
        assert_eq!(h.pass(&pod).await, STEPPED);
    }
    assert!(h.fakes.runtime.is_running(APP_R0));
}

#[tokio::test(start_paused = true)]
async fn an_ephemeral_container_starts_once_in_its_targets_pid_namespace() {
    use crate::runtime::NamespaceMode;
    use berth_api::k8s_openapi::api::core::v1::EphemeralContainer;

    let h = harness();
    let mut pod = app_pod("Always");
    h.running(&pod).await;
    if let Some(spec) = pod.spec.as_mut() {
        spec.ephemeral_containers = Some(vec![EphemeralContainer {
            name: "dbg".into(),
            image: Some("busybox:1.28".into()),
            target_container_name: Some("app".into()),
            stdin: Some(true),
            ..EphemeralContainer::default()
        }]);
    }
    const DBG: &str = "u1-dbg-s0-r0";
    // Its own image pull state (the image is there already: nothing pulled), then the start.
    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(h.fakes.take_calls(), vec![]);
    assert_eq!(h.pass(&pod).await, STEPPED);
    assert_eq!(h.fakes.take_calls(), Harness::start_calls(DBG));
    let config = h.fakes.runtime.config(DBG).expect("created");
    // The fake runtime's tasks all run as pid 4242.
    assert_eq!(
        config.pid_namespace,
        NamespaceMode::Join("/proc/4242/ns/pid".into())
    );
    assert!(config.stdin);
    assert!(
        config.network_namespace.is_some(),
        "in the pod's network namespace"
    );
    let events = h.fakes.events();
    assert!(
        events
            .iter()
            .any(|(reason, msg)| reason == "Started" && msg.contains("dbg")),
        "{events:?}"
    );

    // It exits: never started again, however many passes come.
    h.fakes.runtime.exit(DBG, 1);
    for _ in 0..3 {
        h.pass(&pod).await;
    }
    let calls = h.fakes.take_calls();
    assert!(
        !calls.iter().any(|c| matches!(c, Call::Create(_))),
        "{calls:?}"
    );
    let seen = h.worker.observe(&pod, h.worker.now()).await.expect("seen");
    let status = crate::pod::status::pod_status(&pod, &seen.observed, h.worker.now());
    let ephemeral = status.ephemeral_container_statuses.unwrap_or_default();
    let exit = ephemeral
        .first()
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code);
    assert_eq!(exit, Some(1), "{ephemeral:?}");
    assert_eq!(status.phase.as_deref(), Some("Running"));
}

#[tokio::test(start_paused = true)]
async fn a_missing_config_map_holds_the_pod_and_a_changed_one_is_rewritten_without_a_restart() {
    let h = harness();
    let pod = app_pod_with_volume(serde_json::json!({"name": "cfg", "configMap": {"name": "cm"}}));
    assert_eq!(h.pass(&pod).await, RETRY_IN_A_SECOND);
    h.assert_held_back("nothing starts before the volumes are set up");
    assert_eq!(
        h.fakes.events(),
        vec![(
            "FailedMount".to_string(),
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"cm\" not found".to_string()
        )]
    );
    let put = |v: &str| {
        let cm: berth_api::k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "cm"}, "data": {"k": v}}),
        )
        .unwrap();
        let key = format!("{}/cm", super::ns_of(&pod));
        h.fakes.api.config_maps.lock().unwrap().insert(key, cm);
    };
    put("1");
    h.running(&pod).await;
    let file = h.volume_file("configmap/cfg/k");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "1");
    put("2");
    h.pass(&pod).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "2");
    assert!(
        h.fakes.runtime.is_running(APP_R0),
        "no restart for an update"
    );
}
