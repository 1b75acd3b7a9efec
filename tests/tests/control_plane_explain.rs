//! `kubectl explain` reads the OpenAPI v3 component schemas: fields with their types and
//! descriptions, nested fields through references, `--recursive`, and one kind of every served
//! group (metrics.k8s.io aside: k8s-openapi has no schema for its kinds). Run with every kubectl
//! binary 1.27–1.33 directly, not through the version-matching dispatcher. With stub schemas
//! (`type: object` and nothing else) every field lookup failed with `field "spec" does not
//! exist`. Also: client-side apply keeps building its patches from kubectl's own types, and the
//! documents are cached by their hashed URLs.

use std::path::Path;

use berth_tests::kubectl::{Kubectl, kubectl_1_20};
use berth_tests::seeds::seeds;
use berth_tests::{Controller, Req};

const KUBECTLS: [&str; 7] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.28",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.29",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.30",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.31",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.32",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
];

/// The field names listed under `FIELDS:` at the first indentation level (2 spaces from
/// OpenAPI v3, kubectl 1.27+; 3 from v2, kubectl 1.20).
fn fields(out: &str) -> Vec<&str> {
    let first = out.lines().skip_while(|l| !l.starts_with("FIELDS:")).nth(1);
    let indent = first.map_or(2, |l| l.len() - l.trim_start().len());
    out.lines()
        .skip_while(|l| !l.starts_with("FIELDS:"))
        .skip(1)
        .filter(|l| l.len() - l.trim_start().len() == indent && l.contains('\t'))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

/// `kubectl explain ARGS` with `k`; `bin` names the binary in failure messages.
fn explain(k: &Kubectl, bin: &str, args: &[&str]) -> String {
    let mut full = vec!["explain"];
    full.extend_from_slice(args);
    let out = k.ok(&full);
    assert!(!out.trim().is_empty(), "{bin} {args:?}: no output");
    out
}

fn assert_has(out: &str, bin: &str, what: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(out.contains(w), "{bin} {what}: no {w:?} in\n{out}");
    }
}

#[test]
fn explain_shows_fields_descriptions_and_nested_types_with_every_kubectl() {
    let c = Controller::start();
    for bin in KUBECTLS {
        let k = c.kubectl().with_binary(Path::new(bin));

        let out = explain(&k, bin, &["deployment.spec.strategy"]);
        assert_has(
            &out,
            bin,
            "deployment.spec.strategy",
            &[
                "KIND:",
                "Deployment",
                "apps",
                "v1",
                "FIELD: strategy <DeploymentStrategy>",
                "The deployment strategy to use to replace existing pods with new ones.",
            ],
        );
        assert_eq!(
            fields(&out),
            ["rollingUpdate", "type"],
            "{bin} deployment.spec.strategy:\n{out}"
        );
        assert_has(
            &out,
            bin,
            "deployment.spec.strategy",
            &["rollingUpdate\t<RollingUpdateDeployment>", "type\t<string>"],
        );

        let out = explain(&k, bin, &["pods.spec.containers.ports"]);
        assert_has(
            &out,
            bin,
            "pods.spec.containers.ports",
            &[
                "FIELD: ports <[]ContainerPort>",
                "ContainerPort represents a network port",
            ],
        );
        let ports = fields(&out);
        for f in ["containerPort", "hostIP", "hostPort", "name", "protocol"] {
            assert!(ports.contains(&f), "{bin} ports: no {f} in\n{out}");
        }
        assert_has(
            &out,
            bin,
            "pods.spec.containers.ports",
            &["containerPort\t<integer> -required-"],
        );

        let out = explain(&k, bin, &["cronjobs.spec"]);
        assert_has(
            &out,
            bin,
            "cronjobs.spec",
            &[
                "CronJob",
                "batch",
                "FIELD: spec <CronJobSpec>",
                "jobTemplate\t<JobTemplateSpec> -required-",
                "schedule\t<string> -required-",
                "The schedule in Cron format",
            ],
        );
        assert!(fields(&out).contains(&"timeZone"), "{bin}:\n{out}");

        let out = explain(&k, bin, &["statefulset", "--recursive"]);
        assert_has(
            &out,
            bin,
            "statefulset --recursive",
            &[
                "StatefulSet",
                "volumeClaimTemplates",
                "podManagementPolicy",
                "containerPort",
            ],
        );
        assert!(
            out.lines().count() > 200,
            "{bin}: short recursive output\n{out}"
        );
    }
}

