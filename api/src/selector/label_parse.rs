//! The label selector string grammar (`k8s.io/apimachinery/pkg/labels` parser): a lexer into
//! tokens and a recursive-descent parser producing validated requirements, with upstream's
//! error messages.

use std::collections::BTreeSet;

use super::SelectorError;
use super::label::{LabelOp, Requirement, quote};
use super::names::label_key_errors;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    End,
    OpenPar,
    ClosedPar,
    Comma,
    /// `!`
    DoesNotExist,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    In,
    NotIn,
    Identifier,
}

/// Where the parser is: after a key `in`/`notin` are operators, elsewhere they are plain words
/// (a key or value may be called `in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits `s` into tokens, ending with `End`. Operators are the longest match (`!=` before
/// `!`); words run to the next blank or special character.
fn lex(s: &str) -> Vec<(Tok, &str)> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && is_whitespace(bytes[i]) {
            i += 1;
        }
        let Some(&b) = bytes.get(i) else {
            out.push((Tok::End, ""));
            return out;
        };
        if is_special(b) {
            let pair = bytes.get(i + 1) == Some(&b'=');
            let (tok, len) = match b {
                b'=' if pair => (Tok::DoubleEquals, 2),
                b'!' if pair => (Tok::NotEquals, 2),
                b'=' => (Tok::Equals, 1),
                b'!' => (Tok::DoesNotExist, 1),
                b'(' => (Tok::OpenPar, 1),
                b')' => (Tok::ClosedPar, 1),
                b',' => (Tok::Comma, 1),
                b'>' => (Tok::GreaterThan, 1),
                _ => (Tok::LessThan, 1),
            };
            out.push((tok, &s[i..i + len]));
            i += len;
            continue;
        }
        let start = i;
        while i < bytes.len() && !is_special(bytes[i]) && !is_whitespace(bytes[i]) {
            i += 1;
        }
        let word = &s[start..i];
        let tok = match word {
            "in" => Tok::In,
            "notin" => Tok::NotIn,
            _ => Tok::Identifier,
        };
        out.push((tok, word));
    }
}

struct Parser<'a> {
    items: Vec<(Tok, &'a str)>,
    pos: usize,
}

/// Parses a whole selector string into requirements (unsorted).
pub(super) fn parse(s: &str) -> Result<Vec<Requirement>, SelectorError> {
    let mut p = Parser {
        items: lex(s),
        pos: 0,
    };
    p.parse()
}

fn unexpected(found: &str, expected: &'static str) -> SelectorError {
    SelectorError::Unexpected {
        found: found.to_string(),
        expected,
    }
}

impl<'a> Parser<'a> {
    fn lookahead(&self, ctx: Context) -> (Tok, &'a str) {
        let last = self.items.len().saturating_sub(1);
        let (tok, lit) = self
            .items
            .get(self.pos.min(last))
            .copied()
            .unwrap_or((Tok::End, ""));
        match tok {
            Tok::In | Tok::NotIn if ctx == Context::Values => (Tok::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, ctx: Context) -> (Tok, &'a str) {
        let item = self.lookahead(ctx);
        if self.pos + 1 < self.items.len() {
            self.pos += 1;
        }
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .requirement()
                        .map_err(|e| SelectorError::Requirement(Box::new(e)))?;
                    reqs.push(r);
                    let (tok, lit) = self.consume(Context::Values);
                    match tok {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let (next, lit) = self.lookahead(Context::Values);
                            if next != Tok::Identifier && next != Tok::DoesNotExist {
                                return Err(unexpected(lit, "identifier after ','"));
                            }
                        }
                        _ => return Err(unexpected(lit, "',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(reqs),
                _ => return Err(unexpected(lit, "!, identifier, or 'end of string'")),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (key, unary) = self.key_and_unary_operator()?;
        if let Some(op) = unary {
            return Requirement::new(key, op, Vec::new());
        }
        let op = self.operator()?;
        let values = match op {
            LabelOp::In | LabelOp::NotIn => self.set_values()?,
            _ => self.exact_value()?,
        };
        Requirement::new(key, op, values)
    }

    /// Reads `key` or `!key`; a key followed by `,` or the end is an exists requirement.
    fn key_and_unary_operator(&mut self) -> Result<(&'a str, Option<LabelOp>), SelectorError> {
        let (mut tok, mut lit) = self.consume(Context::Values);
        let mut op = None;
        if tok == Tok::DoesNotExist {
            op = Some(LabelOp::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Tok::Identifier {
            return Err(unexpected(lit, "identifier"));
        }
        let errs = label_key_errors(lit);
        if !errs.is_empty() {
            // Upstream validates here against a nil field path, which prints as `<nil>`.
            return Err(SelectorError::Invalid {
                field: "<nil>".into(),
                value: quote(lit),
                detail: errs.join("; "),
            });
        }
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Tok::End | Tok::Comma) && op.is_none() {
            op = Some(LabelOp::Exists);
        }
        Ok((lit, op))
    }

    fn operator(&mut self) -> Result<LabelOp, SelectorError> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Tok::In => LabelOp::In,
            Tok::NotIn => LabelOp::NotIn,
            Tok::Equals => LabelOp::Equals,
            Tok::DoubleEquals => LabelOp::DoubleEquals,
            Tok::NotEquals => LabelOp::NotEquals,
            Tok::GreaterThan => LabelOp::GreaterThan,
            Tok::LessThan => LabelOp::LessThan,
            _ => return Err(unexpected(lit, "in, notin, =, ==, !=, gt, lt")),
        })
    }

    /// `( v1, v2 )`; `()` is the set holding the empty value.
    fn set_values(&mut self) -> Result<Vec<String>, SelectorError> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Tok::OpenPar {
            return Err(SelectorError::ExpectedOpenParen {
                found: lit.to_string(),
            });
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let values = self.identifier_list()?;
                if self.consume(Context::Values).0 != Tok::ClosedPar {
                    // Upstream reports the token that opened the list here.
                    return Err(unexpected(lit, "')'"));
                }
                Ok(values)
            }
            Tok::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(unexpected(lit, "',', ')' or identifier")),
        }
    }

