//! Kubernetes' URL functions (apiserver `library.URLs`): `url(s)`, `isURL(s)` and on a URL
//! `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`, `getQuery`; parsed as
//! Go's `url.ParseRequestURI` does: an absolute URI (`https://host:8443/p?q=1`, or an opaque
//! one such as `mailto:a@b`) or an absolute path (`/p`).

use std::collections::HashMap;
use std::sync::LazyLock;

use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{Args, Out, string_arg};

static URL_TYPE: LazyLock<Type> = LazyLock::new(|| Type::new_opaque_type("kubernetes.URL"));

/// A parsed URL as a CEL value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Url {
    scheme: String,
    host: String,
    path: String,
    query: String,
    source: String,
}

impl Url {
    pub(crate) fn parse(s: &str) -> Option<Url> {
        if s.is_empty() || s.chars().any(|c| c.is_ascii_control() || c == ' ') {
            return None;
        }
        let (scheme, rest) = match split_scheme(s) {
            Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
            None if s.starts_with('/') => (String::new(), s),
            None => return None,
        };
        if !rest.starts_with('/') {
            // An opaque URI (`mailto:a@b`): no host or path of its own.
            return (!scheme.is_empty()).then(|| Url {
                scheme,
                source: s.to_string(),
                ..Url::default()
            });
        }
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, q.to_string()),
            None => (rest, String::new()),
        };
        let (host, path) = match rest.strip_prefix("//") {
            Some(authority_and_path) => {
                let end = authority_and_path
                    .find('/')
                    .unwrap_or(authority_and_path.len());
                let (authority, path) = authority_and_path.split_at(end);
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                if !valid_host(host) {
                    return None;
                }
                (host.to_string(), path.to_string())
            }
            None => (String::new(), rest.to_string()),
        };
        Some(Url {
            scheme,
            host,
            path,
            query,
            source: s.to_string(),
        })
    }

    /// The host without its port; an IPv6 literal without its brackets.
    fn hostname(&self) -> &str {
        let h = self.host.as_str();
        if let Some(inner) = h.strip_prefix('[') {
            return inner.split_once(']').map_or(inner, |(ip, _)| ip);
        }
        h.rsplit_once(':').map_or(h, |(name, _)| name)
    }

    fn port(&self) -> &str {
        let h = self.host.as_str();
        let after_ip6 = h.rfind(']').map_or(h, |i| &h[i + 1..]);
        after_ip6.rsplit_once(':').map_or("", |(_, port)| port)
    }
}

/// `scheme:` at the start of `s`, as RFC 3986 spells a scheme.
fn split_scheme(s: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = s.split_once(':')?;
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (first_ok && rest_ok).then_some((scheme, rest))
}

/// A host with an optional numeric port (`[::1]:80`, `example.com:8443`).
fn valid_host(host: &str) -> bool {
    let port = if let Some(inner) = host.strip_prefix('[') {
        match inner.split_once(']') {
            Some((_, after)) => after,
            None => return false,
        }
    } else {
        host.rsplit_once(':').map_or("", |(_, p)| p)
    };
    let port = port.strip_prefix(':').unwrap_or(port);
    port.chars().all(|c| c.is_ascii_digit())
}

opaque_val!(Url, URL_TYPE);

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let u = || URL_TYPE.to_owned();
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    env.add_member_overload("getScheme", "url_get_scheme", u(), vec![], |a| {
        part(a, |u| u.scheme.clone())
    })?;
    env.add_member_overload("getHost", "url_get_host", u(), vec![], |a| {
        part(a, |u| u.host.clone())
    })?;
    env.add_member_overload("getHostname", "url_get_hostname", u(), vec![], |a| {
        part(a, |u| u.hostname().to_string())
    })?;
    env.add_member_overload("getPort", "url_get_port", u(), vec![], |a| {
        part(a, |u| u.port().to_string())
    })?;
    env.add_member_overload("getEscapedPath", "url_get_escaped_path", u(), vec![], |a| {
        part(a, |u| u.path.clone())
    })?;
    env.add_member_overload("getQuery", "url_get_query", u(), vec![], get_query)
}

fn this(args: &[CowVal<'_, '_>]) -> Result<Url, ExecutionError> {
    args.first()
        .and_then(|a| a.downcast_ref::<Url>())
        .cloned()
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

fn url<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let s = string_arg(&args, "url")?;
    Url::parse(s).map(CowVal::owned).ok_or_else(|| {
        ExecutionError::function_error(
            "url",
            format!("URL parse error during conversion from string: parse {s:?}: invalid URI for request"),
        )
    })
}

fn is_url<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let s = string_arg(&args, "isURL")?;
    Ok(CowVal::owned(CelBool::from(Url::parse(s).is_some())))
}

fn part<'b, 'v>(args: Args<'b, 'v>, f: impl Fn(&Url) -> String) -> Out<'b, 'v> {
    Ok(CowVal::owned(CelString::from(f(&this(&args)?))))
}

/// The query as a map of each key to its values, in order (Go's `url.Values`); keys and
/// values are percent-decoded, `+` is a space.
fn get_query<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let u = this(&args)?;
    let mut values: HashMap<String, Vec<String>> = HashMap::new();
    for pair in u.query.split(['&', ';']).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        values.entry(unescape(k)).or_default().push(unescape(v));
    }
    let map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = values
        .into_iter()
        .map(|(k, vs)| {
            let list: Vec<Box<dyn Val + 'v>> = vs
                .into_iter()
                .map(|v| Box::new(CelString::from(v)) as Box<dyn Val + 'v>)
                .collect();
            (
                CelMapKey::from(k),
                Box::new(CelList::from(list)) as Box<dyn Val + 'v>,
            )
        })
        .collect();
    Ok(CowVal::owned(CelMap::from(map)))
}

fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}
