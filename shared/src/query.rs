//! Query parameters of resource requests (list, watch, write and delete options): the query
//! string split and percent-decoded, and each parameter the API reads parsed with upstream's
//! error wording. Pure, so the parser can be fuzzed outside the server.

use std::collections::HashMap;

use base64::Engine;
use serde::Deserialize;

use crate::selector::{FieldSelector, LabelSelector, SelectorError};

/// How unknown fields in a request body are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

/// A delete's `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Propagation {
    Orphan,
    Background,
    Foreground,
}

/// A query parameter the API could not use (HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The selector's own message already says "unable to parse requirement".
    #[error("{0}")]
    LabelSelector(SelectorError),
    #[error("{0}")]
    FieldSelector(SelectorError),
    #[error("invalid resourceVersion {0:?}")]
    ResourceVersion(String),
    /// A `continue` token that is not one this server issued for this collection.
    #[error("continue key is not valid")]
    Continue,
    #[error("fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {0:?}")]
    FieldValidation(String),
    #[error("Invalid dryRun value: {0:?}; supported values: \"All\"")]
    DryRun(Vec<String>),
    #[error("invalid gracePeriodSeconds {0:?}")]
    GracePeriod(String),
    #[error("propagationPolicy {0:?} is not supported")]
    Propagation(String),
    /// An integer option that does not parse, with Go's `strconv.ParseInt` message.
    #[error("{0}")]
    Integer(String),
}

impl QueryError {
    /// The same query fails the same way.
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// The parsed query string: every value of every key, percent-decoded (`+` is a space).
#[derive(Debug, Default, Clone)]
pub struct Query {
    params: HashMap<String, Vec<String>>,
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Query {
        let mut params: HashMap<String, Vec<String>> = HashMap::new();
        for pair in raw.unwrap_or_default().split('&').filter(|s| !s.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            params.entry(decode(k)).or_default().push(decode(v));
        }
        Query { params }
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .get(key)
            .and_then(|v| v.first())
            .map(String::as_str)
    }

    pub fn all(&self, key: &str) -> Vec<String> {
        self.params.get(key).cloned().unwrap_or_default()
    }

    /// A boolean option as upstream converts it (`Convert_Slice_string_To_bool`): present and
    /// neither `0` nor `false` (in any case) is true, so `watch`, `watch=` and `watch=yes` are.
    pub fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
    }

    pub fn label_selector(&self) -> Result<LabelSelector, QueryError> {
        match self.get("labelSelector") {
            Some(s) if !s.is_empty() => LabelSelector::parse(s).map_err(QueryError::LabelSelector),
            _ => Ok(LabelSelector::everything()),
        }
    }

    pub fn field_selector(&self) -> Result<FieldSelector, QueryError> {
        match self.get("fieldSelector") {
            Some(s) if !s.is_empty() => FieldSelector::parse(s).map_err(QueryError::FieldSelector),
            _ => Ok(FieldSelector::everything()),
        }
    }

    /// Checks the integers of a list or watch (upstream decodes `ListOptions` before anything
    /// else and answers 400 with the conversion's error): `timeoutSeconds`, then `limit`.
    pub fn check_list_options(&self) -> Result<(), QueryError> {
        for key in ["timeoutSeconds", "limit"] {
            if let Some(v) = self.get(key) {
                parse_int64(v).map_err(QueryError::Integer)?;
            }
        }
        Ok(())
    }

    /// The page size; zero or negative is no limit, as upstream's storage reads it.
    pub fn limit(&self) -> Option<usize> {
        self.get("limit")
            .and_then(|l| parse_int64(l).ok())
            .and_then(|l| usize::try_from(l).ok())
            .filter(|l| *l > 0)
    }

    /// `timeoutSeconds` of a watch; negative or unparseable means none.
    pub fn timeout_seconds(&self) -> Option<u64> {
        self.get("timeoutSeconds")
            .and_then(|t| parse_int64(t).ok())
            .and_then(|t| u64::try_from(t).ok())
    }

    /// The revision a watch starts after; `None` (absent, empty or `0`) means "now, with the
    /// current objects first".
    pub fn resource_version(&self) -> Result<Option<u64>, QueryError> {
        match self.get("resourceVersion") {
            None | Some("") | Some("0") => Ok(None),
            Some(rv) => rv
                .parse::<u64>()
                .map(Some)
                .map_err(|_| QueryError::ResourceVersion(rv.to_string())),
        }
    }

