//! Label and field selectors as the API server understands them: parsing the `?labelSelector=` /
//! `?fieldSelector=` string forms and `metav1.LabelSelector`, matching, and the canonical string
//! form, all with the semantics and error messages of `k8s.io/apimachinery`.

mod field;
mod label;
mod label_parse;
pub mod names;

pub use field::{FieldOp, FieldRequirement, FieldSelector};
pub use label::{LabelOp, LabelSelector, MatchMemo, Requirement, label_set};

/// Why a selector could not be parsed, built or used. The messages follow upstream's wording so
/// they can go into a `400 BadRequest` Status unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A label requirement (`key op values`) failed to parse or validate.
    #[error("unable to parse requirement: {0}")]
    Requirement(Box<SelectorError>),
    /// The parser met a token it did not expect.
    #[error("found '{found}', expected: {expected}")]
    Unexpected {
        found: String,
        expected: &'static str,
    },
    /// A set operator (`in`, `notin`) was not followed by `(`. Upstream words this one without
    /// the comma the other messages have.
    #[error("found '{found}' expected: '('")]
    ExpectedOpenParen { found: String },
    /// A key or value broke the label syntax; `value` is already rendered (quoted string or JSON).
    #[error("{field}: Invalid value: {value}: {detail}")]
    Invalid {
        field: String,
        value: String,
        detail: String,
    },
    /// Several validation failures of one requirement, rendered like upstream's aggregate.
    #[error("[{}]", join_messages(.0))]
    Several(Vec<SelectorError>),
    /// A `matchExpressions` operator other than In, NotIn, Exists, DoesNotExist.
    #[error("{0:?} is not a valid label selector operator")]
    InvalidOperator(String),
    /// A field selector term without `=`, `==` or `!=`.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm { selector: String, term: String },
    /// A backslash in a field selector value not followed by `\`, `,` or `=`.
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A bare `,` or `=` inside a field selector value. Upstream prints the code point as a number.
    #[error("invalid field selector: unescaped character in value: {}", u32::from(*.0))]
    UnescapedCharacter(char),
    /// A field selector names a field the resource does not index.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

impl SelectorError {
    /// Selector errors come from the request itself; retrying cannot help.
    pub fn is_transient(&self) -> bool {
        false
    }

    /// Folds a list of validation failures like upstream's `utilerrors.NewAggregate`: none is
    /// success, one is itself, several are listed once each.
    pub(crate) fn aggregate(mut errs: Vec<SelectorError>) -> Result<(), SelectorError> {
        let mut seen = std::collections::BTreeSet::new();
        errs.retain(|e| seen.insert(e.to_string()));
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(SelectorError::Several(errs)),
        }
    }
}

fn join_messages(errs: &[SelectorError]) -> String {
    errs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_errors_are_listed_once_each_in_brackets() {
        let e = |d: &str| SelectorError::Invalid {
            field: "key".into(),
            value: "\"x\"".into(),
            detail: d.into(),
        };
        let agg = SelectorError::aggregate(vec![e("a"), e("b"), e("a")]).unwrap_err();
        assert_eq!(
            agg.to_string(),
            "[key: Invalid value: \"x\": a, key: Invalid value: \"x\": b]"
        );
        let one = SelectorError::aggregate(vec![e("a"), e("a")]).unwrap_err();
        assert_eq!(one.to_string(), "key: Invalid value: \"x\": a");
        assert!(SelectorError::aggregate(vec![]).is_ok());
    }

    #[test]
    fn unescaped_character_is_reported_as_a_code_point_like_upstream() {
        assert_eq!(
            SelectorError::UnescapedCharacter('=').to_string(),
            "invalid field selector: unescaped character in value: 61"
        );
    }
}
