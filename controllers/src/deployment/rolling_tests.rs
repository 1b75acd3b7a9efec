//! Rolling-update steps: a table of states and the next writes, and whole rollouts simulated
//! pass by pass with the seed's numbers.

use super::super::fixtures::*;
use super::super::revision::REVISION;
use berth_shared::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

fn with_revision(mut d: Deployment, rev: &str) -> Deployment {
    d.metadata.annotations = Some([(REVISION.to_string(), rev.to_string())].into());
    d
}

#[test]
fn each_rolling_state_leads_to_the_upstream_next_step() {
    struct Case {
        name: &'static str,
        d: Deployment,
        rss: Vec<ReplicaSet>,
        want: Vec<&'static str>,
    }
    let d3 = deployment(3, "25%", "25%");
    let cases = vec![
        Case {
            name: "a new template creates the new replica set at the surge (25% of 3 -> 1)",
            d: d3.clone(),
            rss: vec![rs("web-old", 1, 3).with_status(3, 3, 3).sized_for(3, 4)],
            want: vec!["create nginx:new 1"],
        },
        Case {
            name: "while the surge pod is not available nothing else moves",
            d: d3.clone(),
            rss: vec![
                rs("web-old", 1, 3).with_status(3, 3, 3).sized_for(3, 4),
                new_rs_of(&d3, "web-new", 2, 1)
                    .with_status(1, 0, 0)
                    .sized_for(3, 4),
            ],
            want: vec![],
        },
        Case {
            name: "a new available pod lets one old pod go",
            d: d3.clone(),
            rss: vec![
                rs("web-old", 1, 3).with_status(3, 3, 3).sized_for(3, 4),
                new_rs_of(&d3, "web-new", 2, 1)
                    .with_status(1, 1, 1)
                    .sized_for(3, 4),
            ],
            want: vec!["web-old -> 2"],
        },
        Case {
            name: "after an old pod went the new replica set grows",
            d: d3.clone(),
            rss: vec![
                rs("web-old", 1, 2).with_status(2, 2, 2).sized_for(3, 4),
                new_rs_of(&d3, "web-new", 2, 1)
                    .with_status(1, 1, 1)
                    .sized_for(3, 4),
            ],
            want: vec!["web-new -> 2"],
        },
        Case {
            name: "an old replica set still holding the pod its scale-down removes keeps the new one from growing",
            d: d3.clone(),
            rss: vec![
                rs("web-old", 1, 2).with_status(3, 3, 3).sized_for(3, 4),
                new_rs_of(&d3, "web-new", 2, 1)
                    .with_status(1, 1, 1)
                    .sized_for(3, 4),
            ],
            want: vec![],
        },
        Case {
            name: "the last old pod goes when the new replica set is complete",
            d: d3.clone(),
            rss: vec![
                rs("web-old", 1, 1).with_status(1, 1, 1).sized_for(3, 4),
                new_rs_of(&d3, "web-new", 2, 3)
                    .with_status(3, 3, 3)
                    .sized_for(3, 4),
            ],
            want: vec!["web-old -> 0"],
        },
        Case {
            name: "a new replica set above spec.replicas is scaled down to it",
            d: d3.clone(),
            rss: vec![
                new_rs_of(&d3, "web-new", 2, 4)
                    .with_status(4, 4, 4)
                    .sized_for(3, 4),
            ],
            want: vec!["web-new -> 3"],
        },
        Case {
            name: "unhealthy old replicas are removed before healthy ones",
            d: deployment(4, "25%", "25%"),
            rss: vec![
                rs("web-old", 1, 4).with_status(4, 2, 2).sized_for(4, 5),
                new_rs_of(&deployment(4, "25%", "25%"), "web-new", 2, 1)
                    .with_status(1, 0, 0)
                    .sized_for(4, 5),
            ],
            want: vec!["web-old -> 3"],
        },
        Case {
            name: "30% surge and unavailable: the old replica set drops to 70% at once",
            d: deployment(10, "30%", "30%"),
            rss: vec![
                rs("web-old", 1, 10)
                    .with_status(10, 10, 10)
                    .sized_for(10, 13),
            ],
            want: vec!["create nginx:new 3", "web-old -> 7"],
        },
        Case {
            name: "no surge: the new replica set starts empty and old pods go first",
            d: deployment(10, "0", "3"),
            rss: vec![
                rs("web-old", 1, 10)
                    .with_status(10, 10, 10)
                    .sized_for(10, 10),
            ],
            want: vec!["create nginx:new 0", "web-old -> 7"],
        },
        Case {
            name: "rollover: the previous in-flight replica set is scaled down, unhealthy first",
            d: deployment(5, "25%", "25%"),
            rss: vec![
                rs("web-a", 1, 3).with_status(3, 3, 3).sized_for(5, 7),
                rs("web-b", 2, 2).with_status(2, 0, 0).sized_for(5, 7),
            ],
            want: vec!["create nginx:new 2", "web-b -> 1"],
        },
        Case {
            name: "rollover: available old pods go oldest replica set first",
            d: deployment(5, "25%", "25%"),
            rss: vec![
                rs("web-a", 1, 2).with_status(2, 2, 2).sized_for(5, 7),
                rs("web-b", 2, 3).with_status(3, 3, 3).sized_for(5, 7),
                new_rs_of(&deployment(5, "25%", "25%"), "web-new", 3, 2)
                    .with_status(2, 2, 2)
                    .sized_for(5, 7),
            ],
            want: vec!["web-a -> 0", "web-b -> 2"],
        },
    ];
    for c in cases {
        let d = with_revision(c.d, "1");
        assert_eq!(writes(&run(&d, &c.rss, &[], t(10))), c.want, "{}", c.name);
    }
}

