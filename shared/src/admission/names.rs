//! Name and key syntax checks (DNS-1123 labels and subdomains, qualified names, label values,
//! port names, env var names, config keys) with upstream's exact messages, and the
//! `metadata.name` rule for each kind.

use super::field::{FieldError, Path};

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const ENV_VAR_NAME_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

pub(crate) const DNS1123_LABEL_MAX: usize = 63;
pub(crate) const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// `must be no more than N characters`.
pub(crate) fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// Upstream `RegexError`: the message, examples and the regex (with its odd double space).
pub(crate) fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn dns1123_subdomain_fmt() -> String {
    format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*")
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn matches_label_shape(s: &str) -> bool {
    let (Some(first), Some(last)) = (s.chars().next(), s.chars().last()) else {
        return false;
    };
    is_lower_alnum(first)
        && is_lower_alnum(last)
        && s.chars().all(|c| is_lower_alnum(c) || c == '-')
}

fn matches_subdomain_shape(s: &str) -> bool {
    s.split('.').all(matches_label_shape)
}

/// Upstream's two checks of most name-like strings, in its order: at most `max` bytes (when
/// there is a limit), then the shape (`shape_error` says what is wrong with it, if anything).
fn length_and_shape(value: &str, max: Option<usize>, shape_error: Option<String>) -> Vec<String> {
    let too_long = max.filter(|m| value.len() > *m).map(max_len_error);
    too_long.into_iter().chain(shape_error).collect()
}

/// Upstream `IsDNS1123Label`.
pub(crate) fn dns1123_label(value: &str) -> Vec<String> {
    let shape_error = (!matches_label_shape(value)).then(|| {
        if matches_subdomain_shape(value) {
            "must not contain dots".to_string()
        } else {
            regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            )
        }
    });
    length_and_shape(value, Some(DNS1123_LABEL_MAX), shape_error)
}

/// Upstream `IsDNS1035Label` (Service names: they become DNS labels that must not look like
/// numbers).
pub(crate) fn dns1035_label(value: &str) -> Vec<String> {
    let ok = matches_label_shape(value) && value.starts_with(|c: char| c.is_ascii_lowercase());
    let shape_error = (!ok).then(|| {
        regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        )
    });
    length_and_shape(value, Some(DNS1123_LABEL_MAX), shape_error)
}

/// Upstream `IsDNS1123Subdomain`.
pub(crate) fn dns1123_subdomain(value: &str) -> Vec<String> {
    let shape_error = (!matches_subdomain_shape(value)).then(|| {
        regex_error(
            DNS1123_SUBDOMAIN_MSG,
            &dns1123_subdomain_fmt(),
            &["example.com"],
        )
    });
    length_and_shape(value, Some(DNS1123_SUBDOMAIN_MAX), shape_error)
}

/// Upstream `IsWildcardDNS1123Subdomain` (Ingress hosts such as `*.example.com`).
pub(crate) fn wildcard_dns1123_subdomain(value: &str) -> Vec<String> {
    let ok = value
        .strip_prefix("*.")
        .is_some_and(matches_subdomain_shape);
    let shape_error = (!ok).then(|| {
        regex_error(
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character",
            &format!("\\*\\.{}", dns1123_subdomain_fmt()),
            &["*.example.com"],
        )
    });
    length_and_shape(value, Some(DNS1123_SUBDOMAIN_MAX), shape_error)
}

/// Upstream `IsQualifiedName`: an optional DNS subdomain prefix and `/`, then a name ≤ 63.
pub(crate) fn qualified_name(value: &str) -> Vec<String> {
    crate::selector::names::label_key_errors(value)
}

/// Upstream `IsValidLabelValue`.
pub(crate) fn label_value(value: &str) -> Vec<String> {
    crate::selector::names::label_value_errors(value)
}

