//! Agent acceptance 8: images. A pod whose image the registry does not have waits in
//! `ErrImagePull`, then `ImagePullBackOff` (with a `Failed` event), and starts once the image is
//! pushed (`Pulling` and `Pulled` events); `berth-agent image import` of an OCI layout archive
//! makes a pod with `imagePullPolicy: Never` start, which waited in `ErrImageNeverPull` before,
//! and `berth-agent image ls` lists the imported image.

use std::collections::BTreeSet;
use std::time::Duration;

use berth_tests::fixtures::{BUSYBOX, Kind, build_layout, tar_layout};
use berth_tests::pod_reading::{container_status, waiting_reason};
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const START: Duration = secs(90);

fn pod_with_image(name: &str, node: &str, image: &str, policy: Option<&str>) -> Value {
    let mut main = json!({"name": "main", "image": image, "command": ["sh", "-c", SLEEP_FOREVER]});
    if let Some(p) = policy {
        main["imagePullPolicy"] = json!(p);
    }
    bound_pod(name, node, json!({"containers": [main]}))
}

#[test]
fn a_missing_image_backs_off_until_it_is_pushed() {
    let (c, node) = Cluster::start_one();
    assert!(!c.registry().has_manifest("library/late", "1.0"));
    c.apply(&pod_with_image("late", &node, "late:1.0", None));
    let mut reasons = BTreeSet::new();
    c.watch_pod(
        "default",
        "late",
        START,
        "ErrImagePull, then ImagePullBackOff",
        |p| {
            let cs = container_status(p, "main").ok_or("no container status")?;
            if let Some(r) = waiting_reason(cs) {
                reasons.insert(r.to_string());
            }
            ok_if(
                reasons.contains("ErrImagePull") && reasons.contains("ImagePullBackOff"),
                format!("waiting reasons so far {reasons:?}"),
            )
        },
    );
    assert_eq!(
        c.pod("default", "late").unwrap()["status"]["phase"],
        "Pending"
    );
    let events = c.pod_event_reasons("default", "late");
    assert!(events.iter().any(|r| r == "Failed"), "{events:?}");
    // The event follows the status write that entered the back-off.
    let backoff = c.wait_for(secs(10), "a BackOff event", || {
        c.pod_events("default", "late")
            .into_iter()
            .find(|e| e["reason"] == "BackOff")
            .ok_or_else(|| c.pod_event_reasons("default", "late"))
    });
    assert_eq!(backoff["type"], "Normal");
    assert!(
        backoff["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Back-off pulling image \"")),
        "{backoff}"
    );

    c.push_fixture(&BUSYBOX, "library/late", "1.0");
    c.wait_for_pod_ready("default", "late", secs(120));
    c.wait_pod_event_reasons("default", "late", &["Pulling", "Pulled"], secs(20));
}

#[test]
fn an_imported_image_runs_with_pull_policy_never() {
    let (c, node) = Cluster::start_one();
    c.apply(&pod_with_image(
        "offline",
        &node,
        "imported:1.0",
        Some("Never"),
    ));
    c.wait_pod("default", "offline", START, "ErrImageNeverPull", |p| {
        let cs = container_status(p, "main").ok_or("no container status")?;
        match waiting_reason(cs) {
            Some("ErrImageNeverPull") => Ok(()),
            other => Err(format!("waiting reason {other:?}")),
        }
    });

    let layout = build_layout(
        Kind::Busybox,
        "docker.io/library/imported:1.0",
        "imported-1.0",
        &c.scratch().join("imported-layout"),
    );
    let archive = c.scratch().join("imported.tar");
    tar_layout(&layout, &archive).unwrap();
    let archive = archive.to_string_lossy().into_owned();
    let r = c.agent(0).subcommand(&["image", "import", &archive]);
    assert!(r.success(), "{}", r.describe());
    r.assert_stdout_has("docker.io/library/imported:1.0");
    let ls = c.agent(0).subcommand(&["image", "ls"]);
    assert!(ls.success(), "{}", ls.describe());
    ls.assert_stdout_has("docker.io/library/imported:1.0");
    assert!(
        c.containerd()
            .images(c.agent(0).namespace())
            .contains(&"docker.io/library/imported:1.0".to_string())
    );

    c.wait_for_pod_ready("default", "offline", START);
    let pod = c.pod("default", "offline").unwrap();
    let events: Vec<String> = c.pod_event_reasons("default", "offline");
    assert!(
        !events.iter().any(|r| r == "Pulling"),
        "Never must not pull: {events:?}"
    );
    assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Never");
}
