//! Proportional scaling: the seed's example with its exact numbers, and cases with leftovers.

use super::super::fixtures::*;
use super::super::revision::{self, DESIRED_REPLICAS};
use super::*;
use berth_shared::k8s_openapi::api::apps::v1::DeploymentStatus;

fn name_of(sim: &Sim, img: &str) -> String {
    sim.rss
        .iter()
        .find(|r| image(r) == img)
        .and_then(|r| r.metadata.name.clone())
        .unwrap()
}

#[test]
fn the_seed_example_adds_three_to_the_old_and_two_to_the_new_replica_set() {
    // 10 replicas, maxSurge 3, maxUnavailable 2, all available (seed 000:625-694).
    let mut sim = Sim::settled(with_image(deployment(10, "3", "2"), "nginx:1.14.2"));
    assert_eq!(sim.size_of("nginx:1.14.2"), 10);
    // An image that cannot be pulled: the rollout stops at 13 pods, 8 of them available.
    sim.set_template_image("nginx:sometag");
    sim.settle(|rs| image(rs) != "nginx:sometag");
    assert_eq!(sim.size_of("nginx:sometag"), 5);
    assert_eq!(sim.size_of("nginx:1.14.2"), 8);
    let (old, new) = (
        name_of(&sim, "nginx:1.14.2"),
        name_of(&sim, "nginx:sometag"),
    );
    // The autoscaler asks for 15.
    sim.set_replicas(15);
    sim.events.clear();
    let p = sim.pass();
    assert_eq!(
        writes(&p),
        vec![format!("{old} -> 11"), format!("{new} -> 7")]
    );
    assert_eq!(
        sim.events,
        vec![
            format!("Scaled up replica set {old} to 11 from 8"),
            format!("Scaled up replica set {new} to 7 from 5"),
        ]
    );
    // Pods created, the 3 new old-template pods not ready yet: `get deploy` shows
    // DESIRED 15, CURRENT 18, UP-TO-DATE 7, AVAILABLE 8 (D-15).
    for rs in &mut sim.rss {
        *rs = if image(rs) == "nginx:sometag" {
            rs.clone().with_status(7, 0, 0)
        } else {
            rs.clone().with_status(11, 8, 8)
        };
    }
    sim.pass();
    let s = sim.d.status.clone().unwrap();
    assert_eq!(
        (s.replicas, s.updated_replicas, s.available_replicas),
        (Some(18), Some(7), Some(8))
    );
    // Every active replica set now remembers the new size.
    for rs in &sim.rss {
        assert_eq!(
            (revision::desired_replicas(rs), revision::max_replicas(rs)),
            (Some(15), Some(18))
        );
    }
}

