//! Removes the iptables rules and chains a cluster's agents left behind: rules tagged with one of
//! their CNI network names (the bridge plugin's `name: "<net>" id: "<pod>"` comments and the
//! agent's own `berth:<net> …` comments) and the per-pod `CNI-…` chains those rules jump to
//! ([`sweep_networks`]); and portmap's shared `CNI-HOSTPORT-…` chains, when they appeared since
//! the first cluster came and are idle now, only by the last cluster out ([`sweep_shared`],
//! see `host::tenancy`). Rules of other networks (another cluster running beside this one) are
//! never touched.

use std::collections::{BTreeMap, BTreeSet};

use crate::host::tool;

/// The tables the agent and the CNI plugins write to.
pub const TABLES: [&str; 3] = ["filter", "nat", "mangle"];

/// One `-A` line of `iptables-save`: its chain, its 1-based position in that chain, the words.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    chain: String,
    number: usize,
    words: Vec<String>,
    line: String,
}

impl Rule {
    /// The chain this rule jumps or goes to, if any.
    fn target(&self) -> Option<&str> {
        self.words
            .windows(2)
            .find(|w| w[0] == "-j" || w[0] == "-g")
            .map(|w| w[1].as_str())
    }
}

/// One table as `iptables-save -t TABLE` prints it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub chains: BTreeSet<String>,
    rules: Vec<Rule>,
}

impl Table {
    /// A table known only by its chain names (what a cluster's record keeps of the host).
    pub fn with_chains(chains: BTreeSet<String>) -> Table {
        Table {
            chains,
            rules: Vec::new(),
        }
    }
}

/// Splits an `iptables-save` line into words: whitespace separates, double quotes group, and a
/// backslash escapes the next character inside quotes (`"name: \"n\" id: \"c\""`).
pub fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            '\\' if quoted => {
                if let Some(next) = chars.next() {
                    cur.push(next);
                }
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// Parses the output of `iptables-save -t TABLE`.
pub fn parse(save: &str) -> Table {
    let mut table = Table::default();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for line in save.lines() {
        if let Some(decl) = line.strip_prefix(':') {
            if let Some(name) = decl.split_whitespace().next() {
                table.chains.insert(name.to_string());
            }
            continue;
        }
        let w = words(line);
        let [verb, chain, ..] = w.as_slice() else {
            continue;
        };
        if verb != "-A" {
            continue;
        }
        let n = counts.entry(chain.clone()).or_insert(0);
        *n += 1;
        table.rules.push(Rule {
            chain: chain.clone(),
            number: *n,
            words: w.clone(),
            line: line.to_string(),
        });
    }
    table
}

/// One rule to delete: its chain, its position when the table was read (for messages and
/// tests), and its specification, which is what the delete names: deleting by number would
/// hit another rule if someone inserted one meanwhile (agents insert at the top).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    pub chain: String,
    pub number: usize,
    pub spec: Vec<String>,
}

/// What to remove from one table, in order: rules (highest position first within a chain),
/// then chains (all flushed before any is deleted, since one may
/// jump to another).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub rules: Vec<Deletion>,
    pub chains: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.chains.is_empty()
    }
}

/// Whether a rule line carries the tag of network `net`.
fn tagged(line: &str, net: &str) -> bool {
    line.contains(&format!("\\\"{net}\\\""))
        || line.contains(&format!("berth:{net} "))
        || line.contains(&format!("berth:{net}\""))
}

fn is_hostport(chain: &str) -> bool {
    chain.starts_with("CNI-HOSTPORT-")
}

/// A chain a plugin or an agent makes for one pod or one network (not portmap's shared ones).
fn is_owned_chain(chain: &str) -> bool {
    (chain.starts_with("CNI-") && !is_hostport(chain)) || chain.starts_with("BERTH-")
}

