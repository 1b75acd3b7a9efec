//! Several controllers on a real three-member etcd cluster (Debian's `etcd-server`): one cluster
//! served by every controller, compare-and-swap that holds across them, watches that resume on
//! another controller, a leader elected through a Lease that hands over when it dies, and writes
//! that survive losing a member (and fail cleanly without quorum).

use berth_tests::etcd::EtcdCluster;
use berth_tests::wait::wait_for;
use berth_tests::{Controller, Kubectl, Next, Req};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CM: &str = "/api/v1/namespaces/default/configmaps";

/// Three controllers on one etcd (each started as the documented copy of the first one's
/// `pki/` and `token`).
fn three_controllers(etcd: &EtcdCluster) -> Vec<Controller> {
    three_controllers_with(etcd, &[])
}

/// A three-member etcd and [`three_controllers`] on it; bound as `(etcd, cs)`, the controllers
/// are dropped (stopped) before the etcd.
fn three_controllers_on_etcd() -> (EtcdCluster, Vec<Controller>) {
    let etcd = EtcdCluster::start(3);
    let cs = three_controllers(&etcd);
    (etcd, cs)
}

fn three_controllers_with(etcd: &EtcdCluster, extra: &[&str]) -> Vec<Controller> {
    let endpoints = etcd.endpoints();
    let mut args = vec!["--datastore-endpoint", endpoints.as_str()];
    args.extend_from_slice(extra);
    let first = Controller::start_with(&args);
    let second = Controller::start_joining(&first, &args);
    let third = Controller::start_joining(&first, &args);
    vec![first, second, third]
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {obj}"))
}

/// Which controllers say (in `/metrics`) that they lead.
fn leaders(controllers: &[Controller]) -> Vec<usize> {
    controllers
        .iter()
        .enumerate()
        .filter(|(_, c)| c.pid().is_some())
        .filter(|(_, c)| {
            c.admin_api().try_send(Req::get("/metrics")).is_ok_and(|r| {
                r.body
                    .contains("leader_election_master_status{name=\"berth-controller\"} 1")
            })
        })
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn every_controller_serves_the_same_cluster_with_read_after_write_across_them() {
    let (_etcd, cs) = three_controllers_on_etcd();
    let first = cs[0].admin_api();
    let created = first.create(CM, &cm("shared", json!({"k": "v"})));
    // An unset resourceVersion is a consistent read: another controller sees the write at once.
    for c in &cs[1..] {
        let got = c.admin_api().get_ok(&format!("{CM}/shared"));
        assert_eq!(got["metadata"]["uid"], created["metadata"]["uid"]);
        assert_eq!(rv(&got), rv(&created));
    }
    // Revisions are etcd's: one sequence across controllers.
    let second = cs[2].admin_api().create(CM, &cm("second", json!({})));
    assert!(rv(&second) > rv(&created));
    let list = cs[1].admin_api().get_ok(CM);
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert!(
        names.contains(&"shared") && names.contains(&"second"),
        "{names:?}"
    );
    // Exactly one leader, holding the Lease.
    let lead = wait_for(Duration::from_secs(30), "one leader", || {
        let l = leaders(&cs);
        if l.len() == 1 { Ok(l[0]) } else { Err(l) }
    });
    let lease = cs[1]
        .admin_api()
        .get_ok("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/berth-controller");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15, "{lease}");
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
    assert!(
        holder.ends_with(&format!("_{}", cs[lead].port())),
        "holder {holder} is not controller {lead} (port {})",
        cs[lead].port()
    );
}

