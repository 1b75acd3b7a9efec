//! The texts of the StatefulSet controller's events (upstream `StatefulPodControl`'s
//! `recordPodEvent` and `recordClaimEvent`): `Successful<Verb>` when a write went through,
//! `Failed<Verb>` with the error when it did not.
//!
//! Planner: pure, no I/O.

use berth_registry::events::EventType;
use std::fmt::Display;

/// What an event is about.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    Pod(&'a str),
    Claim { claim: &'a str, pod: &'a str },
}

/// The type, reason and message of the event about `verb` (`Create`, `Delete`, `Update`) on
/// `what` in the set `set`; `error` when the write failed.
pub fn event(
    set: &str,
    verb: &str,
    what: Subject<'_>,
    error: Option<&dyn Display>,
) -> (EventType, String, String) {
    let lower = verb.to_lowercase();
    match (error, what) {
        (None, Subject::Pod(p)) => (
            EventType::Normal,
            format!("Successful{verb}"),
            format!("{lower} Pod {p} in StatefulSet {set} successful"),
        ),
        (None, Subject::Claim { claim, pod }) => (
            EventType::Normal,
            format!("Successful{verb}"),
            format!("{lower} Claim {claim} Pod {pod} in StatefulSet {set} success"),
        ),
        (Some(e), what) => {
            let what = match what {
                Subject::Pod(p) => format!("Pod {p}"),
                Subject::Claim { claim, pod } => format!("Claim {claim} for Pod {pod}"),
            };
            (
                EventType::Warning,
                format!("Failed{verb}"),
                format!("{lower} {what} in StatefulSet {set} failed error: {e}"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verb, subject, error, and the event's type, reason and message.
    type Case = (
        &'static str,
        Subject<'static>,
        Option<&'static str>,
        EventType,
        &'static str,
        &'static str,
    );

    #[test]
    fn events_read_as_upstream_writes_them() {
        let cases: [Case; 4] = [
            (
                "Create",
                Subject::Pod("web-0"),
                None,
                EventType::Normal,
                "SuccessfulCreate",
                "create Pod web-0 in StatefulSet web successful",
            ),
            (
                "Create",
                Subject::Claim {
                    claim: "data-web-0",
                    pod: "web-0",
                },
                None,
                EventType::Normal,
                "SuccessfulCreate",
                "create Claim data-web-0 Pod web-0 in StatefulSet web success",
            ),
            (
                "Delete",
                Subject::Pod("web-1"),
                Some("boom"),
                EventType::Warning,
                "FailedDelete",
                "delete Pod web-1 in StatefulSet web failed error: boom",
            ),
            (
                "Create",
                Subject::Claim {
                    claim: "data-web-0",
                    pod: "web-0",
                },
                Some("quota"),
                EventType::Warning,
                "FailedCreate",
                "create Claim data-web-0 for Pod web-0 in StatefulSet web failed error: quota",
            ),
        ];
        for (verb, what, error, t, reason, message) in cases {
            let got = event("web", verb, what, error.as_ref().map(|e| e as &dyn Display));
            assert_eq!(
                got,
                (t, reason.to_string(), message.to_string()),
                "{verb} {what:?}"
            );
        }
    }
}
