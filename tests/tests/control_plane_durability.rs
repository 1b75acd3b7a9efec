//! Acceptance area 6: durability. Every acknowledged write survives a SIGKILL (same uid, same
//! resourceVersion), revisions keep rising after a restart, and a watch resumed from the last
//! revision seen before the kill delivers exactly the writes made after it, in order.

use std::collections::BTreeMap;

use berth_tests::api::event_summary;
use berth_tests::objects::{configmap, items, namespace, rv, uid};
use berth_tests::{Api, Controller, Next, Req, secs};
use serde_json::Value;

/// How many configmaps the SIGKILL test writes.
const N: usize = 200;

fn cms(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/configmaps")
}

/// A controller with namespace `ns` created, and its admin API.
fn started_with_namespace(ns: &str) -> (Controller, Api) {
    let c = Controller::start();
    let api = c.admin_api();
    api.create("/api/v1/namespaces", &namespace(ns));
    (c, api)
}

/// `DELETE path`, which must be accepted (200, or 202 while finalizers run).
#[track_caller]
fn delete(api: &Api, path: &str) {
    let reply = api.send(Req::delete(path));
    assert!(
        reply.status == 200 || reply.status == 202,
        "delete {path}: {}",
        reply.describe()
    );
}

#[derive(Debug, PartialEq)]
struct Stored {
    uid: String,
    rv: u64,
    data: Value,
}

fn stored(o: &Value) -> Stored {
    Stored {
        uid: uid(o),
        rv: rv(o),
        data: o["data"].clone(),
    }
}

#[test]
fn a_sigkill_loses_no_acknowledged_write() {
    let (mut c, api) = started_with_namespace("durable");
    let path = cms("durable");
    let mut expected: BTreeMap<String, Stored> = BTreeMap::new();
    for i in 0..N {
        let name = format!("cm-{i:03}");
        let o = api.create(&path, &configmap(&name, &[("i", &i.to_string())]));
        expected.insert(name, stored(&o));
    }
    // Some updates and deletes as well, the last of them just before the kill.
    for i in 0..20 {
        let name = format!("cm-{i:03}");
        let mut o = api.get_ok(&format!("{path}/{name}"));
        o["data"]["updated"] = "yes".into();
        let o = api.expect(Req::put(format!("{path}/{name}"), &o), 200);
        expected.insert(name, stored(&o));
    }
    for i in N - 10..N {
        let name = format!("cm-{i:03}");
        delete(&api, &format!("{path}/{name}"));
        expected.remove(&name);
    }
    let last_rv = expected.values().map(|s| s.rv).max().unwrap_or(0);
    drop(api);

    c.kill9();
    c.restart();

    let api = c.admin_api();
    let list = api.get_ok(&path);
    // The namespace's CA bundle is the controller's, not the test's.
    let found: BTreeMap<String, Stored> = items(&list)
        .iter()
        .filter(|o| o["metadata"]["name"] != "kube-root-ca.crt")
        .map(|o| {
            (
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                stored(o),
            )
        })
        .collect();
    let missing: Vec<&String> = expected
        .keys()
        .filter(|k| !found.contains_key(*k))
        .collect();
    let extra: Vec<&String> = found
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "after SIGKILL + restart: missing {missing:?}, unexpected {extra:?}\n{}",
        c.log_tail()
    );
    for (name, want) in &expected {
        assert_eq!(&found[name], want, "{name} after SIGKILL + restart");
    }
    assert!(
        rv(&list) >= last_rv,
        "the list's resourceVersion {} is older than the last write {last_rv}",
        rv(&list)
    );

    let new = api.create(&path, &configmap("after-restart", &[]));
    assert!(
        rv(&new) > last_rv,
        "a write after restart got rv {} <= {last_rv}",
        rv(&new)
    );
}

