//! Acceptance area 2: `kubectl apply -f` (default, strict validation) creates every seed
//! manifest and `kubectl get -f` shows each with upstream's columns; a changed apply patches
//! (`generation` 2), an unchanged one is `unchanged`; `apply --server-side` creates and updates.

use berth_tests::kinds::kind;
use berth_tests::seeds::{Seed, seed, seeds};
use berth_tests::{Controller, Table};

/// The namespace a seed goes to: its own if it names one, else a fresh one per seed (two seeds
/// share the name `mypod`).
fn namespace_for(c: &Controller, s: &Seed, i: usize) -> String {
    match &s.namespace {
        Some(ns) => ns.clone(),
        None => {
            let ns = format!("seed-{i}");
            c.kubectl_ok(&["create", "namespace", &ns]);
            ns
        }
    }
}

#[test]
fn apply_creates_every_seed_and_get_shows_upstream_columns() {
    let c = Controller::start();
    let all = seeds();
    for (i, s) in all.iter().enumerate() {
        let ns = namespace_for(&c, s, i);
        let file = s.path.to_str().unwrap();
        let k = kind(&s.kind);
        let out = c.kubectl_ok(&["apply", "-f", file, "-n", &ns]);
        assert_eq!(
            out.trim(),
            format!("{}/{} created", k.kubectl_type(), s.name),
            "apply -f {file}"
        );

        let out = c.kubectl_ok(&["get", "-f", file, "-n", &ns]);
        let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            table.headers, k.columns,
            "columns of `get -f {file}`:\n{out}"
        );
        assert_eq!(
            table.values("NAME"),
            [s.name.as_str()],
            "rows of `get -f {file}`:\n{out}"
        );
        match s.kind.as_str() {
            // No controllers and no agent: nothing is ready and pods stay Pending.
            "Deployment" => assert_eq!(table.cell(&s.name, "READY"), Some("0/3"), "{out}"),
            "Pod" => assert_eq!(table.cell(&s.name, "STATUS"), Some("Pending"), "{out}"),
            _ => {}
        }

        let stored = c.kubectl_ok(&["get", "-f", file, "-n", &ns, "-o", "json"]);
        let stored: serde_json::Value = serde_json::from_str(&stored).unwrap();
        let image = stored_first_image(&stored, &s.kind);
        assert_eq!(image.as_deref(), s.first_image(), "image stored for {file}");
        let last_applied =
            stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
                .as_str();
        assert!(
            last_applied.is_some(),
            "{file}: no last-applied-configuration annotation"
        );
    }
}

fn stored_first_image(object: &serde_json::Value, kind: &str) -> Option<String> {
    let spec = &object["spec"];
    let pod_spec = match kind {
        "Pod" => spec,
        "CronJob" => &spec["jobTemplate"]["spec"]["template"]["spec"],
        _ => &spec["template"]["spec"],
    };
    pod_spec["containers"][0]["image"]
        .as_str()
        .map(str::to_string)
}

fn jsonpath(c: &Controller, what: &str, path: &str) -> String {
    c.kubectl_ok(&["get", what, "-o", &format!("jsonpath={path}")])
}

/// Applies an edit of the seed's Deployment (which must differ from the seed) and checks that
/// kubectl reports it configured.
fn apply_edited(c: &Controller, seed: &Seed, edited: &str) {
    assert_ne!(edited, seed.text);
    let out = c.apply_stdin(edited);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment configured");
}

/// A jsonpath of the seed's Deployment, `nginx-deployment`.
fn seed_field(c: &Controller, path: &str) -> String {
    jsonpath(c, "deploy/nginx-deployment", path)
}

