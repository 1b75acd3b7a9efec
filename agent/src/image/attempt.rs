//! Which logins a pull tries at an endpoint, and in what order.
//!
//! Planner: pure, no I/O.
//!
//! At an endpoint that is the image's own registry, the pod's credentials (in keyring order)
//! come first, then the endpoint's own (anonymous, or the registries file's). A mirror only gets
//! its own: a pod's secret was written for the image's registry, and is never sent to another
//! host. Docker Hub's `registry-1.docker.io` is `docker.io`'s own endpoint.

use super::keyring::Credential;
use super::registries::{Credentials, Endpoint};

/// How a request was made, for the wording of a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Asked {
    /// `GET` or `HEAD`.
    pub method: &'static str,
    /// Credentials were sent: containerd reports the bare status; without, "pull access
    /// denied …".
    pub with_credentials: bool,
}

/// One way to authenticate at an endpoint: a pod's credential, or (`None`) the endpoint's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Attempt<'a> {
    pub pod: Option<&'a Credential>,
}

impl Attempt<'_> {
    pub fn asked(&self, method: &'static str, ep: &Endpoint) -> Asked {
        Asked {
            method,
            with_credentials: self.pod.is_some() || ep.credentials != Credentials::Anonymous,
        }
    }

    /// Part of the client cache key: one oci-client login per credential.
    pub fn key(&self) -> String {
        self.pod
            .map_or_else(|| "endpoint".to_string(), Credential::fingerprint)
    }
}

/// The attempts at `ep` for an image of `registry`, in order.
pub(super) fn attempts<'a>(
    registry: &str,
    ep: &Endpoint,
    creds: &'a [Credential],
) -> Vec<Attempt<'a>> {
    let own = ep.host == registry || (registry == "docker.io" && ep.host == "registry-1.docker.io");
    let mut out: Vec<Attempt<'a>> = if own {
        creds.iter().map(|c| Attempt { pod: Some(c) }).collect()
    } else {
        Vec::new()
    };
    out.push(Attempt { pod: None });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::RegistriesConfig;

    fn basic(u: &str) -> Credential {
        Credential::Basic {
            username: u.into(),
            password: "p".into(),
        }
    }

    #[test]
    fn pod_credentials_go_only_to_the_images_own_registry_first_then_its_own_access() {
        let cfg = RegistriesConfig::parse(
            "mirrors:\n  docker.io:\n    endpoint: [\"http://127.0.0.1:5000\"]\n  quay.io:\n    endpoint: [\"https://quay.io\"]\n",
        )
        .unwrap();
        let creds = [basic("a"), basic("b")];
        for (registry, want) in [
            (
                "docker.io",
                vec![
                    ("127.0.0.1:5000", vec![None]),
                    ("registry-1.docker.io", vec![Some("a"), Some("b"), None]),
                ],
            ),
            (
                "quay.io",
                vec![("quay.io", vec![Some("a"), Some("b"), None])],
            ),
            (
                "private.example:5000",
                vec![("private.example:5000", vec![Some("a"), Some("b"), None])],
            ),
        ] {
            let got: Vec<(String, Vec<Option<String>>)> = cfg
                .endpoints(registry)
                .iter()
                .map(|ep| {
                    let who = attempts(registry, ep, &creds)
                        .iter()
                        .map(|a| {
                            a.pod.map(|c| match c {
                                Credential::Basic { username, .. } => username.clone(),
                                Credential::Token(t) => t.clone(),
                            })
                        })
                        .collect();
                    (ep.host.clone(), who)
                })
                .collect();
            let want: Vec<(String, Vec<Option<String>>)> = want
                .into_iter()
                .map(|(h, w)| {
                    (
                        h.to_string(),
                        w.into_iter().map(|x| x.map(String::from)).collect(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{registry}");
        }
    }

    #[test]
    fn a_refusal_reads_as_anonymous_only_when_nothing_was_sent() {
        let cfg = RegistriesConfig::parse(
            "configs:\n  \"r.example\":\n    auth: {username: u, password: p}\n",
        )
        .unwrap();
        let anonymous = &RegistriesConfig::default().endpoints("q.example")[0];
        let configured = &cfg.endpoints("r.example")[0];
        let cred = basic("a");
        let pod = Attempt { pod: Some(&cred) };
        let own = Attempt { pod: None };
        assert!(!own.asked("GET", anonymous).with_credentials);
        assert!(own.asked("GET", configured).with_credentials);
        assert!(pod.asked("HEAD", anonymous).with_credentials);
        assert_ne!(pod.key(), own.key());
    }
}
