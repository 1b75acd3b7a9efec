//! Reads the host facts the Node reports: CPUs, memory, disk, kernel, OS image, ids, address.

use super::status::HostFacts;
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

/// The first non-loopback IPv4 address of the host (or the one given).
pub fn internal_ip(explicit: Option<&str>) -> Option<String> {
    if let Some(ip) = explicit {
        return Some(ip.to_string());
    }
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    let mut candidates: Vec<(String, String)> = addrs
        .filter_map(|a| {
            let ip = a.address?.as_sockaddr_in()?.ip();
            if ip.is_loopback()
                || a.interface_name.starts_with("berth")
                || a.interface_name.starts_with("veth")
            {
                return None;
            }
            Some((a.interface_name.clone(), ip.to_string()))
        })
        .collect();
    candidates.sort();
    candidates.into_iter().map(|(_, ip)| ip).next()
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
        agent_version: format!("v1.31.4-berth.{}", env!("CARGO_PKG_VERSION")),
        listen_port,
    }
}
