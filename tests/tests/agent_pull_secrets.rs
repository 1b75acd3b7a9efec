//! Image pull secrets (issue 30, acceptance 6) against the tests' own registry requiring an
//! htpasswd login over TLS, trusted by the agent through its registries file (`configs.<host>.
//! tls.ca_file`), as a user would set it up. A pod without `imagePullSecrets` waits in
//! `ErrImagePull` naming the registry's 401; with a `kubernetes.io/dockerconfigjson` secret on
//! the pod it runs; with the secret only on its ServiceAccount it runs too (admission copies
//! it into the pod); a pod of another namespace without credentials cannot start the same
//! image from the node's cache (`IfNotPresent`; `Never` gives `ErrImageNeverPull`), not even
//! after the agent restarted; one with a wrong password gets the 401, and one with the right
//! credentials of its own (a legacy `kubernetes.io/dockercfg` secret) runs from the cache.

use std::time::Duration;

use base64::Engine as _;
use berth_tests::cluster::{AgentOptions, ClusterConfig};
use berth_tests::fixtures::BUSYBOX;
use berth_tests::pod_reading::{container_status, waiting_reason};
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod};
use berth_tests::registry::Registry;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const START: Duration = secs(120);

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A pod in `ns` running `image` (IfNotPresent) with `extra` merged into its spec.
fn pod(ns: &str, name: &str, node: &str, image: &str, extra: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "main", "image": image,
        "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", SLEEP_FOREVER]}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    let mut p = bound_pod(name, node, spec);
    p["metadata"]["namespace"] = json!(ns);
    p
}

/// A `kubernetes.io/dockerconfigjson` secret for `host` with `user:password`.
fn docker_config_secret(ns: &str, name: &str, host: &str, user: &str, password: &str) -> Value {
    let config = json!({"auths": {host: {"auth": b64(&format!("{user}:{password}"))}}});
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "namespace": ns},
        "data": {".dockerconfigjson": b64(&config.to_string())}})
}