#[test]
fn a_watch_resumes_across_a_restart_from_the_last_seen_revision() {
    let (mut c, api) = started_with_namespace("resume");
    let path = cms("resume");
    let mut last_seen = 0;
    for i in 0..10 {
        last_seen = rv(&api.create(&path, &configmap(&format!("before-{i}"), &[])));
    }
    drop(api);
    c.kill9();
    c.restart();
    let api = c.admin_api();

    // (type, name, rv of the write when the response tells it)
    let mut expected: Vec<(&str, String, Option<u64>)> = Vec::new();
    let mut write = |kind: &'static str, name: &str, o: Option<&Value>| {
        expected.push((kind, name.to_string(), o.map(rv)));
    };
    // Writes after the restart, before the watch starts.
    for i in 0..3 {
        let name = format!("after-{i}");
        let o = api.create(&path, &configmap(&name, &[]));
        write("ADDED", &name, Some(&o));
    }
    let mut o = api.get_ok(&format!("{path}/before-0"));
    o["data"] = serde_json::json!({"changed": "after restart"});
    let o = api.expect(Req::put(format!("{path}/before-0"), &o), 200);
    write("MODIFIED", "before-0", Some(&o));
    delete(&api, &format!("{path}/before-1"));
    write("DELETED", "before-1", None);

    let mut watch = api
        .watch(&format!("{path}?watch=true&resourceVersion={last_seen}"))
        .unwrap_or_else(|r| {
            panic!(
                "resuming the watch from {last_seen} failed: {}\n{}",
                r.describe(),
                c.log_tail()
            )
        });

    // Writes after the watch started.
    for i in 0..2 {
        let name = format!("during-{i}");
        let o = api.create(&path, &configmap(&name, &[]));
        write("ADDED", &name, Some(&o));
    }
    delete(&api, &format!("{path}/after-2"));
    write("DELETED", "after-2", None);

    let mut previous = last_seen;
    for (i, (kind, name, write_rv)) in expected.iter().enumerate() {
        let e = watch.expect_event(secs(10), &format!("event {i}: {kind} {name}"));
        let got = (
            e["type"].as_str().unwrap_or("?"),
            e["object"]["metadata"]["name"].as_str().unwrap_or("?"),
        );
        assert_eq!(
            got,
            (*kind, name.as_str()),
            "event {i} (want {expected:?})\n{}",
            watch.describe()
        );
        let event_rv = rv(&e["object"]);
        assert!(
            event_rv > previous,
            "event {i} rv {event_rv} after {previous}\n{}",
            watch.describe()
        );
        if let Some(w) = write_rv {
            assert_eq!(
                event_rv,
                *w,
                "event {i} must carry the write's resourceVersion\n{}",
                watch.describe()
            );
        }
        previous = event_rv;
    }
    loop {
        match watch.next(secs(1)) {
            Next::Event(e) if e["type"] == "BOOKMARK" => continue,
            Next::Event(e) => panic!(
                "unexpected extra event {}\n{}",
                event_summary(&e),
                watch.describe()
            ),
            Next::Timeout => break,
            Next::Closed(why) => panic!("the watch closed early: {why}\n{}", watch.describe()),
        }
    }
}

