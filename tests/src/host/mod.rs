//! The test host: what the agent tests require of it (root, installed tools), small facts they
//! read from it (free ports, routes, `net.ipv4.ip_forward`), unique names; the host lock
//! (`lock`, shared or exclusive as `sharing` classifies each test) and the state clusters
//! running at once hold in common (`tenancy`: sysctls, portmap's chains, pod and service
//! ranges).

pub mod lock;
pub mod sharing;
pub mod tenancy;

pub use lock::{HostLock, HostUse};
pub use tenancy::Tenancy;

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::process::{Run, run};

/// How long a host tool (`ip`, `iptables`, `ctr`, `skopeo` …) may run.
pub const TOOL_DEADLINE: Duration = Duration::from_secs(60);

/// Panics unless the tests run as root (containerd, runc, netns, iptables need it).
pub fn require_root() {
    if !nix::unistd::geteuid().is_root() {
        panic!(
            "the agent tests need root (containerd, runc, cgroups, network namespaces, \
             iptables); run them as root, as CI does"
        );
    }
}

/// The full path of `tool` on `$PATH` (plus the sbin directories); panics naming the Debian
/// package to install when it is missing. A missing tool is a loud failure, never a pass.
pub fn require_tool(tool: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from);
    let found = std::env::split_paths(&path)
        .chain(extra)
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        let package = match tool {
            "containerd" | "ctr" | "containerd-shim-runc-v2" => "containerd",
            "docker-registry" => "docker-registry",
            "etcd" => "etcd-server",
            "busybox" => "busybox-static",
            "ip" => "iproute2",
            "iptables" | "iptables-save" | "iptables-restore" => "iptables",
            other => other,
        };
        panic!(
            "{tool} is not installed: the agent tests need it (apt-get install {package}; \
             see .ci/run)"
        )
    })
}

/// Runs a host tool under [`TOOL_DEADLINE`] and returns how it ended.
pub fn tool(program: &str, args: &[&str]) -> Run {
    let mut cmd = Command::new(require_tool(program));
    cmd.args(args);
    run(cmd, None, TOOL_DEADLINE)
}

/// Runs a host tool that must succeed; returns its stdout.
pub fn tool_ok(program: &str, args: &[&str]) -> String {
    let r = tool(program, args);
    if !r.success() {
        panic!("host command failed\n{}", r.describe());
    }
    r.stdout
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    free_port_on(Ipv4Addr::LOCALHOST)
}

/// A TCP port on `ip` (an address of this machine) that was free a moment ago.
pub fn free_port_on(ip: Ipv4Addr) -> u16 {
    TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("cannot find a free port on {ip}: {e}"))
}

/// Six hex digits that differ between processes and between calls in one process, for names
/// that must not collide with a concurrent or leftover run (bridges, containerd namespaces).
pub fn unique_suffix() -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mixed = nanos
        .wrapping_mul(2_654_435_761)
        .wrapping_add(std::process::id().wrapping_mul(40_503))
        .wrapping_add(SEQ.fetch_add(1, Ordering::Relaxed).wrapping_mul(97));
    format!("{:06x}", mixed & 0x00ff_ffff)
}

const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

/// The permission bits (and setuid/setgid/sticky) of the file at `path`; panics naming it if it
/// cannot be read.
pub fn file_mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// `net.ipv4.ip_forward` (the CNI bridge plugin sets it to 1 for the whole host).
pub fn ip_forward() -> Option<String> {
    read_sysctl(IP_FORWARD)
}

/// The value of the sysctl at `path` (under `/proc/sys`), trimmed; `None` if it cannot be read.
fn read_sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Writes `value` to the sysctl at `path`, reporting (not raising) a failure: for cleanup.
fn write_sysctl(path: &str, value: &str) {
    if let Err(e) = std::fs::write(path, value) {
        eprintln!("berth-tests: cannot restore {path} to {value}: {e}");
    }
}

/// Writes `net.ipv4.ip_forward` back (the last tenant out of the host does, see `tenancy`),
/// unless something else on the host still routes pod
/// traffic (CNI or berth rules left in iptables after the sweep: another agent, a real install)
/// and would break if forwarding went off. Errors are reported, not raised (used in cleanup).
pub fn restore_ip_forward(value: &str) {
    if ip_forward().as_deref() == Some(value) {
        return;
    }
    if value == "0" {
        let nat = tool("iptables-save", &["-t", "nat"]).stdout;
        let filter = tool("iptables-save", &["-t", "filter"]).stdout;
        if nat.contains("CNI-") || filter.contains("berth:") || nat.contains("berth:") {
            eprintln!(
                "berth-tests: leaving {IP_FORWARD} at 1: other pod networks on this host use it"
            );
            return;
        }
    }
    write_sysctl(IP_FORWARD, value);
}

const ROUTE_LOCALNET: &str = "/proc/sys/net/ipv4/conf/all/route_localnet";

/// `net.ipv4.conf.all.route_localnet` of this machine's netns (agents with localhost NodePorts,
/// the default, set it to 1).
pub fn route_localnet() -> Option<String> {
    read_sysctl(ROUTE_LOCALNET)
}

/// Writes `net.ipv4.conf.all.route_localnet` back if it changed. Errors are reported, not
/// raised (used in cleanup).
pub fn restore_route_localnet(value: &str) {
    if route_localnet().as_deref() == Some(value) {
        return;
    }
    write_sysctl(ROUTE_LOCALNET, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_suffixes_are_six_hex_digits_and_differ() {
        let a = unique_suffix();
        let b = unique_suffix();
        assert_eq!(a.len(), 6);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn a_missing_tool_names_its_package() {
        let err = std::panic::catch_unwind(|| require_tool("berth-no-such-tool"))
            .expect_err("must panic");
        let msg = err.downcast_ref::<String>().expect("formatted panic");
        assert!(msg.contains("apt-get install"), "{msg}");
    }
}