/// Plans the sweep of `networks` from `now`; `before` is the same table when the cluster
/// started (chains present then are never deleted).
pub fn plan(now: &Table, before: &Table, networks: &[String]) -> Plan {
    let ours = |r: &Rule| networks.iter().any(|n| tagged(&r.line, n));
    // Per-pod chains: jumped to by one of our rules, or holding only our rules.
    let mut doomed: BTreeSet<String> = BTreeSet::new();
    for r in now.rules.iter().filter(|r| ours(r)) {
        if let Some(t) = r.target()
            && is_owned_chain(t)
            && now.chains.contains(t)
        {
            doomed.insert(t.to_string());
        }
    }
    for chain in &now.chains {
        let mut in_chain = now.rules.iter().filter(|r| &r.chain == chain).peekable();
        if is_owned_chain(chain) && in_chain.peek().is_some() && in_chain.all(&ours) {
            doomed.insert(chain.clone());
        }
    }
    let remove = |doomed: &BTreeSet<String>| -> Vec<&Rule> {
        now.rules
            .iter()
            .filter(|r| !doomed.contains(&r.chain))
            .filter(|r| ours(r) || r.target().is_some_and(|t| doomed.contains(t)))
            .collect()
    };
    // portmap's shared chains go when they are new and no pod's DNAT rule is left in them.
    let hostport_new: BTreeSet<String> = now
        .chains
        .iter()
        .filter(|c| is_hostport(c) && !before.chains.contains(*c))
        .cloned()
        .collect();
    if !hostport_new.is_empty() {
        let removed = remove(&doomed);
        let busy = now
            .rules
            .iter()
            .filter(|r| r.chain == "CNI-HOSTPORT-DNAT")
            .any(|r| !removed.contains(&r));
        if !busy {
            doomed.extend(hostport_new);
        }
    }
    let mut rules: Vec<Deletion> = remove(&doomed)
        .into_iter()
        .map(|r| Deletion {
            chain: r.chain.clone(),
            number: r.number,
            spec: r.words.iter().skip(2).cloned().collect(),
        })
        .collect();
    rules.sort_by(|a, b| a.chain.cmp(&b.chain).then(b.number.cmp(&a.number)));
    Plan {
        rules,
        chains: doomed.into_iter().collect(),
    }
}

/// `iptables-save -t TABLE`, parsed; an empty table if iptables cannot be read.
pub fn snapshot(table: &str) -> Table {
    let r = tool("iptables-save", &["-t", table]);
    if !r.success() {
        eprintln!("berth-tests: cannot read iptables:\n{}", r.describe());
        return Table::default();
    }
    parse(&r.stdout)
}

/// Snapshots of every table in [`TABLES`].
pub fn snapshot_all() -> BTreeMap<String, Table> {
    TABLES
        .iter()
        .map(|t| (t.to_string(), snapshot(t)))
        .collect()
}

/// What a cluster removes of its own from `now`: its networks' rules and chains, never a
/// shared one (every chain there now counts as existing before, so none is new).
pub fn plan_own(now: &Table, networks: &[String]) -> Plan {
    plan(now, &Table::with_chains(now.chains.clone()), networks)
}

/// What the last cluster out removes from `now`: portmap's shared chains not in `before`
/// (what the first cluster in found) and idle.
pub fn plan_shared(now: &Table, before: &BTreeSet<String>) -> Plan {
    plan(now, &Table::with_chains(before.clone()), &[])
}

/// Removes [`plan_own`] of `networks` from every table; returns what it removed, for messages.
pub fn sweep_networks(networks: &[String]) -> Vec<String> {
    sweep_with(|_, now| plan_own(now, networks))
}

/// Removes [`plan_shared`] from every table, `before` holding chain names per table.
pub fn sweep_shared(before: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let none = BTreeSet::new();
    sweep_with(|table, now| plan_shared(now, before.get(table).unwrap_or(&none)))
}

