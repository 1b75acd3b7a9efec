//! Workloads acceptance 2: Deployments on 2 real agents, driven with the real kubectl. The
//! seed's `nginx-deployment` comes up with upstream's `get deploy`/`get rs`/`get pods
//! --show-labels` shapes; `set image` rolls out within maxSurge 1 / maxUnavailable 0; history,
//! a stalled bad image, undo and `--to-revision`, the progress deadline, pause/resume, scaling
//! in the middle of a rollout, Recreate and revisionHistoryLimit behave as upstream.
//!
//! Rollout bounds are asserted from watches that sample after every event, not from polls
//! ([`Watches`]): one on the ReplicaSets' `spec.replicas` (their sum is what upstream's
//! controller bounds by `replicas + maxSurge`) and one on the pods. Pod counting rule, as
//! upstream counts: a pod counts toward the surge from its creation until it is deleted or gets
//! a `deletionTimestamp`, and is available while it also is Ready (minReadySeconds 0); a
//! terminating pod is neither, so more pods than that may exist while old ones stop (seed rule
//! TM-11). One refinement, because ReplicaSet controllers act on resizes independently: a
//! ReplicaSet's surplus over a size it was just lowered to does not count (see
//! [`surge_violations`]); pods beyond any size their ReplicaSet ever had always count.
//!
//! The nginx fixture (busybox httpd as PID 1) ignores SIGTERM, so a deleted seed pod stops only
//! when its 30 s grace period ends; the waits below are on counted pods, never on old pods
//! being gone, except with Recreate, whose manifest shortens the grace period.

use std::time::Duration;

use berth_tests::fixtures::nginx_marker;
use berth_tests::pod_reading::pod_ip;
use berth_tests::rollout::bounds::surge_violations;
use berth_tests::rollout::census::{Census, Sample};
use berth_tests::rollout::output::{self, is_template_hash, scaling_event};
use berth_tests::rollout::sizes::SizeSample;
use berth_tests::rollout::tally::Timeline;
use berth_tests::rollout::{
    PodWatch, SizeWatch, condition, deployment, hash, image, name, replica_sets, revision, rs_of,
    spec_replicas, state, wait_deployment, wait_rolled_out,
};
use berth_tests::seeds::seed;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, Next, Table, http_get, secs};
use serde_json::{Value, json};

const NS: &str = "default";
const DEPLOY: &str = "nginx-deployment";
const TARGET: &str = "deployment/nginx-deployment";
/// A whole rollout of 3 pods: pulls, starts, three surge steps.
const ROLLOUT: Duration = secs(90);

