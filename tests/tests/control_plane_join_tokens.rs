//! Issue 9, join tokens: `berth-controller token create --node NAME [--ttl D]` makes a token
//! (same shape as the cluster's, pinning the same CA) that joins only as NAME — another name is
//! 403 and audited — until it expires or `token delete` removes it (401 with a message saying
//! which); `token list` shows id, node and expiry, never the secret. `token rotate` replaces the
//! cluster's token at once, for a controller that is running; nodes that joined keep working
//! with their certificates. The running controller sees what the CLI writes without a restart.

use berth_tests::host::unique_suffix;
use berth_tests::join::{Attempt, refused, request, token_secret};
use berth_tests::wait::ok_if;
use berth_tests::{Controller, Credentials, Req, secs};
use serde_json::json;

/// A fresh node name for this test.
fn node_name(prefix: &str) -> String {
    format!("{prefix}-{}", unique_suffix())
}

/// A join request with `token` (a whole `K10…` token, as an agent is given it).
fn join(c: &Controller, token: &str, name: &str, node_secret: &str) -> Attempt {
    request(
        &c.anonymous_api(),
        &token_secret(token),
        name,
        Some(node_secret),
        &["127.0.0.1"],
    )
}

fn issued(c: &Controller, a: &Attempt) {
    assert_eq!(
        a.reply.status,
        200,
        "{}\n{}",
        a.reply.describe(),
        c.log_tail()
    );
}

/// `berth-controller token ARGS…` on the controller's data dir; panics unless it succeeds.
fn token_command(c: &Controller, args: &[&str]) -> String {
    let mut full = vec!["token"];
    full.extend_from_slice(args);
    let r = c.subcommand(&full);
    assert!(r.success(), "{}", r.describe());
    r.stdout
}

/// `token create --node NAME …`: the token it prints (one line, nothing else on stdout).
fn create_token(c: &Controller, node: &str, extra: &[&str]) -> String {
    let mut args = vec!["create", "--node", node];
    args.extend_from_slice(extra);
    let out = token_command(c, &args);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    lines[0].trim().to_string()
}

/// The id of a per-node token (`K10<hash>::node:<id>.<secret>`).
fn token_id(token: &str) -> String {
    let secret = token_secret(token);
    let (id, _) = secret
        .split_once('.')
        .unwrap_or_else(|| panic!("not a per-node token: {token}"));
    id.to_string()
}

/// The CA-pinning part of a token, `K10<hash>`.
fn ca_part(token: &str) -> &str {
    token.split_once("::").map_or(token, |(ca, _)| ca)
}

/// Waits until the controller's audit log has a line for `name` containing every one of
/// `wanted`.
fn wait_audit(c: &Controller, name: &str, wanted: &[&str]) {
    let stderr = c.stderr_log();
    c.wait_for(secs(10), "the audit log line", || {
        let log = std::fs::read_to_string(&stderr).map_err(|e| e.to_string())?;
        let audit: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("berth::audit::join") && l.contains(name))
            .collect();
        ok_if(
            audit.iter().any(|l| wanted.iter().all(|w| l.contains(w))),
            format!("no line with {wanted:?} in\n{}", audit.join("\n")),
        )
    });
}

#[test]
fn a_per_node_token_joins_only_as_its_node_until_it_is_deleted() {
    let c = Controller::start();
    let name = node_name("pernode");
    let token = create_token(&c, &name, &[]);
    // It pins the same CA as the cluster's token, so the agent takes it as it is.
    assert_eq!(ca_part(&token), ca_part(&c.join_token()), "{token}");
    let id = token_id(&token);

    // It joins as its node, registering the node's secret as the cluster token does.
    let joined = join(&c, &token, &name, "own-secret");
    issued(&c, &joined);
    assert_eq!(joined.sans(), vec![name.clone(), "127.0.0.1".to_string()]);
    let node = c.api_with(Credentials::ClientCert(joined.identity()));
    let created = node.send(Req::post(
        "/api/v1/nodes",
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
    ));
    assert_eq!(created.status, 201, "{}", created.describe());
    wait_audit(&c, &name, &["issued", &format!("token={id}")]);

    // Any other name is 403, audited with the token's id.
    let other = node_name("other");
    let a = join(&c, &token, &other, "other-secret");
    let message = refused(&c, &a, 403, "Forbidden");
    assert_eq!(
        message,
        format!("join token \"{id}\" is for node \"{name}\" only: it may not join as \"{other}\"")
    );
    wait_audit(&c, &other, &["refused", "code=403", &format!("token={id}")]);
    // The node's own secret still binds the name: the token alone does not take it over.
    refused(&c, &join(&c, &token, &name, "thief"), 403, "Forbidden");

    // Listed with its node and expiry, never its secret.
    let list = token_command(&c, &["list"]);
    let secret = token_secret(&token);
    let (_, secret_part) = secret.split_once('.').unwrap_or_default();
    assert!(!list.contains(secret_part), "{list}");
    let row = list
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not listed:\n{list}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols.len(), 3, "{row}");
    assert_eq!(cols[1], name, "{row}");
    let expires: jiff::Timestamp = cols[2]
        .parse()
        .unwrap_or_else(|e| panic!("expiry {:?}: {e}", cols[2]));
    // The default TTL is 24h (the expiry is rounded up to a whole second).
    let ttl = expires.duration_since(jiff::Timestamp::now());
    let day = jiff::SignedDuration::from_hours(24);
    assert!(
        ttl > day - jiff::SignedDuration::from_mins(10)
            && ttl <= day + jiff::SignedDuration::from_secs(1),
        "{row}"
    );
    assert!(
        list.lines().next().is_some_and(|h| h.starts_with("ID")),
        "{list}"
    );

    // Deleted while the controller runs: refused at once, 401 saying so.
    let out = token_command(&c, &["delete", &id]);
    assert!(out.contains("deleted"), "{out}");
    let a = join(&c, &token, &name, "own-secret");
    let message = refused(&c, &a, 401, "Unauthorized");
    assert!(
        message.contains(&format!("join token \"{id}\" is not valid")),
        "{message}"
    );
    assert!(!token_command(&c, &["list"]).contains(&id));
    let again = c.subcommand(&["token", "delete", &id]);
    assert!(!again.success(), "{}", again.describe());
    let bad = c.subcommand(&["token", "delete", "../token"]);
    assert!(!bad.success(), "{}", bad.describe());
    let bad = c.subcommand(&["token", "create", "--node", "-bad"]);
    assert!(!bad.success(), "{}", bad.describe());
    // The node joined with it keeps its certificate.
    let reply = node.get(&format!("/api/v1/nodes/{name}"));
    assert_eq!(reply.status, 200, "{}", reply.describe());

    // A deleted token counts against the source's rate limit like any wrong secret: with the
    // refusals above (two 403s, one 401), seven more fill the ten; the next is 429.
    for _ in 0..7 {
        refused(
            &c,
            &join(&c, &token, &name, "own-secret"),
            401,
            "Unauthorized",
        );
    }
    refused(
        &c,
        &join(&c, &token, &name, "own-secret"),
        429,
        "TooManyRequests",
    );
}