#[test]
fn explain_knows_one_kind_of_every_served_group_with_every_kubectl() {
    let c = Controller::start();
    // (resource argument, kind, a top-level field, words of the kind's description)
    let kinds: [(&[&str], &str, &str, &str); 13] = [
        (
            &["configmaps"],
            "ConfigMap",
            "data",
            "ConfigMap holds configuration data",
        ),
        (
            &["deployments"],
            "Deployment",
            "spec",
            "Deployment enables declarative updates",
        ),
        (
            &["tokenreviews"],
            "TokenReview",
            "spec",
            "TokenReview attempts to authenticate",
        ),
        (
            &["subjectaccessreviews"],
            "SubjectAccessReview",
            "spec",
            "SubjectAccessReview checks whether or not a user",
        ),
        (
            &["horizontalpodautoscalers"],
            "HorizontalPodAutoscaler",
            "spec",
            "HorizontalPodAutoscaler is the configuration",
        ),
        (
            &["horizontalpodautoscalers", "--api-version=autoscaling/v1"],
            "HorizontalPodAutoscaler",
            "spec",
            "configuration of a horizontal pod autoscaler",
        ),
        (
            &["jobs"],
            "Job",
            "spec",
            "Job represents the configuration of a single job",
        ),
        (
            &["poddisruptionbudgets"],
            "PodDisruptionBudget",
            "spec",
            "PodDisruptionBudget is an object to define",
        ),
        (
            &["roles"],
            "Role",
            "rules",
            "Role is a namespaced, logical grouping",
        ),
        (
            &["storageclasses"],
            "StorageClass",
            "provisioner",
            "StorageClass describes",
        ),
        (
            &["priorityclasses"],
            "PriorityClass",
            "value",
            "PriorityClass defines mapping",
        ),
        (
            &["leases"],
            "Lease",
            "spec",
            "Lease defines a lease concept",
        ),
        (
            &["endpointslices"],
            "EndpointSlice",
            "endpoints",
            "EndpointSlice represents",
        ),
    ];
    for bin in KUBECTLS {
        let k = c.kubectl().with_binary(Path::new(bin));
        for (args, kind, field, description) in kinds {
            let out = explain(&k, bin, args);
            let what = args.join(" ");
            assert_has(
                &out,
                bin,
                &what,
                &["KIND:", kind, "DESCRIPTION:", description],
            );
            let listed = fields(&out);
            for f in ["apiVersion", "kind", "metadata", field] {
                assert!(listed.contains(&f), "{bin} {what}: no field {f} in\n{out}");
            }
        }
        let out = explain(&k, bin, &["hpa", "--api-version=autoscaling/v1"]);
        assert!(
            out.contains("autoscaling/v1") || out.contains("VERSION:    v1"),
            "{bin}:\n{out}"
        );
    }
}

/// A Deployment with the given containers (name, image).
fn deployment(name: &str, containers: &[(&str, &str)]) -> String {
    let mut yaml = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  selector:\n    \
         matchLabels:\n      app: csa\n  template:\n    metadata:\n      labels:\n        \
         app: csa\n    spec:\n      containers:\n",
    );
    for (name, image) in containers {
        yaml.push_str(&format!("      - name: {name}\n        image: {image}\n"));
    }
    yaml
}

