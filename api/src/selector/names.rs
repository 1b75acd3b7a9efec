//! Syntax checks for label keys (qualified names) and label values, returning upstream's
//! `IsQualifiedName` / `IsValidLabelValue` messages (Kubernetes v1.31 wording).

/// Longest name part of a qualified name, and longest label value.
const NAME_MAX_LEN: usize = 63;
/// Longest DNS-1123 subdomain (the optional prefix of a qualified name).
const SUBDOMAIN_MAX_LEN: usize = 253;

const NAME_REGEX: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const VALUE_REGEX: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_REGEX: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Problems with `key` as a label key: an optional DNS-subdomain prefix and `/`, then a name of
/// at most 63 characters. Empty when the key is valid.
pub fn label_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(NAME_MSG, NAME_REGEX, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > NAME_MAX_LEN {
        errs.push(format!("name part {}", max_len_error(NAME_MAX_LEN)));
    }
    if !is_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(NAME_MSG, NAME_REGEX, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// Problems with `value` as a label value: empty, or at most 63 characters shaped like a name.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > NAME_MAX_LEN {
        errs.push(max_len_error(NAME_MAX_LEN));
    }
    if !(value.is_empty() || is_name(value)) {
        errs.push(regex_error(
            VALUE_MSG,
            VALUE_REGEX,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Problems with `value` as a lowercase RFC 1123 subdomain (`example.com`).
pub fn subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > SUBDOMAIN_MAX_LEN {
        errs.push(max_len_error(SUBDOMAIN_MAX_LEN));
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        b.first().is_some_and(edge)
            && b.last().is_some_and(edge)
            && b.iter().all(|c| edge(c) || *c == b'-')
    };
    if !value.split('.').all(label_ok) {
        errs.push(regex_error(
            SUBDOMAIN_MSG,
            SUBDOMAIN_REGEX,
            &["example.com"],
        ));
    }
    errs
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, checked by hand.
fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter().all(|c| edge(c) || matches!(c, b'-' | b'_' | b'.'))
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// Upstream's `RegexError` text, double spaces included.
fn regex_error(msg: &str, regex: &str, examples: &[&str]) -> String {
    let shown: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{regex}')",
        shown.join(" or ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_with_and_without_prefix_are_checked_like_qualified_names() {
        let ok = [
            "app",
            "a",
            "A_b.c-9",
            "example.com/app",
            "kubernetes.io/hostname",
            "x/y",
        ];
        for k in ok {
            assert!(label_key_errors(k).is_empty(), "{k} should be valid");
        }
        let bad = [
            ("", "name part must be non-empty"),
            ("-a", "name part must consist of"),
            ("a-", "name part must consist of"),
            ("a b", "name part must consist of"),
            ("/a", "prefix part must be non-empty"),
            (
                "Example.com/a",
                "prefix part a lowercase RFC 1123 subdomain",
            ),
            ("a/b/c", "a qualified name must consist of"),
            ("example.com/", "name part must be non-empty"),
        ];
        for (k, want) in bad {
            let errs = label_key_errors(k).join("; ");
            assert!(errs.starts_with(want), "{k}: {errs}");
        }
    }

    #[test]
    fn long_names_and_prefixes_are_rejected() {
        let name = "a".repeat(64);
        assert_eq!(
            label_key_errors(&name),
            vec!["name part must be no more than 63 characters"]
        );
        assert!(label_key_errors(&"a".repeat(63)).is_empty());
        let prefix = format!("{}/a", "a".repeat(254));
        assert_eq!(
            label_key_errors(&prefix),
            vec!["prefix part must be no more than 253 characters"]
        );
    }

    #[test]
    fn values_may_be_empty_but_not_malformed_or_long() {
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("v1.2_3-x").is_empty());
        assert_eq!(
            label_value_errors("-x"),
            vec![
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
        assert_eq!(
            label_value_errors(&"v".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert!(!label_value_errors("a/b").is_empty());
    }
}
