//! A CustomResourceDefinition's fields beyond serving, with real kubectl: `selectableFields`
//! (validated with upstream's messages, field selectors on lists and watches with kubectl
//! 1.33 and 1.20, the fields named in OpenAPI), and custom schemas in OpenAPI v2, which
//! kubectl 1.20 reads for `explain`, client-side validation and `--dry-run=server`.

use std::time::Duration;

use berth_tests::Controller;
use berth_tests::client::Req;
use berth_tests::kubectl::kubectl_1_20;
use serde_json::{Value, json};

const KUBECTL_1_33: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

const SHIRTS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: shirts.berth.example.com
spec:
  group: berth.example.com
  scope: Namespaced
  names: {plural: shirts, singular: shirt, kind: Shirt}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields:
    - jsonPath: .spec.color
    - jsonPath: .spec.quantity
    - jsonPath: .spec.size
    - jsonPath: .spec.branded
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              quantity: {type: integer}
              size: {type: string, enum: [S, M, L]}
              branded: {type: boolean}
              weight: {type: number}
"#;

fn shirt(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: berth.example.com/v1\nkind: Shirt\nmetadata:\n  name: {name}\n  namespace: default\nspec: {spec}\n"
    )
}

/// Applies a definition and waits until its kind is served.
fn establish(c: &Controller, yaml: &str, name: &str) {
    c.kubectl().ok_stdin(&["apply", "-f", "-"], yaml);
    c.kubectl().ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=20s",
        &format!("crd/{name}"),
    ]);
}

/// The names `kubectl get shirts --field-selector SEL -o name` prints, sorted.
fn selected(k: &berth_tests::Kubectl, selector: &str) -> Vec<String> {
    let out = k.ok(&["get", "shirts", "--field-selector", selector, "-o", "name"]);
    let mut names: Vec<String> = out
        .lines()
        .map(|l| l.trim_start_matches("shirt.berth.example.com/").to_string())
        .filter(|l| !l.is_empty())
        .collect();
    names.sort();
    names
}

