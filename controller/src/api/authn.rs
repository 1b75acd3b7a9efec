//! Authentication: the identity of a request comes from its verified client certificate
//! (CN = user, O = groups) or a bearer token; anonymous requests reach only the health and
//! version endpoints.

use super::error::ApiError;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Arc;

/// Who is making a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

/// The connection's identity (set by the TLS layer); `None` for anonymous connections.
#[derive(Debug, Clone, Default)]
pub struct Peer(pub Option<Identity>);

/// Static bearer tokens (`token,user,uid,"group1,group2"` lines, upstream's token file format).
#[derive(Debug, Clone, Default)]
pub struct Tokens(pub Arc<HashMap<String, Identity>>);

impl Tokens {
    pub fn parse(text: &str) -> Tokens {
        let mut map = HashMap::new();
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let mut fields = line.splitn(4, ',');
            let (Some(token), Some(user)) = (fields.next(), fields.next()) else {
                continue;
            };
            let _uid = fields.next();
            let groups = fields
                .next()
                .map(|g| {
                    g.trim_matches('"')
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            map.insert(
                token.trim().to_string(),
                Identity {
                    user: user.trim().to_string(),
                    groups,
                },
            );
        }
        Tokens(Arc::new(map))
    }
}

/// Reads user and groups from a DER client certificate.
pub fn identity_from_cert(der: &[u8]) -> Option<Identity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    Some(Identity { user, groups })
}

const PUBLIC: &[&str] = &[
    "/healthz",
    "/livez",
    "/readyz",
    "/version",
    "/cacerts",
    "/v1-berth/node-certificate",
];

pub async fn require_identity(mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if PUBLIC
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
    {
        return next.run(req).await;
    }
    let from_cert = req.extensions().get::<Peer>().and_then(|p| p.0.clone());
    let from_token = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(|t| {
            req.extensions()
                .get::<Tokens>()
                .and_then(|tokens| tokens.0.get(t.trim()).cloned())
        });
    match from_cert.or(from_token) {
        Some(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        None => ApiError::Unauthorized.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_lines_give_user_and_groups() {
        let t = Tokens::parse("abc,alice,1,\"dev,ops\"\n# comment\nxyz,bob,2\n");
        assert_eq!(
            t.0["abc"],
            Identity {
                user: "alice".into(),
                groups: vec!["dev".into(), "ops".into()]
            }
        );
        assert_eq!(t.0["xyz"].groups, Vec::<String>::new());
    }
}
