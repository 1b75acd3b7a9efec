//! Where a list or a watch starts, from its ListOptions (`resourceVersion`,
//! `resourceVersionMatch`, `sendInitialEvents`, `allowWatchBookmarks`), validated as upstream's
//! `ValidateListOptions`: a streamed list (WatchList) is a watch that first sends the state as
//! ADDED events, then a bookmark annotated `k8s.io/initial-events-end`. Pure: no I/O.

use super::error::ApiError;
use super::query::Query;
use berth_registry::RegistryError;
use berth_shared::admission::{FieldError, FieldErrorType};
use serde_json::Value;

/// The annotation of the bookmark that ends a streamed list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// How fresh the state a request starts from must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// `resourceVersion` unset: the newest state (a consistent read).
    Newest,
    /// `resourceVersion=0`: whatever the cache holds.
    Any,
    /// `resourceVersion=N` with `NotOlderThan`: a state at least as new as N.
    NotOlderThan(u64),
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// The state as ADDED events, then changes (a watch without `resourceVersion`, or `0`).
    StateThenChanges,
    /// Changes after this revision (a watch with `resourceVersion=N`).
    ChangesAfter(u64),
    /// A streamed list: the state at `freshness` as ADDED events, then the bookmark marked
    /// [`INITIAL_EVENTS_END`], then changes.
    StreamedList(Freshness),
    /// `sendInitialEvents=false`: changes after the state at `freshness`, nothing before.
    ChangesOnly(Freshness),
}

/// Where a list reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListStart {
    Fresh(Freshness),
    /// `resourceVersionMatch=Exact`: the state at exactly this revision.
    Exact(u64),
}

const MATCH_NOT_OLDER_THAN: &str = "NotOlderThan";
const MATCH_EXACT: &str = "Exact";

fn cause(
    error_type: FieldErrorType,
    field: &str,
    value: Option<Value>,
    detail: &str,
) -> FieldError {
    FieldError {
        error_type,
        field: field.to_string(),
        bad_value: value,
        detail: detail.to_string(),
    }
}

fn forbidden(field: &str, detail: &str) -> FieldError {
    cause(FieldErrorType::Forbidden, field, None, detail)
}

/// A 422 for the request's options, as upstream names them: `ListOptions.meta.k8s.io "" is
/// invalid: …`.
fn invalid(causes: Vec<FieldError>) -> ApiError {
    RegistryError::Invalid {
        kind: "ListOptions".to_string(),
        group: "meta.k8s.io".to_string(),
        name: String::new(),
        causes,
    }
    .into()
}

/// `sendInitialEvents`, parsed as Go's `strconv.ParseBool` (anything else is a 400).
fn send_initial_events(q: &Query) -> Result<Option<bool>, ApiError> {
    match q.get("sendInitialEvents") {
        None => Ok(None),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(Some(true)),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(Some(false)),
        Some(other) => Err(ApiError::BadRequest(format!(
            "strconv.ParseBool: parsing {other:?}: invalid syntax"
        ))),
    }
}

fn resource_version(q: &Query) -> Result<Option<u64>, ApiError> {
    Ok(q.resource_version()?)
}

fn freshness(q: &Query) -> Result<Freshness, ApiError> {
    Ok(match q.get("resourceVersion") {
        None | Some("") => Freshness::Newest,
        Some(_) => match resource_version(q)? {
            None => Freshness::Any,
            Some(n) => Freshness::NotOlderThan(n),
        },
    })
}

fn match_value(q: &Query) -> &str {
    q.get("resourceVersionMatch").unwrap_or("")
}

