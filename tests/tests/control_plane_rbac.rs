//! Access control: RBAC decides what ordinary users and ServiceAccounts may do (namespaced
//! grants stay in their namespace, nobody grants what they do not hold), ServiceAccount tokens
//! from the TokenRequest API authenticate until what they are bound to is gone, and
//! `kubectl auth can-i` / `auth whoami` / `--as` work as upstream's.

use berth_tests::objects::{configmap, failure_status, namespace};
use berth_tests::wait::ok_if;
use berth_tests::{Api, Controller, Credentials, Kubectl, Req};
use serde_json::{Value, json};
use std::time::Duration;

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

/// A controller that knows the bearer tokens of `alice` and `bob` (no groups), with the
/// namespaces `team-a` and `team-b`.
fn start() -> (Controller, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "alice-token,alice,1001\nbob-token,bob,1002\n").expect("tokens");
    let c = Controller::start_with(&["--token-auth-file", tokens.to_str().expect("UTF-8")]);
    let admin = c.admin_api();
    for ns in ["team-a", "team-b"] {
        admin.create("/api/v1/namespaces", &namespace(ns));
    }
    (c, dir)
}

fn user(c: &Controller, name: &str) -> Api {
    c.api_with(Credentials::Bearer(format!("{name}-token")))
}

fn role_binding(ns: &str, name: &str, role_kind: &str, role: &str, subject: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": name, "namespace": ns},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
           "subjects": [subject]})
}

fn user_subject(name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name})
}

/// Binds the `edit` ClusterRole to alice in team-a, as the admin.
fn grant_alice_edit(admin: &Api) {
    admin.create(
        &format!("{RBAC}/namespaces/team-a/rolebindings"),
        &role_binding(
            "team-a",
            "alice-edits",
            "ClusterRole",
            "edit",
            user_subject("alice"),
        ),
    );
}

fn forbidden(reply: &berth_tests::Reply) -> String {
    assert_eq!(reply.status, 403, "{}", reply.describe());
    failure_status(&reply.json(), 403, "Forbidden")
        .unwrap_or_else(|e| panic!("{e}: {}", reply.describe()))
}

#[test]
fn a_namespaced_grant_stays_in_its_namespace() {
    let (c, _tokens) = start();
    let admin = c.admin_api();
    let alice = user(&c, "alice");
    // Nothing granted yet: upstream's message, naming user, verb, resource, group and scope.
    let message = forbidden(&alice.get("/api/v1/namespaces/team-a/pods"));
    assert_eq!(
        message,
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"team-a\""
    );
    grant_alice_edit(&admin);
    let listed = alice.get("/api/v1/namespaces/team-a/pods");
    assert_eq!(listed.status, 200, "{}", listed.describe());
    let created = alice.send(Req::post(
        "/api/v1/namespaces/team-a/configmaps",
        &configmap("made-by-alice", &[("k", "v")]),
    ));
    assert_eq!(created.status, 201, "{}", created.describe());
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "s", "namespace": "team-b"}, "stringData": {"k": "v"}});
    admin.create("/api/v1/namespaces/team-b/secrets", &secret);
    let message = forbidden(&alice.get("/api/v1/namespaces/team-b/secrets/s"));
    assert_eq!(
        message,
        "secrets \"s\" is forbidden: User \"alice\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team-b\""
    );
    forbidden(&alice.get("/api/v1/pods"));
    forbidden(&alice.get("/api/v1/nodes"));
    // Discovery is everyone's (system:discovery); /metrics is not.
    assert_eq!(alice.get("/apis").status, 200);
    forbidden(&alice.get("/metrics"));
    // bob holds nothing anywhere.
    forbidden(&user(&c, "bob").get("/api/v1/namespaces/team-a/configmaps"));
}

