//! A test bed of several hosts on this one machine: each host is a network namespace with an
//! address of its own, on segment A (a bridge in the root namespace, which holds A.1 and so
//! reaches every host, as a controller's machine would) or on segment B (a bridge inside a
//! router namespace, one routed hop from A). An agent runs in a host's namespace as if on a
//! machine of its own; cutting a host's link makes a partition.
//!
//! ```text
//!  root netns: tb<run> A.1/24 ── bv<run>a ── host a (eth0 A.10)     route B/24 via A.254
//!                         ├──── bv<run>b ── host b (eth0 A.11)
//!                         └──── bv<run>-r ── router (eth0 A.254; tb<run>b B.1/24)
//!                                                          └── bv<run>d ── host d (eth0 B.13)
//! ```
//!
//! Host `i` has address `.10+i` on its segment. Hosts on A route B through the router; hosts on
//! B and the router route everything else to A.1. Every name carries the run's suffix. Build
//! inside [`crate::host::tenancy::critical`] (a cluster does): that is what keeps two clusters
//! starting at once from picking the same free segments.

mod build;
mod leftovers;
pub mod segments;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

pub use build::MAX_HOSTS;
pub use leftovers::Leftovers;
pub use segments::Subnet;

use crate::host::{TOOL_DEADLINE, require_tool, tool_ok};
use crate::process::{Run, run};
use crate::sweep::NETNS_DIR;

/// Which segment a host is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    /// The bridge in the root netns, where the controller and the registry listen (A.1).
    A,
    /// The bridge inside the router netns: one routed hop from A.
    B,
}

/// Which hosts to build, in order: host `i` carries agent `i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestBedLayout {
    pub hosts: Vec<Segment>,
}

impl TestBedLayout {
    /// `on_a` hosts on segment A, then `on_b` on segment B.
    pub fn new(on_a: usize, on_b: usize) -> TestBedLayout {
        let mut hosts = vec![Segment::A; on_a];
        hosts.extend(vec![Segment::B; on_b]);
        TestBedLayout { hosts }
    }

    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

/// One host of the bed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Its netns (`bh<run><letter>`).
    pub netns: String,
    pub segment: Segment,
    /// Its `eth0` address (`.10+i` on its segment).
    pub address: Ipv4Addr,
    /// The other end of its `eth0`, a port of its segment's bridge (in the root netns on A, in
    /// the router's on B): the link [`TestBed::cut_off`] takes down.
    pub port: String,
}

impl Host {
    /// `/var/run/netns/<netns>`, for `nsenter --net=`.
    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from(NETNS_DIR).join(&self.netns)
    }
}

/// A built test bed; torn down on drop.
pub struct TestBed {
    segment_a: Subnet,
    segment_b: Subnet,
    /// Segment A's bridge (root netns).
    bridge: String,
    /// The router's netns.
    router: String,
    /// The router's port on segment A's bridge.
    router_port: String,
    hosts: Vec<Host>,
    forward_rule: Option<Vec<String>>,
    torn_down: bool,
}

impl TestBed {
    /// The hosts, in order (host `i` carries agent `i` in a cluster).
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    pub fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }

    /// A.1: the root netns's address on segment A, where the controller and registry of a
    /// cluster on the bed listen, and the default gateway of hosts on A and of the router.
    pub fn gateway(&self) -> Ipv4Addr {
        self.segment_a.host(1)
    }

    /// The router's address on a segment (A.254, B.1).
    pub fn router_address(&self, segment: Segment) -> Ipv4Addr {
        match segment {
            Segment::A => self.segment_a.host(254),
            Segment::B => self.segment_b.host(1),
        }
    }

    /// A segment's `/24`.
    pub fn subnet(&self, segment: Segment) -> Subnet {
        match segment {
            Segment::A => self.segment_a,
            Segment::B => self.segment_b,
        }
    }

    /// Takes host `i`'s link down at the bridge: the host keeps its address and routes but
    /// reaches nothing, and nothing reaches it, until [`TestBed::reconnect`].
    pub fn cut_off(&self, i: usize) {
        self.set_port(i, "down");
    }

    /// Brings host `i`'s link back up.
    pub fn reconnect(&self, i: usize) {
        self.set_port(i, "up");
    }

    fn set_port(&self, i: usize, state: &str) {
        let h = &self.hosts[i];
        match h.segment {
            Segment::A => ip(&["link", "set", &h.port, state]),
            Segment::B => ip(&["-n", &self.router, "link", "set", &h.port, state]),
        }
    }

    /// Runs `args` inside host `i`'s netns (`nsenter --net=…`, keeping this process's mount
    /// namespace), whatever the outcome.
    pub fn host_exec(&self, i: usize, args: &[&str]) -> Run {
        self.exec_in(&self.hosts[i].netns_path(), args)
    }

    /// [`TestBed::host_exec`] that must succeed; returns stdout.
    pub fn host_exec_ok(&self, i: usize, args: &[&str]) -> String {
        let r = self.host_exec(i, args);
        if !r.success() {
            panic!("in host {}:\n{}", self.hosts[i].netns, r.describe());
        }
        r.stdout
    }

    fn exec_in(&self, netns: &std::path::Path, args: &[&str]) -> Run {
        let mut cmd = Command::new(require_tool("nsenter"));
        cmd.arg(format!("--net={}", netns.display())).args(args);
        run(cmd, None, TOOL_DEADLINE)
    }

    fn router_path(&self) -> PathBuf {
        PathBuf::from(NETNS_DIR).join(&self.router)
    }

    /// Segment B's bridge, inside the router netns.
    fn bridge_b(&self) -> String {
        format!("{}b", self.bridge)
    }

    /// `B/24 via A.254`, as `ip route` arguments.
    fn route_to_b(&self) -> [String; 3] {
        [
            self.segment_b.to_string(),
            "via".to_string(),
            self.router_address(Segment::A).to_string(),
        ]
    }

    /// What the bed put on the machine, for removal (now or from a crash record).
    pub fn leftovers(&self) -> Leftovers {
        let mut links: Vec<String> = self
            .hosts
            .iter()
            .filter(|h| h.segment == Segment::A)
            .map(|h| h.port.clone())
            .collect();
        links.extend([self.router_port.clone(), self.bridge.clone()]);
        let mut netns: Vec<String> = self.hosts.iter().map(|h| h.netns.clone()).collect();
        netns.push(self.router.clone());
        Leftovers {
            routes: vec![self.route_to_b().to_vec()],
            links,
            netns,
            forward_rule: self.forward_rule.clone(),
        }
    }

    /// Removes the bed (once); returns one line per thing removed. Kill what runs in its hosts
    /// first: a process keeps a deleted netns alive.
    pub fn tear_down(&mut self) -> Vec<String> {
        if std::mem::replace(&mut self.torn_down, true) {
            return Vec::new();
        }
        self.leftovers().remove()
    }
}

impl Drop for TestBed {
    fn drop(&mut self) {
        self.tear_down();
    }
}

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    tool_ok("ip", args);
}
