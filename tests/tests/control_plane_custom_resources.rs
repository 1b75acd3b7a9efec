//! Issue 34, CustomResourceDefinitions with real kubectl: a definition becomes Established and
//! its custom resources are served at once (short names, printer columns, explain), judged
//! by the structural schema and its CEL rules with upstream's messages, pruned and defaulted,
//! with status and scale subresources; several versions read each other's objects; deleting a
//! definition deletes its objects.

use std::path::Path;
use std::time::{Duration, Instant};

use berth_tests::kubectl::kubectl_1_20;
use berth_tests::{Controller, Kubectl, Table};
use serde_json::Value;

const BACKUPS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: backups.berth.example.com
spec:
  group: berth.example.com
  scope: Namespaced
  names: {plural: backups, singular: backup, kind: Backup, shortNames: [bk], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Schedule, type: string, jsonPath: .spec.schedule}
    - {name: Retention, type: integer, jsonPath: .spec.retentionDays}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: A Backup copies a volume on a schedule.
        properties:
          spec:
            type: object
            description: What to back up, and when.
            required: [schedule]
            x-kubernetes-validations:
            - rule: "self.minReplicas <= self.replicas"
              message: minReplicas must not exceed replicas
            properties:
              schedule:
                type: string
                description: When to run, in cron syntax.
                pattern: '^[0-9*/ ,-]+$'
              retentionDays:
                type: integer
                description: How many days a copy is kept.
                minimum: 1
                maximum: 30
                default: 7
              replicas: {type: integer, default: 1}
              minReplicas: {type: integer, default: 0}
              storage:
                type: object
                properties:
                  class:
                    type: string
                    enum: [fast, slow]
                    x-kubernetes-validations:
                    - rule: "self == oldSelf"
                      message: storage class is immutable
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
"#;

fn backup(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: berth.example.com/v1\nkind: Backup\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec}\n"
    )
}

/// `kubectl apply` of `yaml` fails, saying `expected`.
fn refused(k: &Kubectl, yaml: &str, expected: &str) {
    let r = k.fails_stdin(&["apply", "-f", "-"], yaml);
    assert!(
        r.stderr.contains(expected),
        "missing {expected:?} in:\n{}",
        r.stderr
    );
}