/// Upstream `IsValidPortName` (an IANA_SVC_NAME).
pub(crate) fn port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if port.is_empty() || !port.chars().all(|c| is_lower_alnum(c) || c == '-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.chars().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// Upstream `IsValidPortNum`.
pub(crate) fn port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

pub(crate) fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

fn ch_dir_prefix(value: &str) -> Option<String> {
    match value {
        "." => Some("must not be '.'".to_string()),
        ".." => Some("must not be '..'".to_string()),
        v if v.starts_with("..") => Some("must not start with '..'".to_string()),
        _ => None,
    }
}

/// Upstream `IsEnvVarName`.
pub(crate) fn env_var_name(value: &str) -> Vec<String> {
    let ok_start = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || "-._".contains(c));
    let ok_rest = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
    let shape_error = (!(ok_start && ok_rest)).then(|| {
        regex_error(
            ENV_VAR_NAME_MSG,
            ENV_VAR_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        )
    });
    let mut errs = length_and_shape(value, None, shape_error);
    errs.extend(ch_dir_prefix(value));
    errs
}

/// Upstream `IsConfigMapKey` (also used for Secret keys).
pub(crate) fn config_map_key(value: &str) -> Vec<String> {
    let ok = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
    let shape_error = (!ok).then(|| {
        regex_error(
            CONFIG_KEY_MSG,
            CONFIG_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        )
    });
    let mut errs = length_and_shape(value, Some(DNS1123_SUBDOMAIN_MAX), shape_error);
    errs.extend(ch_dir_prefix(value));
    errs
}

/// Upstream `IsValidPercent` as used by int-or-percent fields.
pub(crate) fn percent(value: &str) -> Vec<String> {
    let digits = value.strip_suffix('%').unwrap_or("");
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
        return Vec::new();
    }
    vec![regex_error(
        "a valid percent string must be a numeric string followed by an ending '%'",
        "[0-9]+%",
        &["1%", "93%"],
    )]
}

/// One `Invalid` error per message for `value` at `path`.
pub(crate) fn each_invalid(path: &Path, value: &str, msgs: Vec<String>) -> Vec<FieldError> {
    msgs.into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

/// A required name-like string: `Required` when empty, else one `Invalid` error per message
/// `check` gives for it.
pub(crate) fn required_name(
    path: &Path,
    value: &str,
    check: fn(&str) -> Vec<String>,
) -> Vec<FieldError> {
    if value.is_empty() {
        vec![FieldError::required(path, "")]
    } else {
        each_invalid(path, value, check(value))
    }
}

/// One `Invalid` error for `value` at `path` carrying all the messages joined with `;`, as
/// upstream words a taint's or toleration's label value; none when `msgs` is empty.
pub(crate) fn joined_invalid(path: &Path, value: &str, msgs: Vec<String>) -> Option<FieldError> {
    (!msgs.is_empty()).then(|| FieldError::invalid(path, value, msgs.join(";")))
}

/// How a kind's `metadata.name` is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    Label,
    /// A DNS-1035 label (Services).
    Dns1035Label,
    Subdomain,
    /// Any name usable as one URL path segment (RBAC kinds: `system:basic-user`).
    PathSegment,
}

