//! The planner's table tests: upstream's classic NetworkPolicy scenarios, each judged by
//! walking the computed chains for a packet as the kernel would (a small interpreter of the
//! rules this planner writes), plus the shape of the chains themselves.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::*;
use crate::network::Ipv4Cidr;

const NODE: &str = "n1";
const NET: &str = "berth-n1";

fn scope() -> PolicyScope<'static> {
    PolicyScope {
        network: NET,
        node: NODE,
    }
}

/// A running pod: `ns/name` at `ip` on `node`, with labels and named container ports
/// (`name=port/PROTO`).
fn pod(ns_name: &str, node: &str, ip: &str, labels: Value, ports: &[(&str, i32, &str)]) -> Pod {
    let (ns, name) = ns_name.split_once('/').unwrap();
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p, proto)| json!({"name": n, "containerPort": p, "protocol": proto}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{ns}-{name}"), "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "main", "ports": ports}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
    }))
    .unwrap()
}

fn namespace(name: &str, labels: Value) -> Namespace {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

fn policy(ns_name: &str, spec: Value) -> NetworkPolicy {
    let (ns, name) = ns_name.split_once('/').unwrap();
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
        .unwrap()
}

/// The generation the tests plan under.
const GEN: Generation = Generation(7);

/// One packet of a new connection (or, with `reply`, a reply of an established one; with
/// `judged`, a packet of an established connection last judged under that generation).
#[derive(Debug, Clone, Copy)]
struct Packet {
    src: &'static str,
    dst: &'static str,
    proto: &'static str,
    port: u16,
    reply: bool,
    judged: Option<Generation>,
}

fn new(src: &'static str, dst: &'static str, proto: &'static str, port: u16) -> Packet {
    Packet {
        src,
        dst,
        proto,
        port,
        reply: false,
        judged: None,
    }
}

fn word_after<'a>(words: &'a [&'a str], flag: &str) -> Option<&'a str> {
    words.windows(2).find(|w| w[0] == flag).map(|w| w[1])
}

fn in_cidr(ip: &str, cidr: &str) -> bool {
    let c: Ipv4Cidr = cidr.parse().unwrap();
    c.contains(ip.parse::<Ipv4Addr>().unwrap())
}

/// Whether one rule's matches hold for the packet (only what the planner writes).
fn rule_matches(rs: &Ruleset, words: &[&str], p: &Packet) -> bool {
    match word_after(words, "--ctstate") {
        // Only ICMP errors are related; the tests send none.
        Some("RELATED") => return false,
        Some(_) if !p.reply => return false,
        _ => {}
    }
    if let Some(mark) = word_after(words, "--mark") {
        let (value, mask) = mark.split_once('/').unwrap();
        let value = u32::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
        assert_eq!(mask, format!("0x{JUDGED_MASK:x}"));
        let connmark = p.judged.map_or(0, |g| u32::from(g.0) << 16);
        if connmark != value {
            return false;
        }
    }
    if let Some(s) = word_after(words, "-s")
        && !in_cidr(p.src, s)
    {
        return false;
    }
    if let Some(d) = word_after(words, "-d")
        && !in_cidr(p.dst, d)
    {
        return false;
    }
    if let Some(set) = word_after(words, "--match-set") {
        let ip = match word_after(words, set) {
            Some("src") => p.src,
            Some("dst") => p.dst,
            other => panic!("set direction {other:?}"),
        };
        let members = rs.sets.get(set).unwrap_or_else(|| panic!("no set {set}"));
        if !members.contains(&ip.parse::<Ipv4Addr>().unwrap()) {
            return false;
        }
    }
    if let Some(proto) = word_after(words, "-p")
        && proto != p.proto
    {
        return false;
    }
    if let Some(range) = word_after(words, "--dport") {
        let (a, b) = range.split_once(':').unwrap_or((range, range));
        let (a, b): (u16, u16) = (a.parse().unwrap(), b.parse().unwrap());
        if p.port < a || p.port > b {
            return false;
        }
    }
    true
}

/// The verdict of `chain` for the packet: `true` returned (or ran off the end), `false`
/// rejected.
fn walk(rs: &Ruleset, chain: &str, p: &Packet) -> bool {
    for rule in &rs.chains[chain] {
        // Comments hold spaces: drop them before splitting.
        let plain: String = rule
            .split('"')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect();
        let words: Vec<&str> = plain.split_whitespace().collect();
        if !rule_matches(rs, &words, p) {
            continue;
        }
        match word_after(&words, "-j") {
            Some("RETURN") => return true,
            Some("REJECT") => return false,
            Some("CONNMARK") => {}
            Some(target) if !walk(rs, target, p) => return false,
            Some(_) | None => {}
        }
    }
    true
}

/// Whether FORWARD lets the packet through the policy chains.
fn passes(rs: &Ruleset, p: Packet) -> bool {
    walk(rs, &Chains::of(NET).top, &p)
}

/// Server `web` (on this node, port 80 named `http`, 5353/UDP named `dns`) in `prod`; clients
/// elsewhere: `prod/client` (role=client), `prod/other`, `dev/client` (role=client);
/// namespace `dev` labelled team=dev, `prod` team=prod.
fn world() -> (Vec<Pod>, Vec<Namespace>) {
    let pods = vec![
        pod(
            "prod/web",
            NODE,
            "10.42.1.10",
            json!({"app": "web"}),
            &[("http", 80, "TCP"), ("dns", 5353, "UDP")],
        ),
        pod(
            "prod/client",
            "n2",
            "10.42.2.20",
            json!({"role": "client"}),
            &[],
        ),
        pod(
            "prod/other",
            "n2",
            "10.42.2.21",
            json!({"role": "other"}),
            &[],
        ),
        pod(
            "dev/client",
            "n3",
            "10.42.3.30",
            json!({"role": "client"}),
            &[],
        ),
    ];
    let namespaces = vec![
        namespace("prod", json!({"team": "prod"})),
        namespace("dev", json!({"team": "dev"})),
    ];
    (pods, namespaces)
}

const WEB: &str = "10.42.1.10";
const PROD_CLIENT: &str = "10.42.2.20";
const PROD_OTHER: &str = "10.42.2.21";
const DEV_CLIENT: &str = "10.42.3.30";
const OUTSIDE: &str = "192.168.7.7";

#[test]
fn the_classic_scenarios_allow_and_refuse_as_upstream_does() {
    struct Case {
        name: &'static str,
        policies: Vec<Value>,
        /// (packet, passes)
        expect: Vec<(Packet, bool)>,
    }
    let deny_all = json!({"podSelector": {}, "policyTypes": ["Ingress"]});
    let cases = vec![
        Case {
            name: "no policy: everything flows",
            policies: vec![],
            expect: vec![
                (new(DEV_CLIENT, WEB, "tcp", 80), true),
                (new(WEB, OUTSIDE, "udp", 53), true),
            ],
        },
        Case {
            name: "default deny ingress",
            policies: vec![deny_all.clone()],
            expect: vec![
                (new(PROD_CLIENT, WEB, "tcp", 80), false),
                (new(DEV_CLIENT, WEB, "udp", 5353), false),
                (new(OUTSIDE, WEB, "tcp", 80), false),
                // Egress is not isolated by an Ingress-only policy.
                (new(WEB, OUTSIDE, "tcp", 443), true),
            ],
        },
        Case {
            name: "replies of allowed connections pass even under deny-all both ways",
            policies: vec![json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})],
            expect: vec![
                (new(WEB, PROD_CLIENT, "tcp", 40000), false),
                (
                    Packet {
                        reply: true,
                        ..new(WEB, PROD_CLIENT, "tcp", 40000)
                    },
                    true,
                ),
                (
                    Packet {
                        reply: true,
                        ..new(DEV_CLIENT, WEB, "udp", 5353)
                    },
                    true,
                ),
            ],
        },
        Case {
            name: "allow from pods with a label (same namespace only)",
            policies: vec![
                deny_all.clone(),
                json!({"podSelector": {"matchLabels": {"app": "web"}},
                       "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}]}),
            ],
            expect: vec![
                (new(PROD_CLIENT, WEB, "tcp", 80), true),
                (new(PROD_CLIENT, WEB, "udp", 5353), true),
                (new(PROD_OTHER, WEB, "tcp", 80), false),
                (new(DEV_CLIENT, WEB, "tcp", 80), false),
            ],
        },
        Case {
            name: "allow from a namespace by label",
            policies: vec![json!({"podSelector": {},
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "dev"}}}]}]})],
            expect: vec![
                (new(DEV_CLIENT, WEB, "tcp", 80), true),
                (new(PROD_CLIENT, WEB, "tcp", 80), false),
            ],
        },
        Case {
            name: "a namespace by its name label",
            policies: vec![json!({"podSelector": {},
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prod"}}}]}]})],
            expect: vec![
                (new(PROD_OTHER, WEB, "tcp", 80), true),
                (new(DEV_CLIENT, WEB, "tcp", 80), false),
            ],
        },
        Case {
            name: "podSelector AND namespaceSelector in one peer",
            policies: vec![json!({"podSelector": {},
                "ingress": [{"from": [{"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["dev", "prod"]}]},
                                       "podSelector": {"matchLabels": {"role": "client"}}}]}]})],
            expect: vec![
                (new(DEV_CLIENT, WEB, "tcp", 80), true),
                (new(PROD_CLIENT, WEB, "tcp", 80), true),
                (new(PROD_OTHER, WEB, "tcp", 80), false),
            ],
        },
        Case {
            name: "podSelector OR namespaceSelector as two peers",
            policies: vec![json!({"podSelector": {},
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "dev"}}},
                                      {"podSelector": {"matchLabels": {"role": "other"}}}]}]})],
            expect: vec![
                (new(DEV_CLIENT, WEB, "tcp", 80), true),
                (new(PROD_OTHER, WEB, "tcp", 80), true),
                (new(PROD_CLIENT, WEB, "tcp", 80), false),
            ],
        },
        Case {
            name: "ipBlock with except",
            policies: vec![json!({"podSelector": {},
                "ingress": [{"from": [{"ipBlock": {"cidr": "10.42.0.0/16", "except": ["10.42.2.0/24"]}}]}]})],
            expect: vec![
                (new(DEV_CLIENT, WEB, "tcp", 80), true),
                (new(PROD_CLIENT, WEB, "tcp", 80), false),
                (new(OUTSIDE, WEB, "tcp", 80), false),
            ],
        },
        Case {
            name: "a port by number and protocol",
            policies: vec![json!({"podSelector": {},
                "ingress": [{"ports": [{"port": 80, "protocol": "TCP"}]}]})],
            expect: vec![
                (new(DEV_CLIENT, WEB, "tcp", 80), true),
                (new(DEV_CLIENT, WEB, "udp", 80), false),
                (new(DEV_CLIENT, WEB, "tcp", 81), false),
            ],
        },
        Case {
            name: "named ports resolve in the destination pod, per protocol",
            policies: vec![json!({"podSelector": {},
                "ingress": [{"ports": [{"port": "http"}, {"port": "dns", "protocol": "UDP"}]}]})],
            expect: vec![
                (new(DEV_CLIENT, WEB, "tcp", 80), true),
                (new(DEV_CLIENT, WEB, "udp", 5353), true),
                (new(DEV_CLIENT, WEB, "tcp", 5353), false),
                (new(DEV_CLIENT, WEB, "tcp", 8080), false),
            ],
        },
        Case {
            name: "an endPort range",
            policies: vec![json!({"podSelector": {},
                "ingress": [{"ports": [{"port": 8000, "endPort": 8010, "protocol": "UDP"}]}]})],
            expect: vec![
                (new(DEV_CLIENT, WEB, "udp", 8000), true),
                (new(DEV_CLIENT, WEB, "udp", 8010), true),
                (new(DEV_CLIENT, WEB, "udp", 8011), false),
                (new(DEV_CLIENT, WEB, "tcp", 8005), false),
            ],
        },
        Case {
            name: "a protocol without a port",
            policies: vec![json!({"podSelector": {},
                "ingress": [{"ports": [{"protocol": "SCTP"}]}]})],
            expect: vec![
                (new(DEV_CLIENT, WEB, "sctp", 9), true),
                (new(DEV_CLIENT, WEB, "tcp", 9), false),
            ],
        },
        Case {
            name: "default deny egress with DNS allowed",
            policies: vec![json!({"podSelector": {}, "policyTypes": ["Egress"],
                "egress": [{"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}]})],
            expect: vec![
                (new(WEB, OUTSIDE, "udp", 53), true),
                (new(WEB, DEV_CLIENT, "tcp", 53), true),
                (new(WEB, DEV_CLIENT, "tcp", 80), false),
                (new(WEB, OUTSIDE, "tcp", 443), false),
                // Ingress is not isolated by an Egress-only policy.
                (new(DEV_CLIENT, WEB, "tcp", 80), true),
            ],
        },
        Case {
            name: "egress to pods by label and a named port of theirs",
            policies: vec![json!({"podSelector": {}, "policyTypes": ["Egress"],
                "egress": [{"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "web"}}}],
                            "ports": [{"port": "http"}]}]})],
            expect: vec![
                (new(WEB, WEB, "tcp", 80), true),
                (new(WEB, DEV_CLIENT, "tcp", 80), false),
            ],
        },
        Case {
            name: "policies add up: either one allowing is enough",
            policies: vec![
                json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}]}),
                json!({"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [{"from": [{"ipBlock": {"cidr": "192.168.0.0/16"}}]}]}),
            ],
            expect: vec![
                (new(PROD_CLIENT, WEB, "tcp", 80), true),
                (new(OUTSIDE, WEB, "tcp", 80), true),
                (new(PROD_OTHER, WEB, "tcp", 80), false),
            ],
        },
        Case {
            name: "a policy of another namespace or for other pods does not isolate",
            policies: vec![
                json!({"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"]}),
            ],
            expect: vec![(new(DEV_CLIENT, WEB, "tcp", 80), true)],
        },
    ];
    let (pods, namespaces) = world();
    for case in cases {
        let policies: Vec<NetworkPolicy> = case
            .policies
            .into_iter()
            .enumerate()
            .map(|(i, spec)| policy(&format!("prod/p{i}"), spec))
            .collect();
        let rs = ruleset(&scope(), &pods, &namespaces, &policies, GEN);
        for (packet, want) in case.expect {
            assert_eq!(
                passes(&rs, packet),
                want,
                "{}: {packet:?}\n{:#?}",
                case.name,
                rs.chains
            );
        }
    }
}