    /// The store key a `continue` token resumes a list of the collection under `prefix` from.
    pub fn continue_key(&self, prefix: &str) -> Result<Option<String>, QueryError> {
        match self.get("continue") {
            Some(t) if !t.is_empty() => decode_continue(t, prefix).map(Some),
            _ => Ok(None),
        }
    }

    pub fn field_validation(&self) -> Result<FieldValidation, QueryError> {
        match self.get("fieldValidation") {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(QueryError::FieldValidation(other.to_string())),
        }
    }

    /// `dryRun=All` (repeatable; empty values are ignored).
    pub fn dry_run(&self) -> Result<bool, QueryError> {
        let all = self.all("dryRun");
        if all.iter().any(|d| d != "All" && !d.is_empty()) {
            return Err(QueryError::DryRun(all));
        }
        Ok(all.iter().any(|d| d == "All"))
    }

    pub fn grace_period_seconds(&self) -> Result<Option<i64>, QueryError> {
        self.get("gracePeriodSeconds")
            .map(|g| {
                g.parse()
                    .map_err(|_| QueryError::GracePeriod(g.to_string()))
            })
            .transpose()
    }

    pub fn propagation_policy(&self) -> Result<Option<Propagation>, QueryError> {
        self.get("propagationPolicy")
            .map(|p| match p {
                "Orphan" => Ok(Propagation::Orphan),
                "Background" => Ok(Propagation::Background),
                "Foreground" => Ok(Propagation::Foreground),
                other => Err(QueryError::Propagation(other.to_string())),
            })
            .transpose()
    }

