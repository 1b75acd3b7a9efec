//! Acceptance area 3: `kubectl get` (`-o yaml|json|wide|name`, `-l`, `--show-labels`, `-A`,
//! `-w`) and `kubectl describe` (with Events about the object) work for every served kind.

use std::time::Duration;

use berth_tests::kinds::{Kind, kind};
use berth_tests::objects::{event_about, pod};
use berth_tests::process::LineChild;
use berth_tests::seeds::seed;
use berth_tests::table::words;
use berth_tests::{Controller, Table};
use serde_json::Value;

/// One object of each served kind: (kind, namespace, name, manifest).
fn samples() -> Vec<(&'static Kind, Option<String>, String, String)> {
    let mut out = Vec::new();
    for stem in [
        "nginx-deployment.deployment",
        "frontend.replicaset",
        "web.statefulset",
        "fluentd-elasticsearch.daemonset",
        "pi.job",
        "hello.cronjob",
        "nginx.replicationcontroller",
        "nginx.pod",
    ] {
        let s = seed(stem);
        let ns = s.namespace.clone().unwrap_or_else(|| "samples".into());
        out.push((kind(&s.kind), Some(ns), s.name.clone(), s.text.clone()));
    }
    let inline: [(&str, Option<&str>, &str, &str); 8] = [
        (
            "Namespace",
            None,
            "sample-ns",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: sample-ns\n",
        ),
        (
            "Node",
            None,
            "sample-node",
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: sample-node\n  labels:\n    kubernetes.io/hostname: sample-node\n",
        ),
        (
            "ConfigMap",
            Some("samples"),
            "sample-cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sample-cm\ndata:\n  a: \"1\"\n  b: \"2\"\n",
        ),
        (
            "Secret",
            Some("samples"),
            "sample-secret",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sample-secret\ntype: Opaque\ndata:\n  password: czNjcjN0\n",
        ),
        (
            "PodDisruptionBudget",
            Some("samples"),
            "sample-pdb",
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: sample-pdb\nspec:\n  minAvailable: 2\n  selector:\n    matchLabels:\n      app: nginx\n",
        ),
        (
            "PriorityClass",
            None,
            "sample-pc",
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: sample-pc\nvalue: 1000\ndescription: a sample class\n",
        ),
        (
            "Lease",
            Some("samples"),
            "sample-lease",
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: sample-lease\nspec:\n  holderIdentity: sample-node\n  leaseDurationSeconds: 40\n",
        ),
        (
            "ControllerRevision",
            Some("samples"),
            "sample-rev",
            "apiVersion: apps/v1\nkind: ControllerRevision\nmetadata:\n  name: sample-rev\nrevision: 1\ndata:\n  spec:\n    template:\n      metadata:\n        labels:\n          app: nginx\n",
        ),
    ];
    for (k, ns, name, yaml) in inline {
        out.push((
            kind(k),
            ns.map(str::to_string),
            name.to_string(),
            yaml.to_string(),
        ));
    }
    out
}

/// Creates the `samples` namespace and every sample object, plus an Event (`sample-event`,
/// about the ConfigMap) created through the API since it needs the ConfigMap's uid.
fn create_samples(c: &Controller) -> Vec<(&'static Kind, Option<String>, String)> {
    c.kubectl_ok(&["create", "namespace", "samples"]);
    let mut created: Vec<_> = samples()
        .into_iter()
        .map(|(k, ns, name, yaml)| {
            match &ns {
                Some(ns) => c.kubectl().ok_stdin(&["apply", "-n", ns, "-f", "-"], &yaml),
                None => c.apply_stdin(&yaml),
            };
            (k, ns, name)
        })
        .collect();
    let api = c.admin_api();
    let cm = api.get_ok("/api/v1/namespaces/samples/configmaps/sample-cm");
    let mut event = event_about(&cm, "Sampled", "an event to get and describe");
    event["metadata"]["name"] = "sample-event".into();
    api.create("/api/v1/namespaces/samples/events", &event);
    created.push((kind("Event"), Some("samples".into()), "sample-event".into()));
    created
}

fn ns_args(ns: &Option<String>) -> Vec<&str> {
    match ns {
        Some(ns) => vec!["-n", ns.as_str()],
        None => vec![],
    }
}

fn parse_json(text: &str, what: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what} is not JSON ({e}):\n{text}"))
}

