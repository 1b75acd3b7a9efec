//! Kubernetes `$(VAR)` expansion for command, args and env values.
//!
//! Rules (as the kubelet applies them): `$(NAME)` is replaced by NAME's value when NAME is
//! defined and left as written when it is not; `$$` is an escaped `$`; a `$` followed by
//! anything else, or an unterminated `$(`, is kept literally.
//! Worked example with `A=x`: `"$(A)-$(B)-$$(A)-$"` → `"x-$(B)-$(A)-$"`.

/// Expands `$(NAME)` references in `input`; `lookup` returns the value of a defined name.
pub fn expand<'a>(input: &str, lookup: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if after.is_empty() {
            // A trailing `$` stays.
            out.push('$');
            rest = after;
        } else if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(close) => {
                    let name = &body[..close];
                    match lookup(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Expands `input` against an ordered list of variables (the last definition of a name wins).
pub fn expand_from(input: &str, vars: &[(String, String)]) -> String {
    expand(input, |name| {
        vars.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vec<(String, String)> {
        vec![
            ("A".to_string(), "x".to_string()),
            ("EMPTY".to_string(), String::new()),
            ("B".to_string(), "old".to_string()),
            ("B".to_string(), "new".to_string()),
        ]
    }

    #[test]
    fn expansion_follows_the_kubelet_rules() {
        let cases = [
            ("plain", "plain"),
            ("$(A)", "x"),
            ("pre-$(A)-post", "pre-x-post"),
            ("$(A)$(A)", "xx"),
            ("$(UNDEFINED)", "$(UNDEFINED)"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$x"),
            ("$$", "$"),
            ("$", "$"),
            ("a$", "a$"),
            ("$A", "$A"),
            ("$(A", "$(A"),
            ("$(", "$("),
            ("$()", "$()"),
            ("$(EMPTY)z", "z"),
            ("$(B)", "new"),
            ("$(A)-$(B)-$$(A)-$", "x-new-$(A)-$"),
            ("héllo $(A) wörld", "héllo x wörld"),
        ];
        for (input, want) in cases {
            assert_eq!(expand_from(input, &vars()), want, "input {input:?}");
        }
    }
}