/// Removes what `plan_of` (given a table's name and its state now) plans in every table;
/// returns what it removed, for messages. Errors are printed, not raised (this runs during
/// cleanup, possibly while a test is failing).
fn sweep_with(plan_of: impl Fn(&str, &Table) -> Plan) -> Vec<String> {
    let mut done = Vec::new();
    for table in TABLES {
        let now = snapshot(table);
        let plan = plan_of(table, &now);
        for d in &plan.rules {
            let mut args = vec!["-w", "5", "-t", table, "-D", d.chain.as_str()];
            args.extend(d.spec.iter().map(String::as_str));
            report(tool("iptables", &args), &mut done);
        }
        if !plan.chains.is_empty() {
            // One restore for every chain (a service proxy leaves thousands): each declared
            // (which flushes it), then each deleted.
            let mut input = format!("*{table}\n");
            for chain in &plan.chains {
                input.push_str(&format!(":{chain} - [0:0]\n"));
            }
            for chain in &plan.chains {
                input.push_str(&format!("-X {chain}\n"));
            }
            input.push_str("COMMIT\n");
            let mut cmd = std::process::Command::new(crate::host::require_tool("iptables-restore"));
            cmd.args(["-w", "5", "--noflush"]);
            let r = crate::process::run(cmd, Some(input.as_bytes()), crate::host::TOOL_DEADLINE);
            if r.success() {
                done.extend(
                    plan.chains
                        .iter()
                        .map(|c| format!("iptables -t {table} -X {c}")),
                );
            } else {
                report(r, &mut done);
            }
        }
    }
    done
}