#[test]
fn nobody_grants_what_they_do_not_hold() {
    let (c, _tokens) = start();
    let admin = c.admin_api();
    let alice = user(&c, "alice");
    let grant = |role_kind: &str, role: &str| {
        alice.send(Req::post(
            format!("{RBAC}/namespaces/team-a/rolebindings"),
            &role_binding(
                "team-a",
                &format!("bob-{role}"),
                role_kind,
                role,
                user_subject("bob"),
            ),
        ))
    };
    // With edit, alice may not touch bindings at all.
    grant_alice_edit(&admin);
    let message = forbidden(&grant("ClusterRole", "cluster-admin"));
    assert!(
        message.contains("cannot create resource \"rolebindings\""),
        "{message}"
    );
    // With admin in team-a she may hand out view there, but not cluster-admin.
    admin.create(
        &format!("{RBAC}/namespaces/team-a/rolebindings"),
        &role_binding(
            "team-a",
            "alice-admins",
            "ClusterRole",
            "admin",
            user_subject("alice"),
        ),
    );
    let ok = grant("ClusterRole", "view");
    assert_eq!(ok.status, 201, "{}", ok.describe());
    let message = forbidden(&grant("ClusterRole", "cluster-admin"));
    assert!(
        message.contains("is attempting to grant RBAC permissions not currently held"),
        "{message}"
    );
    // Nor a Role with more than she holds.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "nodes-too", "namespace": "team-a"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                  {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    let message =
        forbidden(&alice.send(Req::post(format!("{RBAC}/namespaces/team-a/roles"), &role)));
    assert!(message.contains("Resources:[\"*\"]"), "{message}");
    // Nothing was written by the refused requests.
    let bindings = admin.get_ok(&format!("{RBAC}/namespaces/team-a/rolebindings"));
    let names: Vec<&str> = bindings["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|b| b["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["alice-admins", "alice-edits", "bob-view"]);
    // bob, now a viewer in team-a, reads there.
    assert_eq!(
        user(&c, "bob")
            .get("/api/v1/namespaces/team-a/configmaps")
            .status,
        200
    );
}

#[test]
fn service_account_tokens_authenticate_until_their_pod_is_gone() {
    let (c, _tokens) = start();
    let admin = c.admin_api();
    // The controller gives every namespace its default account and the CA bundle.
    c.wait_for(
        Duration::from_secs(10),
        "team-a's default ServiceAccount and kube-root-ca.crt",
        || {
            let sa = admin.get("/api/v1/namespaces/team-a/serviceaccounts/default");
            let cm = admin.get("/api/v1/namespaces/team-a/configmaps/kube-root-ca.crt");
            ok_if(sa.status == 200 && cm.status == 200, (sa.status, cm.status))
        },
    );
    let cm = admin.get_ok("/api/v1/namespaces/team-a/configmaps/kube-root-ca.crt");
    assert_eq!(
        cm["data"]["ca.crt"].as_str().map(str::trim),
        std::str::from_utf8(&c.ca_pem()).ok().map(str::trim)
    );
    // A pod gets the account and the kube-api-access volume, mounted in every container.
    let pod = admin.create(
        "/api/v1/namespaces/team-a/pods",
        &berth_tests::objects::pod("holder", &[("app", "holder")]),
    );
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
    let volume = &pod["spec"]["volumes"][0];
    assert!(
        volume["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("kube-api-access-")),
        "{pod}"
    );
    assert_eq!(
        volume["projected"]["sources"][0]["serviceAccountToken"]["path"],
        "token"
    );
    assert_eq!(
        pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    // A pod naming a missing account is refused as upstream does.
    let mut lost = berth_tests::objects::pod("lost", &[]);
    lost["spec"]["serviceAccountName"] = json!("nobody");
    let message = forbidden(&admin.send(Req::post("/api/v1/namespaces/team-a/pods", &lost)));
    assert!(
        message.contains("serviceaccount \"nobody\" not found"),
        "{message}"
    );

    // A token bound to the pod.
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "holder",
                                    "uid": pod["metadata"]["uid"]}}});
    let answer = admin.expect(
        Req::post(
            "/api/v1/namespaces/team-a/serviceaccounts/default/token",
            &request,
        ),
        201,
    );
    let token = answer["status"]["token"]
        .as_str()
        .expect("token")
        .to_string();
    assert_eq!(answer["spec"]["expirationSeconds"], 3600);
    let sa = c.api_with(Credentials::Bearer(token.clone()));
    let who = sa.expect(
        Req::post(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        ),
        201,
    );
    assert_eq!(
        who["status"]["userInfo"]["username"],
        "system:serviceaccount:team-a:default"
    );
    assert_eq!(
        who["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["holder"])
    );
    forbidden(&sa.get("/api/v1/namespaces/team-a/pods"));
    admin.create(
        &format!("{RBAC}/namespaces/team-a/rolebindings"),
        &role_binding(
            "team-a",
            "default-views",
            "ClusterRole",
            "view",
            json!({"kind": "ServiceAccount", "name": "default", "namespace": "team-a"}),
        ),
    );
    assert_eq!(sa.get("/api/v1/namespaces/team-a/pods").status, 200);
    forbidden(&sa.get("/api/v1/namespaces/team-b/pods"));

    // Gone with the pod.
    admin.expect(
        Req::delete("/api/v1/namespaces/team-a/pods/holder")
            .json(&json!({"gracePeriodSeconds": 0})),
        200,
    );
    let reply = sa.get("/api/v1/namespaces/team-a/pods");
    assert_eq!(reply.status, 401, "{}", reply.describe());
    // Tampered or foreign tokens never work.
    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    let reply = c
        .api_with(Credentials::Bearer(forged))
        .get("/api/v1/namespaces/team-a/pods");
    assert_eq!(reply.status, 401, "{}", reply.describe());
    // Too short a lifetime is refused.
    let short = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": {"expirationSeconds": 60}});
    let reply = admin.send(Req::post(
        "/api/v1/namespaces/team-a/serviceaccounts/default/token",
        &short,
    ));
    assert_eq!(reply.status, 400, "{}", reply.describe());
}

