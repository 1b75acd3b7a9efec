//! Planner: pure, no I/O.
//!
//! The CustomResourceDefinition controller (upstream's naming, establishing and
//! finalizer controllers): the status a definition should have (accepted names, the
//! `NamesAccepted`, `Established` and `Terminating` conditions, the storage version in
//! `storedVersions`), and on deletion its objects deleted before its cleanup finalizer goes.

use berth_shared::admission::CLEANUP_FINALIZER;
use serde_json::{Map, Value, json};

/// What one pass knows of a definition.
pub struct Observed<'a> {
    pub crd: &'a Value,
    /// The other definitions of the same group.
    pub others: Vec<&'a Value>,
    /// When the definition is being deleted: how many of its objects remain (`None` when they
    /// could not be counted because it serves no storage version).
    pub remaining: Option<usize>,
    /// Whether this process's API server serves the definition now: it becomes `Established`
    /// only then, so a client that sees the condition finds its types.
    pub served: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write this `status`.
    WriteStatus(Value),
    /// Delete every object of the definition.
    DeleteObjects,
    /// Every object is gone: lift the cleanup finalizer.
    RemoveFinalizer,
}

/// The actions for one pass; `now` is the RFC 3339 time for new conditions.
pub fn plan(o: &Observed, now: &str) -> Vec<Action> {
    let crd = o.crd;
    let deleting = crd.pointer("/metadata/deletionTimestamp").is_some();
    let mut status = crd.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    let mut actions = Vec::new();
    if deleting {
        if !has_cleanup_finalizer(crd) {
            return actions;
        }
        set_condition(
            &mut status,
            "Terminating",
            true,
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
            now,
        );
        if status != crd["status"] {
            actions.push(Action::WriteStatus(status));
        }
        actions.push(match o.remaining {
            Some(n) if n > 0 => Action::DeleteObjects,
            _ => Action::RemoveFinalizer,
        });
        return actions;
    }
    let names = spec_names(crd);
    match conflict(&names, &o.others) {
        None => {
            status["acceptedNames"] = names;
            set_condition(
                &mut status,
                "NamesAccepted",
                true,
                "NoConflicts",
                "no conflicts found",
                now,
            );
            // Established once this process serves the names (upstream's establishing
            // controller waits for its handler the same way); until then `Installing`.
            if o.served || berth_shared::custom::is_established(crd) {
                set_condition(
                    &mut status,
                    "Established",
                    true,
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                    now,
                );
            } else {
                set_condition(
                    &mut status,
                    "Established",
                    false,
                    "Installing",
                    "the initial names have been accepted",
                    now,
                );
            }
        }
        Some((reason, message)) => {
            if !status["acceptedNames"].is_object() {
                status["acceptedNames"] = json!({"plural": "", "kind": ""});
            }
            set_condition(&mut status, "NamesAccepted", false, reason, &message, now);
            if !berth_shared::custom::is_established(crd) {
                set_condition(
                    &mut status,
                    "Established",
                    false,
                    "NotAccepted",
                    "not all names are accepted",
                    now,
                );
            }
        }
    }
    if let Some(storage) = storage_version(crd) {
        let stored = status["storedVersions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !stored.iter().any(|v| v == storage) {
            let mut stored = stored;
            stored.push(Value::String(storage.to_string()));
            status["storedVersions"] = Value::Array(stored);
        }
    }
    if status != crd["status"] {
        actions.push(Action::WriteStatus(status));
    }
    actions
}

fn has_cleanup_finalizer(crd: &Value) -> bool {
    crd.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x == CLEANUP_FINALIZER))
}

fn storage_version(crd: &Value) -> Option<&str> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["storage"] == true)?
        .get("name")?
        .as_str()
}

/// The spec's names as they are accepted: singular and listKind defaulted.
fn spec_names(crd: &Value) -> Value {
    let mut names = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    if names["singular"].as_str().unwrap_or_default().is_empty() {
        names["singular"] = Value::String(kind.to_lowercase());
    }
    if names["listKind"].as_str().unwrap_or_default().is_empty() {
        names["listKind"] = Value::String(format!("{kind}List"));
    }
    names
}

/// The first of the names another definition of the group has accepted already, as
/// upstream's naming controller words it.
fn conflict(names: &Value, others: &[&Value]) -> Option<(&'static str, String)> {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let list = |v: &Value, k: &str| -> Vec<String> {
        v[k].as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let accepted: Vec<&Value> = others
        .iter()
        .map(|o| &o["status"]["acceptedNames"])
        .collect();
    let resource_names = |a: &Value| -> Vec<String> {
        let mut all = vec![s(a, "plural"), s(a, "singular")];
        all.extend(list(a, "shortNames"));
        all.retain(|n| !n.is_empty());
        all
    };
    let plural = s(names, "plural");
    if accepted.iter().any(|a| resource_names(a).contains(&plural)) {
        return Some(("PluralConflict", format!("{plural:?} is already in use")));
    }
    let singular = s(names, "singular");
    if accepted
        .iter()
        .any(|a| resource_names(a).contains(&singular))
    {
        return Some((
            "SingularConflict",
            format!("{singular:?} is already in use"),
        ));
    }
    for short in list(names, "shortNames") {
        if accepted.iter().any(|a| resource_names(a).contains(&short)) {
            return Some(("ShortNamesConflict", format!("{short:?} is already in use")));
        }
    }
    let kinds = |a: &Value| vec![s(a, "kind"), s(a, "listKind")];
    let kind = s(names, "kind");
    if accepted.iter().any(|a| kinds(a).contains(&kind)) {
        return Some(("KindConflict", format!("{kind:?} is already in use")));
    }
    let list_kind = s(names, "listKind");
    if accepted.iter().any(|a| kinds(a).contains(&list_kind)) {
        return Some((
            "ListKindConflict",
            format!("{list_kind:?} is already in use"),
        ));
    }
    None
}