#[test]
fn a_label_change_moves_a_pod_in_and_out_of_a_policy() {
    let (mut pods, namespaces) = world();
    let policies = vec![policy(
        "prod/allow-clients",
        json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}]}),
    )];
    let before = ruleset(&scope(), &pods, &namespaces, &policies, GEN);
    assert!(!passes(&before, new(PROD_OTHER, WEB, "tcp", 80)));
    pods[2] = pod(
        "prod/other",
        "n2",
        PROD_OTHER,
        json!({"role": "client"}),
        &[],
    );
    let after = ruleset(&scope(), &pods, &namespaces, &policies, GEN);
    assert!(passes(&after, new(PROD_OTHER, WEB, "tcp", 80)));
    // Only the server's ingress chain changed.
    let changes = after.changes_from(&before).unwrap();
    let written: Vec<&str> = changes.lines().filter(|l| l.starts_with(':')).collect();
    assert_eq!(written.len(), 1, "{changes}");
    assert!(written[0].starts_with(":BERTH-NPI-"), "{changes}");
    assert!(after.changes_from(&after).is_none());
    // The server itself losing the label it was selected by: no longer isolated.
    let policies = vec![policy(
        "prod/deny-web",
        json!({"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]}),
    )];
    assert!(!passes(
        &ruleset(&scope(), &pods, &namespaces, &policies, GEN),
        new(DEV_CLIENT, WEB, "tcp", 80)
    ));
    pods[0] = pod("prod/web", NODE, WEB, json!({"app": "web2"}), &[]);
    assert!(passes(
        &ruleset(&scope(), &pods, &namespaces, &policies, GEN),
        new(DEV_CLIENT, WEB, "tcp", 80)
    ));
}

#[test]
fn a_namespace_label_change_moves_its_pods_in_and_out() {
    let (pods, mut namespaces) = world();
    let policies = vec![policy(
        "prod/from-dev",
        json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "dev"}}}]}]}),
    )];
    assert!(passes(
        &ruleset(&scope(), &pods, &namespaces, &policies, GEN),
        new(DEV_CLIENT, WEB, "tcp", 80)
    ));
    namespaces[1] = namespace("dev", json!({"team": "qa"}));
    assert!(!passes(
        &ruleset(&scope(), &pods, &namespaces, &policies, GEN),
        new(DEV_CLIENT, WEB, "tcp", 80)
    ));
}