/// The upstream name rule for a kind: namespaces and statefulsets use DNS-1123 labels (pods of a
/// StatefulSet take its name as their hostname); everything else a DNS-1123 subdomain.
pub(crate) fn name_rule(kind: &str) -> NameRule {
    match kind {
        "Namespace" | "StatefulSet" => NameRule::Label,
        "Service" => NameRule::Dns1035Label,
        "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding" => NameRule::PathSegment,
        // Upstream `ValidateCertificateRequestName`: "we don't care what you call" them.
        "CertificateSigningRequest" => NameRule::PathSegment,
        // Upstream `ValidateAPIService`: a path segment, and `<version>.<group>` besides.
        "APIService" => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

/// Messages for a name (or a `generateName` prefix, whose trailing dash is allowed).
pub(crate) fn name_messages(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    let masked;
    let name = if prefix && name.len() > 1 && name.ends_with('-') {
        masked = format!("{}a", &name[..name.len() - 1]);
        masked.as_str()
    } else {
        name
    };
    match rule {
        NameRule::Label => dns1123_label(name),
        NameRule::Dns1035Label => dns1035_label(name),
        NameRule::Subdomain => dns1123_subdomain(name),
        NameRule::PathSegment => path_segment(name, prefix),
    }
}

/// Upstream `IsValidPathSegmentName` (and its prefix form for `generateName`).
fn path_segment(name: &str, prefix: bool) -> Vec<String> {
    let mut msgs = Vec::new();
    if !prefix && (name == "." || name == "..") {
        msgs.push(format!("may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            msgs.push(format!("may not contain '{bad}'"));
        }
    }
    msgs
}

/// Validates `metadata.name` for a kind; CronJob names are limited to 52 characters because
/// the controller appends an 11-character suffix to make Job names.
pub fn validate_name(kind: &str, name: &str) -> Vec<FieldError> {
    let path = Path::new("metadata").child("name");
    if name.is_empty() {
        return vec![FieldError::required(
            &path,
            "name or generateName is required",
        )];
    }
    let mut errs = each_invalid(&path, name, name_messages(name_rule(kind), name, false));
    if kind == "CronJob" && name.len() > 52 {
        errs.push(FieldError::invalid(
            &path,
            name,
            "must be no more than 52 characters",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_subdomain_names_get_the_upstream_message() {
        let errs = validate_name("Deployment", "Foo_Bar");
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].message(),
            "metadata.name: Invalid value: \"Foo_Bar\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
    }

    #[test]
    fn namespaces_and_statefulsets_need_labels() {
        assert_eq!(
            validate_name("Namespace", "a.b")[0].detail,
            "must not contain dots"
        );
        assert_eq!(
            validate_name("StatefulSet", "a.b")[0].detail,
            "must not contain dots"
        );
        assert!(validate_name("Deployment", "a.b").is_empty());
        assert!(validate_name("Pod", &"a".repeat(253)).is_empty());
        assert_eq!(
            validate_name("Pod", &"a".repeat(254))[0].detail,
            "must be no more than 253 characters"
        );
        assert_eq!(
            validate_name("Namespace", &"a".repeat(64))[0].detail,
            "must be no more than 63 characters"
        );
    }

    #[test]
    fn cron_job_names_stop_at_52_characters() {
        assert!(validate_name("CronJob", &"a".repeat(52)).is_empty());
        assert_eq!(validate_name("CronJob", &"a".repeat(53)).len(), 1);
    }

    #[test]
    fn empty_names_are_required() {
        assert_eq!(
            validate_name("Pod", "")[0].message(),
            "metadata.name: Required value: name or generateName is required"
        );
    }

    #[test]
    fn qualified_names_accept_prefixes_and_reject_bad_parts() {
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert!(qualified_name("MyName").is_empty());
        assert_eq!(
            qualified_name("/x"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must consist"));
        assert!(qualified_name("-x")[0].starts_with("name part must consist"));
        assert_eq!(
            qualified_name(&"a".repeat(64))[0],
            "name part must be no more than 63 characters"
        );
    }

    #[test]
    fn label_values_may_be_empty_but_not_malformed() {
        assert!(label_value("").is_empty());
        assert!(label_value("v1.2_x-y").is_empty());
        assert_eq!(label_value("-x").len(), 1);
        assert_eq!(label_value(&"a".repeat(64)), vec![max_len_error(63)]);
    }

    #[test]
    fn port_names_follow_iana_svc_name() {
        assert!(port_name("http").is_empty());
        assert!(port_name("web-8080").is_empty());
        assert_eq!(
            port_name("8080"),
            vec!["must contain at least one letter (a-z)".to_string()]
        );
        assert_eq!(
            port_name("a--b"),
            vec!["must not contain consecutive hyphens".to_string()]
        );
        assert_eq!(port_name("Http").len(), 1);
        assert_eq!(port_name("abcdefghijklmnop"), vec![max_len_error(15)]);
    }

    #[test]
    fn env_names_and_config_keys() {
        assert!(env_var_name("MY_VAR.x-1").is_empty());
        assert_eq!(env_var_name("1ABC").len(), 1);
        assert_eq!(
            env_var_name("..x"),
            vec!["must not start with '..'".to_string()]
        );
        assert!(config_map_key("app.properties").is_empty());
        assert_eq!(config_map_key(".."), vec!["must not be '..'".to_string()]);
        assert_eq!(config_map_key("a b").len(), 1);
    }

    #[test]
    fn percents_need_digits_and_a_percent_sign() {
        assert!(percent("25%").is_empty());
        assert_eq!(percent("25").len(), 1);
        assert_eq!(
            percent("x%")[0],
            "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
        );
    }

    #[test]
    fn generate_name_prefixes_may_end_with_a_dash() {
        assert!(name_messages(NameRule::Subdomain, "web-", true).is_empty());
        assert!(!name_messages(NameRule::Subdomain, "web-", false).is_empty());
    }
}
