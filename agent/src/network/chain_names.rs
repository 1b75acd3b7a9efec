//! The hashed suffixes of this agent's iptables chain names: a few hex digits of the SHA-256 of
//! what a chain belongs to (the network name, a service port, an endpoint, a pod), so two
//! agents in one network namespace never share a chain and a name stays under iptables' 28
//! characters.
//!
//! Planner: pure, no I/O.

use sha2::Digest;

/// `len` hex digits of the SHA-256 of `parts`, each followed by a NUL.
pub(crate) fn hash(parts: &[&str], len: usize) -> String {
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .chars()
        .take(len)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_kept_apart_and_the_length_is_as_asked() {
        assert_eq!(hash(&["berth-node-a"], 8).len(), 8);
        assert_ne!(hash(&["ab", "c"], 10), hash(&["a", "bc"], 10));
        assert_eq!(hash(&["x"], 9), hash(&["x"], 9));
    }
}
