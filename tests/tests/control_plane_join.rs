//! Issue 9, node identity: with the join token alone nobody gets a certificate for a node name
//! another agent registered (403 without that node's own secret, until an administrator runs
//! `berth-controller node forget`); names that are not node names are 422; only the addresses
//! the SAN rule allows are signed (403 otherwise); a burst of refused attempts is answered 429
//! with `Retry-After`; every attempt is in the audit log.

use berth_tests::host::unique_suffix;
use berth_tests::join::{Attempt, refused, request, token_secret};
use berth_tests::{Controller, secs};

/// A fresh node name for this test.
fn node_name(prefix: &str) -> String {
    format!("{prefix}-{}", unique_suffix())
}

fn join(c: &Controller, name: &str, secret: Option<&str>, addresses: &[&str]) -> Attempt {
    request(
        &c.anonymous_api(),
        &token_secret(&c.join_token()),
        name,
        secret,
        addresses,
    )
}

/// A join from 127.0.0.1 that must be accepted (200).
#[track_caller]
fn joined(c: &Controller, name: &str, secret: &str) -> Attempt {
    let a = join(c, name, Some(secret), &["127.0.0.1"]);
    assert_eq!(a.reply.status, 200, "{}", a.reply.describe());
    a
}

#[test]
fn a_registered_name_needs_its_own_secret_until_an_administrator_forgets_it() {
    let c = Controller::start();
    let name = node_name("owned");
    joined(&c, &name, "secret-one");

    // The join token is not enough for a registered name: another secret, or none, is 403.
    for other in [Some("secret-two"), None, Some("")] {
        let a = join(&c, &name, other, &["127.0.0.1"]);
        let message = refused(&c, &a, 403, "Forbidden");
        assert!(
            message.contains(&format!("node \"{name}\" is registered to another agent")),
            "{message}"
        );
        assert!(a.reply.json().get("certificate").is_none());
    }
    // The owner rejoins (an agent restart, a renewal) as often as it likes.
    for _ in 0..2 {
        joined(&c, &name, "secret-one");
    }
    // Without the join token's secret nothing else matters.
    let no_token = request(&c.anonymous_api(), "wrong", &name, Some("secret-one"), &[]);
    refused(&c, &no_token, 401, "Unauthorized");

    // A first join without a secret registers nothing.
    let unnamed = node_name("secretless");
    let a = join(&c, &unnamed, None, &["127.0.0.1"]);
    refused(&c, &a, 400, "BadRequest");

    // An administrator forgets the name: the next agent registers its own secret.
    let r = c.subcommand(&["node", "forget", &name]);
    assert!(r.success(), "{}", r.describe());
    assert!(r.stdout.contains("forgotten"), "{}", r.describe());
    joined(&c, &name, "secret-two");
    let old_owner = join(&c, &name, Some("secret-one"), &["127.0.0.1"]);
    refused(&c, &old_owner, 403, "Forbidden");
    let bad = c.subcommand(&["node", "forget", "-bad"]);
    assert!(!bad.success(), "{}", bad.describe());

    // The registration survives a restart of the controller.
    let mut c = c;
    c.restart();
    let after = join(&c, &name, Some("secret-one"), &["127.0.0.1"]);
    refused(&c, &after, 403, "Forbidden");
    joined(&c, &name, "secret-two");
}

#[test]
fn names_that_are_not_node_names_are_refused_with_422() {
    let c = Controller::start();
    for bad in ["-bad", "bad-", "Bad_Name", "a/b", "..", ""] {
        let a = join(&c, bad, Some("s"), &["127.0.0.1"]);
        let message = refused(&c, &a, 422, "Invalid");
        assert!(
            message.starts_with(&format!("Node \"{bad}\" is invalid: metadata.name: ")),
            "{message}"
        );
    }
    let a = join(&c, "-bad", Some("s"), &["127.0.0.1"]);
    let message = refused(&c, &a, 422, "Invalid");
    assert!(
        message.contains("a lowercase RFC 1123 subdomain must consist of"),
        "{message}"
    );
}

#[test]
fn only_addresses_the_node_demonstrably_has_are_signed() {
    let c = Controller::start();
    let name = node_name("sans");
    // From 127.0.0.1: not an address of this host, so not the node's either.
    let a = join(&c, &name, Some("s1"), &["127.0.0.1", "192.0.2.10"]);
    let message = refused(&c, &a, 403, "Forbidden");
    assert!(message.contains("192.0.2.10"), "{message}");
    let many: Vec<String> = (1..=17).map(|i| format!("127.0.0.{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    refused(&c, &join(&c, &name, Some("s1"), &many), 403, "Forbidden");
    refused(
        &c,
        &join(&c, &name, Some("s1"), &["not-an-ip"]),
        400,
        "BadRequest",
    );

    // Refused requests registered nothing: another secret still gets the name, with exactly
    // the node's name and the address it asked for as SANs.
    let ok = join(&c, &name, Some("s2"), &["127.0.0.1"]);
    assert_eq!(ok.sans(), vec![name.clone(), "127.0.0.1".to_string()]);

    // An administrator vouches for a range: addresses in it are signed for any node.
    let c = Controller::start_with(&["--node-address-range", "192.0.2.0/24"]);
    let ok = join(&c, &name, Some("s1"), &["192.0.2.10"]);
    assert_eq!(ok.sans(), vec![name.clone(), "192.0.2.10".to_string()]);
    let outside = join(&c, &name, Some("s1"), &["198.51.100.1"]);
    refused(&c, &outside, 403, "Forbidden");
}

#[test]
fn a_burst_of_refused_joins_is_answered_429_and_every_attempt_is_audited() {
    let c = Controller::start();
    let name = node_name("burst");
    joined(&c, &name, "right");
    for i in 0..10 {
        let a = join(&c, &name, Some(&format!("guess-{i}")), &["127.0.0.1"]);
        refused(&c, &a, 403, "Forbidden");
    }
    let blocked = join(&c, &name, Some("guess-10"), &["127.0.0.1"]);
    let message = refused(&c, &blocked, 429, "TooManyRequests");
    assert!(
        message.contains("too many failed join attempts"),
        "{message}"
    );
    let retry = blocked
        .reply
        .retry_after
        .unwrap_or_else(|| panic!("no Retry-After (in seconds): {}", blocked.reply.describe()));
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    // While blocked, even the right secret waits: guessing gains nothing.
    let right = join(&c, &name, Some("right"), &["127.0.0.1"]);
    refused(&c, &right, 429, "TooManyRequests");
    // The rest of the API is not affected.
    assert_eq!(c.admin_api().get("/api/v1/namespaces").status, 200);

    // Each attempt is in the audit log with the name, the source and the outcome.
    let stderr = c.stderr_log();
    c.wait_for(secs(10), "the audit log lines", || {
        let log = std::fs::read_to_string(&stderr).map_err(|e| e.to_string())?;
        let audit: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("berth::audit::join") && l.contains(&name))
            .collect();
        let count = |outcome: &str| audit.iter().filter(|l| l.contains(outcome)).count();
        let counts = (count("issued"), count("refused"), count("rate-limited"));
        let from_loopback = audit.iter().all(|l| l.contains("127.0.0.1"));
        if counts == (1, 10, 2) && from_loopback {
            Ok(())
        } else {
            Err(format!(
                "issued/refused/rate-limited {counts:?}, all from 127.0.0.1: {from_loopback}\n{}",
                audit.join("\n")
            ))
        }
    });
}