#[test]
fn compare_and_swap_counts_exactly_through_different_controllers() {
    let (_etcd, cs) = three_controllers_on_etcd();
    let first = cs[0].admin_api();
    let start = first.create(CM, &cm("counter", json!({"n": "0"})));
    let watcher = cs[1].admin_api();
    let mut watch = watcher
        .watch(&format!(
            "{CM}?watch=true&fieldSelector=metadata.name%3Dcounter&resourceVersion={}",
            rv(&start)
        ))
        .unwrap_or_else(|r| panic!("watch refused: {}", r.describe()));
    const CLIENTS: usize = 8;
    const INCREMENTS: usize = 12;
    let successes = Arc::new(Mutex::new(0usize));
    std::thread::scope(|s| {
        for client in 0..CLIENTS {
            let (cs, successes) = (&cs, successes.clone());
            s.spawn(move || {
                let mut done = 0;
                let mut attempt = 0;
                let deadline = Instant::now() + Duration::from_secs(120);
                while done < INCREMENTS {
                    assert!(Instant::now() < deadline, "client {client} is stuck");
                    attempt += 1;
                    // Read through one controller, write through another.
                    let reader = cs[(client + attempt) % 3].admin_api();
                    let writer = cs[(client + attempt + 1) % 3].admin_api();
                    let mut obj = reader.get_ok(&format!("{CM}/counter"));
                    let n: u64 = obj["data"]["n"].as_str().unwrap().parse().unwrap();
                    obj["data"]["n"] = json!((n + 1).to_string());
                    let reply = writer.send(Req::put(format!("{CM}/counter"), &obj));
                    match reply.status {
                        200 => {
                            done += 1;
                            *successes.lock().unwrap() += 1;
                        }
                        409 => {}
                        _ => panic!("update: {}", reply.describe()),
                    }
                }
            });
        }
    });
    let successes = *successes.lock().unwrap();
    assert_eq!(successes, CLIENTS * INCREMENTS);
    let last = cs[2].admin_api().get_ok(&format!("{CM}/counter"));
    assert_eq!(last["data"]["n"], json!(successes.to_string()), "{last}");
    // The watch through another controller saw every value once, in order, with increasing
    // revisions.
    let mut previous = rv(&start);
    for expected in 1..=successes {
        let ev = watch.expect_event(Duration::from_secs(20), "the next increment");
        assert_eq!(ev["type"], "MODIFIED", "{ev}");
        assert_eq!(
            ev["object"]["data"]["n"],
            json!(expected.to_string()),
            "{ev}"
        );
        let r = rv(&ev["object"]);
        assert!(r > previous, "revision {r} after {previous}");
        previous = r;
    }
}

/// What one client's update came to.
enum Outcome {
    /// 200: the update wrote this value.
    Acked(u64),
    /// No answer, or a 5xx: the update of this value may or may not have been applied.
    Unknown(u64),
}

/// One client's read-increment-write loop over `cs` (the live controllers among them) until
/// `stop`: the GET through one controller, the PUT (with the resourceVersion read) through the
/// next.
fn increment_until(
    cs: &Mutex<Vec<Option<Controller>>>,
    client: usize,
    name: &str,
    acks: &std::sync::atomic::AtomicUsize,
    stop: &std::sync::atomic::AtomicBool,
) -> Vec<Outcome> {
    let mut out = Vec::new();
    let mut attempt = client;
    let api = |i: usize| {
        cs.lock().expect("controllers")[i % 3]
            .as_ref()
            .map(Controller::admin_api)
    };
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        attempt += 1;
        let (Some(reader), Some(writer)) = (api(attempt), api(attempt + 1)) else {
            continue;
        };
        let Ok(read) = reader.try_send(Req::get(format!("{CM}/{name}"))) else {
            continue;
        };
        if read.status != 200 {
            continue;
        }
        let mut obj = read.json();
        let n: u64 = obj["data"]["n"]
            .as_str()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no counter in {obj}"));
        obj["data"]["n"] = json!((n + 1).to_string());
        match writer.try_send(Req::put(format!("{CM}/{name}"), &obj)) {
            Ok(r) if r.status == 200 => {
                acks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                out.push(Outcome::Acked(n + 1));
            }
            Ok(r) if r.status == 409 => {}
            Ok(r) if r.status >= 500 => out.push(Outcome::Unknown(n + 1)),
            Ok(r) => panic!("update: {}", r.describe()),
            Err(_) => out.push(Outcome::Unknown(n + 1)),
        }
    }
    out
}