/// Applies a definition and waits for its `Established` condition; returns how long it took.
fn establish(c: &Controller, yaml: &str, name: &str) -> Duration {
    let started = Instant::now();
    c.kubectl().ok_stdin(&["apply", "-f", "-"], yaml);
    let api = c.admin_api();
    c.wait_for(
        Duration::from_secs(10),
        "the definition established",
        || {
            let crd = api.get_ok(&format!(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            ));
            let established = crd["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            if established { Ok(()) } else { Err(crd) }
        },
    );
    started.elapsed()
}

#[test]
fn a_definition_serves_its_custom_resources_as_upstream() {
    let c = Controller::start();
    let k = c.kubectl();
    let took = establish(&c, BACKUPS, "backups.berth.example.com");
    // `kubectl apply` itself takes most of this.
    assert!(took < Duration::from_secs(3), "established after {took:?}");
    let crd: Value =
        serde_json::from_str(&k.ok(&["get", "crd", "backups.berth.example.com", "-o", "json"]))
            .unwrap();
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "BackupList");
    assert_eq!(
        crd["metadata"]["finalizers"],
        serde_json::json!(["customresourcecleanup.apiextensions.k8s.io"])
    );

    // A valid object: defaults applied, shown by its short name with the printer columns.
    let out = k.ok_stdin(
        &["apply", "-f", "-"],
        &backup(
            "nightly",
            "  schedule: '0 3 * * *'\n  replicas: 2\n  storage: {class: fast}",
        ),
    );
    assert_eq!(out.trim(), "backup.berth.example.com/nightly created");
    let out = k.ok(&["get", "bk"]);
    let table = Table::parse(&out).unwrap();
    assert_eq!(
        table.headers,
        ["NAME", "SCHEDULE", "RETENTION", "REPLICAS", "AGE"],
        "{out}"
    );
    assert_eq!(
        table.cell("nightly", "SCHEDULE"),
        Some("0 3 * * *"),
        "{out}"
    );
    assert_eq!(table.cell("nightly", "RETENTION"), Some("7"), "{out}");
    assert_eq!(table.cell("nightly", "REPLICAS"), Some("2"), "{out}");
    // `kubectl get all` includes the category's members.
    let all = k.ok(&["get", "all"]);
    assert!(all.contains("backup.berth.example.com/nightly"), "{all}");

    // Invalid objects: 422 with upstream's field paths, the CEL rule's message.
    let bad = k.fails_stdin(
        &["apply", "-f", "-"],
        &backup(
            "bad",
            "  schedule: 'every day'\n  retentionDays: 90\n  storage: {class: medium}",
        ),
    );
    for expected in [
        r#"The Backup "bad" is invalid"#,
        r#"spec.schedule: Invalid value: "every day": spec.schedule in body should match '^[0-9*/ ,-]+$'"#,
        "spec.retentionDays: Invalid value: 90: spec.retentionDays in body should be less than or equal to 30",
        r#"spec.storage.class: Unsupported value: "medium": supported values: "fast", "slow""#,
    ] {
        assert!(
            bad.stderr.contains(expected),
            "missing {expected:?} in:\n{}",
            bad.stderr
        );
    }
    let rule = "  schedule: '0 3 * * *'\n  replicas: 1\n  minReplicas: 3";
    refused(
        &k,
        &backup("rule", rule),
        "minReplicas must not exceed replicas",
    );
    let missing = backup("missing", "  replicas: 1");
    refused(&k, &missing, "spec.schedule: Required value");

    // Unknown fields: refused under kubectl's default strict validation, pruned without it.
    let extra = backup("extra", "  schedule: '0 3 * * *'\n  colour: blue");
    refused(&k, &extra, r#"unknown field "spec.colour""#);
    k.ok_stdin(&["apply", "--validate=false", "-f", "-"], &extra);
    let extra: Value =
        serde_json::from_str(&k.ok(&["get", "backup", "extra", "-o", "json"])).unwrap();
    assert!(extra["spec"].get("colour").is_none(), "{extra}");
    assert_eq!(extra["spec"]["retentionDays"], 7);

    // A transition rule judges updates only.
    let changed = "  schedule: '0 3 * * *'\n  replicas: 2\n  storage: {class: slow}";
    refused(
        &k,
        &backup("nightly", changed),
        "storage class is immutable",
    );

    // The scale subresource.
    let out = k.ok(&["scale", "backup/nightly", "--replicas=4"]);
    assert_eq!(out.trim(), "backup.berth.example.com/nightly scaled");
    let scaled: Value =
        serde_json::from_str(&k.ok(&["get", "bk", "nightly", "-o", "json"])).unwrap();
    assert_eq!(scaled["spec"]["replicas"], 4);
    // The scale is recorded under the client's manager, not the controller's.
    let stored = c
        .admin_api()
        .get_ok("/apis/berth.example.com/v1/namespaces/default/backups/nightly");
    let managers: Vec<&str> = stored["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(
        managers.iter().any(|m| m.starts_with("kubectl"))
            && !managers.contains(&"berth-controller"),
        "{managers:?}"
    );
    let scale = c
        .admin_api()
        .get_ok("/apis/berth.example.com/v1/namespaces/default/backups/nightly/scale");
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(scale["kind"], "Scale");

    // Custom resources have no patch strategy: a strategic merge patch is 415.
    let smp = k.fails(&[
        "patch",
        "backup",
        "nightly",
        "--type=strategic",
        "-p",
        r#"{"spec":{"replicas":5}}"#,
    ]);
    assert!(
        smp.stderr.contains("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"),
        "{}",
        smp.stderr
    );

    // The status subresource: the main resource ignores status, /status takes only it.
    k.ok(&[
        "patch",
        "backup",
        "nightly",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":4,"selector":"app=nightly"}}"#,
    ]);
    let scale = c
        .admin_api()
        .get_ok("/apis/berth.example.com/v1/namespaces/default/backups/nightly/scale");
    assert_eq!(scale["status"]["replicas"], 4);
    assert_eq!(scale["status"]["selector"], "app=nightly");

    // kubectl explain reads the schema's descriptions from OpenAPI v3.
    for bin in [
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    ] {
        let k = c.kubectl().with_binary(Path::new(bin));
        let explained = k.ok(&["explain", "backups.spec"]);
        assert!(
            explained.contains("What to back up, and when."),
            "{bin}: {explained}"
        );
        assert!(
            explained.contains("When to run, in cron syntax."),
            "{bin}: {explained}"
        );
        let out = k.ok(&["get", "bk", "nightly"]);
        let table = Table::parse(&out).unwrap();
        assert_eq!(table.cell("nightly", "REPLICAS"), Some("4"), "{bin}: {out}");
    }
    // Old clients read the same Table.
    let out = c.kubectl().with_binary(&kubectl_1_20()).ok(&["get", "bk"]);
    let table = Table::parse(&out).unwrap();
    assert_eq!(
        table.headers,
        ["NAME", "SCHEDULE", "RETENTION", "REPLICAS", "AGE"],
        "{out}"
    );
}

/// A definition in group `berth.example.com` with `versions` (YAML list items at the
/// versions' indentation).
fn definition(plural: &str, kind: &str, scope: &str, versions: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.berth.example.com\nspec:\n  group: berth.example.com\n  scope: {scope}\n  names: {{plural: {plural}, kind: {kind}}}\n  versions:\n{versions}"
    )
}

