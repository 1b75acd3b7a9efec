//! Namespace deletion decisions: delete every object still in a terminating namespace, and
//! release the namespace (drop its `kubernetes` finalizer) once nothing is left.
//!
//! Planner: pure, no I/O.

pub const FINALIZER: &str = "kubernetes";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    pub key: String,
    pub deleting: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Delete {
        key: String,
    },
    RemoveFinalizer,
    /// Content is terminating: look again later.
    Wait,
}

pub fn plan(deleting: bool, spec_finalizers: &[String], content: &[Content]) -> Vec<Action> {
    if !deleting || !spec_finalizers.iter().any(|f| f == FINALIZER) {
        return Vec::new();
    }
    if content.is_empty() {
        return vec![Action::RemoveFinalizer];
    }
    let mut actions: Vec<Action> = content
        .iter()
        .filter(|c| !c.deleting)
        .map(|c| Action::Delete { key: c.key.clone() })
        .collect();
    actions.push(Action::Wait);
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fin() -> Vec<String> {
        vec![FINALIZER.to_string()]
    }

    #[test]
    fn an_active_namespace_is_left_alone() {
        assert!(
            plan(
                false,
                &fin(),
                &[Content {
                    key: "k".into(),
                    deleting: false
                }]
            )
            .is_empty()
        );
    }

    #[test]
    fn content_is_deleted_then_the_namespace_released() {
        let content = vec![
            Content {
                key: "a".into(),
                deleting: false,
            },
            Content {
                key: "b".into(),
                deleting: true,
            },
        ];
        assert_eq!(
            plan(true, &fin(), &content),
            vec![Action::Delete { key: "a".into() }, Action::Wait]
        );
        assert_eq!(plan(true, &fin(), &[]), vec![Action::RemoveFinalizer]);
    }

    #[test]
    fn a_namespace_already_released_needs_nothing() {
        assert!(plan(true, &[], &[]).is_empty());
    }
}