/// Issue 27, acceptance 1: 20 rounds of 6 clients incrementing one counter through 3
/// controllers (read through one, compare-and-swap write through another), while an etcd
/// member and then a controller are SIGKILLed and restarted between and during the rounds.
/// Every acknowledged update is in the counter: the acknowledged values are distinct (two
/// acknowledgements of one value mean one of them was lost), and every value the counter went
/// through was written by an acknowledged update or by one whose answer was lost (a 5xx or a
/// broken connection: applied or not, never acknowledged). With no such update in a round the
/// counter equals the acknowledged updates exactly.
#[test]
fn every_acknowledged_update_is_in_the_counter_across_member_and_controller_kills() {
    const ROUNDS: usize = 20;
    const CLIENTS: usize = 6;
    let mut etcd = EtcdCluster::start(3);
    let cs = Mutex::new(
        three_controllers(&etcd)
            .into_iter()
            .map(Some)
            .collect::<Vec<_>>(),
    );
    let mut exact_rounds = 0;
    let mut unknown_total = 0;
    let mut acked_total = 0;
    for round in 0..ROUNDS {
        let name = format!("counter-{round}");
        let creator = cs.lock().unwrap()[0]
            .as_ref()
            .map(Controller::admin_api)
            .unwrap();
        creator.create(CM, &cm(&name, json!({"n": "0"})));
        let stop = std::sync::atomic::AtomicBool::new(false);
        let acks = std::sync::atomic::AtomicUsize::new(0);
        // Each phase of a round lasts until the clients have had 20 more updates acknowledged.
        let progress = |what: &str| {
            let from = acks.load(std::sync::atomic::Ordering::Relaxed);
            wait_for(Duration::from_secs(60), what, || {
                let n = acks.load(std::sync::atomic::Ordering::Relaxed);
                if n >= from + 20 { Ok(()) } else { Err(n) }
            });
        };
        let outcomes: Vec<Outcome> = std::thread::scope(|s| {
            let clients: Vec<_> = (0..CLIENTS)
                .map(|client| {
                    let (cs, name, acks, stop) = (&cs, &name, &acks, &stop);
                    s.spawn(move || increment_until(cs, client, name, acks, stop))
                })
                .collect();
            progress("updates before the failure");
            // The failures, each in the middle of a round.
            match round {
                4 => etcd.kill(0),
                7 => etcd.restart(0),
                10 => etcd.kill(2),
                12 => etcd.restart(2),
                14 | 17 => {
                    // A controller (the leader first, then another) SIGKILLed mid-round.
                    let victim = if round == 14 { 0 } else { 1 };
                    let taken = cs.lock().unwrap()[victim].take();
                    if let Some(mut c) = taken {
                        c.kill9();
                        c.restart();
                        cs.lock().unwrap()[victim] = Some(c);
                    }
                }
                _ => {}
            }
            progress("updates after the failure");
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            clients
                .into_iter()
                .flat_map(|c| c.join().unwrap())
                .collect()
        });
        let final_value = wait_for(Duration::from_secs(30), "the counter", || {
            let api = cs.lock().unwrap()[2]
                .as_ref()
                .map(Controller::admin_api)
                .unwrap();
            match api.try_send(Req::get(format!("{CM}/{name}"))) {
                Ok(r) if r.status == 200 => Ok(r.json()["data"]["n"]
                    .as_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()),
                Ok(r) => Err(r.describe()),
                Err(e) => Err(e),
            }
        });
        let mut acked = BTreeSet::new();
        let mut unknown = BTreeSet::new();
        for o in &outcomes {
            match o {
                Outcome::Acked(v) => assert!(
                    acked.insert(*v),
                    "round {round}: value {v} acknowledged twice: one of the two updates was lost"
                ),
                Outcome::Unknown(v) => {
                    unknown.insert(*v);
                }
            }
        }
        let unexplained: Vec<u64> = (1..=final_value)
            .filter(|v| !acked.contains(v) && !unknown.contains(v))
            .collect();
        assert!(
            unexplained.is_empty(),
            "round {round}: the counter passed through {unexplained:?}, which no update wrote"
        );
        let lost: Vec<&u64> = acked.iter().filter(|v| **v > final_value).collect();
        assert!(
            lost.is_empty(),
            "round {round}: acknowledged values {lost:?} are past the counter's {final_value}"
        );
        let unknown_n = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Unknown(_)))
            .count();
        if unknown_n == 0 {
            assert_eq!(final_value as usize, acked.len(), "round {round}");
            exact_rounds += 1;
        }
        assert!(
            !acked.is_empty(),
            "round {round}: no update was acknowledged"
        );
        unknown_total += unknown_n;
        acked_total += acked.len();
        eprintln!(
            "round {round}: counter {final_value}, {} acknowledged, {unknown_n} unanswered",
            acked.len()
        );
    }
    eprintln!(
        "{acked_total} acknowledged updates, {unknown_total} unanswered, {exact_rounds} of {ROUNDS} rounds exact"
    );
}