#[test]
fn kubectl_auth_can_i_whoami_and_impersonation_answer_as_upstream() {
    let (c, _tokens) = start();
    let kubectl = Kubectl::new(&c);
    let as_sa = ["--as=system:serviceaccount:team-a:default", "-n", "team-a"];
    let can_i = |extra: &[&str]| {
        let mut args = vec!["auth", "can-i", "create", "deployments"];
        args.extend_from_slice(extra);
        kubectl.run(&args)
    };
    let no = can_i(&as_sa);
    assert_eq!(no.stdout.trim(), "no", "{}", no.describe());
    assert!(!no.success());
    kubectl.ok(&[
        "create",
        "rolebinding",
        "default-edits",
        "--clusterrole=edit",
        "--serviceaccount=team-a:default",
        "-n",
        "team-a",
    ]);
    let yes = can_i(&as_sa);
    assert_eq!(yes.stdout.trim(), "yes", "{}", yes.describe());
    let elsewhere = can_i(&["--as=system:serviceaccount:team-a:default", "-n", "team-b"]);
    assert_eq!(elsewhere.stdout.trim(), "no", "{}", elsewhere.describe());
    let list = kubectl.ok(&["auth", "can-i", "--list", "--as=alice", "-n", "team-a"]);
    assert!(
        list.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{list}"
    );
    assert!(!list.contains("deployments.apps"), "{list}");

    let whoami = kubectl.ok(&["auth", "whoami"]);
    assert!(
        whoami.contains("admin") && whoami.contains("system:masters"),
        "{whoami}"
    );
    let whoami_sa = kubectl.ok(&[
        "auth",
        "whoami",
        "--as=system:serviceaccount:team-a:default",
    ]);
    assert!(
        whoami_sa.contains("system:serviceaccount:team-a:default")
            && whoami_sa.contains("system:serviceaccounts:team-a"),
        "{whoami_sa}"
    );
    // alice may not impersonate; a token made by `kubectl create token` works.
    let alice = user(&c, "alice");
    let message = forbidden(
        &alice.send(Req::get("/api/v1/namespaces/team-a/pods").header("Impersonate-User", "admin")),
    );
    assert_eq!(
        message,
        "users \"admin\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    let token = kubectl.ok(&["create", "token", "default", "-n", "team-a"]);
    let sa = c.api_with(Credentials::Bearer(token.trim().to_string()));
    assert_eq!(
        sa.get("/apis/apps/v1/namespaces/team-a/deployments").status,
        200
    );
}