/// Applies the seed manifest as the documentation does (`kubectl apply -f <file>`).
fn apply_seed(c: &Cluster) {
    let seed = seed("nginx-deployment.deployment");
    let path = seed.path.to_string_lossy().into_owned();
    let out = c.kubectl().ok(&["apply", "-f", &path]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment created");
}

/// `kubectl rollout status`, which must succeed; returns its output.
fn rollout_status(c: &Cluster) -> String {
    c.kubectl().with_deadline(ROLLOUT + secs(10)).ok(&[
        "rollout",
        "status",
        TARGET,
        "--timeout=90s",
    ])
}

/// The census counts only pods of `hash`: `n` of them, all available (terminating pods may
/// still be stopping).
fn only(census: &Census, hash: &str, n: usize) -> Result<(), String> {
    let total = census.total();
    let mine = census.of_hash(hash);
    ok_if(
        total.counted == n && mine.counted == n && mine.available == n,
        format!("want only {n} available pods of {hash}"),
    )
}

/// A ReplicaSet-size watch and a pod watch on one selector, the sizes started first so each
/// pod sample can be judged against the sizes of its moment.
struct Watches {
    sizes: SizeWatch,
    pods: PodWatch,
}

impl Watches {
    fn start(c: &Cluster, selector: &str) -> Watches {
        let sizes = SizeWatch::replica_sets(c, NS, selector);
        let pods = PodWatch::pods(c, NS, selector);
        Watches { sizes, pods }
    }

    /// Stops both and asserts a rolling update's bounds throughout: the ReplicaSets' sizes
    /// never sum to more than `max_total`, nor do the pods counted toward the surge (see
    /// [`surge_violations`]), and never fewer than `min_available` pods are available.
    fn finish_within(
        self,
        max_total: usize,
        min_available: usize,
    ) -> (Timeline<Sample>, Timeline<SizeSample>) {
        let pods = self.pods.finish();
        let sizes = self.sizes.finish();
        let both = || format!("{}\n{}", sizes.describe(), pods.describe());
        let max = sizes.max_total().expect("samples");
        assert!(
            usize::try_from(max.total).unwrap_or(0) <= max_total,
            "the ReplicaSets were sized to more than {max_total} pods at {}\n{}",
            max.stamp.event,
            both()
        );
        let excess = surge_violations(&pods, &sizes, max_total);
        assert!(
            excess.is_empty(),
            "more than {max_total} pods counted toward the surge:\n{}\n{}",
            excess.join("\n"),
            both()
        );
        let min = pods.min_available().expect("samples");
        assert!(
            min.total.available >= min_available,
            "fewer than {min_available} available at {}\n{}",
            min.stamp.event,
            both()
        );
        (pods, sizes)
    }
}

/// [`Watches::finish_within`] for 3 replicas with 25%/25%: at most 3 + 1 pods, at least 3 - 0
/// available; and the surge was used.
fn finish_surge_one_unavailable_zero(w: Watches) -> (Timeline<Sample>, Timeline<SizeSample>) {
    let (pods, sizes) = w.finish_within(4, 3);
    let max = sizes.max_total().map_or(0, |s| s.total);
    assert_eq!(
        max,
        4,
        "the rollout never used its surge\n{}",
        sizes.describe()
    );
    (pods, sizes)
}

/// The pod names and label cells of `kubectl get pods --show-labels`.
fn pod_table(c: &Cluster) -> Table {
    let out = c.kubectl().ok(&["get", "pods", "--show-labels"]);
    let t = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.headers,
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "LABELS"],
        "{out}"
    );
    t
}

/// `kubectl rollout history` of the seed: (revision, change cause) per line.
fn history(c: &Cluster) -> Vec<(u64, String)> {
    let out = c.kubectl().ok(&["rollout", "history", TARGET]);
    output::history(&out, "deployment.apps/nginx-deployment").unwrap_or_else(|e| panic!("{e}"))
}

/// Revisions listed by `kubectl rollout history`.
fn revisions(c: &Cluster) -> Vec<u64> {
    history(c).into_iter().map(|(r, _)| r).collect()
}

/// Waits until the ReplicaSets of the given hashes have these `spec.replicas`.
fn wait_sizes(c: &Cluster, what: &str, want: &[(&str, i64)]) {
    wait_deployment(c, NS, DEPLOY, secs(60), what, |_, rss| {
        for (h, n) in want {
            let got = spec_replicas(rs_of(rss, h)?);
            if got != *n {
                return Err(format!("{h} has {got} replicas, want {n}"));
            }
        }
        Ok(())
    });
}

/// `kubectl set image` of the seed's container, which must succeed.
fn set_image(c: &Cluster, image: &str) {
    let out = c
        .kubectl()
        .ok(&["set", "image", TARGET, &format!("nginx={image}")]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment image updated");
}

/// Waits for the new ReplicaSet of a template change (the one whose template runs `image`);
/// returns its hash.
fn new_hash_for(c: &Cluster, image: &str) -> String {
    wait_deployment(
        c,
        NS,
        DEPLOY,
        secs(30),
        &format!("a ReplicaSet for {image}"),
        |d, rss| {
            rss.iter()
                .rev()
                .find(|rs| self::image(rs) == image && revision(rs) == revision(d))
                .map(|rs| hash(rs).to_string())
                .ok_or_else(|| "not yet".to_string())
        },
    )
}

/// Waits until a pod of `h` shows STATUS `ImagePullBackOff` in `kubectl get pods`.
fn wait_pull_backoff(c: &Cluster, h: &str) -> String {
    c.wait_for(
        secs(60),
        &format!("a pod of {h} in ImagePullBackOff"),
        || {
            let out = c
                .kubectl()
                .ok(&["get", "pods", "-l", &format!("pod-template-hash={h}")]);
            let t = Table::parse(&out)?;
            match t.values("STATUS").as_slice() {
                ["ImagePullBackOff"] => Ok(t.values("NAME")[0].to_string()),
                _ => Err(out),
            }
        },
    )
}

/// Every pod of `h` serves the nginx fixture page of `version`.
fn assert_pods_serve(c: &Cluster, census: &Census, h: &str, version: &str) {
    for p in census.pods().filter(|p| p.hash == h && p.available()) {
        let pod = c.pod(NS, &p.name).expect("a pod the watch sees");
        let ip = pod_ip(&pod).expect("a Ready pod has an IP").to_string();
        let page = c.wait_for(secs(20), &format!("{} answers", p.name), || match http_get(
            &ip, 80, "/",
        ) {
            Ok(r) if r.status == 200 => Ok(r.body),
            other => Err(other),
        });
        assert!(page.contains(&nginx_marker(version)), "{}: {page}", p.name);
    }
}

/// The events about the Deployment, `REASON MESSAGE` per line.
fn events_text(c: &Cluster, deploy: &str) -> String {
    c.kubectl().ok(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.kind=Deployment,involvedObject.name={deploy}"),
        "-o",
        "custom-columns=REASON:.reason,MESSAGE:.message",
    ])
}