/// Issue 27, acceptance 3: with one of three etcd members down, every controller answers
/// reads and writes, each after at most one retry by the client (no 503 twice in a row).
#[test]
fn with_one_member_down_every_controller_answers_after_at_most_one_retry() {
    let (mut etcd, cs) = three_controllers_on_etcd();
    for c in &cs {
        c.admin_api().get_ok(CM);
    }
    for down in [0, 1] {
        etcd.kill(down);
        for (i, c) in cs.iter().enumerate() {
            let api = c.admin_api();
            for k in 0..15 {
                let name = format!("m{down}-c{i}-{k}");
                let mut failures = Vec::new();
                let created = loop {
                    let r = api.send(Req::post(CM, &cm(&name, json!({}))));
                    if r.status == 201 {
                        break r;
                    }
                    failures.push(r.describe());
                    assert!(
                        failures.len() <= 1,
                        "controller {i}, member {down} down: {failures:?}"
                    );
                };
                let got = api.send(Req::get(format!("{CM}/{name}")));
                assert_eq!(got.status, 200, "controller {i}: {}", got.describe());
                assert_eq!(rv(&got.json()), rv(&created.json()));
            }
        }
        etcd.restart(down);
    }
}

#[test]
fn a_watch_resumes_on_another_controller_with_nothing_missed_or_repeated() {
    let (_etcd, mut cs) = three_controllers_on_etcd();
    let from = rv(&cs[0].admin_api().get_ok(CM));
    let writer = std::thread::scope(|s| {
        let writer_api = cs[0].admin_api();
        let handle = s.spawn(move || {
            for i in 0..60 {
                writer_api.create(CM, &cm(&format!("w{i:03}"), json!({})));
            }
        });
        // Watch through controller 1 until part of the writes arrived, then kill it.
        let api1 = cs[1].admin_api();
        let mut watch = api1
            .watch(&format!("{CM}?watch=true&resourceVersion={from}"))
            .unwrap_or_else(|r| panic!("watch refused: {}", r.describe()));
        let mut seen: Vec<(String, u64)> = Vec::new();
        while seen.len() < 20 {
            let ev = watch.expect_event(Duration::from_secs(20), "a create");
            seen.push((
                ev["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                rv(&ev["object"]),
            ));
        }
        handle.join().unwrap();
        seen
    });
    let mut seen = writer;
    cs[1].kill9();
    // Resume on controller 2 from the last revision seen.
    let last = seen.last().unwrap().1;
    let api2 = cs[2].admin_api();
    let mut watch = api2
        .watch(&format!("{CM}?watch=true&resourceVersion={last}"))
        .unwrap_or_else(|r| panic!("resume refused: {}", r.describe()));
    while seen.len() < 60 {
        match watch.next(Duration::from_secs(20)) {
            Next::Event(ev) if ev["type"] == "BOOKMARK" => {}
            Next::Event(ev) => seen.push((
                ev["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                rv(&ev["object"]),
            )),
            other => panic!("resumed watch: {other:?}\n{}", watch.describe()),
        }
    }
    let names: Vec<String> = seen.iter().map(|(n, _)| n.clone()).collect();
    let expected: Vec<String> = (0..60).map(|i| format!("w{i:03}")).collect();
    assert_eq!(names, expected, "missed, repeated or reordered");
    assert!(seen.windows(2).all(|w| w[0].1 < w[1].1));
    // Nothing more.
    assert!(matches!(
        watch.next(Duration::from_millis(500)),
        Next::Timeout
    ));
}

#[test]
fn the_lease_moves_when_the_leader_dies_and_the_new_leader_acts() {
    let (_etcd, mut cs) = three_controllers_on_etcd();
    let lead = wait_for(Duration::from_secs(30), "one leader", || {
        let l = leaders(&cs);
        if l.len() == 1 { Ok(l[0]) } else { Err(l) }
    });
    let killed_at = Instant::now();
    cs[lead].kill9();
    let new = wait_for(Duration::from_secs(30), "another leader", || {
        let l = leaders(&cs);
        if l.len() == 1 && l[0] != lead {
            Ok(l[0])
        } else {
            Err(l)
        }
    });
    let took = killed_at.elapsed();
    // The holder stopped renewing: others wait one lease duration from the last change they saw.
    assert!(took <= Duration::from_secs(15 + 2 + 3), "took {took:?}");
    // The new leader's controllers act: a ReplicaSet gets its pods.
    let api = cs[new].admin_api();
    api.create(
        "/apis/apps/v1/namespaces/default/replicasets",
        &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "after"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "after"}},
              "template": {"metadata": {"labels": {"app": "after"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}),
    );
    wait_for(Duration::from_secs(30), "the ReplicaSet's pods", || {
        let pods = api.get_ok("/api/v1/namespaces/default/pods?labelSelector=app%3Dafter");
        let n = pods["items"].as_array().map_or(0, Vec::len);
        if n == 2 { Ok(()) } else { Err(n) }
    });
    // A LeaderElection event names the new holder.
    let events = api.get_ok("/api/v1/namespaces/kube-system/events");
    let reasons: BTreeSet<String> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "LeaderElection")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect();
    assert!(
        reasons.iter().any(|m| m.ends_with("became leader")) && reasons.len() >= 2,
        "{reasons:?}"
    );
}

