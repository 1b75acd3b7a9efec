//! Label selectors: a conjunction of requirements on an object's labels, built from the
//! `?labelSelector=` string or a `metav1.LabelSelector`, matched and printed like upstream's
//! `labels.Selector`.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

use super::names::{label_key_errors, label_value_errors};
use super::{SelectorError, label_parse};

/// A label requirement's operator. `Equals` and `DoubleEquals` match alike but print as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOp {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// `key>n`: the label parses as an integer greater than `n` (node affinity's Gt).
    GreaterThan,
    /// `key<n`: the label parses as an integer less than `n` (node affinity's Lt).
    LessThan,
}

/// One validated requirement: `key op values`. Values are kept sorted and unique.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    op: LabelOp,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement with upstream's `NewRequirement` checks: a valid key, the number of
    /// values the operator needs, and valid values.
    pub fn new(
        key: impl Into<String>,
        op: LabelOp,
        values: Vec<String>,
    ) -> Result<Requirement, SelectorError> {
        let key = key.into();
        let mut errs = Vec::new();
        let key_errs = label_key_errors(&key);
        if !key_errs.is_empty() {
            errs.push(invalid("key".into(), quote(&key), key_errs.join("; ")));
        }
        let count_problem = match op {
            LabelOp::In | LabelOp::NotIn if values.is_empty() => {
                Some("for 'in', 'notin' operators, values set can't be empty")
            }
            LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::NotEquals if values.len() != 1 => {
                Some("exact-match compatibility requires one single value")
            }
            LabelOp::Exists | LabelOp::DoesNotExist if !values.is_empty() => {
                Some("values set must be empty for exists and does not exist")
            }
            LabelOp::GreaterThan | LabelOp::LessThan if values.len() != 1 => {
                Some("for 'Gt', 'Lt' operators, exactly one value is required")
            }
            _ => None,
        };
        if let Some(detail) = count_problem {
            errs.push(invalid(
                "values".into(),
                render_list(&values),
                detail.into(),
            ));
        }
        if matches!(op, LabelOp::GreaterThan | LabelOp::LessThan) {
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(invalid(
                        format!("values[{i}]"),
                        quote(v),
                        "for 'Gt', 'Lt' operators, the value must be an integer".into(),
                    ));
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let value_errs = label_value_errors(v);
            if !value_errs.is_empty() {
                errs.push(invalid(
                    format!("values[{i}][{key}]"),
                    quote(v),
                    value_errs.join("; "),
                ));
            }
        }
        SelectorError::aggregate(errs)?;
        let mut values = values;
        values.sort();
        values.dedup();
        Ok(Requirement { key, op, values })
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn op(&self) -> LabelOp {
        self.op
    }

    /// The values, sorted and unique; empty for `Exists` / `DoesNotExist`.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether `labels` satisfy this requirement. `!=` and `notin` accept a missing key.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let actual = labels.get(&self.key);
        let listed = |v: &String| self.values.contains(v);
        match self.op {
            LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::In => actual.is_some_and(listed),
            LabelOp::NotEquals | LabelOp::NotIn => actual.is_none_or(|v| !listed(v)),
            LabelOp::Exists => actual.is_some(),
            LabelOp::DoesNotExist => actual.is_none(),
            LabelOp::GreaterThan | LabelOp::LessThan => {
                let (Some(actual), [bound]) = (actual, self.values.as_slice()) else {
                    return false;
                };
                match (actual.parse::<i64>(), bound.parse::<i64>()) {
                    (Ok(a), Ok(b)) if self.op == LabelOp::GreaterThan => a > b,
                    (Ok(a), Ok(b)) => a < b,
                    _ => false,
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = self.values.join(",");
        match self.op {
            LabelOp::Exists => write!(f, "{}", self.key),
            LabelOp::DoesNotExist => write!(f, "!{}", self.key),
            LabelOp::Equals => write!(f, "{}={joined}", self.key),
            LabelOp::DoubleEquals => write!(f, "{}=={joined}", self.key),
            LabelOp::NotEquals => write!(f, "{}!={joined}", self.key),
            LabelOp::GreaterThan => write!(f, "{}>{joined}", self.key),
            LabelOp::LessThan => write!(f, "{}<{joined}", self.key),
            LabelOp::In => write!(f, "{} in ({joined})", self.key),
            LabelOp::NotIn => write!(f, "{} notin ({joined})", self.key),
        }
    }
}

/// A conjunction of label requirements, kept sorted by key. No requirements matches everything;
/// the special "nothing" selector (upstream's `labels.Nothing()`, used for a nil selector)
/// matches no object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// Parses the string form used in `?labelSelector=` (`a=b,c in (x,y),!d`).
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> {
        Ok(LabelSelector::from_requirements(label_parse::parse(s)?))
    }

    /// Converts a `metav1.LabelSelector` like upstream's `LabelSelectorAsSelector`: every
    /// `matchLabels` entry is an `=` requirement, `matchExpressions` map their operators, and an
    /// empty selector matches everything.
    pub fn from_k8s(sel: &metav1::LabelSelector) -> Result<LabelSelector, SelectorError> {
        let mut reqs = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            reqs.push(Requirement::new(k, LabelOp::Equals, vec![v.clone()])?);
        }
        for expr in sel.match_expressions.iter().flatten() {
            let op = match expr.operator.as_str() {
                "In" => LabelOp::In,
                "NotIn" => LabelOp::NotIn,
                "Exists" => LabelOp::Exists,
                "DoesNotExist" => LabelOp::DoesNotExist,
                other => return Err(SelectorError::InvalidOperator(other.to_string())),
            };
            let values = expr.values.clone().unwrap_or_default();
            reqs.push(Requirement::new(&expr.key, op, values)?);
        }
        Ok(LabelSelector::from_requirements(reqs))
    }

    /// A selector requiring exactly the given labels (upstream's `SelectorFromSet`), as used by
    /// Service and ReplicationController selectors. Entries are not validated.
    pub fn from_set(labels: &BTreeMap<String, String>) -> LabelSelector {
        let requirements = labels
            .iter()
            .map(|(k, v)| Requirement {
                key: k.clone(),
                op: LabelOp::Equals,
                values: vec![v.clone()],
            })
            .collect();
        LabelSelector::from_requirements(requirements)
    }

    /// Matches every object.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// Matches no object (a nil `metav1.LabelSelector`).
    pub fn nothing() -> LabelSelector {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    fn from_requirements(mut requirements: Vec<Requirement>) -> LabelSelector {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            nothing: false,
        }
    }

    /// No requirements: matches everything. The "nothing" selector is not empty.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty() && !self.nothing
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// A matcher that remembers its last answer for the label set it was asked about, for
    /// passes over many objects sharing one interned set (the pods of one template).
    pub fn memo<'a>(&'a self) -> MatchMemo<'a> {
        MatchMemo {
            selector: self,
            last: None,
        }
    }

    /// Like [`matches`](Self::matches); `None` means the object has no labels.
    pub fn matches_opt(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        match labels {
            Some(labels) => self.matches(labels),
            None => self.matches(&BTreeMap::new()),
        }
    }

    /// The value `key` must equal (`key=v`, `key==v` or `key in (v)`), if the selector pins one;
    /// lets a store answer from an index.
    pub fn single_value(&self, key: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find_map(|r| match (r.op, r.values.as_slice()) {
                (LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::In, [v]) if r.key == key => {
                    Some(v.as_str())
                }
                _ => None,
            })
    }
}

