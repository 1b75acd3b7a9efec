//! This agent's iptables rules: forwarding for its bridge, no masquerade inside the cluster,
//! and a sweep for CNI rules a plugin DEL left behind.

use super::NetworkError;
use super::command::{self, tool};
use super::config::Ipv4Cidr;

/// One rule: table, built-in chain, match + target arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub table: &'static str,
    pub chain: &'static str,
    pub spec: Vec<String>,
}

impl Rule {
    /// A jump from a built-in chain into one of an agent's chains, tagged
    /// `berth:<network> <what>`.
    pub(crate) fn jump(
        table: &'static str,
        chain: &'static str,
        network: &str,
        what: &str,
        target: &str,
    ) -> Rule {
        let comment = format!("berth:{network} {what}");
        Rule {
            table,
            chain,
            spec: ["-m", "comment", "--comment", &comment, "-j", target]
                .map(str::to_string)
                .to_vec(),
        }
    }
}

/// One agent's host rules, tagged `berth:<network>` so they can be found again: two chains of
/// its own, written whole in one `iptables-restore --noflush` (which replaces a chain's rules
/// in one go, however many there are), and one jump into each from a built-in chain.
///
/// * `filter BERTH-FWD-<h>` accepts traffic into and out of the bridge, in case the host's
///   FORWARD policy drops (Docker sets DROP; `br_netfilter` sends bridged traffic through
///   FORWARD too).
/// * `nat BERTH-MASQ-<h>` masquerades pod traffic leaving the cluster CIDR: one node-level
///   rule (pod → pod traffic keeps its source address, so a pod on another node sees the real
///   peer), where the bridge plugin's `ipMasq` made a chain per pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostRules {
    pub forward_chain: String,
    pub masquerade_chain: String,
    /// The `iptables-restore --noflush` input.
    pub restore: String,
    /// FORWARD → the forward chain, POSTROUTING → the masquerade chain.
    pub jumps: Vec<Rule>,
}

/// The chain-name suffix of a network: ten hex digits of its SHA-256 (chain names are at most
/// 28 bytes; network names are longer).
fn chain_suffix(network: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(network.as_bytes());
    digest.iter().take(5).map(|b| format!("{b:02x}")).collect()
}

fn quoted(comment: &str) -> String {
    format!("\"{}\"", comment.replace(['"', '\\'], ""))
}

pub(crate) fn host_rules(
    network: &str,
    bridge: &str,
    pod_cidr: Ipv4Cidr,
    cluster: Ipv4Cidr,
) -> HostRules {
    let suffix = chain_suffix(network);
    let forward_chain = format!("BERTH-FWD-{suffix}");
    let masquerade_chain = format!("BERTH-MASQ-{suffix}");
    let comment = |what: &str| quoted(&format!("berth:{network} {what}"));
    let restore = [
        "*filter".to_string(),
        format!(":{forward_chain} - [0:0]"),
        format!(
            "-A {forward_chain} -i {bridge} -m comment --comment {} -j ACCEPT",
            comment("forward from bridge")
        ),
        format!(
            "-A {forward_chain} -o {bridge} -m comment --comment {} -j ACCEPT",
            comment("forward to bridge")
        ),
        "COMMIT".to_string(),
        "*nat".to_string(),
        format!(":{masquerade_chain} - [0:0]"),
        format!(
            "-A {masquerade_chain} -s {pod_cidr} -d {cluster} -m comment --comment {} -j RETURN",
            comment("no masquerade inside the cluster")
        ),
        format!(
            "-A {masquerade_chain} -s {pod_cidr} ! -d 224.0.0.0/4 -m comment --comment {} -j MASQUERADE",
            comment("masquerade leaving the cluster")
        ),
        "COMMIT".to_string(),
        String::new(),
    ]
    .join("\n");
    let jumps = vec![
        Rule::jump("filter", "FORWARD", network, "forward", &forward_chain),
        Rule::jump(
            "nat",
            "POSTROUTING",
            network,
            "masquerade",
            &masquerade_chain,
        ),
    ];
    HostRules {
        forward_chain,
        masquerade_chain,
        restore,
        jumps,
    }
}

