//! Node authorization, as a pure decision over the facts of one request: a node's credential
//! may write only its own Node and Lease, the status of pods bound to it, and events; it may
//! read (and finally delete) the pods bound to it and the configmaps/secrets they reference,
//! and ask for tokens of the accounts they run as, bound to them.

/// Kubernetes verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    fn reads(self) -> bool {
        matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }

    fn writes(self) -> bool {
        matches!(self, Verb::Create | Verb::Update | Verb::Patch)
    }
}

/// What a node asks to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub verb: Verb,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    /// For lists and watches: the value of an `=` field selector on `spec.nodeName` /
    /// `metadata.name`.
    pub node_name_selector: Option<&'a str>,
    pub name_selector: Option<&'a str>,
}

/// Facts looked up for the decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// For a named pod: the node it is bound to (`None`: unbound or absent).
    pub pod_node: Option<String>,
    /// For a named configmap/secret: whether a pod bound to the node references it.
    pub referenced_by_node_pod: bool,
    /// For a named secret: it is of type `kubernetes.io/tls` and an Ingress of its namespace
    /// names it in `spec.tls` (every agent's ingress proxy terminates TLS with it).
    pub ingress_tls_secret: bool,
    /// For `serviceaccounts/<name>/token`: the request binds the token to a pod bound to the
    /// node that runs as that account.
    pub token_for_own_pod: bool,
    /// For a named PersistentVolume: its node affinity pins it to the node (a local-path
    /// volume of that node, whose cleanup finalizer the node's agent removes).
    pub volume_on_node: bool,
}