#[test]
fn a_watcher_far_behind_the_live_events_still_gets_every_one_in_order() {
    let (c, api) = started_with_namespace("burst");
    let path = cms("burst");
    // The namespace's CA bundle is written by the controller: not one of the burst.
    c.wait_for(secs(10), "burst's kube-root-ca.crt", || {
        match api.get(&format!("{path}/kube-root-ca.crt")).status {
            200 => Ok(()),
            other => Err(other),
        }
    });
    let from = rv(&api.get_ok(&path));
    // Its own connection, read only after the burst: the server's send buffers, the stream's
    // flow-control window and the socket buffers fill, and the watch falls behind the live
    // event ring (4,096 events).
    let watcher = c.admin_api();
    let mut w = watcher
        .watch(&format!("{path}?watch=true&resourceVersion={from}"))
        .unwrap_or_else(|r| panic!("watch refused: {}", r.describe()));
    // 8,000 writes of 8 KiB: more than the buffers between server and client hold, plus the
    // whole ring. Eight writers at once (one after another this was the longest control-plane
    // test, 285 s on a loaded CI machine): the watch must still deliver their revisions in
    // order, each once.
    const WRITES: usize = 8_000;
    const WRITERS: usize = 8;
    let payload = "x".repeat(8192);
    let mut revisions: Vec<u64> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let (c, path, payload) = (&c, &path, &payload);
                s.spawn(move || {
                    let api = c.admin_api();
                    (writer..WRITES)
                        .step_by(WRITERS)
                        .map(|i| {
                            let cm = configmap(&format!("cm-{i:04}"), &[("pad", payload)]);
                            rv(&api.create(path, &cm))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        writers
            .into_iter()
            .flat_map(|w| w.join().expect("a writer panicked"))
            .collect()
    });
    revisions.sort_unstable();
    let mut seen = Vec::with_capacity(WRITES);
    while seen.len() < WRITES {
        match w.next(secs(30)) {
            Next::Event(e) if e["type"] == "BOOKMARK" => {}
            Next::Event(e) => {
                assert_eq!(e["type"], "ADDED", "{}", event_summary(&e));
                seen.push(rv(&e["object"]));
            }
            other => panic!(
                "after {} of {WRITES} events: {other:?}\n{}",
                seen.len(),
                c.log_tail()
            ),
        }
    }
    assert_eq!(seen, revisions, "every write once, in revision order");
}

/// Unmounts a test filesystem (lazily: the controller may still hold files on it).
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Issue 28, acceptance 2: the data dir on a 64 MiB filesystem, filled by writes. Writes are
/// then refused with a `Status` that says the disk is full, `/readyz` fails and says why,
/// deletions still go through; once space is freed (a file beside the store removed) writes
/// succeed again without a restart, and every acknowledged write is there.
#[test]
fn a_full_disk_refuses_writes_keeps_deletes_and_recovers_when_space_is_freed() {
    if berth_tests::controller::on_etcd() {
        return; // the embedded store's file system; etcd answers NOSPACE itself
    }
    let c = Controller::start_prepared(&[], |dir| {
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount");
        assert!(
            mounted.success(),
            "cannot mount a tmpfs on {}",
            dir.display()
        );
        // Room that the test gives back later, as an operator would.
        std::fs::write(dir.join("filler"), vec![0u8; 16 << 20]).expect("the filler file");
    });
    let _unmount = Unmount(c.data_dir());
    let api = c.admin_api();
    let blob = "x".repeat(400_000);
    let mut acked = Vec::new();
    let refusal = loop {
        let name = format!("fill-{}", acked.len());
        let reply = api.send(Req::post(
            cms("default"),
            &configmap(&name, &[("b", &blob)]),
        ));
        match reply.status {
            201 => acked.push(name),
            _ => break reply,
        }
        assert!(acked.len() < 200, "64 MiB never filled up");
    };
    assert_eq!(refusal.status, 500, "{}", refusal.describe());
    let message = refusal.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("disk is full") || message.contains("No space left"),
        "{message}"
    );
    let ready = api.send(Req::get("/readyz"));
    assert_eq!(ready.status, 500, "{}", ready.describe());
    assert!(ready.body.contains("store failed"), "{}", ready.describe());
    let metrics = api.get("/metrics");
    assert!(
        metrics.body.contains("berth_store_commits_failing 1"),
        "{}",
        metrics.body
    );

    // Deletions are accepted while the disk is full.
    for name in acked.drain(..3) {
        let reply = api.send(Req::delete(format!("{}/{name}", cms("default"))));
        assert_eq!(reply.status, 200, "delete while full: {}", reply.describe());
    }
    // Space freed beside the store: writes work again, no restart.
    std::fs::remove_file(c.data_dir().join("filler")).expect("removing the filler");
    let reply = api.send(Req::post(
        cms("default"),
        &configmap("after", &[("a", "b")]),
    ));
    assert_eq!(reply.status, 201, "{}", reply.describe());
    assert_eq!(api.get("/readyz").status, 200);
    let listed = api.get_ok(&cms("default"));
    let names: std::collections::BTreeSet<String> = items(&listed)
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    for name in acked.iter().chain(std::iter::once(&"after".to_string())) {
        assert!(names.contains(name), "acknowledged {name} is missing");
    }
}
