//! A rule's `fieldPath` (`.spec.ports`, `.labels['app.kubernetes.io/name']`): checked against
//! the schema and turned into the field path its error is reported at, as upstream's
//! `ValidFieldPath` does — a name under `properties` is a child (`a.b`), under
//! `additionalProperties` a key (`a[b]`); list indexes are not supported. CRDs'
//! `selectableFields` use the same check without the bracket form ([`walk`]).

use serde_json::Value;

/// Why a field path does not fit the schema; the text is upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldPathError {
    #[error("array notation is not allowed")]
    ArrayNotation,
    #[error("does not refer to a valid field")]
    NoSuchField,
    #[error("unexpected end of JSON path")]
    UnexpectedEnd,
    #[error("expected single quoted string but got {0}")]
    NotQuoted(String),
    #[error("expected ] but got {0}")]
    NotClosed(String),
    #[error("expected [ or . but got: {0}")]
    Unexpected(String),
    #[error("invalid string literal: invalid escape char {0}")]
    BadEscape(String),
}

/// The segments of `path` appended to `base` (`base.a[b]`), or why it is not valid for
/// `schema`.
pub(super) fn resolve(path: &str, schema: &Value, base: &str) -> Result<String, FieldPathError> {
    walk(path, schema, base, true).map(|w| w.path)
}

/// Where a valid path leads: its field path (`spec.a[b]`), the schema found there and the
/// names to follow through an object to reach it.
#[derive(Debug, Clone, PartialEq)]
pub struct Walked<'a> {
    pub path: String,
    pub schema: &'a Value,
    pub names: Vec<String>,
}

/// Follows `path` through `schema` from `base`; `brackets` allows the `['name']` form.
pub fn walk<'a>(
    path: &str,
    schema: &'a Value,
    base: &str,
    brackets: bool,
) -> Result<Walked<'a>, FieldPathError> {
    let mut out = base.to_string();
    let mut schema = schema;
    let mut names = Vec::new();
    let mut tokens = tokenize(path).into_iter();
    while let Some(tok) = tokens.next() {
        let name = match tok.as_str() {
            "[" if !brackets => return Err(FieldPathError::ArrayNotation),
            "[" => {
                let quoted = tokens.next().ok_or(FieldPathError::UnexpectedEnd)?;
                let inner = quoted
                    .strip_prefix('\'')
                    .and_then(|q| q.strip_suffix('\''))
                    .filter(|_| quoted.len() >= 2)
                    .ok_or_else(|| FieldPathError::NotQuoted(quoted.clone()))?;
                let name = unescape(inner)?;
                match tokens.next() {
                    Some(t) if t == "]" => {}
                    Some(t) => return Err(FieldPathError::NotClosed(t)),
                    None => return Err(FieldPathError::UnexpectedEnd),
                }
                name
            }
            "." => tokens.next().ok_or(FieldPathError::UnexpectedEnd)?,
            other => return Err(FieldPathError::Unexpected(other.to_string())),
        };
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            schema = props.get(&name).ok_or(FieldPathError::NoSuchField)?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(additional) =
            schema.get("additionalProperties").filter(|a| a.is_object())
        {
            schema = additional;
            out.push_str(&format!("[{name}]"));
        } else {
            return Err(FieldPathError::NoSuchField);
        }
        names.push(name);
    }
    Ok(Walked {
        path: out,
        schema,
        names,
    })
}

/// Splits at `.`, `[` and `]` (each its own token), keeping a single-quoted string whole.
fn tokenize(path: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    for c in path.chars() {
        if current.starts_with('\'') {
            let escaped = current.len() > 1 && current.ends_with('\\');
            current.push(c);
            if c == '\'' && !escaped {
                tokens.push(std::mem::take(&mut current));
            }
            continue;
        }
        match c {
            '.' | '[' | ']' => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
                tokens.push(c.to_string());
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

fn unescape(s: &str) -> Result<String, FieldPathError> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let d = chars.next().unwrap_or('\\');
        out.push(match d {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\'' => '\'',
            '\\' => '\\',
            other => return Err(FieldPathError::BadEscape(format!("\\{other}"))),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_paths_resolve_against_the_schema() {
        let schema = json!({"properties": {
            "spec": {"properties": {"ports": {"type": "array"}, "min": {"type": "integer"}}},
            "labels": {"additionalProperties": {"type": "string"}},
        }});
        let cases: &[(&str, Result<&str, FieldPathError>)] = &[
            (".spec.ports", Ok("spec.ports")),
            (".spec['min']", Ok("spec.min")),
            (
                ".labels['app.kubernetes.io/name']",
                Ok("labels[app.kubernetes.io/name]"),
            ),
            (".labels.tier", Ok("labels[tier]")),
            (".spec.nope", Err(FieldPathError::NoSuchField)),
            (".spec.ports.x", Err(FieldPathError::NoSuchField)),
            ("spec", Err(FieldPathError::Unexpected("spec".into()))),
            (".spec[min]", Err(FieldPathError::NotQuoted("min".into()))),
            (".spec['min'", Err(FieldPathError::UnexpectedEnd)),
            (".", Err(FieldPathError::UnexpectedEnd)),
            (
                ".labels['a\\qb']",
                Err(FieldPathError::BadEscape("\\q".into())),
            ),
        ];
        for (path, want) in cases {
            let got = resolve(path, &schema, "");
            assert_eq!(got.as_deref().map_err(Clone::clone), want.clone(), "{path}");
        }
        assert_eq!(
            resolve(".min", &schema["properties"]["spec"], "spec"),
            Ok("spec.min".into())
        );
    }

    #[test]
    fn a_walk_without_brackets_refuses_them_and_reports_the_schema_found() {
        let schema = json!({"properties": {"spec": {"properties": {"min": {"type": "integer"}}}}});
        let w = walk(".spec.min", &schema, "", false).unwrap();
        assert_eq!(
            (w.path.as_str(), &w.schema["type"]),
            ("spec.min", &json!("integer"))
        );
        assert_eq!(w.names, ["spec", "min"]);
        assert_eq!(
            walk(".spec['min']", &schema, "", false),
            Err(FieldPathError::ArrayNotation)
        );
    }
}
