//! Tearing a cluster down so the host is left as it was found, whether the test passed or not:
//! agents and the controller are killed by PID first (so nothing recreates what is removed),
//! then the agents' containers go (through `ctr`), then their cgroup roots, their netns,
//! bridges and tagged iptables rules (never a chain other clusters share), then the test bed
//! the agents ran in (if any); then the cluster leaves the host's tenants, and if it was the
//! last one `net.ipv4.ip_forward`, `route_localnet` (localhost NodePorts) and portmap's shared
//! chains are put back as the first one found them (`host::tenancy`). Only what this cluster
//! made is removed. The fields' own Drops then unmount
//! and remove the agents' directories, stop the registry and containerd (which sweeps shims,
//! runc state and cgroups). Nothing here panics.

use super::Cluster;
use crate::sweep;

impl Cluster {
    /// Everything the agents may have left on the host, removed; returns one line per thing
    /// removed (for the log: after a passing test these are pods that were still running).
    fn sweep_host(&mut self) -> Vec<String> {
        let mut removed = Vec::new();
        for a in &mut self.agents {
            a.kill9();
        }
        self.controller.kill9();
        if self.containerd.pid().is_some() {
            for a in &self.agents {
                for id in self.containerd.clean_namespace(a.namespace()) {
                    removed.push(format!("container {}/{id}", a.namespace()));
                }
            }
        }
        // The agents' cgroup roots (`/<namespace>` with `kubepods` in the cpu, memory and pids
        // hierarchies) exist even when containerd holds nothing of the namespace any more, so
        // containerd's own sweep, which goes by its namespaces, can miss them.
        for a in &self.agents {
            let n = sweep::kill_and_remove_cgroups(a.namespace());
            if n > 0 {
                removed.push(format!("container processes {n} in {}", a.namespace()));
            }
        }
        let networks: Vec<String> = self.agents.iter().map(|a| a.network_name()).collect();
        for net in &networks {
            for ns in sweep::delete_netns_with_prefix(&format!("{net}-")) {
                removed.push(format!("netns {ns}"));
            }
        }
        for a in &self.agents {
            if sweep::delete_link(a.bridge()) {
                removed.push(format!("bridge {}", a.bridge()));
            }
        }
        if !networks.is_empty() {
            for cmd in sweep::iptables::sweep_networks(&networks) {
                removed.push(cmd);
            }
            removed.extend(sweep::ipset::sweep_networks(&networks));
        }
        // The bed's hosts go last: the agents in them are dead and their pods' netns gone.
        if let Some(mut bed) = self.bed.take() {
            removed.extend(bed.tear_down());
        }
        self.tenancy.leave();
        removed
    }
}

/// `3 container, 3 netns, 1 bridge, 12 iptables` from the lines of [`Cluster::sweep_host`].
fn count_by_kind(removed: &[String]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for line in removed {
        let kind = if line.contains("iptables") {
            "iptables"
        } else {
            line.split_whitespace().next().unwrap_or("?")
        };
        match counts.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((kind.to_string(), 1)),
        }
    }
    let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    parts.join(", ")
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let removed = self.sweep_host();
        self.record().forget(&self.record_name);
        if !removed.is_empty() {
            // Pods still running at the end of a test are normal; list them only on request.
            if std::env::var_os("BERTH_TEARDOWN_VERBOSE").is_some() {
                eprintln!("berth-tests: teardown removed:\n  {}", removed.join("\n  "));
            } else {
                eprintln!("berth-tests: teardown removed {}", count_by_kind(&removed));
            }
        }
        // BERTH_KEEP_TMP=1 keeps the scratch dir (registries file, node kubeconfigs).
        crate::process::drop_or_keep(self.tmp.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_are_counted_by_kind() {
        let removed = [
            "container ns/a".to_string(),
            "container ns/b".to_string(),
            "netns berth-x-1".to_string(),
            "/usr/sbin/iptables -w 5 -t nat -D POSTROUTING 1".to_string(),
        ];
        assert_eq!(count_by_kind(&removed), "2 container, 1 netns, 1 iptables");
    }
}