    /// The inside of a value set, stopping before `)`. Empty entries (`(,a)`, `(a,,b)`,
    /// `(a,)`) stand for the empty value.
    fn identifier_list(&mut self) -> Result<Vec<String>, SelectorError> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Tok::Identifier => {
                    set.insert(lit.to_string());
                    let (next, lit) = self.lookahead(Context::Values);
                    match next {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(set.into_iter().collect()),
                        _ => return Err(unexpected(lit, "',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Tok::ClosedPar => {
                            set.insert(String::new());
                            return Ok(set.into_iter().collect());
                        }
                        Tok::Comma => {
                            self.consume(Context::Values);
                            set.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(unexpected(lit, "',', or identifier")),
            }
        }
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`; nothing before `,` or the end is `""`.
    fn exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        let (tok, _) = self.lookahead(Context::Values);
        if matches!(tok, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Tok::Identifier {
            return Ok(vec![lit.to_string()]);
        }
        Err(unexpected(lit, "identifier"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> Result<String, String> {
        let reqs = parse(s).map_err(|e| e.to_string())?;
        Ok(reqs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","))
    }

    #[test]
    fn valid_selectors_parse_into_requirements() {
        let cases = [
            ("x=a", "x=a"),
            ("x==a", "x==a"),
            ("x!=a", "x!=a"),
            ("  x  =  a  ", "x=a"),
            ("x=", "x="),
            ("x=,y=b", "x=,y=b"),
            ("x in (a,b)", "x in (a,b)"),
            ("x in(a)", "x in (a)"),
            ("x notin (a, b ,c)", "x notin (a,b,c)"),
            ("x in (,a)", "x in (,a)"),
            ("x in (a,)", "x in (,a)"),
            ("x in (a,,b)", "x in (,a,b)"),
            ("x in ()", "x in ()"),
            ("x", "x"),
            ("!x", "!x"),
            ("x,!y", "x,!y"),
            ("in in (in)", "in in (in)"),
            ("x=notin", "x=notin"),
            ("example.com/app=web", "example.com/app=web"),
            ("x>1,y<2", "x>1,y<2"),
            ("", ""),
            ("   ", ""),
        ];
        for (input, want) in cases {
            assert_eq!(parsed(input).as_deref(), Ok(want), "{input:?}");
        }
    }

    #[test]
    fn malformed_selectors_give_upstream_messages() {
        let cases = [
            ("x=a,", "found '', expected: identifier after ','"),
            ("x=a b", "found 'b', expected: ',' or 'end of string'"),
            (
                "x a",
                "unable to parse requirement: found 'a', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "x=(a)",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "x in a",
                "unable to parse requirement: found 'a' expected: '('",
            ),
            (
                "x in (a",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "x in (a b)",
                "unable to parse requirement: found 'b', expected: ',' or ')'",
            ),
            (
                "x in (=)",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            ),
            (
                "x in (,=)",
                "unable to parse requirement: found '=', expected: ',', or identifier",
            ),
            ("!x=a", "found '=', expected: ',' or 'end of string'"),
            (
                "!=a",
                "found '!=', expected: !, identifier, or 'end of string'",
            ),
            (
                "!(a)",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                ",x",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            (
                "=",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            ("x=a,,y", "found ',', expected: identifier after ','"),
        ];
        for (input, want) in cases {
            assert_eq!(parsed(input), Err(want.to_string()), "{input:?}");
        }
    }

    #[test]
    fn invalid_keys_and_values_are_rejected_with_field_paths() {
        let key = parsed("-x=a").unwrap_err();
        assert!(
            key.starts_with(
                "unable to parse requirement: <nil>: Invalid value: \"-x\": name part must consist"
            ),
            "{key}"
        );
        let value = parsed("x=-a").unwrap_err();
        assert!(
            value.starts_with("unable to parse requirement: values[0][x]: Invalid value: \"-a\": a valid label must be"),
            "{value}"
        );
        let set = parsed("x in (ok,-bad)").unwrap_err();
        assert!(
            set.contains("values[0][x]: Invalid value: \"-bad\""),
            "{set}"
        );
        let gt = parsed("x>a").unwrap_err();
        assert!(gt.contains("the value must be an integer"), "{gt}");
    }
}