/// [`LabelSelector::matches`] answering again without matching when asked about the very
/// map (by address) it was last asked about. The borrow keeps that map alive, so its address
/// cannot be taken by another.
pub struct MatchMemo<'a> {
    selector: &'a LabelSelector,
    last: Option<(&'a BTreeMap<String, String>, bool)>,
}

impl<'a> MatchMemo<'a> {
    pub fn matches(&mut self, labels: &'a BTreeMap<String, String>) -> bool {
        match self.last {
            Some((seen, m)) if std::ptr::eq(seen, labels) => m,
            _ => {
                let m = self.selector.matches(labels);
                self.last = Some((labels, m));
                m
            }
        }
    }
}

impl fmt::Display for LabelSelector {
    /// Upstream's canonical `String()`: requirements sorted by key, joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

fn invalid(field: String, value: String, detail: String) -> SelectorError {
    SelectorError::Invalid {
        field,
        value,
        detail,
    }
}

/// A string as Go's `%q` prints it (close enough: Rust's debug escaping).
pub(super) fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// A label set from literal pairs, as fixtures and built-in objects write one:
/// `label_set(&[("app", "web")])`.
pub fn label_set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A value list as upstream's field errors print it: JSON, with an empty list shown as `null`.
fn render_list(values: &[String]) -> String {
    if values.is_empty() {
        return "null".to_string();
    }
    serde_json::to_string(values).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::label_set as labels;

    #[test]
    fn each_operator_matches_like_upstream() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("missing=x", false),
            ("app!=db", true),
            ("app!=web", false),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app in (db)", false),
            ("missing in (x)", false),
            ("app notin (db)", true),
            ("app notin (web)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("n>4", true),
            ("n>5", false),
            ("n<6", true),
            ("app>1", false),
            ("missing<1", false),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("", true),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn absent_labels_behave_as_an_empty_set() {
        let s = LabelSelector::parse("app!=web").unwrap();
        assert!(s.matches_opt(None));
        let s = LabelSelector::parse("app").unwrap();
        assert!(!s.matches_opt(None));
        assert!(LabelSelector::everything().matches_opt(None));
        assert!(!LabelSelector::nothing().matches_opt(None));
    }

    #[test]
    fn display_is_sorted_by_key_with_sorted_set_values() {
        let cases = [
            ("b=2,a=1", "a=1,b=2"),
            ("z notin (y,x), a in (c,b,b)", "a in (b,c),z notin (x,y)"),
            ("!x,  y", "!x,y"),
            ("a==b", "a==b"),
            ("a!=b", "a!=b"),
            ("a in ()", "a in ()"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(LabelSelector::parse(input).unwrap().to_string(), want);
        }
    }

    #[test]
    fn from_k8s_converts_match_labels_and_expressions() {
        let sel: metav1::LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "team", "operator": "Exists"}
            ]
        }))
        .unwrap();
        let s = LabelSelector::from_k8s(&sel).unwrap();
        assert_eq!(
            s.to_string(),
            "app=web,!canary,env notin (prod),team,tier in (edge,front)"
        );
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "edge"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "edge")])));
    }

    #[test]
    fn from_k8s_rejects_bad_operators_and_value_counts() {
        let cases = [
            (
                serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Foo"}]}),
                "\"Foo\" is not a valid label selector operator",
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
                "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}),
                "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
                "values: Invalid value: [\"x\"]: values set must be empty for exists and does not exist",
            ),
            (
                serde_json::json!({"matchLabels": {"a": "-x"}}),
                "values[0][a]: Invalid value: \"-x\": a valid label must be",
            ),
            (
                serde_json::json!({"matchLabels": {"-a": "x"}}),
                "key: Invalid value: \"-a\": name part must consist",
            ),
        ];
        for (json, want) in cases {
            let sel: metav1::LabelSelector = serde_json::from_value(json).unwrap();
            let err = LabelSelector::from_k8s(&sel).unwrap_err().to_string();
            assert!(err.starts_with(want), "{err}");
        }
    }

    #[test]
    fn empty_k8s_selector_matches_everything() {
        let s = LabelSelector::from_k8s(&metav1::LabelSelector::default()).unwrap();
        assert!(s.is_empty());
        assert!(s.matches(&labels(&[("a", "b")])));
        assert!(!LabelSelector::nothing().is_empty());
    }

    #[test]
    fn from_set_requires_every_pair() {
        let s = LabelSelector::from_set(&labels(&[("b", "2"), ("a", "1")]));
        assert_eq!(s.to_string(), "a=1,b=2");
        assert!(s.matches(&labels(&[("a", "1"), ("b", "2"), ("c", "3")])));
        assert!(!s.matches(&labels(&[("a", "1")])));
    }

    #[test]
    fn single_value_finds_pinned_keys_only() {
        let s = LabelSelector::parse("app=web,tier in (a),env in (x,y),x!=1").unwrap();
        assert_eq!(s.single_value("app"), Some("web"));
        assert_eq!(s.single_value("tier"), Some("a"));
        assert_eq!(s.single_value("env"), None);
        assert_eq!(s.single_value("x"), None);
    }

    #[test]
    fn gt_lt_need_one_integer() {
        let err = Requirement::new("a", LabelOp::GreaterThan, vec!["x".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert!(Requirement::new("a", LabelOp::LessThan, vec![]).is_err());
    }
}
