//! Between JSON and the typed structs: decoding with an error that names the offending field,
//! encoding back, and finding the fields a strict decoder would reject as unknown.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One step of a JSON path.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Decodes `raw` into `T`; on failure the message names the deepest field that alone makes
/// decoding fail (`spec.replicas: invalid type: string "x", expected i32`).
pub(crate) fn decode<T: DeserializeOwned>(raw: &Value) -> Result<T, String> {
    match serde_json::from_value::<T>(raw.clone()) {
        Ok(v) => Ok(v),
        Err(e) => {
            let (path, err) = locate::<T>(raw).unwrap_or((Vec::new(), e.to_string()));
            if path.is_empty() {
                Err(err)
            } else {
                Err(format!("{}: {err}", render(&path)))
            }
        }
    }
}

/// Narrows a failing document: repeatedly keep a single child of the current node (pruning its
/// siblings) while decoding still fails. Navigation in the pruned copy uses index 0 for arrays.
fn locate<T: DeserializeOwned>(raw: &Value) -> Option<(Vec<Step>, String)> {
    let mut doc = raw.clone();
    let mut shown: Vec<Step> = Vec::new();
    let mut nav: Vec<Step> = Vec::new();
    let mut last_err = serde_json::from_value::<T>(doc.clone()).err()?.to_string();
    'descend: loop {
        let node = get(&doc, &nav)?;
        let children: Vec<Step> = match node {
            Value::Object(m) => m.keys().cloned().map(Step::Key).collect(),
            Value::Array(a) => (0..a.len()).map(Step::Index).collect(),
            _ => break,
        };
        for child in children {
            let mut candidate = doc.clone();
            let kept = keep_only(get_mut(&mut candidate, &nav)?, &child);
            if !kept {
                continue;
            }
            if let Err(e) = serde_json::from_value::<T>(candidate.clone()) {
                last_err = e.to_string();
                doc = candidate;
                nav.push(match &child {
                    Step::Key(k) => Step::Key(k.clone()),
                    Step::Index(_) => Step::Index(0),
                });
                shown.push(child);
                continue 'descend;
            }
        }
        break;
    }
    Some((shown, last_err))
}

fn get<'a>(v: &'a Value, path: &[Step]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, s| match s {
        Step::Key(k) => cur.get(k),
        Step::Index(i) => cur.get(i),
    })
}

fn get_mut<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, s| match s {
        Step::Key(k) => cur.get_mut(k),
        Step::Index(i) => cur.get_mut(i),
    })
}

/// Drops every sibling of `child` in `node`; false when the child is not there.
fn keep_only(node: &mut Value, child: &Step) -> bool {
    match (node, child) {
        (Value::Object(m), Step::Key(k)) => match m.remove(k) {
            Some(v) => {
                m.clear();
                m.insert(k.clone(), v);
                true
            }
            None => false,
        },
        (Value::Array(a), Step::Index(i)) if *i < a.len() => {
            let v = a.swap_remove(*i);
            a.clear();
            a.push(v);
            true
        }
        _ => false,
    }
}

/// Serialises a typed object; the generated serialisers only fail on non-string map keys,
/// which these types do not have.
pub(crate) fn encode<T: Serialize>(obj: &T) -> Value {
    serde_json::to_value(obj).unwrap_or(Value::Null)
}

/// Keys present (non-null) in `input` but missing from the typed round trip `output`.
pub(crate) fn unknown_paths(input: &Value, output: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(input, output, &mut Vec::new(), &mut out);
    out
}

fn walk(input: &Value, output: &Value, path: &mut Vec<Step>, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i {
                if v.is_null() {
                    continue;
                }
                path.push(Step::Key(k.clone()));
                match o.get(k) {
                    Some(ov) => walk(v, ov, path, out),
                    None => out.push(render(path)),
                }
                path.pop();
            }
        }
        (Value::Array(i), Value::Array(o)) => {
            for (idx, (v, ov)) in i.iter().zip(o).enumerate() {
                path.push(Step::Index(idx));
                walk(v, ov, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    #[test]
    fn decode_errors_name_the_field() {
        let raw = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
            "spec": {"replicas": "three", "template": {"spec": {"containers": [{"name": "a"}, {"name": 5}]}}}});
        let err = decode::<Deployment>(&raw).unwrap_err();
        assert_eq!(
            err,
            "spec.replicas: invalid type: string \"three\", expected i32"
        );
        let raw =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": 5}]}}}});
        let err = decode::<Deployment>(&raw).unwrap_err();
        assert_eq!(
            err,
            "spec.template.spec.containers[1].name: invalid type: integer `5`, expected a string"
        );
    }

    #[test]
    fn wrong_kinds_fail_at_kind() {
        let err = decode::<Deployment>(&json!({"kind": "Pod"})).unwrap_err();
        assert!(err.starts_with("kind: invalid value"), "{err}");
    }

    #[test]
    fn unknown_fields_are_listed_with_paths() {
        let raw = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "labels": {"any": "key"}, "bogus": 1},
            "spec": {"selector": {}, "template": {"metadata": {"creationTimestamp": null},
                "spec": {"containers": [{"name": "a", "imagePullPolicyy": "Always", "resources": {"limits": {"anything": "1"}}}]}}}});
        let d: Deployment = decode(&raw).unwrap();
        let unknown = unknown_paths(&raw, &encode(&d));
        assert_eq!(
            unknown,
            vec![
                "metadata.bogus",
                "spec.template.spec.containers[0].imagePullPolicyy"
            ]
        );
    }
}