#[test]
fn only_this_nodes_pod_network_pods_get_chains() {
    let (mut pods, namespaces) = world();
    let mut host = pod("prod/host", NODE, "172.31.0.5", json!({}), &[]);
    host.spec.as_mut().unwrap().host_network = Some(true);
    pods.push(host);
    let mut done = pod("prod/done", NODE, "10.42.1.11", json!({}), &[]);
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    pods.push(done);
    let policies = vec![policy(
        "prod/deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
    )];
    let rs = ruleset(&scope(), &pods, &namespaces, &policies, GEN);
    let c = Chains::of(NET);
    let top = &rs.chains[&c.top];
    // Related packets, replies and connections judged under these rules first, then web's
    // egress and ingress jumps (nothing for the host-network pod, the finished one, or pods of
    // other nodes), then the mark of what passed.
    assert_eq!(top.len(), 6, "{top:#?}");
    assert!(top[0].contains("--ctstate RELATED "));
    assert!(top[1].contains("--ctstate ESTABLISHED --ctdir REPLY "));
    assert!(top[2].contains("-m connmark --mark 0x70000/0xffff0000 "));
    assert!(top[3].contains(&format!("-s {WEB}/32")) && top[3].contains("-j BERTH-NPE-"));
    assert!(top[4].contains(&format!("-d {WEB}/32")) && top[4].contains("-j BERTH-NPI-"));
    assert!(top[5].ends_with("-j CONNMARK --set-xmark 0x70000/0xffff0000"));
    // Every chain is ours by name; the deny chains reject and are tagged for the sweep.
    assert!(rs.chains.keys().all(|k| is_policy_chain(NET, k)), "{rs:#?}");
    assert!(!is_policy_chain("berth-n2", &c.top));
    assert!(rs.chains.keys().all(|k| k.len() <= 28));
    assert_eq!(
        rs.chains[&c.deny_ingress],
        vec![format!(
            "-A {} -m comment --comment \"berth:{NET} ingress refused by network policy\" -j REJECT --reject-with icmp-port-unreachable",
            c.deny_ingress
        )]
    );
}