#[test]
fn get_prints_upstream_columns_and_every_output_format_for_every_kind() {
    let c = Controller::start();
    for (k, ns, name) in create_samples(&c) {
        let nsa = ns_args(&ns);
        let get = |extra: &[&str]| {
            let mut args = vec!["get", k.plural, name.as_str()];
            args.extend(&nsa);
            args.extend(extra);
            c.kubectl_ok(&args)
        };
        let what = format!("{} {name}", k.plural);

        let out = get(&[]);
        let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(table.headers, k.columns, "columns of `get {what}`:\n{out}");
        assert_eq!(table.rows.len(), 1, "`get {what}`:\n{out}");

        let out = get(&["-o", "wide"]);
        let wide = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
        let expected: Vec<&str> = k.columns.iter().chain(k.wide).copied().collect();
        let mut got = wide.headers.iter().map(String::as_str).collect::<Vec<_>>();
        let mut want = expected.clone();
        if k.kind == "Event" {
            // Upstream interleaves the wide event columns; compare as sets.
            got.sort_unstable();
            want.sort_unstable();
        }
        assert_eq!(got, want, "columns of `get {what} -o wide`:\n{out}");

        let out = get(&["-o", "json"]);
        let obj = parse_json(&out, &what);
        assert_eq!(obj["kind"], k.kind, "{what} -o json");
        assert_eq!(obj["apiVersion"], k.api_version, "{what} -o json");
        assert_eq!(obj["metadata"]["name"], name.as_str(), "{what} -o json");
        assert!(
            obj["metadata"]["uid"].is_string(),
            "{what} has no uid:\n{out}"
        );
        assert!(
            obj["metadata"]["creationTimestamp"].is_string(),
            "{what} has no creationTimestamp"
        );
        assert!(
            obj["metadata"]["resourceVersion"].is_string(),
            "{what} has no resourceVersion"
        );

        let out = get(&["-o", "yaml"]);
        let yaml: Value = serde_saphyr::from_str(&out).unwrap_or_else(|e| panic!("{e}:\n{out}"));
        assert_eq!(
            yaml["metadata"]["uid"], obj["metadata"]["uid"],
            "{what} -o yaml:\n{out}"
        );
        assert_eq!(yaml["kind"], k.kind, "{what} -o yaml");

        let out = get(&["-o", "name"]);
        assert_eq!(
            out.trim(),
            format!("{}/{name}", k.kubectl_type()),
            "{what} -o name"
        );
    }
}

#[test]
fn wide_columns_show_containers_images_and_selector() {
    let c = Controller::start();
    c.apply_stdin(&seed("nginx-deployment.deployment").text);
    let out = c.kubectl_ok(&["get", "deploy", "-o", "wide"]);
    let t = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.cell("nginx-deployment", "CONTAINERS"),
        Some("nginx"),
        "{out}"
    );
    assert_eq!(
        t.cell("nginx-deployment", "IMAGES"),
        Some("nginx:1.14.2"),
        "{out}"
    );
    assert_eq!(
        t.cell("nginx-deployment", "SELECTOR"),
        Some("app=nginx"),
        "{out}"
    );

    c.apply_stdin(&seed("nginx.pod").text);
    let out = c.kubectl_ok(&["get", "pod", "nginx", "-o", "wide"]);
    let t = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.cell("nginx", "NODE"),
        Some("<none>"),
        "an unscheduled pod has no node:\n{out}"
    );
}

#[test]
fn label_selectors_show_labels_and_all_namespaces() {
    let c = Controller::start();
    let api = c.admin_api();
    for ns in ["ns1", "ns2"] {
        api.create("/api/v1/namespaces", &berth_tests::objects::namespace(ns));
    }
    api.create(
        "/api/v1/namespaces/ns1/pods",
        &pod("a", &[("app", "web"), ("tier", "front")]),
    );
    api.create(
        "/api/v1/namespaces/ns1/pods",
        &pod("b", &[("app", "web"), ("tier", "back")]),
    );
    api.create("/api/v1/namespaces/ns2/pods", &pod("c", &[("app", "db")]));

    let names = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["get", "pods", "-o", "name"];
        full.extend(args);
        let out = c.kubectl_ok(&full);
        let mut v: Vec<String> = out
            .lines()
            .map(|l| l.trim_start_matches("pod/").to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&["-n", "ns1", "-l", "app=web"]), ["a", "b"]);
    assert_eq!(names(&["-n", "ns1", "-l", "tier=front"]), ["a"]);
    assert_eq!(names(&["-n", "ns1", "-l", "app=web,tier!=front"]), ["b"]);
    assert_eq!(names(&["-A", "-l", "app in (web,db)"]), ["a", "b", "c"]);
    assert_eq!(names(&["-A", "-l", "app notin (web)"]), ["c"]);
    assert_eq!(names(&["-A", "-l", "!tier"]), ["c"]);
    assert_eq!(names(&["-A", "-l", "tier"]), ["a", "b"]);
    assert!(names(&["-A", "-l", "app=nothing"]).is_empty());

    let out = c.kubectl_ok(&["get", "pods", "-n", "ns1", "--show-labels"]);
    let t = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.headers.last().map(String::as_str),
        Some("LABELS"),
        "{out}"
    );
    assert_eq!(t.cell("a", "LABELS"), Some("app=web,tier=front"), "{out}");
    assert_eq!(t.cell("b", "LABELS"), Some("app=web,tier=back"), "{out}");

    let out = c.kubectl_ok(&["get", "pods", "-A"]);
    let t = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.headers,
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    let mut rows: Vec<(String, String)> = t
        .rows
        .iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    rows.sort();
    let want =
        [("ns1", "a"), ("ns1", "b"), ("ns2", "c")].map(|(n, p)| (n.to_string(), p.to_string()));
    assert_eq!(rows, want, "{out}");

    let out = c.kubectl_ok(&["get", "ns", "--show-labels"]);
    let t = Table::parse(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.cell("ns1", "LABELS"),
        Some("kubernetes.io/metadata.name=ns1"),
        "namespaces carry their name label, as upstream:\n{out}"
    );
}

