//! Issue 14, Tables with `includeObject`: `kubectl get --sort-by=<a field outside metadata>`
//! asks for Tables whose rows carry the whole object (`includeObject=Object`) and sorts them
//! with its JSONPath; with PartialObjectMetadata rows it printed "No resources found". Run with
//! real kubectl binaries, each directly (not the version-matching dispatcher).

use std::path::Path;

use berth_tests::objects::{event_about, pod};
use berth_tests::{Controller, Req, Table};
use serde_json::json;

const KUBECTLS: [&str; 2] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
];
const PODS: &str = "/api/v1/namespaces/default/pods";

/// The NAME column of a `kubectl get` table, in printed order.
fn names(out: &str) -> Vec<String> {
    let table = Table::parse(out).unwrap_or_else(|e| panic!("{e}: {out}"));
    table.values("NAME").into_iter().map(String::from).collect()
}

#[test]
fn sort_by_fields_outside_metadata_sorts_and_prints_rows() {
    let c = Controller::start();
    let api = c.admin_api();
    // Pods whose names sort the other way round from their phases.
    for (name, phase) in [
        ("a-running", "Running"),
        ("b-pending", "Pending"),
        ("c-failed", "Failed"),
    ] {
        let created = api.send(Req::post(PODS, &pod(name, &[])));
        assert_eq!(created.status, 201, "{}", created.describe());
        // A merge patch: the scheduler writes the pod's conditions meanwhile.
        let patch = json!({"status": {"phase": phase}});
        let path = format!("{PODS}/{name}/status");
        let patched = api.send(Req::patch(path, "application/merge-patch+json", &patch));
        assert_eq!(patched.status, 200, "{}", patched.describe());
    }
    // Events whose lastTimestamps sort the other way round from their names.
    let about = api.get_ok(&format!("{PODS}/a-running"));
    for (reason, last) in [
        ("Alpha", "2024-05-01T12:00:03Z"),
        ("Beta", "2024-05-01T12:00:02Z"),
        ("Gamma", "2024-05-01T12:00:01Z"),
    ] {
        let mut e = event_about(&about, reason, "sort me");
        e["lastTimestamp"] = json!(last);
        e["firstTimestamp"] = json!(last);
        let created = api.send(Req::post("/api/v1/namespaces/default/events", &e));
        assert_eq!(created.status, 201, "{}", created.describe());
    }
    for bin in KUBECTLS {
        let k = c.kubectl().with_binary(Path::new(bin));
        let out = k.ok(&["get", "pods", "--sort-by=.status.phase"]);
        assert_eq!(
            names(&out),
            ["c-failed", "b-pending", "a-running"],
            "{bin}:\n{out}"
        );
        let out = k.ok(&["get", "events", "--sort-by=.lastTimestamp"]);
        let reasons: Vec<String> = Table::parse(&out)
            .unwrap_or_else(|e| panic!("{bin}: {e}: {out}"))
            .values("REASON")
            .into_iter()
            .map(String::from)
            .collect();
        // The scheduler's FailedScheduling events are newer than ours: they come after.
        let ours: Vec<&String> = reasons
            .iter()
            .filter(|r| *r != "FailedScheduling")
            .collect();
        assert_eq!(ours, ["Gamma", "Beta", "Alpha"], "{bin}:\n{out}");
        assert_eq!(reasons[..3], ["Gamma", "Beta", "Alpha"], "{bin}:\n{out}");
        // Metadata sorts keep working.
        let out = k.ok(&["get", "pods", "--sort-by=.metadata.name"]);
        assert_eq!(
            names(&out),
            ["a-running", "b-pending", "c-failed"],
            "{bin}:\n{out}"
        );
    }
}

#[test]
fn include_object_chooses_what_table_rows_carry() {
    let c = Controller::start();
    let api = c.admin_api();
    assert_eq!(api.send(Req::post(PODS, &pod("p", &[]))).status, 201);
    let row_object = |query: &str| {
        let reply = api.send(Req::get(format!("{PODS}{query}")).table());
        (
            reply.status,
            reply.json_or_null()["rows"][0]["object"].clone(),
            reply,
        )
    };
    let (_, metadata, r) = row_object("");
    assert_eq!(
        metadata["kind"],
        "PartialObjectMetadata",
        "{}",
        r.describe()
    );
    assert!(metadata.get("spec").is_none(), "{}", r.describe());
    let (_, object, r) = row_object("?includeObject=Object");
    assert_eq!(object["kind"], "Pod", "{}", r.describe());
    assert_eq!(object["status"]["phase"], "Pending", "{}", r.describe());
    let (_, none, r) = row_object("?includeObject=None");
    assert!(none.is_null(), "{}", r.describe());
    let bad = api.send(Req::get(format!("{PODS}?includeObject=Everything")).table());
    assert_eq!(bad.status, 400, "{}", bad.describe());
    assert_eq!(
        bad.json()["message"],
        "unrecognized includeObject value: \"Everything\""
    );
}
