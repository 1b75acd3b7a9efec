//! Node names as the join endpoint accepts them: what upstream accepts as a Node's
//! `metadata.name` (a lowercase RFC 1123 subdomain), parsed once at the boundary.

use berth_shared::admission::{FieldError, validate_name};
use std::fmt;

/// A valid node name. It is also safe as a file name (no `/`, never `.` or `..`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeName(String);

impl NodeName {
    /// The name, or the field errors upstream reports for a Node named so.
    pub fn parse(name: &str) -> Result<NodeName, Vec<FieldError>> {
        let errors = validate_name("Node", name);
        if errors.is_empty() {
            Ok(NodeName(name.to_string()))
        } else {
            Err(errors)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_are_node_names() {
        for good in ["node-a", "a", "node-1.example.com", "0abc"] {
            assert_eq!(
                NodeName::parse(good).map(|n| n.to_string()),
                Ok(good.into())
            );
        }
    }

    #[test]
    fn anything_else_is_refused_with_upstreams_message() {
        for bad in [
            "-bad",
            "bad-",
            "Bad",
            "a_b",
            "a..b",
            ".",
            "..",
            "a/b",
            "",
            &"a".repeat(254),
        ] {
            assert!(NodeName::parse(bad).is_err(), "{bad:?} accepted");
        }
        let errors = NodeName::parse("-bad").unwrap_err();
        assert!(
            errors[0].message().starts_with(
                "metadata.name: Invalid value: \"-bad\": a lowercase RFC 1123 subdomain"
            ),
            "{}",
            errors[0].message()
        );
    }
}
