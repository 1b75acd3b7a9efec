//! The runtime over a real store and informers, on paused time (no sleeps): read-your-writes
//! between passes, resync, and the error policy.

use super::*;
use crate::testing::ControlPlane;
use berth_registry::{RegistryError, WriteOptions};
use berth_shared::resource::CONFIG_MAPS;
use serde_json::json;
use std::sync::Mutex;
use tokio::time::Instant;

/// Records each pass (key, virtual time) and answers with `answer(pass number, key)`.
struct Recording<F> {
    passes: Mutex<Vec<(String, Instant)>>,
    answer: F,
}

impl<F> Recording<F> {
    fn new(answer: F) -> Arc<Recording<F>> {
        Arc::new(Recording {
            passes: Mutex::new(Vec::new()),
            answer,
        })
    }

    fn passes(&self) -> Vec<(String, Instant)> {
        self.passes.lock().unwrap().clone()
    }
}

impl<F> Reconciler for Recording<F>
where
    F: Fn(usize, &ObjectKey) -> Result<Outcome, RegistryError> + Send + Sync + 'static,
{
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        let n = {
            let mut p = self.passes.lock().unwrap();
            p.push((key.name().to_string(), Instant::now()));
            p.len()
        };
        (self.answer)(n, key)
    }
}

fn config_map(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

/// A control plane holding one ConfigMap per name.
fn with_config_maps(names: &[&str]) -> ControlPlane {
    let cp = ControlPlane::start();
    for name in names {
        cp.registry()
            .create(
                CONFIG_MAPS,
                Some("default"),
                config_map(name),
                &WriteOptions::default(),
            )
            .unwrap();
    }
    cp
}

/// Waits (in virtual time, advanced by the runtime while idle) until `cond` holds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(3600);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::task::yield_now().await;
        tokio::time::advance(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_write_of_one_pass_is_visible_to_the_next_pass_of_its_key() {
    let cp = ControlPlane::start();
    let registry = cp.registry().clone();
    let maps = cp.ctx.informer(CONFIG_MAPS);
    // None: nothing written yet; Some(false): written, next pass not run; Some(true/false)
    // after the next pass: whether that pass saw the write.
    let written: Arc<Mutex<Option<bool>>> = Arc::new(Mutex::new(None));
    let seen_own_write = Arc::new(Mutex::new(None));
    let (m, w, seen) = (maps.clone(), written.clone(), seen_own_write.clone());
    let r = Recording::new(move |_, key: &ObjectKey| {
        if key.name() != "trigger" {
            return Ok(Outcome::Done);
        }
        let mut written = w.lock().unwrap();
        if written.is_none() {
            registry.create(
                CONFIG_MAPS,
                Some("default"),
                config_map("made"),
                &WriteOptions::default(),
            )?;
            *written = Some(true);
            // Run again at once: the next pass must see what this one wrote.
            return Ok(Outcome::RequeueAfter(Duration::ZERO));
        }
        seen.lock()
            .unwrap()
            .get_or_insert(m.get(Some("default"), "made").is_some());
        Ok(Outcome::Done)
    });
    cp.registry()
        .create(
            CONFIG_MAPS,
            Some("default"),
            config_map("trigger"),
            &WriteOptions::default(),
        )
        .unwrap();
    let run =
        tokio::spawn(Controller::new("test", &cp.ctx, CONFIG_MAPS).run(r.clone(), cp.stop.clone()));
    until("the second pass of the trigger", || {
        seen_own_write.lock().unwrap().is_some()
    })
    .await;
    assert_eq!(*seen_own_write.lock().unwrap(), Some(true));
    cp.stop.cancel();
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_resync_enqueues_every_key_again() {
    let cp = with_config_maps(&["a", "b"]);
    let r = Recording::new(|_, _: &ObjectKey| Ok(Outcome::Done));
    let run = tokio::spawn(
        Controller::new("test", &cp.ctx, CONFIG_MAPS)
            .resync(Duration::from_secs(60))
            .run(r.clone(), cp.stop.clone()),
    );
    until("one pass per key", || r.passes().len() == 2).await;
    let first = r.passes()[0].1;
    until("the resync", || r.passes().len() == 4).await;
    let mut again: Vec<String> = r.passes()[2..].iter().map(|(k, _)| k.clone()).collect();
    again.sort();
    assert_eq!(again, ["a", "b"]);
    assert!(r.passes()[2].1 - first >= Duration::from_secs(60));
    cp.stop.cancel();
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_conflict_is_retried_at_once_and_a_transient_error_after_backoff() {
    let cp = with_config_maps(&["conflicted", "failing"]);
    let r = Recording::new(|_, key: &ObjectKey| {
        Err(match key.name() {
            "conflicted" => RegistryError::conflict(CONFIG_MAPS, key.name()),
            _ => RegistryError::Internal("disk on fire".into()),
        })
    });
    let run =
        tokio::spawn(Controller::new("test", &cp.ctx, CONFIG_MAPS).run(r.clone(), cp.stop.clone()));
    let times = |name: &str| -> Vec<Instant> {
        r.passes()
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, t)| *t)
            .collect()
    };
    until("three passes of each", || {
        times("conflicted").len() >= 3 && times("failing").len() >= 3
    })
    .await;
    let c = times("conflicted");
    assert_eq!(c[1] - c[0], Duration::ZERO, "a conflict is retried at once");
    let f = times("failing");
    assert!(f[1] - f[0] >= berth_shared::reconcile::backoff(1));
    assert!(f[2] - f[1] >= berth_shared::reconcile::backoff(2));
    let text = cp.ctx.metrics.render();
    assert!(
        text.contains("workqueue_retries_total{name=\"test\"}"),
        "{text}"
    );
    cp.stop.cancel();
    run.await.unwrap();
}

/// A DaemonSet's selector, as `.adopts` reads it.
struct Selects(Option<LabelSelector>);

impl View for Selects {
    fn derive(obj: &Object) -> Self {
        Selects(
            obj.value()
                .ok()
                .and_then(|v| serde_json::from_value(v["spec"]["selector"].clone()).ok())
                .and_then(|s| LabelSelector::from_k8s(&s).ok()),
        )
    }
}

/// A reconciler that converges at once.
type Converged = Recording<fn(usize, &ObjectKey) -> Result<Outcome, RegistryError>>;

/// DaemonSets `web` and `db` in `default` (each selecting `app` = its name) and a recording
/// controller of them, wired by `wire`, running; returns once each has had its first pass.
async fn daemon_sets_routed(
    wire: impl FnOnce(Controller<ObjectKey>) -> Controller<ObjectKey> + Send + 'static,
) -> (ControlPlane, Arc<Converged>) {
    let cp = ControlPlane::start();
    for app in ["web", "db"] {
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": app},
            "spec": {"selector": {"matchLabels": {"app": app}},
                "template": {"metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
        let opts = WriteOptions::default();
        let rt = berth_shared::resource::DAEMON_SETS;
        cp.registry()
            .create(rt, Some("default"), ds, &opts)
            .unwrap();
    }
    let r: Arc<Converged> = Recording::new(|_, _| Ok(Outcome::Done));
    let recording = r.clone();
    cp.run(move |ctx, stop| async move {
        let c = Controller::new("routed", &ctx, berth_shared::resource::DAEMON_SETS);
        wire(c).run(recording, stop).await
    });
    let count = |name: &str| passes_of(&r, name);
    until("the first passes", || count("web") == 1 && count("db") == 1).await;
    (cp, r)
}

/// How many passes DaemonSet `name` has had.
fn passes_of(r: &Converged, name: &str) -> usize {
    r.passes().iter().filter(|(n, _)| n == name).count()
}

#[tokio::test(start_paused = true)]
async fn an_orphan_enqueues_the_owners_whose_selector_matches_it_and_an_owned_child_none() {
    use berth_shared::resource::PODS;
    let (cp, r) = daemon_sets_routed(|c| c.adopts::<Selects>(PODS, |s| s.0.as_ref())).await;
    let create = |rt, v| {
        cp.registry()
            .create(rt, Some("default"), v, &WriteOptions::default())
            .unwrap()
    };
    let count = |name: &str| passes_of(&r, name);
    let pod = |name: &str, owner: Option<serde_json::Value>| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        if let Some(o) = owner {
            p["metadata"]["ownerReferences"] = json!([o]);
        }
        p
    };
    // Owned by something else: not an orphan, nobody is woken.
    create(
        PODS,
        pod(
            "owned",
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "name": "x", "uid": "x-uid", "controller": true})),
        ),
    );
    create(PODS, pod("orphan", None));
    until("the orphan's owner", || count("web") == 2).await;
    cp.caught_up().await;
    assert_eq!((count("web"), count("db")), (2, 1), "{:?}", r.passes());
    cp.shut_down().await;
}

