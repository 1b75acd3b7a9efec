//! Reads the host facts the Node reports (CPUs, memory, disk, kernel, OS image, ids, address)
//! and the eviction signals its pressure conditions are judged by.

use super::address::{HostInterface, Route, choose_node_ip, parse_proc_net_route};
use super::pressure::{Observed, Signal};
use super::status::HostFacts;
use std::collections::BTreeMap;
use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn memory_bytes() -> u64 {
    read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn os_image() -> String {
    read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".to_string())
}

fn disk_bytes(dir: &Path) -> u64 {
    nix::sys::statvfs::statvfs(dir)
        .map(|s| s.blocks() * s.fragment_size())
        .unwrap_or(0)
}

/// The node's address: the one given (`--node-ip`), else the default-route interface's, as
/// [`choose_node_ip`] picks it from this thread's network namespace.
pub fn internal_ip(explicit: Option<&str>) -> Option<String> {
    if let Some(ip) = explicit {
        return Some(ip.to_string());
    }
    let (interfaces, routes) = observe_interfaces_and_routes();
    choose_node_ip(&interfaces, &routes).map(|ip| ip.to_string())
}

/// The interfaces with their IPv4 addresses and the IPv4 routes of the calling thread's network
/// namespace (`/proc/thread-self/net/route`, so a thread that entered another namespace reads
/// that one's). Bridges are told by `/sys/class/net/<name>/bridge`.
pub fn observe_interfaces_and_routes() -> (Vec<HostInterface>, Vec<Route>) {
    let routes = std::fs::read_to_string("/proc/thread-self/net/route")
        .or_else(|_| std::fs::read_to_string("/proc/net/route"))
        .map(|t| parse_proc_net_route(&t))
        .unwrap_or_default();
    let mut interfaces: BTreeMap<String, HostInterface> = BTreeMap::new();
    for a in nix::ifaddrs::getifaddrs().into_iter().flatten() {
        let name = a.interface_name.clone();
        let entry = interfaces
            .entry(name.clone())
            .or_insert_with(|| HostInterface {
                bridge: Path::new("/sys/class/net")
                    .join(&name)
                    .join("bridge")
                    .exists(),
                name,
                addrs: Vec::new(),
            });
        if let Some(ip) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()) {
            entry.addrs.push(ip.ip());
        }
    }
    (interfaces.into_values().collect(), routes)
}

pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Gathers the host facts.
pub fn facts(
    node_name: &str,
    root_dir: &Path,
    max_pods: u32,
    runtime_version: &str,
    listen_port: i32,
) -> HostFacts {
    let uname = nix::sys::utsname::uname().ok();
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    HostFacts {
        node_name: node_name.to_string(),
        hostname: hostname(),
        internal_ip: internal_ip(None),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        memory_bytes: memory_bytes(),
        ephemeral_storage_bytes: disk_bytes(root_dir),
        max_pods,
        kernel_version: uname
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
        os_image: os_image(),
        machine_id: read("/etc/machine-id"),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
        architecture: arch.to_string(),
        container_runtime_version: format!("containerd://{runtime_version}"),
        agent_version: format!("v1.34.0-berth.{}", env!("CARGO_PKG_VERSION")),
        listen_port,
        reservation: Default::default(),
    }
}

/// A filesystem's (available bytes, capacity bytes) and (free inodes, inodes), as an
/// unprivileged user sees them (`f_bavail`, `f_favail`), as the kubelet's signals count.
fn filesystem(dir: &Path) -> Option<(Observed, Observed)> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    let size = |n: u64| i64::try_from(n.saturating_mul(s.fragment_size())).unwrap_or(i64::MAX);
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    Some((
        Observed {
            available: size(s.blocks_available()),
            capacity: size(s.blocks()),
        },
        Observed {
            available: count(s.files_available()),
            capacity: count(s.files()),
        },
    ))
}

/// `memory.available` as the kubelet derives it: capacity less the working set, where the
/// working set is what is in use less the inactive file cache (from `/proc/meminfo`).
fn memory() -> Option<Observed> {
    let info = read("/proc/meminfo");
    let kib = |key: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
            .map(|k| k * 1024)
    };
    let total = kib("MemTotal:")?;
    let free = kib("MemFree:")?;
    let inactive_file = kib("Inactive(file):").unwrap_or(0);
    let working_set = (total - free - inactive_file).max(0);
    Some(Observed {
        available: total - working_set,
        capacity: total,
    })
}

/// `pid.available`: the pid limit less the tasks that exist (`/proc/loadavg`'s total).
fn pids() -> Option<Observed> {
    let max: i64 = read("/proc/sys/kernel/pid_max").parse().ok()?;
    let running: i64 = read("/proc/loadavg")
        .split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()?;
    Some(Observed {
        available: max - running,
        capacity: max,
    })
}

/// Observes the eviction signals: the node filesystem is the one holding `root_dir`, the image
/// filesystem the one holding containerd's snapshots (`image_dir`; the node filesystem when
/// unknown).
pub fn signals(root_dir: &Path, image_dir: Option<&Path>) -> BTreeMap<Signal, Observed> {
    let mut out = BTreeMap::new();
    if let Some(m) = memory() {
        out.insert(Signal::MemoryAvailable, m);
    }
    if let Some(p) = pids() {
        out.insert(Signal::PidAvailable, p);
    }
    if let Some((bytes, inodes)) = filesystem(root_dir) {
        out.insert(Signal::NodeFsAvailable, bytes);
        out.insert(Signal::NodeFsInodesFree, inodes);
    }
    if let Some((bytes, inodes)) = filesystem(image_dir.unwrap_or(root_dir)) {
        out.insert(Signal::ImageFsAvailable, bytes);
        out.insert(Signal::ImageFsInodesFree, inodes);
    }
    out
}