fn report(r: crate::process::Run, done: &mut Vec<String>) {
    super::note_step(r, None, "iptables cleanup step failed", done);
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n";

    const NOW: &str = r#"*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:CNI-1111 - [0:0]
:CNI-2222 - [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -s 10.200.1.0/24 -d 10.200.0.0/16 -m comment --comment "berth:berth-node-a no masquerade inside the cluster" -j RETURN
-A POSTROUTING -s 10.200.1.2/32 -m comment --comment "name: \"berth-node-a\" id: \"u1\"" -j CNI-1111
-A POSTROUTING -s 10.9.0.2/32 -m comment --comment "name: \"other-net\" id: \"u9\"" -j CNI-2222
-A CNI-1111 -d 10.200.1.0/24 -m comment --comment "name: \"berth-node-a\" id: \"u1\"" -j ACCEPT
-A CNI-1111 ! -d 224.0.0.0/4 -m comment --comment "name: \"berth-node-a\" id: \"u1\"" -j MASQUERADE
-A CNI-2222 ! -d 224.0.0.0/4 -m comment --comment "name: \"other-net\" id: \"u9\"" -j MASQUERADE
COMMIT
"#;

    fn nets(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn positions(plan: &Plan) -> Vec<(String, usize)> {
        plan.rules
            .iter()
            .map(|d| (d.chain.clone(), d.number))
            .collect()
    }

    #[test]
    fn words_keep_quoted_comments_whole() {
        assert_eq!(
            words(r#"-A X -m comment --comment "name: \"n\" id: \"c\"" -j Y"#),
            [
                "-A",
                "X",
                "-m",
                "comment",
                "--comment",
                r#"name: "n" id: "c""#,
                "-j",
                "Y"
            ]
        );
    }

    #[test]
    fn rules_are_numbered_per_chain() {
        let t = parse(NOW);
        let numbers: Vec<(&str, usize)> = t
            .rules
            .iter()
            .map(|r| (r.chain.as_str(), r.number))
            .collect();
        assert_eq!(
            numbers,
            [
                ("PREROUTING", 1),
                ("POSTROUTING", 1),
                ("POSTROUTING", 2),
                ("POSTROUTING", 3),
                ("CNI-1111", 1),
                ("CNI-1111", 2),
                ("CNI-2222", 1)
            ]
        );
        assert!(t.chains.contains("CNI-HOSTPORT-DNAT"));
    }

    #[test]
    fn a_sweep_takes_our_rules_and_chains_and_leaves_other_networks_alone() {
        let plan = plan(&parse(NOW), &parse(BEFORE), &nets(&["berth-node-a"]));
        // Highest position first within POSTROUTING; the other network's jump (3) stays; the
        // jump to the idle hostport chain goes with it.
        assert_eq!(
            positions(&plan),
            [
                ("POSTROUTING".to_string(), 2),
                ("POSTROUTING".to_string(), 1),
                ("PREROUTING".to_string(), 1),
            ]
        );
        // CNI-HOSTPORT-DNAT is new and idle: it goes too, with the jump to it.
        assert_eq!(plan.chains, ["CNI-1111", "CNI-HOSTPORT-DNAT"]);
    }

    #[test]
    fn the_idle_hostport_chain_takes_its_jump_rule_along() {
        let now = "*nat\n:PREROUTING ACCEPT [0:0]\n:CNI-HOSTPORT-DNAT - [0:0]\n\
                   -A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT\nCOMMIT\n";
        let plan = plan(&parse(now), &parse(BEFORE), &nets(&["berth-node-a"]));
        assert_eq!(positions(&plan), [("PREROUTING".to_string(), 1)]);
        assert_eq!(
            plan.rules[0].spec,
            [
                "-m",
                "addrtype",
                "--dst-type",
                "LOCAL",
                "-j",
                "CNI-HOSTPORT-DNAT"
            ]
        );
        assert_eq!(plan.chains, ["CNI-HOSTPORT-DNAT"]);
    }

    #[test]
    fn chains_that_existed_before_stay() {
        let plan = plan(&parse(NOW), &parse(NOW), &nets(&["berth-node-a"]));
        assert!(!plan.chains.contains(&"CNI-HOSTPORT-DNAT".to_string()));
    }

    #[test]
    fn a_busy_hostport_chain_stays() {
        let now = format!(
            "{}-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"other-net\\\" \
             id: \\\"u9\\\"\" -j CNI-DN-9\nCOMMIT\n",
            NOW.trim_end_matches("COMMIT\n")
        );
        let plan = plan(&parse(&now), &parse(BEFORE), &nets(&["berth-node-a"]));
        assert_eq!(plan.chains, ["CNI-1111"]);
    }

    #[test]
    fn a_clusters_own_sweep_leaves_the_shared_hostport_chains_to_the_last_one_out() {
        let now = parse(NOW);
        let own = plan_own(&now, &nets(&["berth-node-a"]));
        assert_eq!(own.chains, ["CNI-1111"]);
        assert_eq!(
            positions(&own),
            [
                ("POSTROUTING".to_string(), 2),
                ("POSTROUTING".to_string(), 1)
            ],
            "the jump to CNI-HOSTPORT-DNAT stays"
        );
        // The last one out, once the pods are gone: the chain is new since the first came.
        let after = "*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n\
                     :CNI-HOSTPORT-DNAT - [0:0]\n\
                     -A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT\nCOMMIT\n";
        let last = plan_shared(&parse(after), &parse(BEFORE).chains);
        assert_eq!(last.chains, ["CNI-HOSTPORT-DNAT"]);
        assert_eq!(positions(&last), [("PREROUTING".to_string(), 1)]);
        // It existed before the first cluster: it stays.
        assert!(plan_shared(&parse(after), &parse(after).chains).is_empty());
    }

    #[test]
    fn a_name_that_merely_starts_like_ours_is_not_ours() {
        let plan = plan(&parse(NOW), &parse(BEFORE), &nets(&["berth-node"]));
        assert!(
            !plan.rules.iter().any(|d| d.chain == "POSTROUTING"),
            "{plan:?}"
        );
        assert!(!plan.chains.contains(&"CNI-1111".to_string()));
    }
}
