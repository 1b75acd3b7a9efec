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

    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true") | Some("1") | Some(""))
            && self.params.contains_key(key)
    }

    pub fn label_selector(&self) -> Result<LabelSelector, ApiError> {
        match self.get("labelSelector") {
            Some(s) if !s.is_empty() => LabelSelector::parse(s)
                .map_err(|e| ApiError::BadRequest(format!("unable to parse requirement: {e}"))),
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

    pub fn limit(&self) -> Option<usize> {
        self.get("limit")
            .and_then(|l| l.parse().ok())
            .filter(|l| *l > 0)
    }

    pub fn timeout_seconds(&self) -> Option<u64> {
        self.get("timeoutSeconds").and_then(|t| t.parse().ok())
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