/// Runs a rollout from `nginx:1.14.2` to `nginx:1.16.1` pass by pass, with every pod
/// becoming available between passes; checks the bounds after every step.
fn roll(replicas: i32, min_available: i32, max_total: i32) -> Sim {
    let mut sim = Sim::settled(with_image(
        deployment(replicas, "25%", "25%"),
        "nginx:1.14.2",
    ));
    sim.events.clear();
    sim.set_template_image("nginx:1.16.1");
    for _ in 0..30 {
        let p = sim.pass();
        sim.pods(|_| true);
        let total: i32 = sim.sizes().iter().map(|(_, n)| n).sum();
        let available: i32 = sim
            .rss
            .iter()
            .map(|r| {
                r.status
                    .as_ref()
                    .and_then(|s| s.available_replicas)
                    .unwrap_or(0)
            })
            .sum();
        assert!(total <= max_total, "{total} pods: {:?}", sim.sizes());
        assert!(
            available >= min_available,
            "{available} available: {:?}",
            sim.sizes()
        );
        if writes(&p).is_empty() {
            break;
        }
    }
    sim
}

#[test]
fn three_replicas_roll_one_at_a_time_as_in_the_seed() {
    let sim = roll(3, 3, 4);
    assert_eq!(sim.size_of("nginx:1.16.1"), 3);
    assert_eq!(sim.size_of("nginx:1.14.2"), 0);
    let name = |img: &str| {
        sim.rss
            .iter()
            .find(|r| image(r) == img)
            .and_then(|r| r.metadata.name.clone())
            .unwrap()
    };
    let (new, old) = (name("nginx:1.16.1"), name("nginx:1.14.2"));
    assert_eq!(
        sim.events,
        vec![
            format!("Scaled up replica set {new} to 1 from 0"),
            format!("Scaled down replica set {old} to 2 from 3"),
            format!("Scaled up replica set {new} to 2 from 1"),
            format!("Scaled down replica set {old} to 1 from 2"),
            format!("Scaled up replica set {new} to 3 from 2"),
            format!("Scaled down replica set {old} to 0 from 1"),
        ]
    );
}

#[test]
fn four_replicas_stay_between_three_and_five_pods() {
    let sim = roll(4, 3, 5);
    assert_eq!(sim.size_of("nginx:1.16.1"), 4);
    assert_eq!(sim.size_of("nginx:1.14.2"), 0);
}

#[test]
fn a_bad_image_stalls_with_one_new_pod_and_three_old_serving() {
    let mut sim = Sim::settled(with_image(deployment(3, "25%", "25%"), "nginx:1.16.1"));
    sim.set_template_image("nginx:1.161");
    sim.settle(|rs| image(rs) != "nginx:1.161");
    assert_eq!(sim.size_of("nginx:1.161"), 1);
    assert_eq!(sim.size_of("nginx:1.16.1"), 3);
    let s = sim.d.status.clone().unwrap();
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.available_replicas,
            s.unavailable_replicas
        ),
        (Some(4), Some(1), Some(3), Some(1))
    );
    assert_eq!(progressing(&s).1, "ReplicaSetUpdated");
    assert_eq!(cond(&s, "Available").unwrap().status, "True");
}

#[test]
fn rollover_kills_the_in_flight_pods_without_waiting() {
    // T-DEP-03: 5 replicas of 1.14.2 of which only 3 exist, then an update to 1.16.1.
    let d = with_image(deployment(5, "25%", "25%"), "nginx:1.14.2");
    let mut sim = Sim::new(d, Vec::new());
    sim.pass();
    sim.pods(|_| true);
    sim.rss[0] = sim.rss[0].clone().with_status(3, 3, 3);
    sim.events.clear();
    let old = sim.rss[0].metadata.name.clone().unwrap();
    sim.set_template_image("nginx:1.16.1");
    let first = sim.pass();
    assert!(
        writes(&first).contains(&format!("{old} -> 4")),
        "the missing old pods are given up at once: {:?}",
        writes(&first)
    );
    sim.settle(|_| true);
    assert_eq!(sim.size_of("nginx:1.16.1"), 5);
    assert_eq!(sim.size_of("nginx:1.14.2"), 0);
    let about_old: Vec<&String> = sim.events.iter().filter(|e| e.contains(&old)).collect();
    assert!(
        about_old.iter().all(|e| e.starts_with("Scaled down")),
        "{about_old:?}"
    );
}
