//! The agent's network configuration, validated once, and the names derived from it.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::NetworkError;

/// Where the CNI plugins are and which bridge, subnets and names this agent's pods use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkConfig {
    /// Directory with the CNI plugin binaries (`/usr/lib/cni` on Debian).
    pub cni_bin_dir: PathBuf,
    /// Linux bridge the pods' veths attach to (`berth0`); at most 15 bytes.
    pub bridge: String,
    /// The node's pod subnet (`spec.podCIDR`, e.g. `10.42.1.0/24`); host-local allocates from it.
    pub pod_cidr: String,
    /// The whole cluster's pod range (`10.42.0.0/16`); traffic to it is never masqueraded.
    pub cluster_cidr: String,
    /// Directory for host-local's allocations and the per-pod state (`<root-dir>/network`).
    pub state_dir: PathBuf,
    /// CNI network name (`berth-<node>`). It prefixes the netns names and tags the iptables
    /// rules.
    pub network_name: String,
    /// This agent's instance id (see [`instance_id`](super::instance_id)), made once and kept
    /// in its root dir. Every netns name carries it after the network name, so an agent tells
    /// the namespaces it made from those of any other agent on the host, even one with the
    /// same node name, and never touches the others'.
    pub instance: String,
    /// The pods' interface MTU (`None`: the bridge plugin's default, the bridge's). Below the
    /// node's when pod traffic may be tunnelled (VXLAN takes 50 bytes of every packet).
    pub mtu: Option<u32>,
}

/// The CNI network name of node `node`: `berth-<node>` (also the service proxy's rule tag).
pub fn network_name(node: &str) -> String {
    format!("berth-{node}")
}

/// The network state directory of an agent whose root dir is `root_dir`: `<root>/network`.
pub fn state_dir(root_dir: &Path) -> PathBuf {
    root_dir.join("network")
}

/// An IPv4 subnet such as `10.42.1.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ipv4Cidr {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

impl Ipv4Cidr {
    /// The subnet of `prefix` bits that holds `addr` (host bits cleared): an interface address
    /// `172.31.5.11/24` is on the subnet `172.31.5.0/24`.
    pub fn containing(addr: Ipv4Addr, prefix: u8) -> Ipv4Cidr {
        let prefix = prefix.min(32);
        let net = Ipv4Cidr { addr, prefix };
        Ipv4Cidr {
            addr: Ipv4Addr::from(u32::from(addr) & net.mask()),
            prefix,
        }
    }

    /// Whether the two subnets share any address.
    pub fn overlaps(&self, other: &Ipv4Cidr) -> bool {
        self.contains(other.addr) || other.contains(self.addr)
    }

    /// Whether `ip` lies inside this subnet.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = self.mask();
        u32::from(ip) & mask == u32::from(self.addr) & mask
    }

    fn mask(&self) -> u32 {
        if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix))
        }
    }
}

impl FromStr for Ipv4Cidr {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = s.split_once('/').ok_or("expected ADDRESS/PREFIX")?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| "not an IPv4 address")?;
        let prefix: u8 = prefix.parse().map_err(|_| "prefix is not a number")?;
        if prefix > 32 {
            return Err("prefix is larger than 32");
        }
        let cidr = Ipv4Cidr { addr, prefix };
        if u32::from(addr) & !cidr.mask() != 0 {
            return Err("address has host bits set");
        }
        Ok(cidr)
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Linux limits interface names to IFNAMSIZ - 1 bytes.
const MAX_IFNAME: usize = 15;

/// Limit on a pod uid we accept: it becomes part of a file name and a CNI container id.
const MAX_UID: usize = 128;

/// The configuration after validation: parsed subnets plus the original values.
#[derive(Debug, Clone)]
pub(crate) struct Validated {
    pub pod_cidr: Ipv4Cidr,
    pub cluster_cidr: Ipv4Cidr,
}

