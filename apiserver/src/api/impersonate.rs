//! Impersonation (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-<key>` headers, what
//! `kubectl --as`/`--as-group` send): the requester must be allowed the `impersonate` verb on
//! each of them (`users`, `serviceaccounts`, `groups`, `uids`, `userextras/<key>`); the request
//! then runs as the impersonated identity.

use super::SharedState;
use super::authn::Identity;
use super::error::ApiError;
use crate::rbac::rules::{Attributes, User, service_account_of};
use axum::http::HeaderMap;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// What the headers ask to become (`None`: no impersonation).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wanted {
    user: String,
    groups: Vec<String>,
    uid: Option<String>,
    extra: Vec<(String, String)>,
}

fn wanted(headers: &HeaderMap) -> Result<Option<Wanted>, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect()
    };
    let user = values(USER).into_iter().next();
    let groups = values(GROUP);
    let uid = values(UID).into_iter().next();
    let mut extra = Vec::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA)
            && let Ok(v) = value.to_str()
        {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .to_string();
            extra.push((key, v.to_string()));
        }
    }
    match user {
        Some(user) => Ok(Some(Wanted {
            user,
            groups,
            uid,
            extra,
        })),
        None if groups.is_empty() && uid.is_none() && extra.is_empty() => Ok(None),
        None => Err(ApiError::BadRequest(
            "requested impersonation of groups, a uid or extra fields without impersonating a user"
                .into(),
        )),
    }
}

/// The checks impersonating `w` needs, each as (attributes, what the message names).
fn checks(w: &Wanted) -> Vec<(Attributes, String, String)> {
    let attrs =
        |group: &str, resource: &str, sub: &str, ns: &str, name: &str| Attributes::Resource {
            verb: "impersonate".into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        };
    let mut out = Vec::new();
    match service_account_of(&w.user) {
        Some((ns, name)) => out.push((
            attrs("", "serviceaccounts", "", ns, name),
            "serviceaccounts".to_string(),
            name.to_string(),
        )),
        None => out.push((
            attrs("", "users", "", "", &w.user),
            "users".to_string(),
            w.user.clone(),
        )),
    }
    for g in &w.groups {
        out.push((attrs("", "groups", "", "", g), "groups".into(), g.clone()));
    }
    if let Some(uid) = &w.uid {
        out.push((
            attrs("authentication.k8s.io", "uids", "", "", uid),
            "uids.authentication.k8s.io".into(),
            uid.clone(),
        ));
    }
    for (k, v) in &w.extra {
        out.push((
            attrs("authentication.k8s.io", "userextras", k, "", v),
            "userextras.authentication.k8s.io".into(),
            v.clone(),
        ));
    }
    out
}

/// The identity a permitted impersonation yields.
fn become_(w: Wanted) -> Identity {
    let mut groups = w.groups;
    if groups.is_empty()
        && let Some((ns, _)) = service_account_of(&w.user)
    {
        groups = vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{ns}"),
        ];
    }
    let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (k, v) in w.extra {
        extra.entry(k).or_default().push(v);
    }
    let id = Identity {
        user: w.user,
        uid: w.uid.unwrap_or_default(),
        groups,
        extra,
    };
    if id.user == "system:anonymous" {
        id
    } else {
        id.authenticated()
    }
}

/// Applies the request's impersonation headers to the authenticated `id`.
pub async fn apply(
    state: &SharedState,
    id: Identity,
    headers: &HeaderMap,
) -> Result<Identity, ApiError> {
    let Some(w) = wanted(headers)? else {
        return Ok(id);
    };
    let user = User::from(&id);
    for (attrs, resource, name) in checks(&w) {
        if state
            .authorizer
            .allowed_fresh(&user, &attrs)
            .await
            .is_none()
        {
            let (group, res) = match &attrs {
                Attributes::Resource {
                    group, resource, ..
                } => (group.clone(), resource.clone()),
                Attributes::NonResource { .. } => (String::new(), String::new()),
            };
            let scope = match attrs.namespace() {
                "" => "at the cluster scope".to_string(),
                ns => format!("in the namespace \"{ns}\""),
            };
            return Err(ApiError::Forbidden(format!(
                "{resource} \"{name}\" is forbidden: User \"{}\" cannot impersonate resource \"{res}\" in API group \"{group}\" {scope}",
                id.user
            )));
        }
    }
    tracing::debug!(user = %id.user, as_user = %w.user, "impersonating");
    Ok(become_(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn no_headers_means_no_impersonation_and_groups_need_a_user() {
        assert_eq!(wanted(&headers(&[])).unwrap(), None);
        assert!(wanted(&headers(&[("Impersonate-Group", "dev")])).is_err());
    }

    #[test]
    fn each_impersonated_part_is_checked_separately() {
        let w = wanted(&headers(&[
            ("Impersonate-User", "system:serviceaccount:web:builder"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Extra-Scopes", "view"),
        ]))
        .unwrap()
        .unwrap();
        let names: Vec<String> = checks(&w)
            .into_iter()
            .map(|(_, r, n)| format!("{r}/{n}"))
            .collect();
        assert_eq!(
            names,
            [
                "serviceaccounts/builder",
                "groups/dev",
                "groups/ops",
                "userextras.authentication.k8s.io/view"
            ]
        );
    }

    #[test]
    fn an_impersonated_service_account_gets_its_groups_when_none_are_asked() {
        let id = become_(Wanted {
            user: "system:serviceaccount:web:default".into(),
            groups: vec![],
            uid: None,
            extra: vec![],
        });
        assert_eq!(
            id.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:web",
                "system:authenticated"
            ]
        );
    }
}
