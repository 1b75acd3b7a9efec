//! Issue 16, acceptance 5 (embedded store): `berth-controller snapshot save` of a live store
//! while writers keep writing, then `snapshot restore` into an empty data dir: a controller
//! started on it serves every object acknowledged before the save began, with its uid, and
//! its revisions go on from the snapshot's. A restore never replaces an existing store, and
//! only `system:masters` may take a snapshot through the API. The same for a store on etcd:
//! saved from etcd while a controller writes, restored into an empty etcd.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use berth_tests::controller::controller_binary;
use berth_tests::etcd::EtcdCluster;
use berth_tests::objects::{configmap, items, namespace, rv, uid};
use berth_tests::process::run;
use berth_tests::{Controller, Credentials, Req, secs};

const WRITERS: usize = 6;
const NS: &str = "snap";

/// One acknowledged create: its uid and when its answer arrived.
#[derive(Debug, Clone)]
struct Ack {
    uid: String,
    at: Instant,
}

fn cms() -> String {
    format!("/api/v1/namespaces/{NS}/configmaps")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy to {}: {e}", target.display()));
        }
    }
}

/// `berth-controller snapshot ARGS…` (whatever the outcome).
fn snapshot_command(args: &[&str]) -> berth_tests::Run {
    let mut cmd = Command::new(controller_binary());
    cmd.arg("snapshot").args(args);
    run(cmd, None, secs(60))
}

/// Writers creating configmaps through `api` until stopped, recording each acknowledgement.
struct Writers {
    acks: Arc<Mutex<BTreeMap<String, Ack>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Writers {
    fn start(c: &Controller) -> Writers {
        let acks: Arc<Mutex<BTreeMap<String, Ack>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..WRITERS)
            .map(|w| {
                let (api, acks, stop) = (c.admin_api(), acks.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut i = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let name = format!("w{w}-{i:05}");
                        let o =
                            api.create(&cms(), &configmap(&name, &[("writer", &w.to_string())]));
                        let ack = Ack {
                            uid: uid(&o),
                            at: Instant::now(),
                        };
                        acks.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(name, ack);
                        i += 1;
                    }
                })
            })
            .collect();
        Writers {
            acks,
            stop,
            threads,
        }
    }

    fn count(&self) -> usize {
        self.acks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Waits until `n` creates were acknowledged.
    fn wait_for(&self, c: &Controller, n: usize) {
        c.wait_for(
            secs(60),
            &format!("the writers to have written {n} configmaps"),
            || {
                let done = self.count();
                if done >= n { Ok(()) } else { Err(done) }
            },
        );
    }

    /// Stops the writers; every acknowledgement.
    fn stop(self) -> BTreeMap<String, Ack> {
        self.stop.store(true, Ordering::SeqCst);
        for w in self.threads {
            w.join().unwrap_or_else(|_| panic!("a writer panicked"));
        }
        self.acks.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A snapshot holds Secrets: its file must be private.
fn assert_private(file: &Path) {
    let mode = std::fs::metadata(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the snapshot holds Secrets");
}

/// Every configmap of `list`: name → (uid, resourceVersion).
fn by_name(list: &serde_json::Value) -> BTreeMap<String, (String, u64)> {
    items(list)
        .iter()
        .map(|o| {
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (name, (uid(o), rv(o)))
        })
        .collect()
}

/// Every object acknowledged before the save is in `found`, with its uid.
fn assert_all_restored(before: &BTreeMap<&String, &Ack>, found: &BTreeMap<String, (String, u64)>) {
    let missing = missing(before, found);
    assert!(
        missing.is_empty(),
        "{} of {} objects acknowledged before the save are missing or changed:\n{}",
        missing.len(),
        before.len(),
        missing.join("\n")
    );
}

/// The acknowledged-before ones that `found` lacks or holds with another uid.
fn missing(
    before: &BTreeMap<&String, &Ack>,
    found: &BTreeMap<String, (String, u64)>,
) -> Vec<String> {
    before
        .iter()
        .filter(|(name, ack)| found.get(**name).is_none_or(|(u, _)| *u != ack.uid))
        .map(|(name, ack)| {
            format!(
                "{name}: acknowledged {} found {:?}",
                ack.uid,
                found.get(*name)
            )
        })
        .collect()
}

#[test]
fn a_snapshot_taken_during_writes_restores_every_acknowledged_object_with_its_uid() {
    if berth_tests::controller::on_etcd() {
        // The embedded store's snapshot; the etcd one has its own test below.
        return;
    }
    let tokens_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let tokens = tokens_dir.path().join("tokens.csv");
    std::fs::write(&tokens, "alice-token,alice,1001\n").unwrap_or_else(|e| panic!("{e}"));
    let mut c = Controller::start_with(&["--token-auth-file", &tokens.to_string_lossy()]);
    let admin = c.admin_api();
    admin.create("/api/v1/namespaces", &namespace(NS));

    // Concurrent writers, each creating configmaps until told to stop.
    let writers = Writers::start(&c);
    writers.wait_for(&c, 300);

    let file = c.scratch().join("backup.snap");
    let save_started = Instant::now();
    let saved = c.subcommand(&["snapshot", "save", &file.to_string_lossy()]);
    let save_ended = Instant::now();
    let acks = writers.stop();
    assert!(
        saved.success(),
        "snapshot save failed\n{}",
        saved.describe()
    );
    assert!(
        saved.stdout.contains("from the running controller"),
        "the save should have gone through the running controller: {}",
        saved.stdout
    );
    assert_private(&file);

    let before: BTreeMap<&String, &Ack> =
        acks.iter().filter(|(_, a)| a.at < save_started).collect();
    assert!(
        before.len() >= 300,
        "{} acknowledged before the save",
        before.len()
    );
    let during = acks
        .values()
        .filter(|a| a.at >= save_started && a.at <= save_ended)
        .count();
    assert!(during > 0, "no write was acknowledged while the save ran");

    // A restore never replaces a store: not the one of the running controller's data dir.
    let refused = snapshot_command(&[
        "restore",
        "--data-dir",
        &c.data_dir().to_string_lossy(),
        &file.to_string_lossy(),
    ]);
    assert!(!refused.success(), "restore over a store succeeded");
    assert!(
        refused.stderr.contains("exists"),
        "the refusal should say the store exists\n{}",
        refused.describe()
    );

    // Only system:masters may take a snapshot, even a user RBAC lets do everything.
    admin.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "alice-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
        }),
    );
    let alice = c.api_with(Credentials::Bearer("alice-token".into()));
    let reply = c.wait_for(secs(10), "alice to be refused the snapshot", || {
        let r = alice.send(Req::get("/v1-berth/snapshot"));
        if r.status == 403 {
            Ok(r)
        } else {
            Err(r.describe())
        }
    });
    reply.assert_body_has("system:masters");
    assert_eq!(c.anonymous_api().get("/v1-berth/snapshot").status, 401);

    // The backup procedure: the snapshot, plus pki/ and token copied beside it.
    let old_data = c.data_dir();
    let status = c.terminate();
    assert!(status.success(), "the controller stopped with {status}");
    let restored = Controller::start_prepared(&[], |data| {
        let r = snapshot_command(&[
            "restore",
            "--data-dir",
            &data.to_string_lossy(),
            &file.to_string_lossy(),
        ]);
        assert!(r.success(), "snapshot restore failed\n{}", r.describe());
        copy_dir(&old_data.join("pki"), &data.join("pki"));
        std::fs::copy(old_data.join("token"), data.join("token"))
            .unwrap_or_else(|e| panic!("copy token: {e}"));
    });
    let api = restored.admin_api();
    let list = api.get_ok(&cms());
    let found = by_name(&list);
    eprintln!(
        "{} configmaps acknowledged before the save, {during} while it ran, {} in all; {} restored",
        before.len(),
        acks.len(),
        found.len()
    );
    assert_all_restored(&before, &found);
    // Nothing is invented: every restored configmap is one a writer created.
    for (name, (u, _)) in found.iter().filter(|(n, _)| *n != "kube-root-ca.crt") {
        let ack = acks.get(name);
        assert!(
            ack.is_none_or(|a| a.uid == *u),
            "{name} restored with uid {u}, created with {ack:?}"
        );
        assert!(name.starts_with('w'), "unexpected {name}");
    }
    // Revisions go on from the snapshot's: a new write is newer than every restored object.
    let newest = found.values().map(|(_, r)| *r).max().unwrap_or(0);
    let after = api.create(&cms(), &configmap("after-restore", &[]));
    assert!(rv(&after) > newest, "{} is not after {newest}", rv(&after));
}