/// Checks every field once, before anything touches the host.
pub(crate) fn validate(cfg: &NetworkConfig) -> Result<Validated, NetworkError> {
    let invalid = |field, value: &str, reason| NetworkError::InvalidConfig {
        field,
        value: value.to_string(),
        reason,
    };
    if cfg.bridge.is_empty() || cfg.bridge.len() > MAX_IFNAME {
        return Err(invalid("bridge", &cfg.bridge, "must be 1 to 15 bytes"));
    }
    if !cfg
        .bridge
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        return Err(invalid("bridge", &cfg.bridge, "must be [A-Za-z0-9._-]"));
    }
    if !is_cni_name(&cfg.network_name) {
        return Err(invalid(
            "network_name",
            &cfg.network_name,
            "must match ^[A-Za-z0-9][A-Za-z0-9_.-]*$ and be at most 64 bytes",
        ));
    }
    if !super::instance::is_valid(&cfg.instance) {
        return Err(invalid(
            "instance",
            &cfg.instance,
            "must be 1 to 16 bytes of [a-z0-9]",
        ));
    }
    let pod_cidr: Ipv4Cidr = cfg
        .pod_cidr
        .parse()
        .map_err(|reason| invalid("pod_cidr", &cfg.pod_cidr, reason))?;
    let cluster_cidr: Ipv4Cidr = cfg
        .cluster_cidr
        .parse()
        .map_err(|reason| invalid("cluster_cidr", &cfg.cluster_cidr, reason))?;
    if pod_cidr.prefix > 30 {
        return Err(invalid(
            "pod_cidr",
            &cfg.pod_cidr,
            "needs room for a gateway and pods (prefix at most /30)",
        ));
    }
    if !cluster_cidr.contains(pod_cidr.addr) || cluster_cidr.prefix > pod_cidr.prefix {
        return Err(invalid(
            "pod_cidr",
            &cfg.pod_cidr,
            "must lie inside cluster_cidr",
        ));
    }
    Ok(Validated {
        pod_cidr,
        cluster_cidr,
    })
}

/// CNI's rule for network names (and container ids): `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`.
fn is_cni_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphanumeric())
        && s.len() <= 64
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

/// Checks a pod uid: it is used verbatim as the CNI container id and in file names.
pub(crate) fn validate_uid(uid: &str) -> Result<(), NetworkError> {
    let ok = !uid.is_empty()
        && uid.len() <= MAX_UID
        && uid.as_bytes()[0].is_ascii_alphanumeric()
        && uid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(NetworkError::InvalidPod {
            field: "uid",
            value: uid.to_string(),
            reason: "must be 1 to 128 bytes of [A-Za-z0-9._-] starting with a letter or digit",
        })
    }
}

/// The netns name of a pod: `<network name>-<instance>-<pod uid>`, unique per agent (even
/// between agents of the same node name) and per pod.
pub(crate) fn netns_name(network_name: &str, instance: &str, uid: &str) -> String {
    format!("{network_name}-{instance}-{uid}")
}

/// The pod uid encoded in a netns name of this network and instance, if the name is one of
/// ours.
///
/// Only uids in the Kubernetes form (a UUID) are recognised here, so that network `berth-a`
/// never claims `berth-a-b-<instance>-<uuid>`, which belongs to network `berth-a-b`, nor a
/// netns of another instance of `berth-a` (another agent with the same node name).
pub(crate) fn uid_from_netns_name<'a>(
    network_name: &str,
    instance: &str,
    netns: &'a str,
) -> Option<&'a str> {
    let uid = netns
        .strip_prefix(network_name)?
        .strip_prefix('-')?
        .strip_prefix(instance)?
        .strip_prefix('-')?;
    is_uuid(uid).then_some(uid)
}