#[test]
fn selectable_fields_select_custom_resources_as_upstream() {
    let c = Controller::start();
    establish(&c, SHIRTS, "shirts.berth.example.com");
    let k = c.kubectl();
    for (name, spec) in [
        ("red-s", "{color: red, quantity: 1, size: S, branded: true}"),
        (
            "blue-m",
            "{color: blue, quantity: 3, size: M, branded: false}",
        ),
        ("blue-l", "{color: blue, quantity: 1, size: L}"),
    ] {
        k.ok_stdin(&["apply", "-f", "-"], &shirt(name, spec));
    }

    for bin in [kubectl_1_20(), KUBECTL_1_33.into()] {
        let k = c.kubectl().with_binary(&bin);
        let cases: [(&str, &[&str]); 8] = [
            ("spec.color=blue", &["blue-l", "blue-m"]),
            ("spec.color==blue", &["blue-l", "blue-m"]),
            ("spec.color!=blue", &["red-s"]),
            ("spec.color=blue,spec.quantity=3", &["blue-m"]),
            ("spec.size=L", &["blue-l"]),
            ("spec.branded=true", &["red-s"]),
            // A missing field is the empty string, as upstream.
            ("spec.branded=", &["blue-l"]),
            ("metadata.name=red-s,spec.color=red", &["red-s"]),
        ];
        for (selector, want) in cases {
            assert_eq!(
                selected(&k, selector),
                want,
                "{}: {selector}",
                bin.display()
            );
        }
        // A field the version does not declare is refused, as before.
        for undeclared in ["spec.weight=1", "spec.nodeName=n1", "status.phase=Running"] {
            let r = k.fails(&["get", "shirts", "--field-selector", undeclared]);
            let field = undeclared.split('=').next().unwrap_or_default();
            assert!(
                r.stderr
                    .contains(&format!("field label not supported: {field}")),
                "{}: {undeclared}: {}",
                bin.display(),
                r.stderr
            );
        }
    }

    // A watch sees objects enter and leave the selection.
    let api = c.admin_api();
    let path = "/apis/berth.example.com/v1/namespaces/default/shirts";
    let list = api.get_ok(&format!("{path}?fieldSelector=spec.color%3Dblue"));
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("0");
    let mut watch = api
        .watch(&format!(
            "{path}?fieldSelector=spec.color%3Dblue&watch=true&resourceVersion={rv}"
        ))
        .unwrap_or_else(|r| panic!("cannot watch: {}", r.describe()));
    let patch = |name: &str, color: &str| {
        api.expect(
            Req::patch(
                format!("{path}/{name}"),
                "application/merge-patch+json",
                &json!({"spec": {"color": color}}),
            ),
            200,
        );
    };
    patch("red-s", "blue");
    let e = watch.expect_event(Duration::from_secs(10), "red-s turned blue");
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("red-s"))
    );
    patch("blue-m", "green");
    let e = watch.expect_event(Duration::from_secs(10), "blue-m turned green");
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("DELETED"), Some("blue-m"))
    );
    patch("blue-m", "yellow");
    patch("blue-l", "blue");
    k.ok(&["delete", "shirt", "blue-l"]);
    let e = watch.expect_event(Duration::from_secs(10), "blue-l deleted");
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("DELETED"), Some("blue-l")),
        "{}",
        watch.describe()
    );
    assert!(
        !watch
            .seen()
            .iter()
            .any(|e| e["object"]["metadata"]["name"] == "blue-m" && e["type"] != "DELETED"),
        "{}",
        watch.describe()
    );

    // Both OpenAPI versions name the fields on the kind's schema.
    let v3 = api.get_ok("/openapi/v3/apis/berth.example.com/v1");
    assert_eq!(
        v3["components"]["schemas"]["com.example.berth.v1.Shirt"]["x-kubernetes-selectable-fields"],
        json!([{"fieldPath": "spec.color"}, {"fieldPath": "spec.quantity"},
               {"fieldPath": "spec.size"}, {"fieldPath": "spec.branded"}])
    );
}

#[test]
fn selectable_fields_are_validated_with_upstreams_messages() {
    let c = Controller::start();
    let k = c.kubectl();
    let bad = SHIRTS.replace(
        "    - jsonPath: .spec.branded\n",
        "    - jsonPath: .spec.branded\n    - jsonPath: .spec.weight\n    - jsonPath: .spec.color\n    - jsonPath: .spec.nope\n    - jsonPath: .metadata.name\n",
    );
    let r = k.fails_stdin(&["apply", "-f", "-"], &bad);
    let p = "spec.versions[0].selectableFields";
    for want in [
        format!(
            "{p}[4].jsonPath: Invalid value: \".spec.weight\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."
        ),
        format!("{p}[5].jsonPath: Duplicate value: \".spec.color\""),
        format!(
            "{p}[6].jsonPath: Invalid value: \".spec.nope\": is an invalid path: does not refer to a valid field"
        ),
        format!(
            "{p}[7].jsonPath: Invalid value: \".metadata.name\": is an invalid path: does not refer to a valid field"
        ),
    ] {
        assert!(r.stderr.contains(&want), "{want}\n{}", r.stderr);
    }
    // Nine distinct fields are one too many.
    let props: String = (0..9)
        .map(|i| format!("              f{i}: {{type: string}}\n"))
        .collect();
    let fields: String = (0..9)
        .map(|i| format!("    - jsonPath: .spec.f{i}\n"))
        .collect();
    let many = SHIRTS
        .replace("              weight: {type: number}\n", &props)
        .replace(
            "    - jsonPath: .spec.color\n    - jsonPath: .spec.quantity\n    - jsonPath: .spec.size\n    - jsonPath: .spec.branded\n",
            &fields,
        );
    let r = k.fails_stdin(&["apply", "-f", "-"], &many);
    assert!(
        r.stderr
            .contains(&format!("{p}: Too many: 9: must have at most 8 items")),
        "{}",
        r.stderr
    );
}

