//! Planner: pure, no I/O.
//!
//! What every active namespace must hold, as upstream's ServiceAccount and root-CA publisher
//! controllers keep it: a `default` ServiceAccount, and the `kube-root-ca.crt` ConfigMap with
//! the cluster's CA bundle under `ca.crt`.

/// What is there now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed<'a> {
    /// The namespace exists and is not terminating.
    pub active: bool,
    pub has_default_account: bool,
    /// The `ca.crt` of `kube-root-ca.crt`: `None` when the ConfigMap is absent.
    pub root_ca: Option<Option<&'a str>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    CreateDefaultAccount,
    CreateRootCa,
    /// The ConfigMap exists with other (or no) contents: put the bundle back.
    UpdateRootCa,
}

pub fn plan(o: &Observed<'_>, ca: &str) -> Vec<Action> {
    if !o.active {
        return Vec::new();
    }
    let mut out = Vec::new();
    if !o.has_default_account {
        out.push(Action::CreateDefaultAccount);
    }
    match o.root_ca {
        None => out.push(Action::CreateRootCa),
        Some(have) if have != Some(ca) => out.push(Action::UpdateRootCa),
        Some(_) => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_namespace_gets_its_account_and_the_ca() {
        let o = Observed {
            active: true,
            has_default_account: false,
            root_ca: None,
        };
        assert_eq!(
            plan(&o, "CA"),
            [Action::CreateDefaultAccount, Action::CreateRootCa]
        );
    }

    #[test]
    fn an_edited_ca_bundle_is_put_back_and_a_correct_one_left_alone() {
        let edited = Observed {
            active: true,
            has_default_account: true,
            root_ca: Some(Some("evil")),
        };
        assert_eq!(plan(&edited, "CA"), [Action::UpdateRootCa]);
        let emptied = Observed {
            root_ca: Some(None),
            ..edited.clone()
        };
        assert_eq!(plan(&emptied, "CA"), [Action::UpdateRootCa]);
        let fine = Observed {
            root_ca: Some(Some("CA")),
            ..edited
        };
        assert!(plan(&fine, "CA").is_empty());
    }

    #[test]
    fn terminating_namespaces_get_nothing() {
        let o = Observed {
            active: false,
            has_default_account: false,
            root_ca: None,
        };
        assert!(plan(&o, "CA").is_empty());
    }
}
