//! Building a test bed: segment A's bridge in the root netns, the router with segment B's
//! bridge inside it, then each host's netns, veth, address and routes, all with `ip`. A failing
//! step panics; the half-built bed's Drop removes what exists.

use std::time::Instant;

use super::{Host, Segment, TestBed, TestBedLayout, ip, segments};
use crate::host::{require_tool, tool_ok};

/// At most this many hosts (one letter each).
pub const MAX_HOSTS: usize = 26;

/// Where br_netfilter says whether bridged IPv4 traffic goes through iptables.
const BRIDGE_NF_CALL_IPTABLES: &str = "/proc/sys/net/bridge/bridge-nf-call-iptables";

impl TestBed {
    /// Builds the bed for `layout`, naming everything after `suffix` (six hex digits from
    /// [`crate::host::unique_suffix`]); panics, having removed what it built, if a step fails.
    pub fn build(suffix: &str, layout: &TestBedLayout) -> TestBed {
        for t in ["ip", "iptables", "nsenter", "sysctl"] {
            require_tool(t);
        }
        if layout.len() > MAX_HOSTS {
            panic!(
                "a test bed has at most {MAX_HOSTS} hosts, not {}",
                layout.len()
            );
        }
        let routes = tool_ok("ip", &["-4", "route", "show", "table", "all"]);
        let start = u8::from_str_radix(&suffix[..2.min(suffix.len())], 16).unwrap_or(0);
        let (segment_a, segment_b) = segments::pick_segments(&routes, start)
            .unwrap_or_else(|| panic!("no two /24s of 172.31.0.0/16 are free of routes here"));
        let hosts = layout
            .hosts
            .iter()
            .enumerate()
            .map(|(i, &segment)| {
                let letter = char::from(b'a' + u8::try_from(i).unwrap_or(0));
                let subnet = if segment == Segment::A {
                    segment_a
                } else {
                    segment_b
                };
                Host {
                    netns: format!("bh{suffix}{letter}"),
                    segment,
                    address: subnet.host(10 + u8::try_from(i).unwrap_or(0)),
                    port: format!("bv{suffix}{letter}"),
                }
            })
            .collect();
        let mut bed = TestBed {
            segment_a,
            segment_b,
            bridge: format!("tb{suffix}"),
            router: format!("br{suffix}"),
            router_port: format!("bv{suffix}-r"),
            hosts,
            forward_rule: None,
            torn_down: false,
        };
        // A failing step panics; unwinding drops `bed`, which removes what exists so far.
        let started = Instant::now();
        bed.apply_segment_a(suffix);
        bed.apply_router();
        for i in 0..bed.hosts.len() {
            bed.apply_host(i);
        }
        if std::env::var_os("BERTH_TESTBED_VERBOSE").is_some() {
            eprintln!(
                "berth-tests: test bed {suffix} ({} hosts) built in {:.1?}",
                bed.hosts.len(),
                started.elapsed()
            );
        }
        bed
    }

    /// Segment A's bridge, its address A.1, and (when br_netfilter sends bridged traffic
    /// through iptables) a FORWARD rule that lets traffic between the bridge's ports through
    /// whatever the chain's policy is (Docker's is DROP).
    fn apply_segment_a(&mut self, suffix: &str) {
        let a1 = format!("{}/24", self.gateway());
        ip(&["link", "add", &self.bridge, "type", "bridge"]);
        ip(&["link", "set", &self.bridge, "up"]);
        ip(&["addr", "add", &a1, "dev", &self.bridge]);
        let bridged =
            std::fs::read_to_string(BRIDGE_NF_CALL_IPTABLES).is_ok_and(|v| v.trim() == "1");
        if bridged {
            let comment = format!("berth:berth-bed-{suffix} test bed: traffic between hosts");
            let spec: Vec<String> = [
                "-i",
                &self.bridge,
                "-o",
                &self.bridge,
                "-m",
                "comment",
                "--comment",
                &comment,
                "-j",
                "ACCEPT",
            ]
            .map(String::from)
            .to_vec();
            // Recorded before it exists: removal checks first, and a failed insert leaves
            // nothing to remove.
            self.forward_rule = Some(spec.clone());
            let mut args = vec!["-w", "5", "-t", "filter", "-I", "FORWARD", "1"];
            args.extend(spec.iter().map(String::as_str));
            tool_ok("iptables", &args);
        }
    }