    pub fn orphan_dependents(&self) -> Option<bool> {
        self.get("orphanDependents").map(|v| v == "true")
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)`, with its error text (upstream returns it as the message).
fn parse_int64(s: &str) -> Result<i64, String> {
    let quoted = serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""));
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseInt: parsing {quoted}: invalid syntax"
        ));
    }
    s.parse()
        .map_err(|_| format!("strconv.ParseInt: parsing {quoted}: value out of range"))
}

/// The `continue` token for resuming a list after store key `key`.
pub fn encode_continue(key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.as_bytes())
}

fn decode_continue(token: &str, prefix: &str) -> Result<String, QueryError> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| QueryError::Continue)?;
    let key = String::from_utf8(raw).map_err(|_| QueryError::Continue)?;
    if !key.starts_with(prefix) {
        return Err(QueryError::Continue);
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_as_go_parses_them_with_its_messages() {
        assert_eq!(parse_int64("500"), Ok(500));
        assert_eq!(parse_int64("-1"), Ok(-1));
        assert_eq!(parse_int64("+7"), Ok(7));
        assert_eq!(
            parse_int64("abc"),
            Err("strconv.ParseInt: parsing \"abc\": invalid syntax".to_string())
        );
        assert_eq!(
            parse_int64(""),
            Err("strconv.ParseInt: parsing \"\": invalid syntax".to_string())
        );
        assert_eq!(
            parse_int64(" 5"),
            Err("strconv.ParseInt: parsing \" 5\": invalid syntax".to_string())
        );
        assert_eq!(
            parse_int64("99999999999999999999"),
            Err(
                "strconv.ParseInt: parsing \"99999999999999999999\": value out of range"
                    .to_string()
            )
        );
    }

    #[test]
    fn a_bad_limit_is_refused_and_a_negative_one_is_no_limit() {
        let q = Query::parse(Some("limit=abc"));
        assert_eq!(
            q.check_list_options().unwrap_err().to_string(),
            "strconv.ParseInt: parsing \"abc\": invalid syntax"
        );
        let q = Query::parse(Some("limit=-1"));
        assert!(q.check_list_options().is_ok());
        assert_eq!(q.limit(), None);
        assert_eq!(Query::parse(Some("limit=0")).limit(), None);
        assert_eq!(Query::parse(Some("limit=500")).limit(), Some(500));
    }

    #[test]
    fn timeout_seconds_is_checked_before_limit() {
        let q = Query::parse(Some("limit=x&timeoutSeconds=y"));
        assert_eq!(
            q.check_list_options().unwrap_err().to_string(),
            "strconv.ParseInt: parsing \"y\": invalid syntax"
        );
    }

    #[test]
    fn flags_are_true_unless_absent_zero_or_false() {
        for (query, want) in [
            ("watch=true", true),
            ("watch=1", true),
            ("watch", true),
            ("watch=", true),
            ("watch=yes", true),
            ("watch=0", false),
            ("watch=false", false),
            ("watch=False", false),
            ("", false),
        ] {
            assert_eq!(Query::parse(Some(query)).flag("watch"), want, "{query}");
        }
    }

    #[test]
    fn values_are_percent_decoded_and_repeatable() {
        let q = Query::parse(Some(
            "labelSelector=app%3Dweb&dryRun=All&dryRun=&watch&x=a+b",
        ));
        assert_eq!(q.get("labelSelector"), Some("app=web"));
        assert_eq!(q.all("dryRun"), ["All", ""]);
        assert!(q.flag("watch"));
        assert!(!q.flag("missing"));
        assert_eq!(q.get("x"), Some("a b"));
        assert_eq!(q.dry_run(), Ok(true));
    }

    #[test]
    fn list_and_watch_parameters_parse_or_fall_back_like_upstream() {
        let q = Query::parse(Some("limit=0&timeoutSeconds=-1&resourceVersion=0"));
        assert_eq!(q.limit(), None);
        assert_eq!(q.timeout_seconds(), None);
        assert_eq!(q.resource_version(), Ok(None));
        let q = Query::parse(Some("limit=5&timeoutSeconds=30&resourceVersion=42"));
        assert_eq!(q.limit(), Some(5));
        assert_eq!(q.timeout_seconds(), Some(30));
        assert_eq!(q.resource_version(), Ok(Some(42)));
        let q = Query::parse(Some("resourceVersion=x"));
        assert_eq!(
            q.resource_version().unwrap_err().to_string(),
            "invalid resourceVersion \"x\""
        );
    }

    #[test]
    fn continue_tokens_round_trip_only_within_their_collection() {
        let token = encode_continue("/core/pods/default/web-1");
        let q = Query::parse(Some(&format!("continue={token}")));
        assert_eq!(
            q.continue_key("/core/pods/default/"),
            Ok(Some("/core/pods/default/web-1".to_string()))
        );
        assert_eq!(
            q.continue_key("/core/pods/other/"),
            Err(QueryError::Continue)
        );
        let q = Query::parse(Some("continue=%FF%FE"));
        assert_eq!(q.continue_key(""), Err(QueryError::Continue));
    }

    #[test]
    fn write_and_delete_options_refuse_unknown_values() {
        let q = Query::parse(Some(
            "fieldValidation=Strict&gracePeriodSeconds=0&propagationPolicy=Foreground&orphanDependents=true",
        ));
        assert_eq!(q.field_validation(), Ok(FieldValidation::Strict));
        assert_eq!(q.grace_period_seconds(), Ok(Some(0)));
        assert_eq!(q.propagation_policy(), Ok(Some(Propagation::Foreground)));
        assert_eq!(q.orphan_dependents(), Some(true));
        let q = Query::parse(Some(
            "fieldValidation=strict&gracePeriodSeconds=soon&propagationPolicy=Now&dryRun=Some",
        ));
        assert_eq!(
            q.field_validation().unwrap_err().to_string(),
            "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got \"strict\""
        );
        assert_eq!(
            q.grace_period_seconds().unwrap_err().to_string(),
            "invalid gracePeriodSeconds \"soon\""
        );
        assert_eq!(
            q.propagation_policy().unwrap_err().to_string(),
            "propagationPolicy \"Now\" is not supported"
        );
        assert_eq!(
            q.dry_run().unwrap_err().to_string(),
            "Invalid dryRun value: [\"Some\"]; supported values: \"All\""
        );
    }

    #[test]
    fn selector_errors_keep_upstream_wording() {
        let q = Query::parse(Some("labelSelector=x%20a&fieldSelector=nope"));
        assert!(
            q.label_selector()
                .unwrap_err()
                .to_string()
                .starts_with("unable to parse requirement: "),
        );
        assert_eq!(
            q.field_selector().unwrap_err().to_string(),
            "invalid selector: 'nope'; can't understand 'nope'"
        );
    }
}
