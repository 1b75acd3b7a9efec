//! Server-side apply's conflicts: fields an apply would change that other managers own, and
//! the words upstream refuses them with (`internal.NewConflictError`): a 409 `Status` whose
//! message is `Apply failed with 1 conflict: conflict with "mgr": .spec.replicas` and whose
//! causes are one `FieldManagerConflict` per field.

/// One field another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager as upstream names it: `"kubectl"`, `"kubectl-edit" using apps/v1`.
    pub manager: String,
    /// The field, as upstream prints paths: `.spec.replicas`.
    pub field: String,
}

impl Conflict {
    /// The cause's message: `conflict with "kubectl"`.
    pub fn message(&self) -> String {
        format!("conflict with {}", self.manager)
    }
}

/// The conflicts an apply ran into, by manager then field; never empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", message(.0))]
pub struct Conflicts(pub Vec<Conflict>);

impl Conflicts {
    /// The cause reason upstream gives each conflict.
    pub const CAUSE: &'static str = "FieldManagerConflict";

    /// A conflict is the caller's to resolve (`force`, or a changed configuration).
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// Upstream's message: the one conflict inline; several grouped by manager, managers sorted.
fn message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager, only.field
        );
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for m in managers {
        lines.push(format!("conflicts with {m}:"));
        for c in conflicts.iter().filter(|c| c.manager == m) {
            lines.push(format!("- {}", c.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict(manager: &str, field: &str) -> Conflict {
        Conflict {
            manager: manager.into(),
            field: field.into(),
        }
    }

    #[test]
    fn messages_are_worded_as_upstreams() {
        let one = Conflicts(vec![conflict("\"kubectl\"", ".spec.replicas")]);
        assert_eq!(
            one.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas"
        );
        assert_eq!(one.0[0].message(), "conflict with \"kubectl\"");
        let several = Conflicts(vec![
            conflict("\"z\" using v1", ".data.a"),
            conflict("\"a\"", ".data.b"),
            conflict("\"z\" using v1", ".data.c"),
        ]);
        assert_eq!(
            several.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .data.b\nconflicts with \"z\" using v1:\n- .data.a\n- .data.c"
        );
    }
}