const BACKUPS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: backups.berth.example.com
spec:
  group: berth.example.com
  scope: Namespaced
  names: {plural: backups, singular: backup, kind: Backup, shortNames: [bk]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A Backup copies a volume on a schedule.
        properties:
          spec:
            type: object
            description: What to back up, and when.
            required: [schedule]
            properties:
              schedule:
                type: string
                description: When to run, in cron syntax.
              retentionDays:
                type: integer
                nullable: true
                description: How many days a copy is kept.
              port:
                x-kubernetes-int-or-string: true
                anyOf: [{type: integer}, {type: string}]
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
"#;

fn backup(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: berth.example.com/v1\nkind: Backup\nmetadata:\n  name: {name}\n  namespace: default\nspec: {spec}\n"
    )
}

#[test]
fn kubectl_1_20_explains_and_validates_custom_resources_from_openapi_v2() {
    let c = Controller::start();
    establish(&c, BACKUPS, "backups.berth.example.com");
    let old = c.kubectl().with_binary(&kubectl_1_20());

    let explained = old.ok(&["explain", "backups.spec"]);
    for want in [
        "What to back up, and when.",
        "When to run, in cron syntax.",
        "How many days a copy is kept.",
    ] {
        assert!(explained.contains(want), "{want}\n{explained}");
    }
    let top = old.ok(&["explain", "backups"]);
    assert!(
        top.contains("A Backup copies a volume on a schedule."),
        "{top}"
    );

    // Client-side validation from the v2 schema: an unknown field is refused before the
    // request, as kubectl 1.20 does against kube-apiserver; fields that keep unknown fields
    // take anything, an int-or-string either.
    let r = old.fails_stdin(
        &["apply", "-f", "-"],
        &backup("typo", "{schedule: '0 1 * * *', colour: red}"),
    );
    assert!(
        r.stderr.contains("unknown field \"colour\"")
            && r.stderr.contains("com.example.berth.v1.Backup.spec"),
        "{}",
        r.stderr
    );
    old.ok_stdin(
        &["apply", "-f", "-"],
        &backup(
            "nightly",
            "{schedule: '0 1 * * *', port: web, extra: {any: {thing: 1}}}",
        ),
    );
    // `--validate=false` sends it; the server prunes the field and says so.
    let r = old.run_stdin(
        &["apply", "--validate=false", "-f", "-"],
        &backup("typo", "{schedule: '0 1 * * *', colour: red}"),
    );
    assert!(r.status.is_some_and(|s| s.success()), "{}", r.stderr);
    let stored = c
        .admin_api()
        .get_ok("/apis/berth.example.com/v1/namespaces/default/backups/typo");
    assert_eq!(stored["spec"].get("colour"), None, "{stored}");

    // The kind's PATCH declares dryRun in v2, so kubectl 1.20's server dry run goes ahead.
    let out = old.ok_stdin(
        &["apply", "--dry-run=server", "-f", "-"],
        &backup("nightly", "{schedule: '0 2 * * *'}"),
    );
    assert!(out.contains("server dry run"), "{out}");
    let stored = c
        .admin_api()
        .get_ok("/apis/berth.example.com/v1/namespaces/default/backups/nightly");
    assert_eq!(stored["spec"]["schedule"], "0 1 * * *");

    // A changed definition is a changed v2 document.
    let changed = BACKUPS.replace(
        "              extra:\n",
        "              compress:\n                type: boolean\n                description: Whether copies are gzipped.\n              extra:\n",
    );
    c.kubectl().ok_stdin(&["apply", "-f", "-"], &changed);
    c.wait_for(
        Duration::from_secs(10),
        "kubectl 1.20 explains the new field",
        || {
            let r = old.run(&["explain", "backups.spec.compress"]);
            if r.stdout.contains("Whether copies are gzipped.") {
                Ok(())
            } else {
                Err(Value::String(format!("{}{}", r.stdout, r.stderr)))
            }
        },
    );
}