/// The real schemas must not change client-side apply: PATCH bodies still do not offer
/// strategic merge in the v3 documents, so every kubectl keeps building its patch from its
/// compiled-in Go types, with their merge keys (a `$setElementOrder` list and a `$patch:
/// delete` for a removed container), not from schemas without them (which would send the
/// whole `containers` list).
#[test]
fn client_side_apply_still_patches_from_kubectls_builtin_types_with_every_kubectl() {
    let c = Controller::start();
    let api = c.admin_api();
    for (i, bin) in KUBECTLS.iter().enumerate() {
        let k = c.kubectl().with_binary(Path::new(bin));
        let name = format!("csa-{i}");
        k.ok_stdin(
            &["apply", "-f", "-"],
            &deployment(
                &name,
                &[("main", "nginx:1.14.2"), ("sidecar", "busybox:1.28")],
            ),
        );
        let second = k.run_stdin(
            &["apply", "-f", "-", "-v=8"],
            &deployment(&name, &[("main", "nginx:1.16.1")]),
        );
        assert!(second.success(), "{bin}: {}", second.describe());
        // kubectl ≤ 1.31 logs `Request Body: {…}`, 1.32+ `"Request Body" body="{\"…"`.
        let body = second
            .stderr
            .lines()
            .find(|l| l.contains("Request Body") && l.contains("last-applied-configuration"))
            .map(|l| l.replace("\\\"", "\""))
            .unwrap_or_else(|| panic!("{bin}: no PATCH body in\n{}", second.stderr));
        for wanted in [
            r#""$setElementOrder/containers":[{"name":"main"}]"#,
            r#"{"$patch":"delete","name":"sidecar"}"#,
        ] {
            assert!(body.contains(wanted), "{bin}: no {wanted} in {body}");
        }
        let d = api.get_ok(&format!(
            "/apis/apps/v1/namespaces/default/deployments/{name}"
        ));
        let containers = &d["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers.as_array().map(Vec::len), Some(1), "{bin}: {d}");
        assert_eq!(containers[0]["image"], "nginx:1.16.1", "{bin}: {d}");
    }
}

/// The root's URLs carry each document's content hash; the document answers with it as its
/// ETag, so a client holding it revalidates with a 304 instead of downloading it again.
#[test]
fn documents_are_served_at_the_roots_hashed_urls_and_revalidated_by_etag() {
    let c = Controller::start();
    let api = c.admin_api();
    let root = api.get_ok("/openapi/v3");
    let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap_or_else(|| panic!("no apps/v1 in {root}"))
        .to_string();
    let doc = api.get_ok(&url);
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    let hash = url.rsplit("hash=").next().unwrap_or_default();
    let again = api
        .send(Req::get("/openapi/v3/apis/apps/v1").header("If-None-Match", &format!("\"{hash}\"")));
    assert_eq!(again.status, 304, "{}", again.describe());
    let stale = api.send(Req::get("/openapi/v3/apis/apps/v1?hash=0"));
    assert!([200, 301].contains(&stale.status), "{}", stale.describe());
    assert_eq!(api.send(Req::get("/openapi/v3/apis/apps/v2")).status, 404);
}

/// kubectl 1.20 reads `/openapi/v2` (protobuf) instead: `explain` works from its definitions,
/// client-side validation refuses an unknown field in kubectl's words but accepts every seed
/// manifest, `--dry-run=server` is allowed (its PATCH operations declare `dryRun`), and
/// client-side apply, which builds its patch from the served schema in 1.20, still merges
/// containers by name (the definitions carry upstream's patch merge keys) and deletes the one
/// a manifest dropped.
#[test]
fn kubectl_1_20_explains_validates_and_applies_with_the_v2_definitions() {
    let c = Controller::start();
    let bin = kubectl_1_20();
    let k = c.kubectl().with_binary(&bin);
    let bin = "kubectl 1.20";

    let out = explain(&k, bin, &["deployment.spec.strategy"]);
    assert_has(
        &out,
        bin,
        "deployment.spec.strategy",
        &[
            "KIND:     Deployment",
            "VERSION:  apps/v1",
            "RESOURCE: strategy <Object>",
            "The deployment strategy to use to replace existing pods with new ones.",
        ],
    );
    assert_eq!(fields(&out), ["rollingUpdate", "type"], "{out}");
    let out = explain(&k, bin, &["pods.spec.containers.ports"]);
    assert!(fields(&out).contains(&"containerPort"), "{out}");
    let out = explain(&k, bin, &["cronjobs.spec"]);
    for f in ["jobTemplate", "schedule", "timeZone"] {
        assert!(fields(&out).contains(&f), "{f}: {out}");
    }
    let out = explain(&k, bin, &["statefulset", "--recursive"]);
    assert_has(
        &out,
        bin,
        "statefulset --recursive",
        &["volumeClaimTemplates"],
    );
    for (resource, kind) in [
        ("configmaps", "ConfigMap"),
        ("tokenreviews", "TokenReview"),
        ("subjectaccessreviews", "SubjectAccessReview"),
        ("horizontalpodautoscalers", "HorizontalPodAutoscaler"),
        ("jobs", "Job"),
        ("poddisruptionbudgets", "PodDisruptionBudget"),
        ("roles", "Role"),
        ("storageclasses", "StorageClass"),
        ("priorityclasses", "PriorityClass"),
        ("leases", "Lease"),
        ("endpointslices", "EndpointSlice"),
    ] {
        let out = explain(&k, bin, &[resource]);
        assert_has(&out, bin, resource, &[&format!("KIND:     {kind}")]);
        assert!(fields(&out).contains(&"metadata"), "{resource}: {out}");
    }

    // Validation accepts every seed manifest...
    for (i, s) in seeds().iter().enumerate() {
        let ns = s.namespace.clone().unwrap_or_else(|| format!("seed-{i}"));
        k.run(&["create", "namespace", &ns]);
        let file = s.path.to_str().unwrap_or_default();
        k.ok(&["apply", "-f", file, "-n", &ns]);
    }
    // ...and refuses an unknown field before sending anything.
    let bogus = deployment("bogus", &[("main", "nginx:1.14.2")]).replace(
        "        image: nginx:1.14.2\n",
        "        image: nginx:1.14.2\n        bogusField: 1\n",
    );
    let refused = k.fails_stdin(&["apply", "-f", "-"], &bogus);
    assert!(
        refused
            .stderr
            .contains("unknown field \"bogusField\" in io.k8s.api.core.v1.Container"),
        "{}",
        refused.describe()
    );
    let api = c.admin_api();
    assert_eq!(
        api.get("/apis/apps/v1/namespaces/default/deployments/bogus")
            .status,
        404
    );
    let dry = k.ok_stdin(
        &["create", "-f", "-", "--dry-run=server", "-o", "name"],
        &deployment("dry", &[("main", "nginx:1.14.2")]),
    );
    assert_eq!(dry.trim(), "deployment.apps/dry");
    assert_eq!(
        api.get("/apis/apps/v1/namespaces/default/deployments/dry")
            .status,
        404
    );

    k.ok_stdin(
        &["apply", "-f", "-"],
        &deployment(
            "csa",
            &[("main", "nginx:1.14.2"), ("sidecar", "busybox:1.28")],
        ),
    );
    let second = k.run_stdin(
        &["apply", "-f", "-", "-v=8"],
        &deployment("csa", &[("main", "nginx:1.16.1")]),
    );
    assert!(second.success(), "{}", second.describe());
    let body = second
        .stderr
        .lines()
        .find(|l| l.contains("Request Body") && l.contains("last-applied-configuration"))
        .unwrap_or_else(|| panic!("no PATCH body in\n{}", second.stderr));
    for wanted in [
        r#""$setElementOrder/containers":[{"name":"main"}]"#,
        r#"{"$patch":"delete","name":"sidecar"}"#,
    ] {
        assert!(body.contains(wanted), "no {wanted} in {body}");
    }
    let d = api.get_ok("/apis/apps/v1/namespaces/default/deployments/csa");
    let containers = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().map(Vec::len), Some(1), "{d}");
    assert_eq!(containers[0]["image"], "nginx:1.16.1", "{d}");
}