#[test]
fn a_changed_apply_patches_and_an_unchanged_one_does_nothing() {
    let c = Controller::start();
    let s = seed("nginx-deployment.deployment");
    let out = c.apply_stdin(&s.text);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment created");
    assert_eq!(seed_field(&c, "{.metadata.generation}"), "1");
    let rv_before = seed_field(&c, "{.metadata.resourceVersion}");

    let changed = s.text.replace("image: nginx:1.14.2", "image: nginx:1.16.1");
    apply_edited(&c, &s, &changed);
    assert_eq!(seed_field(&c, "{.metadata.generation}"), "2");
    assert_eq!(
        seed_field(&c, "{.spec.template.spec.containers[0].image}"),
        "nginx:1.16.1"
    );
    // The deployment controller writes the status while the rollout starts; with no nodes it
    // stops at one surge pod beside the three old ones. Only then is the object at rest.
    c.wait_for(
        std::time::Duration::from_secs(30),
        "the rollout to come to rest (observedGeneration 2, 4 replicas, 1 updated)",
        || {
            let s = seed_field(
                &c,
                "{.status.observedGeneration}/{.status.replicas}/{.status.updatedReplicas}",
            );
            if s == "2/4/1" { Ok(()) } else { Err(s) }
        },
    );
    let rv_after = seed_field(&c, "{.metadata.resourceVersion}");
    assert_ne!(
        rv_before, rv_after,
        "a patch must change the resourceVersion"
    );

    let out = c.apply_stdin(&changed);
    assert_eq!(out.trim(), "deployment.apps/nginx-deployment unchanged");
    assert_eq!(seed_field(&c, "{.metadata.generation}"), "2");
    assert_eq!(
        seed_field(&c, "{.metadata.resourceVersion}"),
        rv_after,
        "an unchanged apply must not write"
    );
}

#[test]
fn a_metadata_only_apply_does_not_bump_the_generation() {
    let c = Controller::start();
    let s = seed("nginx-deployment.deployment");
    c.apply_stdin(&s.text);
    let relabelled = s
        .text
        .replacen("    app: nginx\n", "    app: nginx\n    team: web\n", 1);
    apply_edited(&c, &s, &relabelled);
    assert_eq!(seed_field(&c, "{.metadata.labels.team}"), "web");
    assert_eq!(
        seed_field(&c, "{.metadata.generation}"),
        "1",
        "generation counts spec changes only"
    );
}

#[test]
fn server_side_apply_creates_and_updates() {
    let c = Controller::start();
    let s = seed("nginx-deployment.deployment");
    let file = s.path.to_str().unwrap();
    let out = c.kubectl_ok(&["apply", "--server-side", "-f", file]);
    assert_eq!(
        out.trim(),
        "deployment.apps/nginx-deployment serverside-applied"
    );
    assert_eq!(seed_field(&c, "{.metadata.generation}"), "1");
    assert_eq!(seed_field(&c, "{.spec.replicas}"), "3");

    let changed = s
        .text
        .replace("image: nginx:1.14.2", "image: nginx:1.16.1")
        .replace("replicas: 3", "replicas: 2");
    let out = c
        .kubectl()
        .ok_stdin(&["apply", "--server-side", "-f", "-"], &changed);
    assert_eq!(
        out.trim(),
        "deployment.apps/nginx-deployment serverside-applied"
    );
    assert_eq!(seed_field(&c, "{.metadata.generation}"), "2");
    assert_eq!(seed_field(&c, "{.spec.replicas}"), "2");
    assert_eq!(
        seed_field(&c, "{.spec.template.spec.containers[0].image}"),
        "nginx:1.16.1"
    );

    // A core kind too.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n";
    let out = c
        .kubectl()
        .ok_stdin(&["apply", "--server-side", "-f", "-"], cm);
    assert_eq!(out.trim(), "configmap/ssa serverside-applied");
    let out = c.kubectl().ok_stdin(
        &["apply", "--server-side", "-f", "-"],
        &cm.replace("\"1\"", "\"2\""),
    );
    assert_eq!(out.trim(), "configmap/ssa serverside-applied");
    assert_eq!(jsonpath(&c, "cm/ssa", "{.data.a}"), "2");
}