    /// The router netns: `eth0` (A.254) on segment A, segment B's bridge (B.1), forwarding on,
    /// default route via A.1; and the root netns's route to B through it.
    fn apply_router(&self) {
        let r = self.router.as_str();
        let (a254, b1) = (
            format!("{}/24", self.router_address(Segment::A)),
            format!("{}/24", self.router_address(Segment::B)),
        );
        let bridge_b = self.bridge_b();
        ip(&["netns", "add", r]);
        ip(&["-n", r, "link", "set", "lo", "up"]);
        ip(&[
            "link",
            "add",
            &self.router_port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            r,
        ]);
        ip(&[
            "link",
            "set",
            &self.router_port,
            "master",
            &self.bridge,
            "up",
        ]);
        ip(&["-n", r, "addr", "add", &a254, "dev", "eth0"]);
        ip(&["-n", r, "link", "set", "eth0", "up"]);
        ip(&["-n", r, "link", "add", &bridge_b, "type", "bridge"]);
        ip(&["-n", r, "link", "set", &bridge_b, "up"]);
        ip(&["-n", r, "addr", "add", &b1, "dev", &bridge_b]);
        ip(&[
            "-n",
            r,
            "route",
            "add",
            "default",
            "via",
            &self.gateway().to_string(),
        ]);
        let forward = self.exec_in(
            &self.router_path(),
            &["sysctl", "-w", "net.ipv4.ip_forward=1"],
        );
        if !forward.success() {
            panic!(
                "cannot turn forwarding on in the router\n{}",
                forward.describe()
            );
        }
        let [dst, via, gw] = self.route_to_b();
        ip(&["route", "add", &dst, &via, &gw]);
    }

    /// Host `i`: its netns, a veth whose inside end is its `eth0` and whose outside end is a
    /// port of its segment's bridge, its address and routes.
    fn apply_host(&self, i: usize) {
        let h = &self.hosts[i];
        let ns = h.netns.as_str();
        let addr = format!("{}/24", h.address);
        ip(&["netns", "add", ns]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        // A new netns copies the root netns's `conf/all` values (devconf_inherit_init_net 0),
        // and a cluster running beside this one in the root netns holds route_localnet at 1
        // for its localhost NodePorts: a host of the bed starts as a fresh machine does.
        let fresh = self.exec_in(
            &h.netns_path(),
            &["sysctl", "-w", "net.ipv4.conf.all.route_localnet=0"],
        );
        if !fresh.success() {
            panic!("cannot reset route_localnet in {ns}\n{}", fresh.describe());
        }
        let veth = [
            "link", "add", &h.port, "type", "veth", "peer", "name", "eth0", "netns", ns,
        ];
        match h.segment {
            Segment::A => {
                ip(&veth);
                ip(&["link", "set", &h.port, "master", &self.bridge, "up"]);
            }
            Segment::B => {
                let r = self.router.as_str();
                ip(&[&["-n", r][..], &veth].concat());
                ip(&[
                    "-n",
                    r,
                    "link",
                    "set",
                    &h.port,
                    "master",
                    &self.bridge_b(),
                    "up",
                ]);
            }
        }
        ip(&["-n", ns, "addr", "add", &addr, "dev", "eth0"]);
        ip(&["-n", ns, "link", "set", "eth0", "up"]);
        let gateway = match h.segment {
            Segment::A => self.gateway(),
            Segment::B => self.router_address(Segment::B),
        };
        ip(&[
            "-n",
            ns,
            "route",
            "add",
            "default",
            "via",
            &gateway.to_string(),
        ]);
        if h.segment == Segment::A {
            let b = self.segment_b.to_string();
            let a254 = self.router_address(Segment::A).to_string();
            ip(&["-n", ns, "route", "add", &b, "via", &a254]);
        }
    }
}