#[test]
fn the_seed_deployment_comes_up_and_set_image_rolls_out_with_surge_one_and_none_unavailable() {
    let c = Cluster::start(2);
    apply_seed(&c);
    let out = rollout_status(&c);
    assert!(
        out.trim_end()
            .ends_with("deployment \"nginx-deployment\" successfully rolled out"),
        "{out}"
    );

    // `get deploy`: NAME READY UP-TO-DATE AVAILABLE AGE.
    let out = c.kubectl().ok(&["get", "deployments"]);
    let t = Table::parse(&out).unwrap();
    assert_eq!(
        t.headers,
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{out}"
    );
    assert_eq!(t.rows.len(), 1, "{out}");
    assert_eq!(t.cell(DEPLOY, "READY"), Some("3/3"), "{out}");
    assert_eq!(t.cell(DEPLOY, "UP-TO-DATE"), Some("3"), "{out}");
    assert_eq!(t.cell(DEPLOY, "AVAILABLE"), Some("3"), "{out}");

    // `get rs`: one ReplicaSet named after the Deployment and its pod-template-hash.
    let d = deployment(&c, NS, DEPLOY);
    assert_eq!(revision(&d), Some(1), "{d:#}");
    let rss = replica_sets(&c, &d);
    assert_eq!(rss.len(), 1, "{}", state(&c, NS, DEPLOY));
    let first_hash = hash(&rss[0]).to_string();
    assert!(is_template_hash(&first_hash), "hash {first_hash:?}");
    let first_rs = format!("{DEPLOY}-{first_hash}");
    assert_eq!(name(&rss[0]), first_rs);
    let out = c.kubectl().ok(&["get", "rs"]);
    let t = Table::parse(&out).unwrap();
    assert_eq!(
        t.headers,
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        "{out}"
    );
    assert_eq!(t.values("NAME"), [first_rs.as_str()], "{out}");
    for col in ["DESIRED", "CURRENT", "READY"] {
        assert_eq!(t.cell(&first_rs, col), Some("3"), "{col}\n{out}");
    }

    // `get pods --show-labels`: <rs>-<5 chars>, with the app and hash labels.
    let t = pod_table(&c);
    assert_eq!(t.rows.len(), 3, "{t:?}");
    let labels = format!("app=nginx,pod-template-hash={first_hash}");
    for row in &t.rows {
        let suffix = row[0].strip_prefix(&format!("{first_rs}-"));
        assert!(
            suffix.is_some_and(|s| s.len() == 5),
            "pod name {} is not {first_rs}-<5 chars>",
            row[0]
        );
        assert_eq!(row[1..4], ["1/1", "Running", "0"], "{row:?}");
        assert_eq!(row[5], labels, "{row:?}");
    }
    // Each replica serves the 1.14.2 page at its pod IP.
    for row in &t.rows {
        let pod = c.pod(NS, &row[0]).expect("listed pod");
        let ip = pod_ip(&pod).expect("a Running pod has an IP").to_string();
        let page = c.wait_for(secs(20), &format!("{} answers", row[0]), || match http_get(
            &ip, 80, "/",
        ) {
            Ok(r) if r.status == 200 => Ok(r.body),
            other => Err(other),
        });
        assert!(page.contains(&nginx_marker("1.14.2")), "{page}");
    }

    // The rollout, watched pod version by pod version, and the sizes the controller gave.
    let watches = Watches::start(&c, "app=nginx");
    let out = c
        .kubectl()
        .ok(&["set", "image", TARGET, "nginx=nginx:1.16.1"]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment image updated");
    let out = rollout_status(&c);
    assert!(out.contains("successfully rolled out"), "{out}");
    let d = wait_rolled_out(&c, NS, DEPLOY, "nginx:1.16.1", secs(10));
    assert_eq!(revision(&d), Some(2), "{d:#}");
    let rss = replica_sets(&c, &d);
    assert_eq!(rss.len(), 2, "{}", state(&c, NS, DEPLOY));
    let new_hash = hash(&rss[1]).to_string();
    let new_rs = format!("{DEPLOY}-{new_hash}");
    assert_eq!(name(&rss[0]), first_rs);
    assert_eq!(name(&rss[1]), new_rs);
    watches
        .pods
        .wait_until(&c, secs(60), "only the 3 new pods left", |census| {
            only(census, &new_hash, 3)
        });
    let (timeline, sizes) = finish_surge_one_unavailable_zero(watches);
    assert_eq!(
        timeline.hashes(),
        [first_hash.clone(), new_hash.clone()],
        "{}",
        timeline.describe()
    );
    // One step per pass, as upstream: up one new while the total is under 4, down one old
    // once the new one is available.
    assert_eq!(
        sizes.pairs(&first_hash, &new_hash),
        [(3, 0), (3, 1), (2, 1), (2, 2), (1, 2), (1, 3), (0, 3)],
        "{}",
        sizes.describe()
    );

    let out = c.kubectl().ok(&["get", "rs"]);
    let t = Table::parse(&out).unwrap();
    for (rs, want) in [(&new_rs, "3"), (&first_rs, "0")] {
        for col in ["DESIRED", "CURRENT", "READY"] {
            assert_eq!(t.cell(rs, col), Some(want), "{rs} {col}\n{out}");
        }
    }
    // Old pods may still be stopping (shown as Terminating); the others are the new ones.
    let t = pod_table(&c);
    let live: Vec<&Vec<String>> = t.rows.iter().filter(|r| r[2] != "Terminating").collect();
    assert_eq!(live.len(), 3, "{t:?}");
    for row in live {
        assert!(row[0].starts_with(&format!("{new_rs}-")), "{row:?}");
        assert_eq!(row[5], format!("app=nginx,pod-template-hash={new_hash}"));
    }

    // History: revisions 1 and 2, no change cause.
    assert_eq!(history(&c), [(1, "<none>".into()), (2, "<none>".into())]);
    let out = c
        .kubectl()
        .ok(&["rollout", "history", TARGET, "--revision=2"]);
    assert!(out.contains("nginx:1.16.1"), "{out}");

    // describe: replica counts, the ReplicaSets, conditions and ScalingReplicaSet events.
    let out = c.kubectl().ok(&["describe", "deployment", DEPLOY]);
    let has = |line_words: &[&str]| {
        out.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.windows(line_words.len()).any(|w| w == line_words)
        })
    };
    for want in [
        &[
            "Replicas:",
            "3",
            "desired",
            "|",
            "3",
            "updated",
            "|",
            "3",
            "total",
            "|",
            "3",
            "available",
            "|",
            "0",
            "unavailable",
        ][..],
        &["StrategyType:", "RollingUpdate"],
        &[
            "RollingUpdateStrategy:",
            "25%",
            "max",
            "unavailable,",
            "25%",
            "max",
            "surge",
        ],
        &["Image:", "nginx:1.16.1"],
        &["Available", "True", "MinimumReplicasAvailable"],
        &["Progressing", "True", "NewReplicaSetAvailable"],
        // kubectl 1.31 lists every old ReplicaSet, scaled-down ones too (the seed's `<none>`
        // is older kubectl's output).
        &["OldReplicaSets:", &first_rs, "(0/0", "replicas", "created)"],
        &["NewReplicaSet:", &new_rs, "(3/3", "replicas", "created)"],
    ] {
        assert!(has(want), "describe lacks {want:?}\n{out}");
    }
    for msg in [
        format!("Scaled up replica set {first_rs} to 3"),
        format!("Scaled up replica set {new_rs} to 1"),
        format!("Scaled down replica set {first_rs} to 2"),
        format!("Scaled up replica set {new_rs} to 3"),
        format!("Scaled down replica set {first_rs} to 0"),
    ] {
        assert!(
            scaling_event(&out, &msg),
            "describe lacks event {msg:?}\n{out}"
        );
    }
}