/// Allowed, or the reason it is not.
pub fn decide(node: &str, r: &Request<'_>, facts: &Facts) -> Result<(), String> {
    let own_name = r.name == Some(node);
    let ok = match (r.group, r.resource) {
        ("", "nodes") => match r.verb {
            // As upstream's system:node role: every Node may be read (the agent routes to
            // every other node's pods).
            Verb::Get | Verb::List | Verb::Watch => true,
            // A create names the object in its body: [`created_name_allowed`] checks it.
            Verb::Create => r.name.is_none(),
            Verb::Update | Verb::Patch => own_name,
            _ => false,
        },
        ("coordination.k8s.io", "leases") => {
            r.namespace == Some("kube-node-lease")
                && (own_name
                    || (r.verb.reads() && r.name_selector == Some(node))
                    || (r.verb == Verb::Create && r.name.is_none()))
                && (r.verb.reads() || r.verb.writes())
        }
        ("", "pods") => match (r.verb, r.subresource) {
            (Verb::List | Verb::Watch, None) => r.node_name_selector == Some(node),
            (Verb::Get, None) => facts.pod_node.as_deref() == Some(node),
            (Verb::Update | Verb::Patch, Some("status")) => facts.pod_node.as_deref() == Some(node),
            (Verb::Get, Some("status")) => facts.pod_node.as_deref() == Some(node),
            (Verb::Delete, None) => facts.pod_node.as_deref() == Some(node),
            _ => false,
        },
        ("", "events") => matches!(
            r.verb,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Get
        ),
        // As upstream's node authorizer: a referenced object may be read, listed and watched,
        // a list or watch only of the one object its `metadata.name` field selector names.
        ("", "configmaps") | ("", "secrets") => match r.verb {
            Verb::Get => facts.referenced_by_node_pod || facts.ingress_tls_secret,
            Verb::List | Verb::Watch => r.name_selector.is_some() && facts.referenced_by_node_pod,
            _ => false,
        },
        // As upstream's node authorizer: the service variables of every pod (and, later, the
        // service proxy) need every Service.
        ("", "services") => r.verb.reads(),
        // The service proxy: every Service's endpoints.
        ("discovery.k8s.io", "endpointslices") => r.verb.reads(),
        // The agent mounts the claims of its pods and their volumes. Upstream's graph allows
        // only those its pods reference; reads of all are the simpler rule here.
        ("", "persistentvolumeclaims") => r.verb.reads() && r.subresource.is_none(),
        ("", "persistentvolumes") => match r.verb {
            Verb::Get | Verb::List | Verb::Watch => r.subresource.is_none(),
            Verb::Update | Verb::Patch => r.subresource.is_none() && facts.volume_on_node,
            _ => false,
        },
        ("", "serviceaccounts") => {
            r.verb == Verb::Create && r.subresource == Some("token") && facts.token_for_own_pod
        }
        // As upstream's node rules: a node requests its certificates and waits for them
        // (admission refuses a request for another node's identity).
        ("certificates.k8s.io", "certificatesigningrequests") => {
            r.subresource.is_none()
                && matches!(r.verb, Verb::Create | Verb::Get | Verb::List | Verb::Watch)
        }
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let what = match r.name {
        Some(n) => format!("{} \"{n}\"", qualified(r.group, r.resource)),
        None => qualified(r.group, r.resource),
    };
    let scope = match r.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    let resource = match r.subresource {
        Some(s) => format!("{}/{s}", r.resource),
        None => r.resource.to_string(),
    };
    Err(format!(
        "{what} is forbidden: User \"system:node:{node}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}: a node may only touch its own Node and Lease, and the pods bound to it",
        r.verb.as_str(),
        r.group
    ))
}

/// For a node's create of a Node or Lease: the object in the body must be its own.
pub fn created_name_allowed(
    node: &str,
    group: &str,
    resource: &str,
    body_name: Option<&str>,
) -> Result<(), String> {
    match (group, resource) {
        ("", "nodes") | ("coordination.k8s.io", "leases") if body_name != Some(node) => {
            Err(format!(
                "{} \"{}\" is forbidden: User \"system:node:{node}\" cannot create resource \"{resource}\" in API group \"{group}\": a node may only create its own Node and Lease",
                qualified(group, resource),
                body_name.unwrap_or_default()
            ))
        }
        _ => Ok(()),
    }
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(
        verb: Verb,
        group: &'a str,
        resource: &'a str,
        ns: Option<&'a str>,
        name: Option<&'a str>,
    ) -> Request<'a> {
        Request {
            verb,
            group,
            resource,
            subresource: None,
            namespace: ns,
            name,
            node_name_selector: None,
            name_selector: None,
        }
    }

    #[test]
    fn a_node_writes_its_own_node_but_not_another() {
        assert!(
            decide(
                "a",
                &req(Verb::Update, "", "nodes", None, Some("a")),
                &Facts::default()
            )
            .is_ok()
        );
        let err = decide(
            "a",
            &req(Verb::Update, "", "nodes", None, Some("b")),
            &Facts::default(),
        )
        .unwrap_err();
        assert!(err.contains("nodes \"b\" is forbidden"), "{err}");
    }

    #[test]
    fn a_node_reads_claims_and_volumes_and_writes_only_its_own_volumes() {
        for verb in [Verb::Get, Verb::List, Verb::Watch] {
            let r = req(verb, "", "persistentvolumeclaims", Some("shop"), None);
            assert!(decide("n1", &r, &Facts::default()).is_ok());
            let r = req(verb, "", "persistentvolumes", None, None);
            assert!(decide("n1", &r, &Facts::default()).is_ok());
        }
        let write = req(Verb::Patch, "", "persistentvolumes", None, Some("pvc-1"));
        assert!(decide("n1", &write, &Facts::default()).is_err());
        let own = Facts {
            volume_on_node: true,
            ..Facts::default()
        };
        assert!(decide("n1", &write, &own).is_ok());
        let delete = req(Verb::Delete, "", "persistentvolumes", None, Some("pvc-1"));
        assert!(decide("n1", &delete, &own).is_err());
        let claim_write = req(
            Verb::Update,
            "",
            "persistentvolumeclaims",
            Some("shop"),
            Some("c"),
        );
        assert!(decide("n1", &claim_write, &own).is_err());
    }

    #[test]
    fn a_node_reads_every_service_but_writes_none() {
        for verb in [Verb::Get, Verb::List, Verb::Watch] {
            let r = req(verb, "", "services", Some("shop"), None);
            assert!(decide("a", &r, &Facts::default()).is_ok(), "{verb:?}");
        }
        let write = req(Verb::Create, "", "services", Some("shop"), None);
        assert!(decide("a", &write, &Facts::default()).is_err());
    }

    #[test]
    fn a_node_renews_only_its_own_lease_in_the_node_lease_namespace() {
        let ok = req(
            Verb::Update,
            "coordination.k8s.io",
            "leases",
            Some("kube-node-lease"),
            Some("a"),
        );
        assert!(decide("a", &ok, &Facts::default()).is_ok());
        let other_ns = req(
            Verb::Update,
            "coordination.k8s.io",
            "leases",
            Some("default"),
            Some("a"),
        );
        assert!(decide("a", &other_ns, &Facts::default()).is_err());
    }

    #[test]
    fn pod_status_writes_need_the_pod_to_be_bound_to_the_node() {
        let mut r = req(Verb::Update, "", "pods", Some("default"), Some("p"));
        r.subresource = Some("status");
        let mine = Facts {
            pod_node: Some("a".into()),
            ..Facts::default()
        };
        let theirs = Facts {
            pod_node: Some("b".into()),
            ..Facts::default()
        };
        assert!(decide("a", &r, &mine).is_ok());
        assert!(decide("a", &r, &theirs).is_err());
        let spec_update = req(Verb::Update, "", "pods", Some("default"), Some("p"));
        assert!(
            decide("a", &spec_update, &mine).is_err(),
            "only status, never the spec"
        );
    }

    #[test]
    fn pod_lists_must_select_the_nodes_own_pods() {
        let mut r = req(Verb::Watch, "", "pods", None, None);
        assert!(decide("a", &r, &Facts::default()).is_err());
        r.node_name_selector = Some("a");
        assert!(decide("a", &r, &Facts::default()).is_ok());
    }

    #[test]
    fn secrets_are_readable_only_when_a_pod_on_the_node_uses_them() {
        let r = req(Verb::Get, "", "secrets", Some("default"), Some("s"));
        assert!(decide("a", &r, &Facts::default()).is_err());
        assert!(
            decide(
                "a",
                &r,
                &Facts {
                    referenced_by_node_pod: true,
                    ..Facts::default()
                }
            )
            .is_ok()
        );
    }

    #[test]
    fn a_referenced_secret_may_be_watched_only_by_its_name() {
        let referenced = Facts {
            referenced_by_node_pod: true,
            ..Facts::default()
        };
        let mut r = req(Verb::Watch, "", "secrets", Some("default"), None);
        assert!(decide("a", &r, &referenced).is_err(), "every secret");
        r.name_selector = Some("s");
        assert!(decide("a", &r, &referenced).is_ok());
        assert!(decide("a", &r, &Facts::default()).is_err());
        r.verb = Verb::List;
        assert!(decide("a", &r, &referenced).is_ok());
        r.verb = Verb::Update;
        assert!(decide("a", &r, &referenced).is_err());
    }

    #[test]
    fn an_ingress_tls_secret_may_be_read_but_not_listed_or_written() {
        let tls = Facts {
            ingress_tls_secret: true,
            ..Facts::default()
        };
        let mut r = req(Verb::Get, "", "secrets", Some("default"), Some("shop-tls"));
        assert!(decide("a", &r, &tls).is_ok());
        assert!(decide("a", &r, &Facts::default()).is_err());
        for verb in [Verb::List, Verb::Watch, Verb::Update, Verb::Delete] {
            r.verb = verb;
            assert!(decide("a", &r, &tls).is_err(), "{verb:?}");
        }
    }

    #[test]
    fn a_node_creates_only_its_own_node_and_lease() {
        assert!(
            decide(
                "a",
                &req(Verb::Create, "", "nodes", None, None),
                &Facts::default()
            )
            .is_ok()
        );
        assert!(created_name_allowed("a", "", "nodes", Some("a")).is_ok());
        assert!(created_name_allowed("a", "", "nodes", Some("b")).is_err());
        assert!(created_name_allowed("a", "coordination.k8s.io", "leases", Some("b")).is_err());
        assert!(created_name_allowed("a", "", "events", Some("anything")).is_ok());
    }

    #[test]
    fn everything_else_is_forbidden() {
        for r in [
            req(Verb::Create, "apps", "deployments", Some("default"), None),
            req(Verb::Create, "", "pods", Some("default"), None),
        ] {
            assert!(decide("a", &r, &Facts::default()).is_err(), "{r:?}");
        }
    }
}
