//! Authentication: the identity of a request comes from its verified client certificate
//! (CN = user, O = groups), a static bearer token, or a ServiceAccount token (a JWT we signed,
//! whose account and bound pod still exist); every authenticated identity is also in
//! `system:authenticated`. Anonymous requests reach only the health and version endpoints.
//! Impersonation headers then switch the identity ([`super::impersonate`]).

use super::SharedState;
use super::error::ApiError;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Arc;

// Who a request is from: the registry records it too (a CSR's requestor), so the type lives
// there.
pub use berth_registry::identity::{AUTHENTICATED, Identity};

/// The identity as RBAC matches it.
impl From<&Identity> for crate::rbac::rules::User {
    fn from(id: &Identity) -> Self {
        crate::rbac::rules::User {
            name: id.user.clone(),
            groups: id.groups.clone(),
        }
    }
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
            map.insert(token.trim().to_string(), Identity::new(user.trim(), groups));
        }
        Tokens(Arc::new(map))
    }
}

/// The identity of the first certificate of a PEM chain (tests of the certificates we issue).
#[cfg(test)]
pub(crate) fn identity_from_pem(pem: &str) -> Option<Identity> {
    let der = rustls_pemfile::certs(&mut pem.as_bytes()).next()?.ok()?;
    identity_from_cert(&der)
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
    Some(Identity::new(user, groups))
}

const PUBLIC: &[&str] = &[
    "/healthz",
    "/livez",
    "/readyz",
    "/version",
    "/cacerts",
    "/v1-berth/node-certificate",
];

/// The bearer token of a request, if it carries one.
fn bearer(req: &Request) -> Option<String> {
    req.headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme is case-insensitive (the Python client sends `bearer`).
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        })
        .map(|t| t.trim().to_string())
}

/// Verifies a ServiceAccount token against the signer and the store.
async fn service_account(state: &SharedState, token: String) -> Option<Identity> {
    if !state.tokens.is_ours(&token) {
        return None;
    }
    let st = state.clone();
    let verified = tokio::task::spawn_blocking(move || {
        crate::serviceaccount::authenticate(&st.registry, &st.tokens, &token)
    })
    .await
    .ok()?;
    match verified {
        Ok(u) => Some(Identity {
            user: u.name,
            uid: u.uid,
            groups: u.groups,
            extra: u.extra,
        }),
        Err(e) => {
            tracing::debug!(error = %e, "service account token refused");
            None
        }
    }
}

pub async fn require_identity(
    State(state): State<SharedState>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    if PUBLIC
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
    {
        return next.run(req).await;
    }
    let from_cert = req.extensions().get::<Peer>().and_then(|p| p.0.clone());
    let token = bearer(&req);
    let from_static = token.as_ref().and_then(|t| {
        req.extensions()
            .get::<Tokens>()
            .and_then(|tokens| tokens.0.get(t).cloned())
    });
    let id = match (from_cert, from_static, token) {
        (Some(id), _, _) | (None, Some(id), _) => Some(id),
        (None, None, Some(token)) => service_account(&state, token).await,
        (None, None, None) => None,
    };
    let Some(id) = id else {
        return ApiError::Unauthorized.into_response();
    };
    let id = match super::impersonate::apply(&state, id.authenticated(), req.headers()).await {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    req.extensions_mut().insert(id);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_lines_give_user_and_groups() {
        let t = Tokens::parse("abc,alice,1,\"dev,ops\"\n# comment\nxyz,bob,2\n");
        assert_eq!(
            t.0["abc"],
            Identity::new("alice", vec!["dev".into(), "ops".into()])
        );
        assert_eq!(t.0["xyz"].groups, Vec::<String>::new());
    }
}