/// One served version whose `spec` has the given properties (a YAML flow map).
fn version(name: &str, storage: bool, spec_properties: &str) -> String {
    format!(
        "  - name: {name}\n    served: true\n    storage: {storage}\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec: {{type: object, properties: {spec_properties}}}\n"
    )
}

/// Widgets in v1alpha1 and v1, one of them the storage version.
fn widgets(storage_v1: bool) -> String {
    let size = "{size: {type: integer}}";
    let versions = version("v1alpha1", !storage_v1, size) + &version("v1", storage_v1, size);
    definition("widgets", "Widget", "Cluster", &versions)
}

#[test]
fn objects_of_one_version_are_read_through_the_other() {
    let c = Controller::start();
    // kubectl 1.33 creates (rather than applies) the definition.
    let k = c
        .kubectl()
        .with_binary(Path::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33"));
    k.ok_stdin(&["create", "-f", "-"], &widgets(true));
    establish(&c, &widgets(true), "widgets.berth.example.com");
    k.ok_stdin(
        &["create", "-f", "-"],
        "apiVersion: berth.example.com/v1alpha1\nkind: Widget\nmetadata: {name: old}\nspec: {size: 1}\n",
    );
    k.ok_stdin(
        &["create", "-f", "-"],
        "apiVersion: berth.example.com/v1\nkind: Widget\nmetadata: {name: new}\nspec: {size: 2}\n",
    );
    let api = c.admin_api();
    for (version, name, size) in [("v1", "old", 1), ("v1alpha1", "new", 2), ("v1", "new", 2)] {
        let w = api.get_ok(&format!("/apis/berth.example.com/{version}/widgets/{name}"));
        assert_eq!(w["apiVersion"], format!("berth.example.com/{version}"));
        assert_eq!(w["spec"]["size"], size);
    }
    let list = api.get_ok("/apis/berth.example.com/v1alpha1/widgets");
    assert_eq!(list["kind"], "WidgetList");
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["apiVersion"] == "berth.example.com/v1alpha1"),
        "{list}"
    );
    // The storage version changes: both are recorded as stored.
    k.ok_stdin(&["apply", "-f", "-"], &widgets(false));
    c.wait_for(
        Duration::from_secs(10),
        "both versions recorded as stored",
        || {
            let crd = api.get_ok(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.berth.example.com",
            );
            if crd["status"]["storedVersions"] == serde_json::json!(["v1", "v1alpha1"]) {
                Ok(())
            } else {
                Err(crd["status"].clone())
            }
        },
    );
}

#[test]
fn deleting_a_definition_deletes_its_objects_first() {
    let c = Controller::start();
    let k = c.kubectl();
    establish(&c, BACKUPS, "backups.berth.example.com");
    for name in ["one", "two"] {
        k.ok_stdin(
            &["create", "-f", "-"],
            &backup(name, "  schedule: '0 3 * * *'"),
        );
    }
    k.ok(&[
        "delete",
        "crd",
        "backups.berth.example.com",
        "--timeout=30s",
    ]);
    let gone = k.fails(&["get", "crd", "backups.berth.example.com"]);
    assert!(gone.stderr.contains("NotFound"), "{}", gone.stderr);
    // Served again, the definition finds none of the old objects.
    establish(&c, BACKUPS, "backups.berth.example.com");
    let api = c.admin_api();
    let list = api.get_ok("/apis/berth.example.com/v1/backups");
    assert_eq!(list["items"], serde_json::json!([]), "{list}");
}

#[test]
fn invalid_definitions_are_refused_with_upstreams_messages() {
    let c = Controller::start();
    let k = c.kubectl();
    let bad = BACKUPS
        .replace(
            "name: backups.berth.example.com",
            "name: wrong.berth.example.com",
        )
        .replace(
            "type: integer, default: 1",
            "type: integer, default: 1, x-kubernetes-validations: [{rule: 'self >'}]",
        )
        .replace("storage: true", "storage: false");
    let r = k.fails_stdin(&["apply", "-f", "-"], &bad);
    for expected in [
        r#"metadata.name: Invalid value: "wrong.berth.example.com": must be spec.names.plural+"."+spec.group"#,
        "must have exactly one version marked as storage version",
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[replicas].x-kubernetes-validations[0].rule",
    ] {
        assert!(
            r.stderr.contains(expected),
            "missing {expected:?} in:\n{}",
            r.stderr
        );
    }
}

