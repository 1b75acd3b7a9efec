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
/// decoding fail (`spec.replicas: invalid type: string "x", expected i32`). Decodes from the
/// borrowed document, not a copy of it: every write decodes its object at least once.
pub(crate) fn decode<T: DeserializeOwned>(raw: &Value) -> Result<T, String> {
    match T::deserialize(raw) {
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
///
/// Each child is tried alone in its parent's place, so a level costs the size of its node, not
/// the node's size per child: a 200 KB body of 20,000 unknown keys and one bad field took
/// minutes when every candidate was a copy of the whole document.
fn locate<T: DeserializeOwned>(raw: &Value) -> Option<(Vec<Step>, String)> {
    let mut doc = raw.clone();
    let mut shown: Vec<Step> = Vec::new();
    let mut nav: Vec<Step> = Vec::new();
    let mut last_err = serde_json::from_value::<T>(doc.clone()).err()?.to_string();
    'descend: loop {
        let children: Vec<(Step, Value)> = match std::mem::take(get_mut(&mut doc, &nav)?) {
            Value::Object(m) => m.into_iter().map(|(k, v)| (Step::Key(k), v)).collect(),
            Value::Array(a) => a
                .into_iter()
                .enumerate()
                .map(|(i, v)| (Step::Index(i), v))
                .collect(),
            _ => break,
        };
        for (child, value) in children {
            let alone = match &child {
                Step::Key(k) => {
                    let mut m = serde_json::Map::new();
                    m.insert(k.clone(), value);
                    Value::Object(m)
                }
                Step::Index(_) => Value::Array(vec![value]),
            };
            *get_mut(&mut doc, &nav)? = alone;
            if let Err(e) = serde_json::from_value::<T>(doc.clone()) {
                last_err = e.to_string();
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

fn get_mut<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, s| match s {
        Step::Key(k) => cur.get_mut(k),
        Step::Index(i) => cur.get_mut(i),
    })
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
    fn a_wide_document_is_narrowed_in_linear_time() {
        // Regression: 20,000 unknown keys before a bad field took minutes (every candidate
        // was a copy of the whole document); a 3 MiB body would have held a thread for hours.
        let mut raw = serde_json::Map::new();
        for i in 0..20_000 {
            raw.insert(format!("k{i}"), json!(0));
        }
        raw.insert("metadata".into(), json!(5));
        let err = decode::<Deployment>(&Value::Object(raw)).unwrap_err();
        assert!(
            err.starts_with("metadata: invalid type: integer `5`"),
            "{err}"
        );
        let wide: Vec<Value> = (0..20_000).map(|_| json!({"name": "a"})).collect();
        let raw = json!({"spec": {"template": {"spec": {"containers": wide, "nodeName": 1}}}});
        let err = decode::<Deployment>(&raw).unwrap_err();
        assert!(
            err.starts_with("spec.template.spec.nodeName: invalid type"),
            "{err}"
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