#[test]
fn a_bad_image_stalls_past_its_progress_deadline_and_undo_restores_earlier_revisions() {
    let c = Cluster::start(2);
    apply_seed(&c);
    rollout_status(&c);
    let h1 = hash(&replica_sets(&c, &deployment(&c, NS, DEPLOY))[0]).to_string();
    let watch = Watches::start(&c, "app=nginx");
    set_image(&c, "nginx:1.16.1");
    rollout_status(&c);
    let h2 = new_hash_for(&c, "nginx:1.16.1");
    watch
        .pods
        .wait_until(&c, secs(60), "the 3 pods of revision 2", |census| {
            only(census, &h2, 3)
        });

    // A deadline of 10 s (a spec change, not a rollout), then the bad image.
    let patch = json!({"spec": {"progressDeadlineSeconds": 10}}).to_string();
    c.kubectl().ok(&["patch", TARGET, "-p", &patch]);
    set_image(&c, "nginx:1.161");
    let h3 = new_hash_for(&c, "nginx:1.161");
    let bad_rs = format!("{DEPLOY}-{h3}");
    wait_pull_backoff(&c, &h3);
    let d = wait_deployment(
        &c,
        NS,
        DEPLOY,
        secs(60),
        "Progressing False ProgressDeadlineExceeded",
        |d, _| match condition(d, "Progressing") {
            Some(p) if p["status"] == "False" && p["reason"] == "ProgressDeadlineExceeded" => {
                Ok(d.clone())
            }
            other => Err(format!("Progressing {other:?}")),
        },
    );
    let p = condition(&d, "Progressing").unwrap();
    assert_eq!(
        p["message"],
        format!("ReplicaSet \"{bad_rs}\" has timed out progressing."),
        "{d:#}"
    );
    assert_eq!(condition(&d, "Available").unwrap()["status"], "True");
    let r = c
        .kubectl()
        .fails(&["rollout", "status", TARGET, "--timeout=30s"]);
    r.assert_stderr_has("deployment \"nginx-deployment\" exceeded its progress deadline");

    // Stalled: one new pod that cannot pull, the three old ones serving (maxUnavailable 0).
    wait_sizes(&c, "stalled at 3 old + 1 new", &[(&h2, 3), (&h3, 1)]);
    let census = watch
        .pods
        .wait_until(&c, secs(30), "3 old available, 1 new", |census| {
            let (old, new) = (census.of_hash(&h2), census.of_hash(&h3));
            let stalled = old.available == 3 && new.counted == 1 && new.available == 0;
            ok_if(stalled, String::from("not stalled yet")).map(|()| census.clone())
        });
    assert_pods_serve(&c, &census, &h2, "1.16.1");
    let out = c.kubectl().ok(&["get", "rs"]);
    let t = Table::parse(&out).unwrap();
    assert_eq!(t.cell(&bad_rs, "DESIRED"), Some("1"), "{out}");
    assert_eq!(t.cell(&bad_rs, "READY"), Some("0"), "{out}");
    assert_eq!(
        t.cell(&format!("{DEPLOY}-{h2}"), "READY"),
        Some("3"),
        "{out}"
    );
    assert_eq!(revisions(&c), [1, 2, 3]);

    // Undo: revision 2's ReplicaSet comes back as revision 4; no new ReplicaSet.
    let out = c.kubectl().ok(&["rollout", "undo", TARGET]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment rolled back");
    rollout_status(&c);
    let d = wait_rolled_out(&c, NS, DEPLOY, "nginx:1.16.1", secs(30));
    assert_eq!(revision(&d), Some(4), "{}", state(&c, NS, DEPLOY));
    let rss = replica_sets(&c, &d);
    assert_eq!(rss.len(), 3, "{}", state(&c, NS, DEPLOY));
    let rs2 = rs_of(&rss, &h2).unwrap();
    assert_eq!(revision(rs2), Some(4), "{rs2:#}");
    assert_eq!(
        rs2["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"], "2",
        "{rs2:#}"
    );
    assert_eq!(spec_replicas(rs_of(&rss, &h3).unwrap()), 0);
    assert_eq!(
        condition(&d, "Progressing").unwrap()["reason"],
        "NewReplicaSetAvailable",
        "{d:#}"
    );
    watch
        .pods
        .wait_until(&c, secs(60), "only revision 4's pods", |census| {
            only(census, &h2, 3)
        });
    assert_eq!(revisions(&c), [1, 3, 4]);

    // --to-revision: back to 1.14.2 (revision 1's ReplicaSet, now revision 5).
    let r = c
        .kubectl()
        .fails(&["rollout", "undo", TARGET, "--to-revision=2"]);
    r.assert_stderr_has("unable to find specified revision 2 in history");
    let out = c
        .kubectl()
        .ok(&["rollout", "undo", TARGET, "--to-revision=1"]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment rolled back");
    rollout_status(&c);
    let d = wait_rolled_out(&c, NS, DEPLOY, "nginx:1.14.2", secs(30));
    assert_eq!(revision(&d), Some(5), "{}", state(&c, NS, DEPLOY));
    assert_eq!(
        revision(rs_of(&replica_sets(&c, &d), &h1).unwrap()),
        Some(5)
    );
    let census = watch
        .pods
        .wait_until(&c, secs(60), "only revision 5's pods", |census| {
            only(census, &h1, 3).map(|()| census.clone())
        });
    assert_pods_serve(&c, &census, &h1, "1.14.2");
    assert_eq!(revisions(&c), [3, 4, 5]);
    // Through rollout, stall, undo and undo: never more than 4 pods, never fewer than 3 up.
    finish_surge_one_unavailable_zero(watch);
}

#[test]
fn pause_batches_two_changes_into_one_replicaset_and_scaling_mid_rollout_is_proportional() {
    let c = Cluster::start(2);
    apply_seed(&c);
    rollout_status(&c);
    let h1 = hash(&replica_sets(&c, &deployment(&c, NS, DEPLOY))[0]).to_string();

    let out = c.kubectl().ok(&["rollout", "pause", TARGET]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment paused");
    set_image(&c, "nginx:1.16.1");
    let out = c.kubectl().ok(&["set", "env", TARGET, "GREETING=hello"]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment env updated");
    // The controller saw both changes (observedGeneration) and started nothing.
    let d = wait_deployment(
        &c,
        NS,
        DEPLOY,
        secs(30),
        "both changes observed, paused",
        |d, _| {
            let generation = d["metadata"]["generation"].as_i64().unwrap_or(0);
            let observed = d["status"]["observedGeneration"].as_i64().unwrap_or(0);
            let paused = condition(d, "Progressing")
                .is_some_and(|p| p["status"] == "Unknown" && p["reason"] == "DeploymentPaused");
            if observed >= generation && paused {
                Ok(d.clone())
            } else {
                Err(format!(
                    "observed {observed} of {generation}, paused condition {paused}"
                ))
            }
        },
    );
    let rss = replica_sets(&c, &d);
    assert_eq!(rss.len(), 1, "{}", state(&c, NS, DEPLOY));
    assert_eq!(revision(&d), Some(1));
    assert_eq!(revisions(&c), [1]);
    let r = c
        .kubectl()
        .fails(&["rollout", "undo", TARGET, "--to-revision=1"]);
    r.assert_stderr_has("you cannot rollback a paused deployment");

    let watch = Watches::start(&c, "app=nginx");
    let out = c.kubectl().ok(&["rollout", "resume", TARGET]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment resumed");
    rollout_status(&c);
    let d = wait_rolled_out(&c, NS, DEPLOY, "nginx:1.16.1", secs(30));
    let rss = replica_sets(&c, &d);
    assert_eq!(
        rss.len(),
        2,
        "one new ReplicaSet\n{}",
        state(&c, NS, DEPLOY)
    );
    assert_eq!(revision(&d), Some(2));
    let h2 = hash(&rss[1]).to_string();
    assert_eq!(image(&rss[1]), "nginx:1.16.1");
    assert_eq!(
        rss[1]["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "GREETING", "value": "hello"}])
    );
    let census =
        watch
            .pods
            .wait_until(&c, secs(60), "only the resumed revision's pods", |census| {
                only(census, &h2, 3).map(|()| census.clone())
            });
    let pod = census
        .pods()
        .find(|p| p.hash == h2 && p.available())
        .map(|p| p.name.clone())
        .unwrap();
    assert_eq!(
        c.exec_ok(NS, &pod, None, &["sh", "-c", "echo $GREETING"]),
        "hello\n"
    );
    assert_eq!(census.of_hash(&h1).counted, 0);
    finish_surge_one_unavailable_zero(watch);

    // Scale in the middle of a stalled rollout (3 old + 1 new that cannot pull; max-replicas
    // annotation 4). To 6 replicas, maxSurge ceil(1.5) = 2: 8 pods allowed, 4 to add, each
    // ReplicaSet grows in proportion: old 3 * 8 / 4 = 6, new 1 * 8 / 4 = 2.
    set_image(&c, "nginx:1.161");
    let h3 = new_hash_for(&c, "nginx:1.161");
    wait_sizes(&c, "stalled at 3 old + 1 new", &[(&h2, 3), (&h3, 1)]);
    let watch = Watches::start(&c, "app=nginx");
    // The sizes each ReplicaSet is given, watched from before the scale: the events would say
    // it too, but this Deployment has had more than ten `ScalingReplicaSet` messages within ten
    // minutes by now, so they are combined into one whose message is the latest, as upstream's.
    let rs_path = format!("/apis/apps/v1/namespaces/{NS}/replicasets");
    let mut sets = c.api().watch_from_now(&rs_path);
    let out = c.kubectl().ok(&["scale", TARGET, "--replicas=6"]);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment scaled");
    let (old_rs, new_rs) = (format!("{DEPLOY}-{h2}"), format!("{DEPLOY}-{h3}"));
    let mut sized = (false, false);
    let deadline = std::time::Instant::now() + secs(20);
    while sized != (true, true) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match sets.next(left) {
            Next::Event(ev) => {
                let (name, size) = (
                    ev["object"]["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default(),
                    ev["object"]["spec"]["replicas"].as_i64(),
                );
                sized.0 |= name == old_rs && size == Some(6);
                sized.1 |= name == new_rs && size == Some(2);
            }
            other => panic!(
                "{old_rs} to 6 and {new_rs} to 2 (seen: {sized:?}): {other:?}\n{}",
                events_text(&c, DEPLOY)
            ),
        }
    }
    // Then the rollout goes on with maxUnavailable floor(1.5) = 1: one old pod goes (5 of 6
    // available; the controller removes one that is not ready yet), one more new one comes
    // (8 in all), and it stalls again.
    wait_sizes(&c, "stalled at 5 old + 3 new", &[(&h2, 5), (&h3, 3)]);
    let census = watch
        .pods
        .wait_until(&c, secs(60), "5 old available, 3 new", |census| {
            let (old, new) = (census.of_hash(&h2), census.of_hash(&h3));
            let there = old.available == 5 && old.counted == 5 && new.counted == 3;
            ok_if(there, String::from("not there yet")).map(|()| census.clone())
        });
    assert_pods_serve(&c, &census, &h2, "1.16.1");
    // The pods' readiness reaches the Deployment's status through its ReplicaSets a moment later.
    wait_deployment(
        &c,
        NS,
        DEPLOY,
        secs(30),
        "status 5 ready, 3 updated",
        |d, _| {
            let st = &d["status"];
            let n = |k: &str| st[k].as_i64().unwrap_or(0);
            ok_if(
                n("readyReplicas") == 5 && n("availableReplicas") == 5 && n("updatedReplicas") == 3,
                format!("status {st}"),
            )
        },
    );
    let out = c.kubectl().ok(&["get", "deployments"]);
    let t = Table::parse(&out).unwrap();
    assert_eq!(t.cell(DEPLOY, "READY"), Some("5/6"), "{out}");
    assert_eq!(t.cell(DEPLOY, "UP-TO-DATE"), Some("3"), "{out}");
    assert_eq!(t.cell(DEPLOY, "AVAILABLE"), Some("5"), "{out}");

    // At most 6 + 2 pods and at least the 3 old ones available throughout; the sizes went
    // through the proportional step, then one rolling step each way.
    let (_, sizes) = watch.finish_within(8, 3);
    let steps = sizes.pairs(&h2, &h3);
    let mut at = 0;
    for w in [(3, 1), (6, 2), (5, 3)] {
        at += steps[at..].iter().position(|s| *s == w).unwrap_or_else(|| {
            panic!(
                "sizes {w:?} missing after step {at}: {steps:?}\n{}",
                sizes.describe()
            )
        });
    }
}

/// A Deployment `web` of 3 `nginx:1.14.2` pods with the Recreate strategy, keeping 1 old
/// ReplicaSet. The nginx fixture (busybox httpd as PID 1) has no SIGTERM handler, so a deleted
/// pod lives until its grace period ends: 5 s instead of 30 keeps the suite short and still
/// leaves old pods terminating for a while, which Recreate must wait out.
fn recreate_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "revisionHistoryLimit": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {"name": "web", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]}
                    ],
                },
            },
        },
    })
}