/// Sets condition `type_`, keeping its `lastTransitionTime` when its status does not change.
fn set_condition(
    status: &mut Value,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    now: &str,
) {
    let value = if ok { "True" } else { "False" };
    let conditions = status
        .as_object_mut()
        .map(|m| m.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(conditions)) = conditions else {
        return;
    };
    let mut c = Map::new();
    c.insert("type".into(), json!(type_));
    c.insert("status".into(), json!(value));
    c.insert("lastTransitionTime".into(), json!(now));
    c.insert("reason".into(), json!(reason));
    c.insert("message".into(), json!(message));
    match conditions.iter_mut().find(|x| x["type"] == type_) {
        Some(existing) => {
            if existing["status"] == value {
                c.insert(
                    "lastTransitionTime".into(),
                    existing["lastTransitionTime"].clone(),
                );
            }
            *existing = Value::Object(c);
        }
        None => conditions.push(Value::Object(c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-11-29T22:00:00Z";

    /// What a pass of a process that serves the definition observes.
    fn observed<'a>(
        crd: &'a Value,
        others: Vec<&'a Value>,
        remaining: Option<usize>,
    ) -> Observed<'a> {
        Observed {
            crd,
            others,
            remaining,
            served: true,
        }
    }

    fn crd(plural: &str, kind: &str, short: &[&str]) -> Value {
        json!({
            "metadata": {"name": format!("{plural}.example.com"), "finalizers": [CLEANUP_FINALIZER]},
            "spec": {"group": "example.com", "names": {"plural": plural, "kind": kind, "shortNames": short},
                     "versions": [{"name": "v1alpha1", "served": true, "storage": false},
                                  {"name": "v1", "served": true, "storage": true}]}
        })
    }

    fn established(mut c: Value) -> Value {
        let Action::WriteStatus(s) = plan(&observed(&c, vec![], None), NOW)[0].clone() else {
            panic!("a new definition gets a status");
        };
        c["status"] = s;
        c
    }

    #[test]
    fn a_new_definition_is_accepted_and_established_with_its_storage_version() {
        let c = crd("crontabs", "CronTab", &["ct"]);
        let actions = plan(&observed(&c, vec![], None), NOW);
        let [Action::WriteStatus(s)] = actions.as_slice() else {
            panic!("{actions:?}");
        };
        assert_eq!(s["acceptedNames"]["singular"], "crontab");
        assert_eq!(s["acceptedNames"]["listKind"], "CronTabList");
        assert_eq!(s["storedVersions"], json!(["v1"]));
        let types: Vec<(&str, &str, &str)> = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["type"].as_str().unwrap(),
                    c["status"].as_str().unwrap(),
                    c["reason"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            types,
            [
                ("NamesAccepted", "True", "NoConflicts"),
                ("Established", "True", "InitialNamesAccepted")
            ]
        );
        // A second pass over the written status changes nothing.
        let mut again = c.clone();
        again["status"] = s.clone();
        assert!(plan(&observed(&again, vec![], None), "later").is_empty());
    }

    #[test]
    fn a_definition_is_established_only_once_this_process_serves_it() {
        let c = crd("crontabs", "CronTab", &[]);
        let o = Observed {
            crd: &c,
            others: vec![],
            remaining: None,
            served: false,
        };
        let actions = plan(&o, NOW);
        let [Action::WriteStatus(s)] = actions.as_slice() else {
            panic!("{actions:?}");
        };
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(
            (&s["conditions"][1]["status"], &s["conditions"][1]["reason"]),
            (&json!("False"), &json!("Installing"))
        );
    }

    #[test]
    fn names_another_definition_holds_are_refused() {
        let other = established(crd("crontabs", "CronTab", &["ct"]));
        for (c, reason) in [
            (crd("crontabs", "Other", &[]), "PluralConflict"),
            (crd("others", "Other", &["ct"]), "ShortNamesConflict"),
            (
                {
                    // Its own singular: the one derived from the kind would conflict first.
                    let mut c = crd("others", "CronTab", &[]);
                    c["spec"]["names"]["singular"] = json!("other");
                    c
                },
                "KindConflict",
            ),
        ] {
            let actions = plan(&observed(&c, vec![&other], None), NOW);
            let Action::WriteStatus(s) = &actions[0] else {
                panic!()
            };
            assert_eq!(s["conditions"][0]["reason"], reason);
            assert_eq!(
                s["conditions"][1]["status"], "False",
                "{reason}: not established"
            );
        }
    }

    #[test]
    fn a_definition_being_deleted_deletes_its_objects_then_its_finalizer() {
        let mut c = established(crd("crontabs", "CronTab", &[]));
        c["metadata"]["deletionTimestamp"] = json!(NOW);
        let with_objects = plan(&observed(&c, vec![], Some(2)), NOW);
        assert!(
            matches!(with_objects.as_slice(), [Action::WriteStatus(s), Action::DeleteObjects] if s["conditions"][2]["type"] == "Terminating")
        );
        let none_left = plan(&observed(&c, vec![], Some(0)), NOW);
        assert_eq!(none_left.last(), Some(&Action::RemoveFinalizer));
        c["metadata"]["finalizers"] = json!([]);
        assert!(plan(&observed(&c, vec![], Some(1)), NOW).is_empty());
    }
}
