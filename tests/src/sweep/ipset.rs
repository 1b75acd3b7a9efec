//! Removes the peer ipsets a cluster's agents left behind in this network namespace: the
//! agents name them `BERTH-NP-<h>-<m>`, `h` the first eight hex digits of the SHA-256 of the
//! network name followed by a NUL (as their policy chains are tagged), so only the sets of the
//! given networks are touched, never another cluster's running beside this one. Run after the
//! iptables sweep: a set that a rule still names cannot be destroyed.

use sha2::{Digest, Sha256};

use crate::host::tool;

/// The name prefix of `network`'s agent's peer sets.
pub fn prefix(network: &str) -> String {
    let mut h = Sha256::new();
    h.update(network.as_bytes());
    h.update([0]);
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("BERTH-NP-{}-", &hex[..8])
}

/// Which of `sets` belong to one of `networks`.
pub fn plan(sets: &[String], networks: &[String]) -> Vec<String> {
    let prefixes: Vec<String> = networks.iter().map(|n| prefix(n)).collect();
    sets.iter()
        .filter(|s| prefixes.iter().any(|p| s.starts_with(p.as_str())))
        .cloned()
        .collect()
}

/// Destroys the peer sets of `networks`; returns what it removed, for messages. Without the
/// `ipset` tool there is nothing to remove (only that tool makes them). Errors are printed,
/// not raised (this runs during cleanup).
pub fn sweep_networks(networks: &[String]) -> Vec<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let installed = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(std::path::PathBuf::from))
        .any(|dir| dir.join("ipset").is_file());
    if !installed {
        return Vec::new();
    }
    let r = tool("ipset", &["list", "-n"]);
    if !r.success() {
        eprintln!("berth-tests: cannot list ipsets:\n{}", r.describe());
        return Vec::new();
    }
    let sets: Vec<String> = r.stdout.lines().map(|l| l.trim().to_string()).collect();
    let mut done = Vec::new();
    for set in plan(&sets, networks) {
        super::note_step(
            tool("ipset", &["destroy", &set]),
            None,
            "ipset cleanup step failed",
            &mut done,
        );
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sets_of_the_given_networks_are_swept() {
        let net = "berth-t1-n0".to_string();
        let ours = format!("{}0123456789ab", prefix(&net));
        let theirs = format!("{}0123456789ab", prefix("berth-t2-n0"));
        assert_eq!(ours.len(), 30);
        let sets = [ours.clone(), theirs, "KUBE-X".to_string()];
        assert_eq!(plan(&sets, &[net]), [ours]);
    }
}