#[test]
fn acknowledged_writes_survive_a_member_kill_and_quorum_loss_fails_writes_not_cached_reads() {
    let (mut etcd, cs) = three_controllers_on_etcd();
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..8 {
            let (cs, acked, stop) = (&cs, acked.clone(), &stop);
            s.spawn(move || {
                let api = cs[w % 3].admin_api();
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let name = format!("w{w}-{i}");
                    i += 1;
                    match api.try_send(Req::post(CM, &cm(&name, json!({})))) {
                        Ok(r) if r.status == 201 => acked.lock().unwrap().push(name),
                        Ok(r) if r.status >= 500 => {}
                        Ok(r) => panic!("create: {}", r.describe()),
                        Err(_) => {}
                    }
                }
            });
        }
        wait_for(Duration::from_secs(30), "writes before the kill", || {
            let n = acked.lock().unwrap().len();
            if n >= 80 { Ok(()) } else { Err(n) }
        });
        etcd.kill(0);
        let at_kill = acked.lock().unwrap().len();
        wait_for(Duration::from_secs(60), "writes after the kill", || {
            let n = acked.lock().unwrap().len();
            if n >= at_kill + 80 { Ok(()) } else { Err(n) }
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    // Lose quorum: writes fail with a 5xx Status, reads of the cache keep working.
    etcd.kill(1);
    let api = cs[2].admin_api();
    let reply = api.send(Req::post(CM, &cm("no-quorum", json!({}))));
    assert!(reply.status >= 500, "{}", reply.describe());
    let status = reply.json();
    assert_eq!(status["kind"], "Status", "{}", reply.describe());
    let cached = api.get_ok(&format!("{CM}?resourceVersion=0"));
    assert!(!cached["items"].as_array().unwrap().is_empty());
    // Quorum back: everything acknowledged is there.
    etcd.restart(0);
    etcd.restart(1);
    let acked = acked.lock().unwrap().clone();
    for c in &cs {
        let api = c.admin_api();
        wait_for(Duration::from_secs(30), "every acknowledged write", || {
            let reply = api.send(Req::get(CM));
            if reply.status != 200 {
                return Err(reply.describe());
            }
            let names: BTreeSet<String> = reply.json()["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            let missing: Vec<&String> = acked.iter().filter(|n| !names.contains(*n)).collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{} missing: {:?}",
                    missing.len(),
                    &missing[..missing.len().min(5)]
                ))
            }
        });
    }
}

#[test]
fn services_created_through_different_controllers_at_once_get_distinct_addresses() {
    let etcd = EtcdCluster::start(3);
    // 61 addresses for 48 Services: unsynchronised allocations would collide.
    let cs = three_controllers_with(&etcd, &["--service-cidr", "10.96.0.0/26"]);
    let created = Arc::new(Mutex::new(Vec::<Value>::new()));
    std::thread::scope(|s| {
        for w in 0..6 {
            let (cs, created) = (&cs, created.clone());
            s.spawn(move || {
                let api = cs[w % 3].admin_api();
                for i in 0..8 {
                    let svc = json!({"apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": format!("s{w}-{i}")},
                        "spec": {"type": "NodePort", "selector": {"app": "x"},
                            "ports": [{"port": 80}]}});
                    let obj = api.create("/api/v1/namespaces/default/services", &svc);
                    created.lock().unwrap().push(obj);
                }
            });
        }
    });
    let created = created.lock().unwrap();
    let ips: BTreeSet<&str> = created
        .iter()
        .filter_map(|s| s["spec"]["clusterIP"].as_str())
        .collect();
    let ports: BTreeSet<u64> = created
        .iter()
        .filter_map(|s| s["spec"]["ports"][0]["nodePort"].as_u64())
        .collect();
    assert_eq!(ips.len(), created.len(), "a cluster IP was given twice");
    assert_eq!(ports.len(), created.len(), "a node port was given twice");
}