#[test]
fn an_etcd_store_snapshot_taken_during_writes_restores_into_an_empty_etcd() {
    let etcd = EtcdCluster::start(3);
    let endpoints = etcd.endpoints();
    let mut c = Controller::start_with(&["--datastore-endpoint", &endpoints]);
    c.admin_api().create("/api/v1/namespaces", &namespace(NS));
    let writers = Writers::start(&c);
    writers.wait_for(&c, 200);
    let file = c.scratch().join("etcd.snap");
    let save_started = Instant::now();
    let saved = snapshot_command(&[
        "save",
        "--datastore-endpoint",
        &endpoints,
        &file.to_string_lossy(),
    ]);
    let acks = writers.stop();
    assert!(
        saved.success(),
        "snapshot save failed\n{}",
        saved.describe()
    );
    assert!(saved.stdout.contains("from etcd"), "{}", saved.stdout);
    assert_private(&file);
    let before: BTreeMap<&String, &Ack> =
        acks.iter().filter(|(_, a)| a.at < save_started).collect();
    assert!(before.len() >= 200, "{} acknowledged before", before.len());
    let status = c.terminate();
    assert!(status.success(), "the controller stopped with {status}");

    // Into a new, empty etcd; a second restore into it is refused.
    let fresh = EtcdCluster::start(1);
    let target = fresh.endpoints();
    let restore = [
        "restore",
        "--datastore-endpoint",
        &target,
        &file.to_string_lossy(),
    ];
    let r = snapshot_command(&restore);
    assert!(r.success(), "snapshot restore failed\n{}", r.describe());
    let again = snapshot_command(&restore);
    assert!(
        !again.success() && again.stderr.contains("already holds"),
        "a restore into a non-empty etcd must fail\n{}",
        again.describe()
    );
    let restored = Controller::start_joining(&c, &["--datastore-endpoint", &target]);
    let found = by_name(&restored.admin_api().get_ok(&cms()));
    assert_all_restored(&before, &found);
}