#[test]
fn scaling_spreads_replicas_in_proportion_with_leftovers_to_the_biggest() {
    struct Case {
        name: &'static str,
        to: i32,
        surge: &'static str,
        /// (name, revision, spec.replicas, desired annotation, max annotation)
        rss: Vec<(&'static str, i64, i32, i32, Option<i32>)>,
        status_replicas: i32,
        want: Vec<&'static str>,
    }
    let cases = vec![
        Case {
            name: "growing by one: nobody's fraction rounds up, the newest of the biggest gets it",
            to: 10,
            surge: "0",
            rss: vec![
                ("web-a", 1, 3, 9, Some(9)),
                ("web-b", 2, 3, 9, Some(9)),
                ("web-new", 3, 3, 9, Some(9)),
            ],
            status_replicas: 9,
            want: vec!["web-new -> 4", "web-b -> 3", "web-a -> 3"],
        },
        Case {
            name: "shrinking by one: the oldest of the biggest gives it up",
            to: 8,
            surge: "0",
            rss: vec![
                ("web-a", 1, 3, 9, Some(9)),
                ("web-b", 2, 3, 9, Some(9)),
                ("web-new", 3, 3, 9, Some(9)),
            ],
            status_replicas: 9,
            want: vec!["web-a -> 2", "web-b -> 3", "web-new -> 3"],
        },
        Case {
            name: "fractions round down everywhere: the leftover goes to the largest",
            to: 6,
            surge: "0",
            rss: vec![
                ("web-a", 1, 2, 5, Some(5)),
                ("web-b", 2, 2, 5, Some(5)),
                ("web-new", 3, 1, 5, Some(5)),
            ],
            status_replicas: 5,
            want: vec!["web-b -> 3", "web-a -> 2", "web-new -> 1"],
        },
        Case {
            name: "a replica set at zero is not scaled up",
            to: 9,
            surge: "0",
            rss: vec![
                ("web-a", 1, 4, 6, Some(6)),
                ("web-b", 2, 0, 6, Some(6)),
                ("web-new", 3, 2, 6, Some(6)),
            ],
            status_replicas: 6,
            want: vec!["web-a -> 6", "web-new -> 3"],
        },
        Case {
            name: "scaling to zero empties every replica set",
            to: 0,
            surge: "1",
            rss: vec![("web-a", 1, 3, 5, Some(6)), ("web-new", 2, 2, 5, Some(6))],
            status_replicas: 5,
            want: vec!["web-a -> 0", "web-new -> 0"],
        },
        Case {
            name: "without max-replicas the deployment's status replicas is the base",
            to: 12,
            surge: "0",
            rss: vec![("web-a", 1, 6, 8, None), ("web-new", 2, 2, 8, None)],
            status_replicas: 8,
            want: vec!["web-a -> 9", "web-new -> 3"],
        },
        Case {
            name: "shrinking with surge: 9 and 6 sized for 15 keep their share of 13",
            to: 10,
            surge: "3",
            rss: vec![
                ("web-a", 1, 9, 12, Some(15)),
                ("web-new", 2, 6, 12, Some(15)),
            ],
            status_replicas: 15,
            want: vec!["web-a -> 8", "web-new -> 5"],
        },
        Case {
            name: "a single active replica set takes the whole new size",
            to: 5,
            surge: "1",
            rss: vec![("web-a", 1, 0, 3, Some(4)), ("web-new", 2, 3, 3, Some(4))],
            status_replicas: 3,
            want: vec!["web-new -> 5"],
        },
    ];
    for c in cases {
        let mut d = deployment(c.to, c.surge, "1");
        d.status = Some(DeploymentStatus {
            replicas: Some(c.status_replicas),
            ..Default::default()
        });
        let rss: Vec<_> = c
            .rss
            .iter()
            .map(|(name, rev, size, desired, max)| {
                let r = if *name == "web-new" {
                    new_rs_of(&d, name, *rev, *size)
                } else {
                    rs(name, *rev, *size)
                };
                let r = r
                    .with_status(*size, *size, *size)
                    .with_annotations(&[(DESIRED_REPLICAS, &desired.to_string())]);
                match max {
                    Some(m) => r.with_annotations(&[(revision::MAX_REPLICAS, &m.to_string())]),
                    None => r,
                }
            })
            .collect();
        assert_eq!(writes(&run(&d, &rss, &[], t(1))), c.want, "{}", c.name);
    }
}

#[test]
fn a_saturated_new_replica_set_lets_the_old_ones_go() {
    let d = deployment(3, "1", "0");
    let rss = vec![
        rs("web-a", 1, 1).with_status(1, 1, 1).sized_for(2, 3),
        new_rs_of(&d, "web-new", 2, 3)
            .with_status(3, 3, 3)
            .sized_for(3, 4),
    ];
    assert_eq!(writes(&run(&d, &rss, &[], t(1))), vec!["web-a -> 0"]);
}

#[test]
fn fractions_follow_the_annotated_size() {
    let d = deployment(15, "3", "2");
    let old = rs("web-a", 1, 8).sized_for(10, 13);
    let new = rs("web-b", 2, 5).sized_for(10, 13);
    assert_eq!((fraction(&old, &d), fraction(&new, &d)), (3, 2));
    assert_eq!(proportion(&old, &d, 5, 0), 3);
    assert_eq!(proportion(&new, &d, 5, 4), 1, "bounded by what is left");
    assert_eq!(proportion(&new, &d, 5, 5), 0);
    let zero = deployment(0, "3", "2");
    assert_eq!(fraction(&old, &zero), -8);
}
