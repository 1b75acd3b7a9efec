//! Field sets: the fields of an object a manager owns, as a tree of upstream's `FieldsV1`
//! path elements (`f:name` a field, `k:{"name":"nginx"}` an item of a list keyed by its map
//! keys, `v:"x"` an item of a set, `i:0` an item by index), and the set algebra
//! structured-merge-diff does on them. A node is a member (`me`) when the field itself is owned
//! (a leaf, a list item, an atomic value); an inner node that is only the way to its children
//! is not.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// A set of field paths, as a tree.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FieldSet {
    /// The node itself is in the set (`.` when it has children, `{}` when it does not).
    pub(super) me: bool,
    pub(super) children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    /// A set holding just the node it stands at.
    pub fn leaf() -> FieldSet {
        FieldSet {
            me: true,
            children: BTreeMap::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.me && self.children.is_empty()
    }

    /// The node at `element` below this one, if anything of it is in the set.
    pub fn child(&self, element: &str) -> Option<&FieldSet> {
        self.children.get(element).filter(|c| !c.is_empty())
    }

    /// The node at `element`, made if missing.
    pub fn child_mut(&mut self, element: &str) -> &mut FieldSet {
        self.children.entry(element.to_string()).or_default()
    }

    /// Adds the path (of path elements) to the set as a member.
    pub fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.me = true,
            Some((head, rest)) => self.child_mut(head).insert(rest),
        }
    }

    /// Whether the path is a member.
    #[cfg(test)]
    pub fn has(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.me,
            Some((head, rest)) => self.children.get(head).is_some_and(|c| c.has(rest)),
        }
    }

    pub fn union(&mut self, other: &FieldSet) {
        self.me |= other.me;
        for (k, v) in &other.children {
            self.child_mut(k).union(v);
        }
    }

    /// Removes `other`'s members, path by path (a member of `other` does not take the
    /// members below it: upstream's `Set.Difference`).
    pub fn difference(&mut self, other: &FieldSet) {
        if other.me {
            self.me = false;
        }
        for (k, v) in &other.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.difference(v);
                if mine.is_empty() {
                    self.children.remove(k);
                }
            }
        }
    }

    /// The members in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            me: self.me && other.me,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            if let Some(theirs) = other.children.get(k) {
                let both = v.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(k.clone(), both);
                }
            }
        }
        out
    }

    /// Drops what a write removed: a node removed whole (a member with no children listed)
    /// takes its subtree with it.
    pub fn remove_subtrees(&mut self, removed: &FieldSet) {
        if removed.me && removed.children.is_empty() {
            *self = FieldSet::default();
            return;
        }
        for (k, v) in &removed.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.remove_subtrees(v);
                if mine.is_empty() {
                    self.children.remove(k);
                }
            }
        }
    }

    /// The member paths in upstream's iteration order: at each node its members first, then
    /// its children's members, each run sorted (fields, then keyed items, values, indexes).
    pub fn members(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut names: Vec<&String> = self.children.keys().collect();
        names.sort_by_key(|n| (element_rank(n), n.as_str()));
        for name in &names {
            if self.children[*name].me {
                let mut p = prefix.clone();
                p.push((*name).clone());
                out.push(p);
            }
        }
        for name in names {
            prefix.push(name.clone());
            self.children[name].collect(prefix, out);
            prefix.pop();
        }
    }

    /// The set in `FieldsV1` JSON.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        if self.me && !self.children.is_empty() {
            out.insert(".".into(), json!({}));
        }
        for (k, v) in &self.children {
            if !v.is_empty() {
                out.insert(k.clone(), v.to_json());
            }
        }
        Value::Object(out)
    }

    /// The set a `FieldsV1` JSON value holds (anything else holds nothing).
    pub fn from_json(v: &Value) -> FieldSet {
        let mut s = FieldSet::default();
        if let Some(o) = v.as_object() {
            if o.is_empty() {
                s.me = true;
            }
            for (k, child) in o {
                if k == "." {
                    s.me = true;
                } else {
                    s.children.insert(k.clone(), FieldSet::from_json(child));
                }
            }
        }
        s
    }
}

