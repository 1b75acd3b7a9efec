//! Query parameters of resource requests (list, watch, write and delete options).

use super::error::ApiError;
use crate::registry::{DeleteOptions, FieldValidation, Propagation, WriteOptions};
use berth_shared::selector::{FieldSelector, LabelSelector};
use std::collections::HashMap;

/// The parsed query string.
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

    pub fn label_selector(&self) -> Result<LabelSelector, ApiError> {
        match self.get("labelSelector") {
            Some(s) if !s.is_empty() => {
                LabelSelector::parse(s).map_err(|e| ApiError::BadRequest(e.to_string()))
            }
            _ => Ok(LabelSelector::everything()),
        }
    }

    pub fn field_selector(&self) -> Result<FieldSelector, ApiError> {
        match self.get("fieldSelector") {
            Some(s) if !s.is_empty() => {
                FieldSelector::parse(s).map_err(|e| ApiError::BadRequest(e.to_string()))
            }
            _ => Ok(FieldSelector::everything()),
        }
    }

    /// Checks the integers of a list or watch (upstream decodes `ListOptions` before anything
    /// else and answers 400 with the conversion's error): `timeoutSeconds`, then `limit`.
    pub fn check_list_options(&self) -> Result<(), ApiError> {
        for key in ["timeoutSeconds", "limit"] {
            if let Some(v) = self.get(key) {
                parse_int64(v).map_err(ApiError::BadRequest)?;
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

    pub fn timeout_seconds(&self) -> Option<u64> {
        self.get("timeoutSeconds")
            .and_then(|t| parse_int64(t).ok())
            .and_then(|t| u64::try_from(t).ok())
    }

    pub fn write_options(&self) -> Result<WriteOptions, ApiError> {
        let field_validation = match self.get("fieldValidation") {
            None | Some("") | Some("Warn") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
                )));
            }
        };
        Ok(WriteOptions {
            dry_run: self.dry_run()?,
            field_validation,
            node: None,
            guard: None,
        })
    }

    pub fn dry_run(&self) -> Result<bool, ApiError> {
        let all = self.all("dryRun");
        if all.iter().any(|d| d != "All" && !d.is_empty()) {
            return Err(ApiError::BadRequest(format!(
                "Invalid dryRun value: {all:?}; supported values: \"All\""
            )));
        }
        Ok(all.iter().any(|d| d == "All"))
    }

    /// DeleteOptions from the query (the Python client sends them this way).
    pub fn delete_options(&self) -> Result<DeleteOptions, ApiError> {
        let mut o = DeleteOptions::default();
        if let Some(g) = self.get("gracePeriodSeconds") {
            o.grace_period_seconds =
                Some(g.parse().map_err(|_| {
                    ApiError::BadRequest(format!("invalid gracePeriodSeconds {g:?}"))
                })?);
        }
        if let Some(p) = self.get("propagationPolicy") {
            o.propagation_policy = Some(match p {
                "Orphan" => Propagation::Orphan,
                "Background" => Propagation::Background,
                "Foreground" => Propagation::Foreground,
                other => {
                    return Err(ApiError::BadRequest(format!(
                        "propagationPolicy {other:?} is not supported"
                    )));
                }
            });
        }
        if let Some(v) = self.get("orphanDependents") {
            o.orphan_dependents = Some(v == "true");
        }
        if self.dry_run()? {
            o.dry_run = Some(vec!["All".to_string()]);
        }
        Ok(o)
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
    fn a_bad_limit_is_400_and_a_negative_one_is_no_limit() {
        let q = Query::parse(Some("limit=abc"));
        let e = q.check_list_options().unwrap_err();
        assert_eq!(e.code(), axum::http::StatusCode::BAD_REQUEST);
        assert_eq!(
            e.to_string(),
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
}