/// Whether a netns name read from a state file can be used as one: a single path component
/// that `ip netns` accepts.
pub(crate) fn is_netns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// A node's network configuration for tests.
#[cfg(test)]
pub(crate) fn example() -> NetworkConfig {
    NetworkConfig {
        cni_bin_dir: "/usr/lib/cni".into(),
        bridge: "berth0".into(),
        pod_cidr: "10.42.1.0/24".into(),
        cluster_cidr: "10.42.0.0/16".into(),
        state_dir: "/var/lib/berth/agent/network".into(),
        network_name: "berth-node1".into(),
        instance: "k3x9q2m7ab".into(),
        mtu: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_and_reject_host_bits_and_bad_prefixes() {
        type Want = Result<(Ipv4Addr, u8), &'static str>;
        let table: &[(&str, Want)] = &[
            ("10.42.1.0/24", Ok((Ipv4Addr::new(10, 42, 1, 0), 24))),
            ("0.0.0.0/0", Ok((Ipv4Addr::UNSPECIFIED, 0))),
            ("10.42.1.5/32", Ok((Ipv4Addr::new(10, 42, 1, 5), 32))),
            ("10.42.1.1/24", Err("address has host bits set")),
            ("10.42.1.0/33", Err("prefix is larger than 32")),
            ("10.42.1.0", Err("expected ADDRESS/PREFIX")),
            ("fd00::/64", Err("not an IPv4 address")),
        ];
        for (input, want) in table {
            let got = input.parse::<Ipv4Cidr>().map(|c| (c.addr, c.prefix));
            assert_eq!(&got, want, "{input}");
        }
    }

    #[test]
    fn cidr_membership_uses_the_prefix() {
        let c: Ipv4Cidr = "10.42.0.0/16".parse().unwrap();
        assert!(c.contains(Ipv4Addr::new(10, 42, 200, 7)));
        assert!(!c.contains(Ipv4Addr::new(10, 43, 0, 1)));
        let all: Ipv4Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(Ipv4Addr::new(192, 0, 2, 1)));
    }

    #[test]
    fn a_default_style_config_is_valid() {
        let v = validate(&example()).unwrap();
        assert_eq!(v.pod_cidr.to_string(), "10.42.1.0/24");
        assert_eq!(v.cluster_cidr.to_string(), "10.42.0.0/16");
    }

    #[test]
    fn invalid_configs_name_the_offending_field() {
        type Mutation = Box<dyn Fn(&mut NetworkConfig)>;
        let cases: Vec<(&str, Mutation)> = vec![
            (
                "bridge",
                Box::new(|c| c.bridge = "a-very-long-bridge0".into()),
            ),
            ("bridge", Box::new(|c| c.bridge = "br 0".into())),
            ("network_name", Box::new(|c| c.network_name = "-x".into())),
            ("network_name", Box::new(|c| c.network_name = "a/b".into())),
            ("instance", Box::new(|c| c.instance = String::new())),
            ("instance", Box::new(|c| c.instance = "Ab-1".into())),
            ("pod_cidr", Box::new(|c| c.pod_cidr = "10.42.1.0".into())),
            ("pod_cidr", Box::new(|c| c.pod_cidr = "10.43.1.0/24".into())),
            ("pod_cidr", Box::new(|c| c.pod_cidr = "10.42.1.0/31".into())),
            ("cluster_cidr", Box::new(|c| c.cluster_cidr = "x".into())),
        ];
        for (field, mutate) in cases {
            let mut c = example();
            mutate(&mut c);
            match validate(&c) {
                Err(NetworkError::InvalidConfig { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: expected InvalidConfig, got {other:?}"),
            }
        }
    }

    #[test]
    fn uids_must_be_safe_file_and_cni_names() {
        for ok in ["3f2a9c1e-0b7d-4a51-9c3e-1d2f3a4b5c6d", "pod-1", "a.b_c"] {
            assert!(validate_uid(ok).is_ok(), "{ok}");
        }
        for bad in ["", "../etc", "a b", "-x", "x;y", &"a".repeat(129)] {
            assert!(validate_uid(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn netns_names_round_trip_only_for_uuid_uids_of_the_same_network_and_instance() {
        let uid = "3f2a9c1e-0b7d-4a51-9c3e-1d2f3a4b5c6d";
        let name = netns_name("berth-a", "i1", uid);
        assert_eq!(name, format!("berth-a-i1-{uid}"));
        assert_eq!(uid_from_netns_name("berth-a", "i1", &name), Some(uid));
        // Another network whose name extends ours does not belong to us.
        let other = netns_name("berth-a-b", "i1", uid);
        assert_eq!(uid_from_netns_name("berth-a", "i1", &other), None);
        assert_eq!(uid_from_netns_name("berth-a-b", "i1", &other), Some(uid));
        // Nor does another agent's of the same network name (same node name, other root dir).
        let twin = netns_name("berth-a", "i2", uid);
        assert_eq!(uid_from_netns_name("berth-a", "i1", &twin), None);
        // Nor a name from before instance ids, `berth-a-<uid>`: its first uuid group is not
        // our instance, and what follows is not a whole uuid.
        assert_eq!(
            uid_from_netns_name("berth-a", "3f2a9c1e", &format!("berth-a-{uid}")),
            None
        );
        assert_eq!(
            uid_from_netns_name("berth-a", "i1", "berth-a-i1-pod-1"),
            None
        );
        assert_eq!(uid_from_netns_name("berth-a", "i1", "cni-1234"), None);
    }

    #[test]
    fn recorded_netns_names_must_be_one_path_component() {
        assert!(is_netns_name(
            "berth-a-i1-3f2a9c1e-0b7d-4a51-9c3e-1d2f3a4b5c6d"
        ));
        for bad in ["", ".", "..", "a/b", "../x", "a b"] {
            assert!(!is_netns_name(bad), "{bad:?}");
        }
    }
}