#[test]
fn recreate_never_overlaps_old_and_new_pods_and_history_limit_one_keeps_one_old_replicaset() {
    let c = Cluster::start(2);
    c.apply(&recreate_deployment());
    let kubectl = c.kubectl().with_deadline(ROLLOUT + secs(10));
    let status = ["rollout", "status", "deployment/web", "--timeout=90s"];
    kubectl.ok(&status);
    let h1 = hash(&replica_sets(&c, &deployment(&c, NS, "web"))[0]).to_string();

    let watch = PodWatch::pods(&c, NS, "app=web");
    c.kubectl()
        .ok(&["set", "image", "deployment/web", "web=nginx:1.16.1"]);
    kubectl.ok(&status);
    let d = deployment(&c, NS, "web");
    let rss = replica_sets(&c, &d);
    let h2 = hash(rss.last().unwrap()).to_string();
    assert_ne!(h1, h2);
    watch.wait_until(&c, secs(60), "only revision 2's pods", |census| {
        only(census, &h2, 3)
    });
    c.kubectl()
        .ok(&["set", "env", "deployment/web", "STAGE=three"]);
    kubectl.ok(&status);
    let d = deployment(&c, NS, "web");
    assert_eq!(revision(&d), Some(3));
    let h3 = hash(replica_sets(&c, &d).last().unwrap()).to_string();
    watch.wait_until(&c, secs(60), "only revision 3's pods", |census| {
        only(census, &h3, 3)
    });
    let timeline = watch.finish();
    assert_eq!(timeline.hashes(), [h1.clone(), h2.clone(), h3.clone()]);
    let overlaps = timeline.overlaps();
    assert!(
        overlaps.is_empty(),
        "old and new pods ran together at {}\n{}",
        overlaps[0].stamp.event,
        timeline.describe()
    );
    let max = timeline.max_counted().unwrap();
    assert_eq!(max.total.counted, 3, "{}", timeline.describe());

    // revisionHistoryLimit 1: revision 1's ReplicaSet is deleted, revision 2's is kept.
    let rss = wait_deployment(
        &c,
        NS,
        "web",
        secs(30),
        "one old ReplicaSet left",
        |_, rss| {
            if rss.len() == 2 {
                Ok(rss.to_vec())
            } else {
                Err(format!("{} ReplicaSets", rss.len()))
            }
        },
    );
    assert_eq!(
        rss.iter()
            .map(|rs| hash(rs).to_string())
            .collect::<Vec<_>>(),
        [h2.clone(), h3.clone()]
    );
    assert_eq!(spec_replicas(&rss[0]), 0);
    let out = c.kubectl().ok(&["rollout", "history", "deployment/web"]);
    let revs: Vec<&str> = out
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revs, ["2", "3"], "{out}");
    let out = c.kubectl().ok(&["describe", "deployment", "web"]);
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().eq(["StrategyType:", "Recreate"])),
        "{out}"
    );
    for msg in [
        format!("Scaled down replica set web-{h1} to 0"),
        format!("Scaled up replica set web-{h2} to 3"),
        format!("Scaled down replica set web-{h2} to 0"),
        format!("Scaled up replica set web-{h3} to 3"),
    ] {
        assert!(
            scaling_event(&out, &msg),
            "describe lacks event {msg:?}\n{out}"
        );
    }
}