#[test]
fn a_per_node_token_is_refused_once_its_ttl_has_passed() {
    let c = Controller::start();
    let name = node_name("expiring");
    // 3 s rather than 2: the first join must land inside it on a loaded machine.
    let token = create_token(&c, &name, &["--ttl", "3s"]);
    let id = token_id(&token);
    issued(&c, &join(&c, &token, &name, "s1"));
    // The owner rejoins until the token expires; then it is 401, saying so.
    let message = c.wait_for(secs(15), "the token to expire", || {
        let a = join(&c, &token, &name, "s1");
        match a.reply.status {
            200 => Err("still joins".to_string()),
            401 => Ok(refused(&c, &a, 401, "Unauthorized")),
            _ => panic!("{}", a.reply.describe()),
        }
    });
    assert!(
        message.starts_with(&format!(
            "join token \"{id}\" (for node \"{name}\") expired at "
        )),
        "{message}"
    );
    let list = token_command(&c, &["list"]);
    let row = list
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_default();
    assert!(row.ends_with("(expired)"), "{list}");
    wait_audit(&c, &name, &["refused", "code=401", "expired at"]);

    // `--ttl 0`: it never expires.
    let forever = node_name("forever");
    let token = create_token(&c, &forever, &["--ttl", "0"]);
    let list = token_command(&c, &["list"]);
    let row = list
        .lines()
        .find(|l| l.starts_with(&token_id(&token)))
        .unwrap_or_default();
    assert!(row.ends_with("never"), "{list}");
    issued(&c, &join(&c, &token, &forever, "s1"));
}

#[test]
fn rotating_the_cluster_token_refuses_the_old_one_and_joined_nodes_keep_working() {
    let mut c = Controller::start();
    let old = c.join_token();
    let name = node_name("joined");
    let joined = join(&c, &old, &name, "node-secret");
    issued(&c, &joined);
    let node = c.api_with(Credentials::ClientCert(joined.identity()));
    let created = node.send(Req::post(
        "/api/v1/nodes",
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
    ));
    assert_eq!(created.status, 201, "{}", created.describe());
    // A per-node token made before the rotation is not the cluster's: it is not rotated.
    let later = node_name("later");
    let per_node = create_token(&c, &later, &[]);

    // Rotated while the controller runs: the new token is printed and is the cluster's now.
    let out = token_command(&c, &["rotate"]);
    let new = out.trim().to_string();
    assert_eq!(new, c.join_token());
    assert_ne!(token_secret(&new), token_secret(&old));
    assert_eq!(ca_part(&new), ca_part(&old), "the CA does not change");
    assert_eq!(token_command(&c, &[]).trim(), new, "`token` prints it");

    // The old one joins nothing, not even the node that joined with it.
    for n in [name.clone(), node_name("fresh")] {
        let message = refused(&c, &join(&c, &old, &n, "node-secret"), 401, "Unauthorized");
        assert_eq!(message, "invalid join token");
    }
    // The new one does, and the joined node renews with it and its own secret.
    issued(&c, &join(&c, &new, &node_name("fresh"), "s1"));
    issued(&c, &join(&c, &new, &name, "node-secret"));
    issued(&c, &join(&c, &per_node, &later, "s1"));

    // The joined node's certificate still works: it reads and writes its own Node and Lease.
    let path = format!("/api/v1/nodes/{name}");
    let reply = node.get(&path);
    assert_eq!(reply.status, 200, "{}", reply.describe());
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40},
    });
    let reply = node.send(Req::post(
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
        &lease,
    ));
    assert_eq!(reply.status, 201, "{}", reply.describe());

    // The rotation survives a restart: the controller does not bring the old token back.
    c.restart();
    assert_eq!(c.join_token(), new);
    refused(
        &c,
        &join(&c, &old, &name, "node-secret"),
        401,
        "Unauthorized",
    );
    issued(&c, &join(&c, &new, &name, "node-secret"));
    // A new client: the old one's connection ended with the controller it was made to.
    let node = c.api_with(Credentials::ClientCert(joined.identity()));
    let reply = node.get(&path);
    assert_eq!(reply.status, 200, "{}", reply.describe());
}
