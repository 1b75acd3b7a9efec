//! What a test bed put on the machine outside its own namespaces, listed so that it can be
//! removed by the bed itself or, from a cluster's record, by the next cluster after the test
//! process was killed outright. Removal is best effort: it reports what it could not undo on
//! stderr and never panics (it runs from `Drop`).

use serde::{Deserialize, Serialize};

use crate::host::tool;
use crate::sweep::{self, delete_link, note_step};

/// Everything of a test bed that must go when it goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leftovers {
    /// Root-netns routes as `ip route` arguments (`172.31.8.0/24 via 172.31.7.254`).
    pub routes: Vec<Vec<String>>,
    /// Root-netns links, ports before the bridge they are attached to.
    pub links: Vec<String>,
    /// The host and router netns (deleting one deletes the links and bridges inside it).
    pub netns: Vec<String>,
    /// The root-netns `iptables -t filter` FORWARD rule letting bridged traffic through, as
    /// its specification, when the bed added one.
    pub forward_rule: Option<Vec<String>>,
}

impl Leftovers {
    /// Removes whatever of it is still there; returns one line per thing removed.
    pub fn remove(&self) -> Vec<String> {
        let mut removed = Vec::new();
        for route in &self.routes {
            let args: Vec<&str> = route.iter().map(String::as_str).collect();
            let shown = tool("ip", &[&["-4", "route", "show"][..], &args].concat());
            if shown.success() && !shown.stdout.trim().is_empty() {
                note_step(
                    tool("ip", &[&["route", "delete"][..], &args].concat()),
                    Some(format!("route {}", route.join(" "))),
                    "cannot delete a test bed route",
                    &mut removed,
                );
            }
        }
        // A veth goes with its peer, but only once the kernel gets round to destroying a
        // deleted netns: deleting the root ends first leaves nothing for a reader to see.
        for link in &self.links {
            if delete_link(link) {
                removed.push(format!("link {link}"));
            }
        }
        for ns in &self.netns {
            if sweep::netns_with_prefix(ns).contains(ns) {
                note_step(
                    tool("ip", &["netns", "delete", ns]),
                    Some(format!("netns {ns}")),
                    &format!("cannot delete netns {ns}"),
                    &mut removed,
                );
            }
        }
        if let Some(spec) = &self.forward_rule {
            let spec: Vec<&str> = spec.iter().map(String::as_str).collect();
            let check = [&["-w", "5", "-t", "filter", "-C", "FORWARD"][..], &spec].concat();
            if tool("iptables", &check).success() {
                let delete = [&["-w", "5", "-t", "filter", "-D", "FORWARD"][..], &spec].concat();
                note_step(
                    tool("iptables", &delete),
                    None,
                    "cannot delete the test bed's FORWARD rule",
                    &mut removed,
                );
            }
        }
        removed
    }
}