/// The host rules of earlier agent versions (rules straight in the built-in chains), which
/// an upgraded agent removes.
pub(crate) fn legacy_host_rules(
    network: &str,
    bridge: &str,
    pod_cidr: Ipv4Cidr,
    cluster: Ipv4Cidr,
) -> Vec<Rule> {
    let comment = |what: &str| format!("berth:{network} {what}");
    let spec = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect();
    vec![
        Rule {
            table: "filter",
            chain: "FORWARD",
            spec: spec(&[
                "-i",
                bridge,
                "-m",
                "comment",
                "--comment",
                &comment("forward from bridge"),
                "-j",
                "ACCEPT",
            ]),
        },
        Rule {
            table: "filter",
            chain: "FORWARD",
            spec: spec(&[
                "-o",
                bridge,
                "-m",
                "comment",
                "--comment",
                &comment("forward to bridge"),
                "-j",
                "ACCEPT",
            ]),
        },
        Rule {
            table: "nat",
            chain: "POSTROUTING",
            spec: spec(&[
                "-s",
                &pod_cidr.to_string(),
                "-d",
                &cluster.to_string(),
                "-m",
                "comment",
                "--comment",
                &comment("no masquerade inside the cluster"),
                "-j",
                "RETURN",
            ]),
        },
    ]
}

/// Writes the host chains in one `iptables-restore --noflush`, then makes sure the jumps
/// into them exist.
pub(crate) async fn ensure_host(rules: &HostRules) -> Result<(), NetworkError> {
    restore(&rules.restore).await?;
    for jump in &rules.jumps {
        ensure(jump).await?;
    }
    Ok(())
}

/// `iptables-restore -w 5 --noflush` of `input`: the chains it declares are replaced whole, in
/// one transaction; everything else stays.
pub(crate) async fn restore(input: &str) -> Result<(), NetworkError> {
    let out = command::run(
        std::path::Path::new("iptables-restore"),
        &["-w", "5", "--noflush"],
        &[],
        Some(input.as_bytes()),
        command::TOOL_DEADLINE,
    )
    .await?;
    if out.success {
        Ok(())
    } else {
        Err(NetworkError::Command {
            command: "iptables-restore -w 5 --noflush".into(),
            status: out.status,
            stderr: out.stderr,
        })
    }
}

/// Removes the jumps and the host chains (absent ones are fine).
pub(crate) async fn remove_host(rules: &HostRules) -> Result<(), NetworkError> {
    for jump in &rules.jumps {
        remove(jump).await?;
    }
    for (table, chain) in [
        ("filter", &rules.forward_chain),
        ("nat", &rules.masquerade_chain),
    ] {
        for op in ["-F", "-X"] {
            let _ = iptables(&["-w", "5", "-t", table, op, chain]).await?;
        }
    }
    Ok(())
}

const IPTABLES: &str = "iptables";

/// Runs `iptables` with `args`; whether it succeeded (a missing rule or chain is an answer, not
/// an error).
async fn iptables(args: &[&str]) -> Result<bool, NetworkError> {
    let path = std::path::Path::new(IPTABLES);
    let out = command::run(path, args, &[], None, command::TOOL_DEADLINE).await?;
    Ok(out.success)
}

fn args<'a>(table: &'a str, op: &'a str, chain: &'a str, spec: &'a [String]) -> Vec<&'a str> {
    let mut v = vec!["-w", "5", "-t", table, op, chain];
    v.extend(spec.iter().map(String::as_str));
    v
}

/// Inserts the rule at the top of its chain unless it is already there.
pub(crate) async fn ensure(rule: &Rule) -> Result<(), NetworkError> {
    let check = args(rule.table, "-C", rule.chain, &rule.spec);
    let present = iptables(&check).await?;
    if !present {
        let mut insert = args(rule.table, "-I", rule.chain, &[]);
        insert.push("1");
        insert.extend(rule.spec.iter().map(String::as_str));
        tool(IPTABLES, &insert).await?;
    }
    Ok(())
}

/// Deletes every copy of the rule; an absent rule is fine.
pub(crate) async fn remove(rule: &Rule) -> Result<(), NetworkError> {
    let del = args(rule.table, "-D", rule.chain, &rule.spec);
    // Bounded: each pass deletes one copy; a rule inserted twice (two racing ensures) goes too.
    for _ in 0..16 {
        if !iptables(&del).await? {
            break;
        }
    }
    Ok(())
}

/// Which CNI rules a sweep removes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Owner<'a> {
    /// Rules of one pod (CNI container id) in this network.
    Pod(&'a str),
    /// Every pod of this network.
    AllPods,
}

/// What must go: rules in chains that stay (`-D`), then per-pod chains (`-F`, `-X`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Sweep {
    pub rules: Vec<(String, Vec<String>)>,
    pub chains: Vec<String>,
}