/// Upstream's order of path element kinds: field names, keys, values, indexes.
fn element_rank(element: &str) -> u8 {
    match element.split_once(':').map(|(t, _)| t) {
        Some("f") => 0,
        Some("k") => 1,
        Some("v") => 2,
        _ => 3,
    }
}

/// A path as upstream prints it (`fieldpath.Path.String()`):
/// `.spec.template.spec.containers[name="nginx"].image`, `.metadata.finalizers[="a"]`.
pub fn render_path(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        match element.split_once(':') {
            Some(("f", name)) => {
                out.push('.');
                out.push_str(name);
            }
            Some(("k", key)) => {
                let fields: Vec<String> = match serde_json::from_str::<Map<String, Value>>(key) {
                    Ok(m) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                    Err(_) => vec![key.to_string()],
                };
                out.push_str(&format!("[{}]", fields.join(",")));
            }
            Some(("v", value)) => out.push_str(&format!("[={value}]")),
            Some(("i", index)) => out.push_str(&format!("[{index}]")),
            _ => out.push_str(element),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    fn set(paths: &[&[&str]]) -> FieldSet {
        let mut s = FieldSet::default();
        for p in paths {
            s.insert(&path(p));
        }
        s
    }

    #[test]
    fn paths_print_as_upstreams_fieldpath() {
        let cases: [(&[&str], &str); 4] = [
            (&["f:spec", "f:replicas"], ".spec.replicas"),
            (
                &[
                    "f:spec",
                    "f:containers",
                    "k:{\"name\":\"nginx\"}",
                    "f:image",
                ],
                ".spec.containers[name=\"nginx\"].image",
            ),
            (
                &["f:ports", "k:{\"containerPort\":80,\"protocol\":\"TCP\"}"],
                ".ports[containerPort=80,protocol=\"TCP\"]",
            ),
            (
                &["f:metadata", "f:finalizers", "v:\"a.io/x\""],
                ".metadata.finalizers[=\"a.io/x\"]",
            ),
        ];
        for (p, want) in cases {
            assert_eq!(render_path(&path(p)), want);
        }
    }

    #[test]
    fn set_algebra_works_member_by_member() {
        let a = set(&[
            &["f:spec", "f:replicas"],
            &["f:spec", "f:paused"],
            &["f:data"],
        ]);
        let b = set(&[&["f:spec", "f:replicas"], &["f:spec"], &["f:kind"]]);
        assert_eq!(a.intersection(&b), set(&[&["f:spec", "f:replicas"]]));
        let mut d = a.clone();
        d.difference(&b);
        assert_eq!(d, set(&[&["f:spec", "f:paused"], &["f:data"]]));
        let mut u = a.clone();
        u.union(&b);
        assert!(u.has(&path(&["f:spec"])) && u.has(&path(&["f:kind"])));
        // A member of `removed` with no children takes its whole subtree.
        let mut r = a.clone();
        r.remove_subtrees(&set(&[&["f:spec"]]));
        assert_eq!(r, set(&[&["f:data"]]));
    }

    #[test]
    fn members_come_node_by_node_and_round_trip_through_json() {
        let s = set(&[
            &["f:spec", "f:template", "f:image"],
            &["f:spec", "f:replicas"],
            &["f:data"],
            &["f:spec", "f:list", "k:{\"a\":1}"],
            &["f:spec", "f:list", "k:{\"a\":1}", "f:b"],
        ]);
        let printed: Vec<String> = s.members().iter().map(|p| render_path(p)).collect();
        assert_eq!(
            printed,
            [
                ".data",
                ".spec.replicas",
                ".spec.list[a=1]",
                ".spec.list[a=1].b",
                ".spec.template.image"
            ]
        );
        assert_eq!(FieldSet::from_json(&s.to_json()), s);
        assert_eq!(
            s.to_json()["f:spec"]["f:list"]["k:{\"a\":1}"],
            json!({".": {}, "f:b": {}})
        );
    }
}