#[test]
fn without_policies_the_ruleset_is_the_reply_rule_and_the_deny_chains() {
    let (pods, namespaces) = world();
    let rs = ruleset(&scope(), &pods, &namespaces, &[], GEN);
    assert_eq!(rs.chains.len(), 3);
    assert_eq!(rs.rule_count(), 6);
}

#[test]
fn an_established_connection_is_judged_again_once_the_rules_change() {
    let (pods, namespaces) = world();
    let allow_clients = policy(
        "prod/clients",
        json!({"podSelector": {"matchLabels": {"app": "web"}},
               "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}]}),
    );
    let deny_all = policy(
        "prod/deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    );
    let before = ruleset(&scope(), &pods, &namespaces, &[allow_clients], GEN);
    let flow = new(PROD_CLIENT, WEB, "tcp", 80);
    assert!(passes(&before, flow), "the connection opens");
    // Its later packets take the judged rule without entering web's chain.
    let judged = Packet {
        judged: Some(GEN),
        ..flow
    };
    assert!(passes(&before, judged));

    // The policy tightens: the next write is a new generation, and the same established
    // connection, marked under the old one, is judged again and refused.
    let next = GEN.next();
    let after = ruleset(&scope(), &pods, &namespaces, &[deny_all], next);
    assert!(
        !passes(&after, judged),
        "an established flow now refused stops"
    );
    // Replies are never judged: refusing the original direction stops the flow.
    let reply = Packet {
        reply: true,
        ..new(WEB, PROD_CLIENT, "tcp", 40000)
    };
    assert!(passes(&after, reply));
    // A connection still allowed after a change is judged again, and passes.
    let (_, namespaces) = world();
    let allow_all = policy("prod/all", json!({"podSelector": {}, "ingress": [{}]}));
    let open = ruleset(&scope(), &pods, &namespaces, &[allow_all], next);
    assert!(passes(&open, judged));
}

#[test]
fn generations_skip_zero_and_a_new_one_rewrites_only_the_generation_rules() {
    assert_eq!(Generation(65_535).next(), Generation(1));
    assert_eq!(Generation(1).next(), Generation(2));
    assert_ne!(Generation::first(65_534), Generation(0));
    assert_ne!(Generation::first(u64::MAX), Generation(0));
    let (pods, namespaces) = world();
    let policies = vec![policy(
        "prod/deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    )];
    let a = ruleset(&scope(), &pods, &namespaces, &policies, GEN);
    let b = ruleset(&scope(), &pods, &namespaces, &policies, GEN.next());
    assert_ne!(a, b);
    assert_eq!(a.clone().with_generation(NET, GEN.next()), b);
    let top = Chains::of(NET).top;
    let changed: Vec<&String> = a
        .chains
        .keys()
        .filter(|c| a.chains[*c] != b.chains[*c])
        .collect();
    assert_eq!(changed, [&top]);
}

#[test]
fn the_restore_input_deletes_our_stale_chains_only() {
    let (pods, namespaces) = world();
    let rs = ruleset(&scope(), &pods, &namespaces, &[], GEN);
    let c = Chains::of(NET);
    let stale = format!("BERTH-NPI-{}", &c.top["BERTH-NP-".len()..]) + "0123abcd";
    let theirs = "BERTH-NPI-ffffffff0123abcd".to_string();
    let input = rs.restore_input(&[stale.clone(), theirs.clone(), "FORWARD".into()], NET);
    assert!(input.starts_with("*filter\n"));
    assert!(input.contains(&format!("-X {stale}\n")), "{input}");
    assert!(!input.contains(&theirs), "{input}");
    assert!(input.ends_with("COMMIT\n"));
}

#[test]
fn a_rule_names_its_peer_pods_as_one_set_per_port() {
    // A rule naming n peer pods and m ports is m lines in the chain of each pod it protects,
    // each one set lookup, not n·m address rules.
    let mut pods = vec![pod("prod/web", NODE, WEB, json!({"app": "web"}), &[])];
    for i in 0..100 {
        pods.push(pod(
            &format!("prod/c{i}"),
            "n2",
            &format!("10.42.2.{}", i + 1),
            json!({"role": "client"}),
            &[],
        ));
    }
    let policies = vec![policy(
        "prod/clients",
        json!({"podSelector": {"matchLabels": {"app": "web"}},
               "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}],
                            "ports": [{"port": 80}, {"port": 443}]}]}),
    )];
    let rs = ruleset(&scope(), &pods, &[], &policies, GEN);
    let chain = first_pod_ingress_chain(&rs);
    assert_eq!(rs.chains[chain].len(), 2 + 1);
    assert_eq!(rs.sets.len(), 1);
    let (name, members) = rs.sets.iter().next().unwrap();
    assert_eq!(members.len(), 100);
    assert!(sets::is_policy_set(NET, name), "{name}");
    assert!(rs.chains[chain][0].contains(&format!("-m set --match-set {name} src ")));
    assert!(passes(&rs, new("10.42.2.57", WEB, "tcp", 443)));
    assert!(!passes(&rs, new("10.42.3.57", WEB, "tcp", 443)));
}

#[test]
fn policies_naming_the_same_pods_share_a_set_and_a_change_of_members_is_a_new_set() {
    let (pods, namespaces) = world();
    let allow = |name: &str, port: u16| {
        policy(
            &format!("prod/{name}"),
            json!({"podSelector": {"matchLabels": {"app": "web"}},
                   "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}],
                                "ports": [{"port": port}]}]}),
        )
    };
    let both = [allow("a", 80), allow("b", 8080)];
    let rs = ruleset(&scope(), &pods, &namespaces, &both, GEN);
    assert_eq!(rs.sets.len(), 1, "{:?}", rs.sets);
    let before = rs.sets.keys().next().unwrap().clone();

    // prod/other takes the label: the rule's peers are another set, under another name.
    let mut relabelled = pods.clone();
    for p in &mut relabelled {
        if p.metadata.name.as_deref() == Some("other") {
            p.metadata
                .labels
                .get_or_insert_default()
                .insert("role".into(), "client".into());
        }
    }
    let after = ruleset(&scope(), &relabelled, &namespaces, &both, GEN);
    assert_eq!(after.sets.len(), 1);
    assert!(!after.sets.contains_key(&before));
    let input = sets::create_input(&after.sets, Some(&rs.sets)).unwrap();
    assert!(input.starts_with("create BERTH-NP-"), "{input}");
    let stale = sets::stale(NET, &after.sets, rs.sets.keys());
    assert_eq!(stale, std::slice::from_ref(&before));
    // Without policies, no set is left named.
    let none = ruleset(&scope(), &pods, &namespaces, &[], GEN);
    assert!(none.sets.is_empty());
    assert_eq!(sets::stale(NET, &none.sets, rs.sets.keys()), [before]);
}

#[test]
fn a_chain_joins_the_peer_pods_of_all_its_policies_in_one_set_per_port() {
    // However many policies protect a pod, a new connection takes one lookup per port match:
    // the chain's set for it holds the peers of every policy.
    let mut pods = vec![pod("prod/web", NODE, WEB, json!({"app": "web"}), &[])];
    let mut policies = Vec::new();
    for i in 0..10 {
        pods.push(pod(
            &format!("prod/c{i}"),
            "n2",
            &format!("10.42.2.{}", i + 1),
            json!({"group": format!("g{i}")}),
            &[],
        ));
        policies.push(policy(
            &format!("prod/p{i}"),
            json!({"podSelector": {"matchLabels": {"app": "web"}},
                   "ingress": [{"from": [{"podSelector": {"matchLabels": {"group": format!("g{i}")}}}],
                                "ports": [{"port": 80}]}]}),
        ));
    }
    let rs = ruleset(&scope(), &pods, &[], &policies, GEN);
    let chain = first_pod_ingress_chain(&rs);
    assert_eq!(rs.chains[chain].len(), 1 + 1, "{:?}", rs.chains[chain]);
    assert_eq!(
        rs.sets.values().map(BTreeSet::len).collect::<Vec<_>>(),
        [10]
    );
    assert!(passes(&rs, new("10.42.2.10", WEB, "tcp", 80)));
    assert!(!passes(&rs, new("10.42.2.10", WEB, "tcp", 81)));
}

#[test]
fn an_egress_named_port_gets_a_set_per_port_number_and_blocks_stay_rules() {
    let pods = vec![
        pod(
            "prod/client",
            NODE,
            "10.42.1.9",
            json!({"app": "client"}),
            &[],
        ),
        pod(
            "prod/a",
            "n2",
            "10.42.2.1",
            json!({"app": "srv"}),
            &[("http", 80, "TCP")],
        ),
        pod(
            "prod/b",
            "n2",
            "10.42.2.2",
            json!({"app": "srv"}),
            &[("http", 8080, "TCP")],
        ),
        pod(
            "prod/c",
            "n2",
            "10.42.2.3",
            json!({"app": "srv"}),
            &[("http", 80, "TCP")],
        ),
    ];
    let policies = vec![policy(
        "prod/out",
        json!({"podSelector": {"matchLabels": {"app": "client"}}, "policyTypes": ["Egress"],
               "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "srv"}}},
                                  {"ipBlock": {"cidr": "192.168.0.0/16"}}],
                           "ports": [{"port": "http"}]}]}),
    )];
    let rs = ruleset(&scope(), &pods, &[], &policies, GEN);
    let sizes: Vec<usize> = rs.sets.values().map(BTreeSet::len).collect();
    assert_eq!(rs.sets.len(), 2, "{:?}", rs.sets);
    assert!(sizes.contains(&2) && sizes.contains(&1));
    assert!(passes(&rs, new("10.42.1.9", "10.42.2.1", "tcp", 80)));
    assert!(passes(&rs, new("10.42.1.9", "10.42.2.2", "tcp", 8080)));
    assert!(!passes(&rs, new("10.42.1.9", "10.42.2.2", "tcp", 80)));
    assert!(!passes(&rs, new("10.42.1.9", "10.42.2.3", "tcp", 8080)));
    let chain = rs
        .chains
        .keys()
        .find(|k| k.starts_with(POD_EGRESS))
        .unwrap();
    assert!(
        rs.chains[chain]
            .iter()
            .all(|r| r.contains("--match-set") || !r.contains("10.42.2.")),
        "{:?}",
        rs.chains[chain]
    );
}

/// The name of the ruleset's first pod ingress chain (the tests above make one).
fn first_pod_ingress_chain(rs: &Ruleset) -> &str {
    rs.chains
        .keys()
        .find(|k| k.starts_with(POD_INGRESS))
        .expect("a pod ingress chain")
}