/// Plans the removal of CNI rules owned by `network` (and `owner`) from `iptables -t nat -S`.
///
/// The bridge plugin's masquerade rules and portmap's DNAT rules carry the comment
/// `name: "<network>" id: "<container id>"`; the chains they live in or jump to (`CNI-<hash>`,
/// `CNI-DN-<hash>`) are per pod, except portmap's shared `CNI-HOSTPORT-*` chains, which stay.
pub(crate) fn plan_sweep(listing: &str, network: &str, owner: Owner<'_>) -> Sweep {
    let tag = match owner {
        Owner::Pod(id) => format!("name: \"{network}\" id: \"{id}\""),
        Owner::AllPods => format!("name: \"{network}\" id: \""),
    };
    let per_pod = |chain: &str| chain.starts_with("CNI-") && !chain.starts_with("CNI-HOSTPORT-");
    let mut sweep = Sweep::default();
    let mut rules = Vec::new();
    for line in listing.lines() {
        let words = split_words(line);
        let [verb, chain, spec @ ..] = words.as_slice() else {
            continue;
        };
        if verb != "-A" || !comment_of(spec).is_some_and(|c| c.contains(&tag)) {
            continue;
        }
        if per_pod(chain) && !sweep.chains.contains(chain) {
            sweep.chains.push(chain.clone());
        }
        if let Some(target) = target_of(spec).filter(|t| per_pod(t))
            && !sweep.chains.iter().any(|c| c == target)
        {
            sweep.chains.push(target.to_string());
        }
        rules.push((chain.clone(), spec.to_vec()));
    }
    // Rules inside chains that are flushed anyway need no separate delete.
    sweep.rules = rules
        .into_iter()
        .filter(|(chain, _)| !sweep.chains.contains(chain))
        .collect();
    sweep
}

fn comment_of(spec: &[String]) -> Option<&str> {
    spec.windows(2)
        .find(|w| w[0] == "--comment")
        .map(|w| w[1].as_str())
}

fn target_of(spec: &[String]) -> Option<&str> {
    spec.windows(2)
        .find(|w| w[0] == "-j" || w[0] == "-g")
        .map(|w| w[1].as_str())
}

/// Splits an `iptables -S` line into arguments: words, or double-quoted strings in which a
/// backslash escapes the next character (`"name: \"n\" id: \"c\""` → `name: "n" id: "c"`).
pub(crate) fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else {
            return words;
        };
        let mut word = String::new();
        if first == '"' {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => word.extend(chars.next()),
                    '"' => break,
                    c => word.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                word.push(c);
            }
        }
        words.push(word);
    }
}