/// Where a watch starts, or upstream's 422 for options that do not go together.
pub fn watch_start(q: &Query) -> Result<WatchStart, ApiError> {
    let send = send_initial_events(q)?;
    let rv_match = match_value(q);
    let mut causes = Vec::new();
    if send.is_some() && rv_match != MATCH_NOT_OLDER_THAN {
        causes.push(forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !rv_match.is_empty() {
        if send.is_none() {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if rv_match != MATCH_NOT_OLDER_THAN {
            causes.push(cause(
                FieldErrorType::NotSupported,
                "resourceVersionMatch",
                Some(Value::from(rv_match)),
                "supported values: \"NotOlderThan\"",
            ));
        }
        if !q.flag("allowWatchBookmarks") {
            causes.push(forbidden(
                "allowWatchBookmarks",
                "allowWatchBookmarks must be set to true when resourceVersionMatch is provided",
            ));
        }
    }
    if !causes.is_empty() {
        return Err(invalid(causes));
    }
    Ok(match send {
        Some(true) => WatchStart::StreamedList(freshness(q)?),
        Some(false) => WatchStart::ChangesOnly(freshness(q)?),
        None => match resource_version(q)? {
            None => WatchStart::StateThenChanges,
            Some(n) => WatchStart::ChangesAfter(n),
        },
    })
}

/// Where a list reads, or upstream's 422 for options that do not go together.
pub fn list_start(q: &Query) -> Result<ListStart, ApiError> {
    let rv_match = match_value(q);
    let rv = q.get("resourceVersion").unwrap_or("");
    let mut causes = Vec::new();
    if !rv_match.is_empty() {
        if rv.is_empty() {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if q.get("continue").is_some_and(|c| !c.is_empty()) {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if rv_match != MATCH_EXACT && rv_match != MATCH_NOT_OLDER_THAN {
            causes.push(cause(
                FieldErrorType::NotSupported,
                "resourceVersionMatch",
                Some(Value::from(rv_match)),
                "supported values: \"Exact\", \"NotOlderThan\", \"\"",
            ));
        }
        if rv_match == MATCH_EXACT && rv == "0" {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if q.get("sendInitialEvents").is_some() {
        causes.push(forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if !causes.is_empty() {
        return Err(invalid(causes));
    }
    match (rv_match, resource_version(q)?) {
        (MATCH_EXACT, Some(n)) => Ok(ListStart::Exact(n)),
        _ => Ok(ListStart::Fresh(freshness(q)?)),
    }
}

/// The BOOKMARK line that ends a streamed list's initial events at `revision`.
pub fn initial_events_end(kind: &str, api_version: &str, revision: u64) -> String {
    format!(
        "{{\"type\":\"BOOKMARK\",\"object\":{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",\
         \"metadata\":{{\"resourceVersion\":\"{revision}\",\"creationTimestamp\":null,\
         \"annotations\":{{\"{INITIAL_EVENTS_END}\":\"true\"}}}}}}}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(query: &str) -> Result<WatchStart, ApiError> {
        watch_start(&Query::parse(Some(query)))
    }

    fn list(query: &str) -> Result<ListStart, ApiError> {
        list_start(&Query::parse(Some(query)))
    }

    fn message(e: ApiError) -> String {
        assert_eq!(e.code().as_u16(), 422, "{e}");
        e.to_string()
    }

    #[test]
    fn watches_start_where_their_options_say() {
        use Freshness::*;
        use WatchStart::*;
        for (query, want) in [
            ("watch=1", StateThenChanges),
            ("watch=1&resourceVersion=0", StateThenChanges),
            ("watch=1&resourceVersion=42", ChangesAfter(42)),
            (
                "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
                StreamedList(Newest),
            ),
            (
                "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=",
                StreamedList(Newest),
            ),
            (
                "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=0",
                StreamedList(Any),
            ),
            (
                "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=7",
                StreamedList(NotOlderThan(7)),
            ),
            (
                "watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=7",
                ChangesOnly(NotOlderThan(7)),
            ),
        ] {
            assert_eq!(watch(query).ok(), Some(want), "{query}");
        }
    }

    #[test]
    fn watch_options_that_do_not_go_together_are_422s_as_upstream_words_them() {
        for (query, want) in [
            (
                "watch=1&sendInitialEvents=true&allowWatchBookmarks=true",
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
                 sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ),
            (
                "watch=1&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
                 resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ),
            (
                "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
                "ListOptions.meta.k8s.io \"\" is invalid: allowWatchBookmarks: Forbidden: \
                 allowWatchBookmarks must be set to true when resourceVersionMatch is provided",
            ),
        ] {
            assert_eq!(message(watch(query).unwrap_err()), want, "{query}");
        }
        let both = message(
            watch("watch=1&sendInitialEvents=true&resourceVersionMatch=Exact").unwrap_err(),
        );
        assert!(both.contains("Unsupported value: \"Exact\""), "{both}");
        assert!(both.contains("allowWatchBookmarks: Forbidden"), "{both}");
        let e = watch("watch=1&sendInitialEvents=maybe").unwrap_err();
        assert_eq!(e.code().as_u16(), 400);
    }

    #[test]
    fn lists_refuse_what_only_a_watch_takes() {
        for (query, want) in [
            ("", ListStart::Fresh(Freshness::Newest)),
            ("resourceVersion=0", ListStart::Fresh(Freshness::Any)),
            (
                "resourceVersion=9&resourceVersionMatch=NotOlderThan",
                ListStart::Fresh(Freshness::NotOlderThan(9)),
            ),
            (
                "resourceVersion=9&resourceVersionMatch=Exact",
                ListStart::Exact(9),
            ),
        ] {
            assert_eq!(list(query).ok(), Some(want), "{query}");
        }
        for (query, want) in [
            (
                "sendInitialEvents=true",
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
            ),
            (
                "resourceVersionMatch=NotOlderThan",
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless \
                 resourceVersion is provided",
            ),
            (
                "resourceVersion=0&resourceVersionMatch=Exact",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ),
        ] {
            let m = message(list(query).unwrap_err());
            assert!(m.contains(want), "{query}: {m}");
        }
    }

    #[test]
    fn the_closing_bookmark_names_the_lists_revision_and_is_annotated() {
        let line = initial_events_end("Pod", "v1", 17);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "BOOKMARK");
        assert_eq!(v["object"]["metadata"]["resourceVersion"], "17");
        assert_eq!(
            v["object"]["metadata"]["annotations"][INITIAL_EVENTS_END],
            "true"
        );
        assert!(line.ends_with('\n'));
    }
}