#[tokio::test(start_paused = true)]
async fn a_selected_child_enqueues_the_owners_whose_selector_matches_it_owned_or_not() {
    use berth_shared::resource::PERSISTENT_VOLUME_CLAIMS;
    let wire =
        |c: Controller<ObjectKey>| c.selects::<Selects>(PERSISTENT_VOLUME_CLAIMS, |s| s.0.as_ref());
    let (cp, r) = daemon_sets_routed(wire).await;
    let registry = cp.registry();
    let create = |rt, v| {
        registry
            .create(rt, Some("default"), v, &WriteOptions::default())
            .unwrap()
    };
    let count = |name: &str| passes_of(&r, name);
    // Owned (not by a controller reference), it still concerns the set selecting it.
    create(
        PERSISTENT_VOLUME_CLAIMS,
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-web-0", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web-0",
                "uid": "p-uid"}]},
        "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    until("the claim's set", || count("web") == 2).await;
    let opts = berth_registry::DeleteOptions::default();
    registry
        .delete(
            PERSISTENT_VOLUME_CLAIMS,
            Some("default"),
            "data-web-0",
            &opts,
        )
        .unwrap();
    until("the gone claim's set", || count("web") == 3).await;
    cp.caught_up().await;
    assert_eq!((count("web"), count("db")), (3, 1), "{:?}", r.passes());
    cp.shut_down().await;
}