const WATCH_WAIT: Duration = Duration::from_secs(20);

/// Waits for `kubectl get -w`'s `EVENT p1` row and checks that it is in table form (six columns).
fn table_row(w: &mut LineChild, event: &str) {
    let line = w.expect_line(WATCH_WAIT, &format!("{event} p1"), |l| {
        words(l).starts_with(&[event, "p1"])
    });
    assert_eq!(
        words(&line).len(),
        6,
        "{event} row in table form:\n{}",
        w.describe()
    );
}

#[test]
fn get_pods_watch_shows_added_modified_deleted_as_table_rows() {
    let c = Controller::start();
    c.kubectl_ok(&["create", "namespace", "watched"]);
    let mut w = c.kubectl().spawn(&[
        "get",
        "pods",
        "-n",
        "watched",
        "-w",
        "--output-watch-events",
    ]);
    let api = c.admin_api();
    api.create(
        "/api/v1/namespaces/watched/pods",
        &pod("p1", &[("app", "w")]),
    );

    let added = w.expect_line(WATCH_WAIT, "ADDED p1", |l| {
        words(l).starts_with(&["ADDED", "p1"])
    });
    let cells = words(&added);
    assert!(
        cells.len() == 6 && cells[..5] == ["ADDED", "p1", "0/1", "Pending", "0"],
        "want a table row (EVENT NAME READY STATUS RESTARTS AGE), not NAME/AGE: {added:?}\n{}",
        w.describe()
    );
    let header = w.seen().first().cloned().unwrap_or_default();
    assert_eq!(
        words(&header),
        ["EVENT", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "header:\n{}",
        w.describe()
    );

    // Only now is the watch certainly established (the ADDED row came from its list or itself).
    c.kubectl_ok(&["label", "pod", "p1", "-n", "watched", "step=two"]);
    table_row(&mut w, "MODIFIED");

    c.kubectl_ok(&["delete", "pod", "p1", "-n", "watched"]);
    table_row(&mut w, "DELETED");
}

#[test]
fn get_one_deployment_watch_shows_its_changes() {
    let c = Controller::start();
    c.apply_stdin(&seed("nginx-deployment.deployment").text);
    let mut w = c.kubectl().spawn(&[
        "get",
        "deploy",
        "nginx-deployment",
        "-w",
        "--output-watch-events",
    ]);
    w.expect_line(WATCH_WAIT, "the deployment's first row", |l| {
        words(l).get(1) == Some(&"nginx-deployment")
    });
    c.kubectl_ok(&["scale", "deploy/nginx-deployment", "--replicas=5"]);
    let line = w.expect_line(
        WATCH_WAIT,
        "MODIFIED nginx-deployment with READY 0/5",
        |l| words(l).starts_with(&["MODIFIED", "nginx-deployment", "0/5"]),
    );
    assert_eq!(
        words(&line).len(),
        6,
        "EVENT NAME READY UP-TO-DATE AVAILABLE AGE:\n{}",
        w.describe()
    );
}

/// Kinds whose kubectl describer prints the object's Events (Secret and Namespace describers
/// do not, upstream; Event is not described with events about itself).
fn describes_events(k: &Kind) -> bool {
    !matches!(k.kind, "Secret" | "Namespace" | "Event")
}

#[test]
fn describe_shows_every_kind_with_its_events() {
    let c = Controller::start();
    let api = c.admin_api();
    for (k, ns, name) in create_samples(&c) {
        let nsa = ns_args(&ns);
        let mut get = vec!["get", k.plural, name.as_str(), "-o", "json"];
        get.extend(&nsa);
        let object = parse_json(&c.kubectl_ok(&get), &name);
        let reason = format!("Berth{}", k.kind);
        let message = format!("describe shows this event about {name}");
        let event = event_about(&object, &reason, &message);
        // Events about cluster-scoped objects live in `default`, as upstream.
        let event_ns = ns
            .clone()
            .filter(|_| k.namespaced)
            .unwrap_or_else(|| "default".into());
        api.create(&format!("/api/v1/namespaces/{event_ns}/events"), &event);

        let mut args = vec!["describe", k.plural, name.as_str()];
        args.extend(&nsa);
        let out = c.kubectl_ok(&args);
        let name_line = out
            .lines()
            .find(|l| l.starts_with("Name:"))
            .unwrap_or_default();
        assert!(
            name_line.split_whitespace().nth(1) == Some(name.as_str()),
            "describe {} {name} has no `Name: {name}` line:\n{out}",
            k.plural
        );
        if describes_events(k) {
            let events_at = out.find("\nEvents:").unwrap_or_else(|| {
                panic!("describe {} {name} has no Events section:\n{out}", k.plural)
            });
            let events = &out[events_at..];
            assert!(
                events
                    .lines()
                    .any(|l| l.contains(&reason) && l.contains(&message) && l.contains("Normal")),
                "describe {} {name} does not show the event ({reason}: {message}):\n{out}",
                k.plural
            );
        }
    }
}