/// Lists the nat table (`iptables -S` form).
pub(crate) async fn nat_listing() -> Result<String, NetworkError> {
    let out = tool(IPTABLES, &["-w", "5", "-t", "nat", "-S"]).await?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The bridge plugin's per-pod masquerade (its `ipMasq`, which earlier versions turned on) in
/// `network`: the POSTROUTING jumps and the `CNI-<hash>` chains they lead to. portmap's rules
/// are left alone (their pods still forward ports).
pub(crate) fn plan_legacy_masquerade(listing: &str, network: &str) -> Sweep {
    let all = plan_sweep(listing, network, Owner::AllPods);
    let rules: Vec<(String, Vec<String>)> = all
        .rules
        .into_iter()
        .filter(|(chain, _)| chain == "POSTROUTING")
        .collect();
    let chains = rules
        .iter()
        .filter_map(|(_, spec)| target_of(spec))
        .filter(|t| t.starts_with("CNI-") && !t.starts_with("CNI-DN-"))
        .map(str::to_string)
        .collect();
    Sweep { rules, chains }
}

/// Removes what [`plan_legacy_masquerade`] finds; returns how many rules and chains went.
pub(crate) async fn sweep_legacy_masquerade(network: &str) -> Result<usize, NetworkError> {
    apply(&plan_legacy_masquerade(&nat_listing().await?, network)).await
}

/// portmap's shared chains (`CNI-HOSTPORT-DNAT`, `-SETMARK`, `-MASQ`) and the jumps to them,
/// once no pod on the host forwards a port any more (`CNI-HOSTPORT-DNAT` is empty).
pub(crate) fn plan_idle_portmap(listing: &str) -> Sweep {
    let mut sweep = Sweep::default();
    let mut busy = false;
    for line in listing.lines() {
        let words = split_words(line);
        match words.as_slice() {
            [verb, chain] if verb == "-N" && chain.starts_with("CNI-HOSTPORT-") => {
                sweep.chains.push(chain.clone());
            }
            [verb, chain, ..] if verb == "-A" && chain == "CNI-HOSTPORT-DNAT" => busy = true,
            [verb, chain, spec @ ..]
                if verb == "-A"
                    && !chain.starts_with("CNI-HOSTPORT-")
                    && target_of(spec).is_some_and(|t| t.starts_with("CNI-HOSTPORT-")) =>
            {
                sweep.rules.push((chain.clone(), spec.to_vec()));
            }
            _ => {}
        }
    }
    if busy { Sweep::default() } else { sweep }
}

/// Removes portmap's shared chains when no pod uses them any more (see [`plan_idle_portmap`]).
pub(crate) async fn remove_idle_portmap() -> Result<usize, NetworkError> {
    apply(&plan_idle_portmap(&nat_listing().await?)).await
}

/// Removes the CNI rules and chains of `owner` in `network` that are still in the nat table.
pub(crate) async fn sweep(network: &str, owner: Owner<'_>) -> Result<usize, NetworkError> {
    apply(&plan_sweep(&nat_listing().await?, network, owner)).await
}

async fn apply(plan: &Sweep) -> Result<usize, NetworkError> {
    let count = plan.rules.len() + plan.chains.len();
    for (chain, spec) in &plan.rules {
        let del = args("nat", "-D", chain, spec);
        // Another DEL may have won the race; a missing rule is fine.
        let _ = iptables(&del).await?;
    }
    // Flush every chain before deleting any: one per-pod chain may jump to another.
    for op in ["-F", "-X"] {
        for chain in &plan.chains {
            let _ = iptables(&["-w", "5", "-t", "nat", op, chain]).await?;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = r#"-P PREROUTING ACCEPT
-P POSTROUTING ACCEPT
-N CNI-3df33d081738ff882912a4e1
-N CNI-aaaaaaaaaaaaaaaaaaaaaaaa
-N CNI-HOSTPORT-DNAT
-N CNI-DN-0123456789abcdef01234
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -s 10.244.1.0/24 -d 10.244.0.0/16 -m comment --comment "berth:net-a no masquerade inside the cluster" -j RETURN
-A POSTROUTING -s 10.244.1.2/32 -m comment --comment "name: \"net-a\" id: \"pod-1\"" -j CNI-3df33d081738ff882912a4e1
-A POSTROUTING -s 10.244.2.2/32 -m comment --comment "name: \"net-b\" id: \"pod-1\"" -j CNI-aaaaaaaaaaaaaaaaaaaaaaaa
-A CNI-3df33d081738ff882912a4e1 -d 10.244.1.0/24 -m comment --comment "name: \"net-a\" id: \"pod-1\"" -j ACCEPT
-A CNI-3df33d081738ff882912a4e1 ! -d 224.0.0.0/4 -m comment --comment "name: \"net-a\" id: \"pod-1\"" -j MASQUERADE
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"net-a\" id: \"pod-1\"" -m multiport --dports 8080 -j CNI-DN-0123456789abcdef01234
-A CNI-DN-0123456789abcdef01234 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.244.1.2:80
"#;

    fn words(s: &str) -> Vec<String> {
        split_words(s)
    }

    #[test]
    fn words_respect_quotes_and_escapes() {
        assert_eq!(
            words(r#"-A POSTROUTING -m comment --comment "name: \"n\" id: \"c\"" -j X"#),
            vec![
                "-A",
                "POSTROUTING",
                "-m",
                "comment",
                "--comment",
                r#"name: "n" id: "c""#,
                "-j",
                "X"
            ]
        );
        assert_eq!(words("  a  b "), vec!["a", "b"]);
        assert_eq!(words(r#""a\\b""#), vec![r"a\b"]);
        assert!(words("").is_empty());
    }

    #[test]
    fn a_pod_sweep_takes_its_masquerade_and_dnat_chains_and_their_jumps() {
        let sweep = plan_sweep(LISTING, "net-a", Owner::Pod("pod-1"));
        assert_eq!(
            sweep.chains,
            vec![
                "CNI-3df33d081738ff882912a4e1",
                "CNI-DN-0123456789abcdef01234"
            ]
        );
        let rule_chains: Vec<&str> = sweep.rules.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(rule_chains, vec!["POSTROUTING", "CNI-HOSTPORT-DNAT"]);
        // The spec is exactly what `-D POSTROUTING` needs.
        assert_eq!(
            sweep.rules[0].1,
            words(
                r#"-s 10.244.1.2/32 -m comment --comment "name: \"net-a\" id: \"pod-1\"" -j CNI-3df33d081738ff882912a4e1"#
            )
        );
    }

    #[test]
    fn a_sweep_leaves_other_networks_other_pods_and_shared_chains_alone() {
        let none = plan_sweep(LISTING, "net-a", Owner::Pod("pod-2"));
        assert_eq!(none, Sweep::default());
        let b = plan_sweep(LISTING, "net-b", Owner::AllPods);
        assert_eq!(b.chains, vec!["CNI-aaaaaaaaaaaaaaaaaaaaaaaa"]);
        assert_eq!(b.rules.len(), 1);
        // "net" is a prefix of "net-a" but not the same network.
        assert_eq!(plan_sweep(LISTING, "net", Owner::AllPods), Sweep::default());
        let all_a = plan_sweep(LISTING, "net-a", Owner::AllPods);
        assert!(!all_a.chains.iter().any(|c| c.starts_with("CNI-HOSTPORT")));
    }

    #[test]
    fn portmap_chains_go_only_when_no_pod_forwards_a_port() {
        assert!(
            plan_idle_portmap(LISTING).chains.is_empty(),
            "DNAT chain still has a rule"
        );
        let idle = r#"-P PREROUTING ACCEPT
-N CNI-HOSTPORT-DNAT
-N CNI-HOSTPORT-MASQ
-N CNI-HOSTPORT-SETMARK
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
-A POSTROUTING -s 10.244.1.2/32 -j CNI-abc
-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE
-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
"#;
        let sweep = plan_idle_portmap(idle);
        assert_eq!(
            sweep.chains,
            vec![
                "CNI-HOSTPORT-DNAT",
                "CNI-HOSTPORT-MASQ",
                "CNI-HOSTPORT-SETMARK"
            ]
        );
        let chains: Vec<&str> = sweep.rules.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(chains, vec!["PREROUTING", "OUTPUT", "POSTROUTING"]);
        assert_eq!(
            plan_idle_portmap("-P PREROUTING ACCEPT\n"),
            Sweep::default()
        );
    }

    #[test]
    fn host_rules_are_two_chains_of_the_network_written_in_one_restore() {
        let rules = host_rules(
            "net-a",
            "br-a",
            "10.244.1.0/24".parse().unwrap(),
            "10.244.0.0/16".parse().unwrap(),
        );
        let h = chain_suffix("net-a");
        assert_eq!(h.len(), 10);
        assert_eq!(rules.forward_chain, format!("BERTH-FWD-{h}"));
        assert_eq!(rules.masquerade_chain, format!("BERTH-MASQ-{h}"));
        assert!(rules.masquerade_chain.len() <= 28);
        let expected = format!(
            r#"*filter
:BERTH-FWD-{h} - [0:0]
-A BERTH-FWD-{h} -i br-a -m comment --comment "berth:net-a forward from bridge" -j ACCEPT
-A BERTH-FWD-{h} -o br-a -m comment --comment "berth:net-a forward to bridge" -j ACCEPT
COMMIT
*nat
:BERTH-MASQ-{h} - [0:0]
-A BERTH-MASQ-{h} -s 10.244.1.0/24 -d 10.244.0.0/16 -m comment --comment "berth:net-a no masquerade inside the cluster" -j RETURN
-A BERTH-MASQ-{h} -s 10.244.1.0/24 ! -d 224.0.0.0/4 -m comment --comment "berth:net-a masquerade leaving the cluster" -j MASQUERADE
COMMIT
"#
        );
        assert_eq!(rules.restore, expected);
        let jumps: Vec<String> = rules
            .jumps
            .iter()
            .map(|r| format!("{} {} {}", r.table, r.chain, r.spec.join(" ")))
            .collect();
        assert_eq!(
            jumps,
            vec![
                format!("filter FORWARD -m comment --comment berth:net-a forward -j BERTH-FWD-{h}"),
                format!(
                    "nat POSTROUTING -m comment --comment berth:net-a masquerade -j BERTH-MASQ-{h}"
                ),
            ]
        );
        assert_ne!(chain_suffix("net-b"), h);
    }

    #[test]
    fn legacy_masquerade_sweep_takes_the_per_pod_chains_and_leaves_portmap() {
        let sweep = plan_legacy_masquerade(LISTING, "net-a");
        assert_eq!(sweep.chains, vec!["CNI-3df33d081738ff882912a4e1"]);
        assert_eq!(sweep.rules.len(), 1);
        assert_eq!(sweep.rules[0].0, "POSTROUTING");
        assert_eq!(plan_legacy_masquerade(LISTING, "net-c"), Sweep::default());
    }
}
