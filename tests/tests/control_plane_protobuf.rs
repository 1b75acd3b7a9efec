//! Issue 14, protobuf request bodies: kubectl 1.32 and later send every `kubectl create <kind>`
//! as `application/vnd.kubernetes.protobuf`. Each generator runs with kubectl 1.33 and 1.32
//! (the binaries themselves, not the version-matching dispatcher) and what the server stored is
//! read back as JSON. A protobuf body the server cannot decode is a 400 naming the kind, and an
//! unknown kind in the envelope is refused, not stored.

use std::path::Path;

use berth_tests::client::Method;
use berth_tests::{Controller, Req};

const KUBECTLS: [&str; 2] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.32",
];

#[test]
fn every_kubectl_create_generator_is_stored_from_its_protobuf_body() {
    let c = Controller::start();
    let api = c.admin_api();
    for bin in KUBECTLS {
        let v = bin.rsplit('.').next().unwrap_or("x");
        let k = c.kubectl().with_binary(Path::new(bin));
        let ns = format!("pb-{v}");
        k.ok(&["create", "namespace", &ns]);
        assert_eq!(
            api.get_ok(&format!("/api/v1/namespaces/{ns}"))["status"]["phase"],
            "Active"
        );
        let n = ["-n", ns.as_str()];
        let create = |args: &[&str]| k.ok(&[&["create"], &n[..], args].concat());
        // `kubectl create ARGS`, then what the server stored at `path`.
        let created = |args: &[&str], path: String| {
            create(args);
            api.get_ok(&path)
        };

        let d = created(
            &[
                "deployment",
                "web",
                "--image=nginx:1.25",
                "--replicas=0",
                "--port=80",
            ],
            format!("/apis/apps/v1/namespaces/{ns}/deployments/web"),
        );
        assert_eq!(
            d["spec"]["replicas"], 0,
            "{bin}: replicas 0 is a value, not unset"
        );
        assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "web");
        let container = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "nginx:1.25");
        assert_eq!(container["ports"][0]["containerPort"], 80);
        // Go's zero values are unset: the server's defaults apply, as upstream's do.
        assert_eq!(container["imagePullPolicy"], "IfNotPresent");
        assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
        assert!(d["metadata"]["creationTimestamp"].is_string());

        let cm = created(
            &[
                "configmap",
                "cfg",
                "--from-literal=a=1",
                "--from-literal=empty=",
            ],
            format!("/api/v1/namespaces/{ns}/configmaps/cfg"),
        );
        assert_eq!(cm["data"]["a"], "1");
        assert_eq!(cm["data"]["empty"], "");

        let s = created(
            &["secret", "generic", "pw", "--from-literal=password=s3cret"],
            format!("/api/v1/namespaces/{ns}/secrets/pw"),
        );
        assert_eq!(s["data"]["password"], "czNjcmV0");
        assert_eq!(s["type"], "Opaque");

        let cj = created(
            &[
                "cronjob",
                "tick",
                "--image=busybox",
                "--schedule=*/5 * * * *",
                "--",
                "date",
            ],
            format!("/apis/batch/v1/namespaces/{ns}/cronjobs/tick"),
        );
        assert_eq!(cj["spec"]["schedule"], "*/5 * * * *");
        assert_eq!(
            cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][0],
            "date"
        );
        let job = created(
            &["job", "once", "--from=cronjob/tick"],
            format!("/apis/batch/v1/namespaces/{ns}/jobs/once"),
        );
        assert_eq!(
            job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
            "manual"
        );
        assert_eq!(job["metadata"]["ownerReferences"][0]["name"], "tick");
        let job = created(
            &["job", "pi", "--image=busybox", "--", "echo", "3.14"],
            format!("/apis/batch/v1/namespaces/{ns}/jobs/pi"),
        );
        assert_eq!(job["spec"]["backoffLimit"], 6);

        let pdb = created(
            &[
                "poddisruptionbudget",
                "pdb",
                "--selector=app=web",
                "--min-available=50%",
            ],
            format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/pdb"),
        );
        assert_eq!(pdb["spec"]["minAvailable"], "50%");
        let pdb = created(
            &[
                "poddisruptionbudget",
                "pdb2",
                "--selector=app=web",
                "--max-unavailable=1",
            ],
            format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/pdb2"),
        );
        assert_eq!(pdb["spec"]["maxUnavailable"], 1);

        let svc = created(
            &["service", "clusterip", "web", "--tcp=80:8080"],
            format!("/api/v1/namespaces/{ns}/services/web"),
        );
        assert_eq!(svc["spec"]["ports"][0]["port"], 80);
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
        assert!(
            svc["spec"]["clusterIP"]
                .as_str()
                .is_some_and(|ip| ip.starts_with("10.43."))
        );

        create(&["serviceaccount", "robot"]);
        let role = created(
            &["role", "reader", "--verb=get,list", "--resource=pods"],
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/reader"),
        );
        assert_eq!(
            role["rules"][0]["verbs"],
            serde_json::json!(["get", "list"])
        );
        let rb = created(
            &[
                "rolebinding",
                "reader",
                "--role=reader",
                &format!("--serviceaccount={ns}:robot"),
            ],
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/reader"),
        );
        assert_eq!(rb["subjects"][0]["name"], "robot");

        k.ok(&[
            "create",
            "priorityclass",
            &format!("pc-{v}"),
            "--value=0",
            "--description=zero",
        ]);
        let pc = api.get_ok(&format!(
            "/apis/scheduling.k8s.io/v1/priorityclasses/pc-{v}"
        ));
        assert_eq!(pc["value"], 0);

        k.ok(&["delete", "namespace", &ns, "--wait=false"]);
    }
}

#[test]
fn protobuf_bodies_that_do_not_decode_are_refused_naming_the_kind() {
    let c = Controller::start();
    let api = c.admin_api();
    let post = |body: &[u8]| {
        api.send(
            Req::new(Method::POST, "/api/v1/namespaces/default/configmaps")
                .raw("application/vnd.kubernetes.protobuf", body.to_vec()),
        )
    };
    let r = post(b"{\"kind\":\"ConfigMap\"}");
    assert_eq!(r.status, 400, "{}", r.describe());
    r.assert_body_has("the object provided is unrecognized (must be of type ConfigMap)");
    // An envelope naming a kind no group-version has.
    let mut body = b"k8s\0".to_vec();
    body.extend_from_slice(&[
        0x0a, 0x0a, 0x0a, 0x02, b'v', b'1', 0x12, 0x04, b'N', b'o', b'p', b'e',
    ]);
    let r = post(&body);
    assert_eq!(r.status, 400, "{}", r.describe());
    assert!(r.body.contains("no kind \\\"Nope\\\""), "{}", r.describe());
    let r = api.send(Req::get("/api/v1/namespaces/default/configmaps"));
    assert_eq!(r.status, 200);
}