#[test]
fn an_autoscaler_scales_a_custom_resource_through_its_scale_subresource() {
    let c = Controller::start_with(&["--horizontal-pod-autoscaler-sync-period", "1s"]);
    let k = c.kubectl();
    establish(&c, BACKUPS, "backups.berth.example.com");
    k.ok_stdin(
        &["apply", "-f", "-"],
        &backup("scaled", "  schedule: '0 3 * * *'\n  replicas: 1"),
    );
    k.ok(&[
        "patch",
        "backup",
        "scaled",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":1,"selector":"app=scaled"}}"#,
    ]);
    // Below its minimum the autoscaler raises the target without needing any metric.
    k.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: scaled, namespace: default}\nspec:\n  scaleTargetRef: {apiVersion: berth.example.com/v1, kind: Backup, name: scaled}\n  minReplicas: 3\n  maxReplicas: 5\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}\n",
    );
    let api = c.admin_api();
    c.wait_for(Duration::from_secs(20), "the backup scaled to 3", || {
        let b = api.get_ok("/apis/berth.example.com/v1/namespaces/default/backups/scaled");
        if b["spec"]["replicas"] == 3 {
            Ok(())
        } else {
            Err(b["spec"].clone())
        }
    });
    // The autoscaler writes the scale first and its own status after it: wait for that too.
    c.wait_for(Duration::from_secs(20), "the autoscaler's status", || {
        let hpa =
            api.get_ok("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/scaled");
        if hpa["status"]["desiredReplicas"] == 3 {
            Ok(())
        } else {
            Err(hpa["status"].clone())
        }
    });
}

#[test]
fn a_custom_resource_owns_what_names_it_as_owner() {
    let c = Controller::start();
    let k = c.kubectl();
    establish(&c, BACKUPS, "backups.berth.example.com");
    k.ok_stdin(
        &["create", "-f", "-"],
        &backup("owner", "  schedule: '0 3 * * *'"),
    );
    let api = c.admin_api();
    let owner = api.get_ok("/apis/berth.example.com/v1/namespaces/default/backups/owner");
    let uid = owner["metadata"]["uid"].as_str().unwrap();
    api.create(
        "/api/v1/namespaces/default/configmaps",
        &serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "owned", "ownerReferences": [{
                "apiVersion": "berth.example.com/v1", "kind": "Backup", "name": "owner",
                "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
            "data": {"k": "v"}}),
    );
    k.ok(&["delete", "backup", "owner"]);
    c.wait_for(
        Duration::from_secs(20),
        "the owned ConfigMap collected",
        || {
            let r = api.get("/api/v1/namespaces/default/configmaps/owned");
            if r.status == 404 {
                Ok(())
            } else {
                Err(r.status)
            }
        },
    );
}

const GATEWAY_OBJECTS: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: berth}
spec: {controllerName: example.com/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: default}
spec:
  gatewayClassName: berth
  listeners:
  - {name: http, protocol: HTTP, port: 80}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: default}
spec:
  parentRefs: [{name: web}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /cart}}]
    backendRefs: [{name: cart, port: 8080}]
"#;

#[test]
fn real_projects_definitions_apply_and_judge_their_objects() {
    let c = Controller::start();
    let k = c.kubectl();
    let dir = berth_tests::controller::workspace_root().join("tests/manifests/crds/gateway-api");
    let dir = dir.to_str().unwrap();
    let out = k.ok(&["apply", "--server-side", "-f", dir]);
    assert_eq!(out.matches("serverside-applied").count(), 5, "{out}");
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "--all",
        "--timeout=10s",
    ]);
    // Valid objects are admitted, defaulted as the schemas say.
    k.ok_stdin(&["apply", "-f", "-"], GATEWAY_OBJECTS);
    let route: Value =
        serde_json::from_str(&k.ok(&["get", "httproute", "shop", "-o", "json"])).unwrap();
    let backend = &route["spec"]["rules"][0]["backendRefs"][0];
    assert_eq!(
        (&backend["kind"], &backend["weight"]),
        (&"Service".into(), &1.into()),
        "{route}"
    );
    let out = k.ok(&["get", "gateway"]);
    let table = Table::parse(&out).unwrap();
    assert_eq!(table.cell("web", "CLASS"), Some("berth"), "{out}");
    // The v1beta1 version reads the same object.
    let beta = c
        .admin_api()
        .get_ok("/apis/gateway.networking.k8s.io/v1beta1/namespaces/default/httproutes/shop");
    assert_eq!(beta["apiVersion"], "gateway.networking.k8s.io/v1beta1");
    // Invalid ones are refused by the projects' own CEL rules and schema checks.
    let bad = GATEWAY_OBJECTS.replace("value: /cart", "value: cart");
    refused(
        &k,
        &bad,
        "spec.rules[0].matches[0].path: Invalid value: \"object\": value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']",
    );
    let bad = GATEWAY_OBJECTS.replace("port: 80}", "port: 70000}");
    refused(
        &k,
        &bad,
        "spec.listeners[0].port: Invalid value: 70000: spec.listeners[0].port in body should be less than or equal to 65535",
    );
}