/// Waits until container `main` of `ns/name` waits in `ErrImagePull` or `ImagePullBackOff`;
/// returns its message from the `ErrImagePull` state.
fn wait_pull_error(c: &Cluster, ns: &str, name: &str) -> String {
    c.watch_pod(ns, name, START, "ErrImagePull with a message", |p| {
        let cs = container_status(p, "main").ok_or("no container status")?;
        match waiting_reason(cs) {
            Some("ErrImagePull") => Ok(cs["state"]["waiting"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string()),
            other => Err(format!(
                "waiting reason {other:?}, phase {}",
                p["status"]["phase"]
            )),
        }
    })
}

fn assert_unauthorized(message: &str, image: &str) {
    assert!(
        message.contains(&format!("Failed to pull image \"{image}\""))
            && message.contains("401 Unauthorized"),
        "{message}"
    );
}

/// A pod spec's `imagePullSecrets` naming secret `name`.
fn pull_secret(name: &str) -> Value {
    json!({"imagePullSecrets": [{"name": name}]})
}

#[test]
fn private_images_need_the_pods_own_credentials_even_from_the_cache() {
    let mut c = Cluster::start_with(ClusterConfig::agents(0));
    let registry = Registry::start_with_login("berth", "s3cret-pass");
    let login = registry
        .login()
        .cloned()
        .unwrap_or_else(|| panic!("no login"));
    let host = registry.addr().to_string();
    registry.push(
        &BUSYBOX.layout(),
        &BUSYBOX.reference(),
        "private/busybox",
        "1.28",
    );
    registry.push(
        &BUSYBOX.layout(),
        &BUSYBOX.reference(),
        "private/busybox",
        "sa",
    );
    // The agent trusts the registry's CA as a user configures it.
    let mut file = std::fs::read_to_string(c.registries_file()).unwrap_or_default();
    file.push_str(&format!(
        "configs:\n  \"{host}\":\n    tls:\n      ca_file: {}\n",
        login.ca_file.display()
    ));
    std::fs::write(c.registries_file(), file).unwrap_or_else(|e| panic!("registries file: {e}"));
    c.add_agent(&AgentOptions::default());
    let node = c.node_name(0).to_string();
    let image = format!("{host}/private/busybox:1.28");
    let sa_image = format!("{host}/private/busybox:sa");
    let (team, other) = ("team-a", "team-b");
    for ns in [team, other] {
        c.api().create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }

    // No credentials: the registry's 401.
    c.apply(&pod(team, "anonymous", &node, &image, json!({})));
    let message = wait_pull_error(&c, team, "anonymous");
    assert_unauthorized(&message, &image);
    assert!(
        message.contains("pull access denied"),
        "anonymous refusal reads as containerd's: {message}"
    );

    // The secret on the pod.
    let secret = docker_config_secret(team, "regcred", &host, "berth", "s3cret-pass");
    c.api()
        .create(&format!("/api/v1/namespaces/{team}/secrets"), &secret);
    c.apply(&pod(
        team,
        "with-secret",
        &node,
        &image,
        pull_secret("regcred"),
    ));
    c.wait_for_pod_ready(team, "with-secret", START);

    // The secret only on the ServiceAccount (another tag, so it is really pulled).
    c.api().create(
        &format!("/api/v1/namespaces/{team}/serviceaccounts"),
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "puller", "namespace": team},
            "imagePullSecrets": [{"name": "regcred"}]}),
    );
    c.apply(&pod(
        team,
        "via-account",
        &node,
        &sa_image,
        json!({"serviceAccountName": "puller"}),
    ));
    c.wait_for_pod_ready(team, "via-account", START);
    let admitted = c.pod(team, "via-account").unwrap_or_default();
    assert_eq!(
        admitted["spec"]["imagePullSecrets"],
        json!([{"name": "regcred"}]),
        "admission copies the account's pull secrets"
    );
    let pulled: Vec<String> = c.pod_event_reasons(team, "via-account");
    assert!(pulled.iter().any(|r| r == "Pulling"), "{pulled:?}");

    // Another namespace without credentials: the image is on the node, but not for it.
    let cached = c.containerd().images(c.agent(0).namespace());
    assert!(cached.contains(&image), "{cached:?}");
    c.apply(&pod(other, "no-credentials", &node, &image, json!({})));
    let message = wait_pull_error(&c, other, "no-credentials");
    assert_unauthorized(&message, &image);
    assert_eq!(
        c.pod(other, "no-credentials").unwrap_or_default()["status"]["phase"],
        "Pending"
    );

    // A wrong password: the registry's 401 for those credentials.
    let secret = docker_config_secret(other, "wrong", &host, "berth", "not-the-password");
    c.api()
        .create(&format!("/api/v1/namespaces/{other}/secrets"), &secret);
    c.apply(&pod(
        other,
        "wrong-password",
        &node,
        &image,
        pull_secret("wrong"),
    ));
    let message = wait_pull_error(&c, other, "wrong-password");
    assert_unauthorized(&message, &image);

    // `Never` cannot ask the registry: without the credentials it pulled with, the pod waits.
    let mut never = pod(other, "never", &node, &image, json!({}));
    never["spec"]["containers"][0]["imagePullPolicy"] = json!("Never");
    c.apply(&never);
    let message = c.watch_pod(other, "never", START, "ErrImageNeverPull", |p| {
        let cs = container_status(p, "main").ok_or("no container status")?;
        match waiting_reason(cs) {
            Some("ErrImageNeverPull") => Ok(cs["state"]["waiting"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string()),
            other => Err(format!("waiting reason {other:?}")),
        }
    });
    assert!(
        message.contains("does not have the proper auth credentials"),
        "{message}"
    );

    // A restarted agent still knows (the record's label in containerd, nothing else).
    c.restart_agent(0);
    c.wait_node_ready(0);
    c.apply(&pod(other, "after-restart", &node, &image, json!({})));
    let message = wait_pull_error(&c, other, "after-restart");
    assert_unauthorized(&message, &image);

    // The right credentials of its own (legacy .dockercfg): it runs from the cache.
    let cfg = json!({format!("https://{host}"): {"username": "berth", "password": "s3cret-pass"}});
    c.api().create(
        &format!("/api/v1/namespaces/{other}/secrets"),
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockercfg",
            "metadata": {"name": "legacy", "namespace": other},
            "data": {".dockercfg": b64(&cfg.to_string())}}),
    );
    c.apply(&pod(
        other,
        "own-credentials",
        &node,
        &image,
        pull_secret("legacy"),
    ));
    c.wait_for_pod_ready(other, "own-credentials", START);
    drop(registry);
}