#[test]
fn a_restarted_controller_resumes_watches_from_before_its_start() {
    let etcd = EtcdCluster::start(1);
    let endpoints = etcd.endpoints();
    let mut c = Controller::start_with(&["--datastore-endpoint", &endpoints]);
    let from = rv(&c.admin_api().get_ok(CM));
    for i in 0..10 {
        c.admin_api().create(CM, &cm(&format!("r{i}"), json!({})));
    }
    // A new cache: its history is read back from etcd, not started empty.
    c.restart();
    let api = c.admin_api();
    let mut watch = api
        .watch(&format!("{CM}?watch=true&resourceVersion={from}"))
        .unwrap_or_else(|r| panic!("the resumed watch was refused: {}", r.describe()));
    let mut names = Vec::new();
    while names.len() < 10 {
        let ev = watch.expect_event(Duration::from_secs(10), "a create from before the restart");
        // The controllers' own writes (kube-root-ca.crt) may fall in the window too.
        let name = ev["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default();
        if name.starts_with('r') {
            assert_eq!(ev["type"], "ADDED", "{ev}");
            names.push(name.to_string());
        }
    }
    let expected: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    assert_eq!(names, expected);
}

#[test]
fn kubectl_get_watch_through_a_killed_controller_resumes_on_another_from_its_last_version() {
    let (_etcd, mut cs) = three_controllers_on_etcd();
    // `kubectl get --watch` through controller 1: the list, then every change, as
    // "name resourceVersion" lines.
    let mut first = Kubectl::new(&cs[1]).spawn(&[
        "get",
        "configmaps",
        "--watch",
        "-o",
        "jsonpath={.metadata.name} {.metadata.resourceVersion}{\"\\n\"}",
    ]);
    let mut seen: Vec<(String, u64)> = Vec::new();
    let record = |seen: &mut Vec<(String, u64)>, line: &str| {
        if let Some((name, rv)) = line.trim().split_once(' ')
            && name.starts_with('x')
        {
            seen.push((name.to_string(), rv.parse().unwrap_or(0)));
        }
    };
    let writer = cs[0].admin_api();
    for i in 0..40 {
        writer.create(CM, &cm(&format!("x{i:03}"), json!({})));
        if i == 19 {
            // Half of them through kubectl, then its controller dies.
            while seen.len() < 20 {
                let line = first
                    .next_line(Duration::from_secs(20))
                    .unwrap_or_else(|| panic!("kubectl's watch stalled\n{}", first.describe()));
                record(&mut seen, &line);
            }
            cs[1].kill9();
        }
    }
    // Whatever kubectl printed before its server died counts too.
    while let Some(line) = first.next_line(Duration::from_millis(500)) {
        record(&mut seen, &line);
    }
    let last = seen.last().map(|(_, rv)| *rv).unwrap_or(0);
    // Resumed through controller 2 from the last resourceVersion kubectl printed.
    let mut resumed = Kubectl::new(&cs[2]).spawn(&[
        "get",
        "--raw",
        &format!("{CM}?watch=true&resourceVersion={last}"),
    ]);
    while seen.len() < 40 {
        let line = resumed
            .next_line(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("the resumed watch stalled\n{}", resumed.describe()));
        let ev: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not a watch event ({e}): {line}"));
        let name = ev["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default();
        record(&mut seen, &format!("{name} {}", rv(&ev["object"])));
    }
    let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    let expected: Vec<String> = (0..40).map(|i| format!("x{i:03}")).collect();
    assert_eq!(names, expected, "missed, repeated or reordered");
    assert!(
        resumed.next_line(Duration::from_millis(500)).is_none(),
        "more than the 40 creates"
    );
}

/// The harness itself: `free_port` only says a port was free a moment ago, so a member whose
/// port was taken before it bound exits at once; the cluster is then started again on fresh
/// ports instead of the test waiting 30 s on a member that is gone.
#[test]
fn an_etcd_cluster_whose_port_was_taken_starts_again_on_fresh_ports() {
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind a port");
    let taken_port = taken.local_addr().expect("its address").port();
    let mut first = true;
    let etcd = EtcdCluster::start_on(1, || {
        if std::mem::take(&mut first) {
            taken_port
        } else {
            berth_tests::host::free_port()
        }
    });
    assert_ne!(
        etcd.client_port(0),
        taken_port,
        "the cluster runs on fresh ports"
    );
    let r = berth_tests::http_get("127.0.0.1", etcd.client_port(0), "/health")
        .expect("the restarted member answers");
    assert_eq!(r.status, 200, "{}", r.body);
    drop(taken);
}