const OPERATOR_OBJECTS: &str = r#"
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  endpoints: [{port: http, interval: 30s}]
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: alerts, namespace: default}
spec:
  groups:
  - name: web
    rules:
    - {alert: WebDown, expr: 'up{job="web"} == 0', for: 5m}
---
apiVersion: postgresql.cnpg.io/v1
kind: Cluster
metadata: {name: db, namespace: default}
spec:
  instances: 3
  storage: {size: 1Gi}
"#;

#[test]
fn operators_definitions_apply_and_judge_their_objects() {
    let c = Controller::start();
    let k = c.kubectl();
    let root = berth_tests::controller::workspace_root().join("tests/manifests/crds");
    let (prom, cnpg) = (
        root.join("prometheus-operator"),
        root.join("cloudnative-pg"),
    );
    let out = k.ok(&[
        "apply",
        "--server-side",
        "-f",
        prom.to_str().unwrap(),
        "-f",
        cnpg.to_str().unwrap(),
    ]);
    assert_eq!(out.matches("serverside-applied").count(), 8, "{out}");
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "--all",
        "--timeout=10s",
    ]);
    k.ok_stdin(&["apply", "-f", "-"], OPERATOR_OBJECTS);
    // CloudNativePG's defaults, from its schema.
    let db: Value = serde_json::from_str(&k.ok(&["get", "cluster", "db", "-o", "json"])).unwrap();
    assert_eq!(db["spec"]["primaryUpdateStrategy"], "unsupervised", "{db}");
    assert_eq!(db["spec"]["logLevel"], "info", "{db}");
    let out = k.ok(&["get", "clusters.postgresql.cnpg.io"]);
    let table = Table::parse(&out).unwrap();
    assert_eq!(
        table.headers,
        ["NAME", "AGE", "INSTANCES", "READY", "STATUS", "PRIMARY"],
        "{out}"
    );
    // A list-map keyed by name refuses a repeated key; a CEL rule refuses both image fields.
    refused(
        &k,
        "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: dup, namespace: default}\nspec:\n  groups:\n  - {name: web, rules: [{alert: A, expr: up}]}\n  - {name: web, rules: [{alert: B, expr: up}]}\n",
        "spec.groups[1]: Duplicate value",
    );
    refused(
        &k,
        "apiVersion: postgresql.cnpg.io/v1\nkind: Cluster\nmetadata: {name: bad, namespace: default}\nspec:\n  instances: 3\n  imageName: postgres:17\n  imageCatalogRef: {apiGroup: postgresql.cnpg.io, kind: ImageCatalog, name: pg, major: 17}\n  storage: {size: 1Gi}\n",
        "spec: Invalid value: \"object\": imageName and imageCatalogRef are mutually exclusive",
    );
}

/// Templates: a string of an unchecked format and an embedded resource.
fn templates() -> String {
    let spec = "{size: {type: string, format: quantity}, template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}}";
    definition(
        "templates",
        "Template",
        "Namespaced",
        &version("v1", true, spec),
    )
}

#[test]
fn formats_nothing_checks_are_warned_of_and_embedded_metadata_is_judged() {
    let c = Controller::start();
    let k = c.kubectl();
    let r = k.run_stdin(&["apply", "-f", "-"], &templates());
    assert!(r.status.is_some_and(|s| s.success()), "{}", r.stderr);
    assert!(
        r.stderr
            .contains(r#"Warning: unrecognized format "quantity""#),
        "{}",
        r.stderr
    );
    establish(&c, &templates(), "templates.berth.example.com");
    refused(
        &k,
        "apiVersion: berth.example.com/v1\nkind: Template\nmetadata: {name: t, namespace: default}\nspec:\n  template:\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: inner, labels: {app: 'not a value!'}}\n",
        r#"spec.template.metadata.labels: Invalid value: "not a value!""#,
    );
}
