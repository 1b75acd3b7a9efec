//! Field selectors (`?fieldSelector=metadata.name=x,spec.nodeName!=`): parsing with upstream's
//! backslash escaping, checking the fields a resource supports, and matching.

use std::fmt;

use super::SelectorError;

/// `=` / `==` (both mean equality) or `!=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    Equals,
    NotEquals,
}

/// One `field op value` term; `value` is unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub op: FieldOp,
    pub value: String,
}

/// A conjunction of field terms, ordered like upstream (by the raw term text).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `a=b,c!=d`. Terms split on unescaped `,`; each term splits at its first `!=`,
    /// `==` or `=`; the value may escape `\\`, `\,` and `\=`. Nothing is trimmed.
    pub fn parse(s: &str) -> Result<FieldSelector, SelectorError> {
        let mut terms = split_terms(s);
        terms.sort_unstable();
        let mut requirements = Vec::new();
        for term in terms.into_iter().filter(|t| !t.is_empty()) {
            let Some((field, op, raw)) = split_term(term) else {
                return Err(SelectorError::FieldTerm {
                    selector: s.to_string(),
                    term: term.to_string(),
                });
            };
            requirements.push(FieldRequirement {
                field: field.to_string(),
                op,
                value: unescape(raw)?,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// Matches every object.
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Fails on the first term whose field is not in `allowed`, like a resource's
    /// field-label conversion does upstream.
    pub fn validate_fields(&self, allowed: &[&str]) -> Result<(), SelectorError> {
        match self
            .requirements
            .iter()
            .find(|r| !allowed.contains(&r.field.as_str()))
        {
            Some(r) => Err(SelectorError::UnsupportedField(r.field.clone())),
            None => Ok(()),
        }
    }

    /// Whether every term holds; `get` yields a field's value, and a missing field counts as "".
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| {
            let actual = get(&r.field).unwrap_or_default();
            (actual == r.value) == (r.op == FieldOp::Equals)
        })
    }

    /// The value an `=` term pins `field` to, if any (lets a store use an index, e.g. on
    /// `metadata.name` or `spec.nodeName`).
    pub fn single_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.op == FieldOp::Equals && r.field == field)
            .map(|r| r.value.as_str())
    }
}

impl fmt::Display for FieldSelector {
    /// Upstream's `String()`: `field=value` / `field!=value` with the value re-escaped, joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = match r.op {
                FieldOp::Equals => "=",
                FieldOp::NotEquals => "!=",
            };
            write!(f, "{}{op}{}", r.field, escape(&r.value))?;
        }
        Ok(())
    }
}

/// Splits on commas not preceded by a backslash escape; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits a term at the first operator; at each position `!=` is tried before `==` before `=`.
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in [
            ("!=", FieldOp::NotEquals),
            ("==", FieldOp::Equals),
            ("=", FieldOp::Equals),
        ] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], kind, value));
            }
        }
    }
    None
}

fn unescape(raw: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(raw.len());
    let mut escaped = false;
    for c in raw.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError::InvalidEscape(format!("\\{c}")));
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => return Err(SelectorError::UnescapedCharacter(c)),
            _ => out.push(c),
        }
    }
    if escaped {
        return Err(SelectorError::InvalidEscape("\\".into()));
    }
    Ok(out)
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(field: &str, op: FieldOp, value: &str) -> FieldRequirement {
        FieldRequirement {
            field: field.into(),
            op,
            value: value.into(),
        }
    }

    #[test]
    fn terms_parse_with_all_three_operators() {
        let s =
            FieldSelector::parse("spec.nodeName=n1,metadata.name==x,status.phase!=Failed").unwrap();
        assert_eq!(
            s.requirements(),
            [
                req("metadata.name", FieldOp::Equals, "x"),
                req("spec.nodeName", FieldOp::Equals, "n1"),
                req("status.phase", FieldOp::NotEquals, "Failed"),
            ]
        );
        assert_eq!(
            s.to_string(),
            "metadata.name=x,spec.nodeName=n1,status.phase!=Failed"
        );
    }

    #[test]
    fn escapes_and_empty_values_round_trip() {
        let cases = [
            (r"a=x\,y", "x,y", r"a=x\,y"),
            (r"a=x\=y", "x=y", r"a=x\=y"),
            (r"a=x\\y", r"x\y", r"a=x\\y"),
            ("a=", "", "a="),
            ("a==", "", "a="),
        ];
        for (input, value, display) in cases {
            let s = FieldSelector::parse(input).unwrap();
            assert_eq!(s.requirements()[0].value, value, "{input}");
            assert_eq!(s.to_string(), display);
        }
    }

    #[test]
    fn empty_terms_are_skipped() {
        assert!(FieldSelector::parse("").unwrap().is_empty());
        assert!(FieldSelector::parse(",").unwrap().is_empty());
        assert_eq!(
            FieldSelector::parse("a=b,").unwrap().requirements().len(),
            1
        );
    }

    #[test]
    fn malformed_selectors_give_upstream_messages() {
        let cases = [
            ("abc", "invalid selector: 'abc'; can't understand 'abc'"),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            (
                r"a=x\y",
                r"invalid field selector: invalid escape sequence: \y",
            ),
            (
                r"a=x\",
                r"invalid field selector: invalid escape sequence: \",
            ),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a!==b",
                "invalid field selector: unescaped character in value: 61",
            ),
        ];
        for (input, want) in cases {
            let err = FieldSelector::parse(input).unwrap_err();
            assert_eq!(err.to_string(), want, "{input}");
        }
    }

    #[test]
    fn unsupported_fields_are_named() {
        let s = FieldSelector::parse("metadata.name=x,spec.foo=y").unwrap();
        assert_eq!(
            s.validate_fields(&["metadata.name", "metadata.namespace"])
                .unwrap_err()
                .to_string(),
            "field label not supported: spec.foo"
        );
        assert!(s.validate_fields(&["metadata.name", "spec.foo"]).is_ok());
    }

    #[test]
    fn matching_treats_missing_fields_as_empty() {
        let get = |f: &str| match f {
            "metadata.name" => Some("web".to_string()),
            _ => None,
        };
        let cases = [
            ("metadata.name=web", true),
            ("metadata.name=db", false),
            ("metadata.name!=db", true),
            ("spec.nodeName=", true),
            ("spec.nodeName!=", false),
            ("spec.nodeName=n1", false),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                FieldSelector::parse(sel).unwrap().matches(get),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn single_value_reports_equality_terms_only() {
        let s = FieldSelector::parse("spec.nodeName=n1,metadata.name!=x").unwrap();
        assert_eq!(s.single_value("spec.nodeName"), Some("n1"));
        assert_eq!(s.single_value("metadata.name"), None);
    }
}
