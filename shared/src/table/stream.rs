//! Table lists written straight to bytes: what [`super::table_with`] builds as one value, for
//! many stored objects. Each object is parsed once and without its `managedFields` (no column
//! reads them, and they are most of a pod's bytes; of a pod only what the pod printer reads),
//! its row is written as soon as its cells are computed, and the row's PartialObjectMetadata
//! (or whole object) is copied from the stored bytes instead of being cloned and encoded
//! again. The bytes are those of `table_with`.

use super::{IncludeObject, cells, columns, pod};
use jiff::Timestamp;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

/// The top-level fields of one JSON object, in their order, each left as its raw bytes.
struct RawFields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for RawFields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = RawFields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    fields.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(RawFields(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

impl<'a> RawFields<'a> {
    /// Parses from text: raw values read from `&str` are not checked for UTF-8 again, as
    /// those read from bytes are, each time a nested object is parsed.
    fn parse(json: &'a str) -> serde_json::Result<Self> {
        serde_json::from_str(json)
    }

    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The fields as a value, leaving out those named in `skip`.
    fn value(&self, skip: &[&str]) -> serde_json::Result<Map<String, Value>> {
        let mut m = Map::with_capacity(self.0.len());
        for (k, raw) in &self.0 {
            if !skip.contains(&k.as_ref()) {
                m.insert(k.to_string(), serde_json::from_str(raw.get())?);
            }
        }
        Ok(m)
    }
}

/// What the printers read of a stored object: all of it but `metadata.managedFields` (and of a
/// pod's spec only what the pod printer reads), with the raw metadata kept for the row's object.
fn printable<'a>(kind: &str, json: &'a [u8]) -> serde_json::Result<(Value, Option<&'a RawValue>)> {
    let text = std::str::from_utf8(json).map_err(serde::de::Error::custom)?;
    if kind == "Pod" {
        return printable_pod(text);
    }
    let top = RawFields::parse(text)?;
    let mut obj = Map::with_capacity(top.0.len());
    for (k, raw) in &top.0 {
        let v = match k.as_ref() {
            "metadata" => Value::Object(RawFields::parse(raw.get())?.value(&["managedFields"])?),
            _ => serde_json::from_str(raw.get())?,
        };
        obj.insert(k.to_string(), v);
    }
    Ok((Value::Object(obj), top.get("metadata")))
}

/// A pod as the pod printer reads it, taken in one pass over its JSON: the raw metadata (for
/// the row's object and the three fields below), the spec's printed fields and the status.
/// Nothing else of a pod is printed.
#[derive(serde::Deserialize)]
struct PrintedPod<'a> {
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
    #[serde(default)]
    spec: Option<PrintedSpec>,
    #[serde(default)]
    status: Option<Value>,
}

/// The fields of a pod's spec the pod printer reads: the node, the readiness gates, the init
/// containers (sidecars count as containers) and how many containers there are. The rest
/// (volumes, each container's image, env, resources, mounts …) is most of a spec and is
/// skipped, not kept.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PrintedSpec {
    #[serde(default)]
    node_name: Option<Value>,
    #[serde(default)]
    readiness_gates: Option<Value>,
    #[serde(default)]
    init_containers: Option<Value>,
    #[serde(default)]
    containers: Option<Counted>,
}

/// How many entries a JSON array has, its entries skipped.
struct Counted(usize);

impl<'de> serde::Deserialize<'de> for Counted {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Count;
        impl<'de> Visitor<'de> for Count {
            type Value = Counted;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON array")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Counted(n))
            }
        }
        d.deserialize_seq(Count)
    }
}

/// [`printable`] for a pod: what the pod printer reads (a null counts as absent, as it does
/// for the printers), the containers standing in as placeholders, one per container.
fn printable_pod(text: &str) -> serde_json::Result<(Value, Option<&RawValue>)> {
    // A derived struct would also take an array, field by field.
    if !text.trim_start().starts_with('{') {
        return Err(serde::de::Error::custom(
            "a stored pod is not a JSON object",
        ));
    }
    let pod: PrintedPod = serde_json::from_str(text)?;
    let mut obj = Map::with_capacity(3);
    if let Some(raw) = pod.metadata {
        obj.insert("metadata".into(), printed_pod_metadata(raw)?);
    }
    if let Some(spec) = pod.spec {
        let mut m = Map::with_capacity(4);
        let fields = [
            ("nodeName", spec.node_name),
            ("readinessGates", spec.readiness_gates),
            ("initContainers", spec.init_containers),
        ];
        for (k, v) in fields {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        }
        if let Some(Counted(n)) = spec.containers {
            m.insert("containers".into(), Value::Array(vec![Value::Null; n]));
        }
        obj.insert("spec".into(), Value::Object(m));
    }
    if let Some(status) = pod.status {
        obj.insert("status".into(), status);
    }
    Ok((Value::Object(obj), pod.metadata))
}

/// The fields of a pod's metadata the pod printer reads: its name, age and whether it is
/// being deleted (labels, annotations and owners are left unparsed; the row's object copies
/// the metadata's bytes).
fn printed_pod_metadata(raw: &RawValue) -> serde_json::Result<Value> {
    let mut metadata = Map::new();
    for (k, v) in RawFields::parse(raw.get())?.0 {
        if matches!(
            k.as_ref(),
            "name" | "creationTimestamp" | "deletionTimestamp"
        ) {
            metadata.insert(k.into_owned(), serde_json::from_str(v.get())?);
        }
    }
    Ok(Value::Object(metadata))
}

/// Writes a `meta.k8s.io/v1` Table of `kind` whose rows are the stored objects `objects` (each
/// one object's JSON), with the list's resource version and `continue` token, rows carrying
/// what `include` asks for. Fails on bytes that are not a JSON object.
pub fn write_table<'a>(
    out: &mut Vec<u8>,
    kind: &str,
    objects: impl IntoIterator<Item = &'a [u8]>,
    resource_version: Option<&str>,
    cont: Option<&str>,
    now: Timestamp,
    include: IncludeObject,
) -> serde_json::Result<()> {
    let list = TableList {
        kind,
        resource_version,
        cont,
        now,
        include,
    };
    list.write_head(out)?;
    list.write_rows(out, objects, true)?;
    TableList::write_tail(out);
    Ok(())
}

/// What a Table list is of and carries, beside its rows' objects.
#[derive(Debug, Clone, Copy)]
pub struct TableList<'a> {
    pub kind: &'a str,
    pub resource_version: Option<&'a str>,
    pub cont: Option<&'a str>,
    pub now: Timestamp,
    pub include: IncludeObject,
}

impl TableList<'_> {
    /// The Table's opening, up to and including the rows' opening bracket.
    pub fn write_head(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let mut metadata = Map::new();
        if let Some(rv) = self.resource_version {
            metadata.insert("resourceVersion".into(), Value::String(rv.into()));
        }
        if let Some(c) = self.cont {
            metadata.insert("continue".into(), Value::String(c.into()));
        }
        out.extend_from_slice(br#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":"#);
        serde_json::to_writer(&mut *out, &metadata)?;
        out.extend_from_slice(br#","columnDefinitions":"#);
        serde_json::to_writer(&mut *out, &columns(self.kind))?;
        out.extend_from_slice(br#","rows":["#);
        Ok(())
    }

    /// The rows of `objects`, comma-separated; `opening` says whether the first of them is the
    /// Table's first row (else a comma goes before it). Rows written in parts, in order, are
    /// the rows written at once.
    pub fn write_rows<'o>(
        &self,
        out: &mut Vec<u8>,
        objects: impl IntoIterator<Item = &'o [u8]>,
        opening: bool,
    ) -> serde_json::Result<()> {
        for (i, json) in objects.into_iter().enumerate() {
            if i > 0 || !opening {
                out.push(b',');
            }
            write_row(out, self.kind, json, self.now, self.include)?;
        }
        Ok(())
    }

    /// The Table's closing, after its last row.
    pub fn write_tail(out: &mut Vec<u8>) {
        out.extend_from_slice(b"]}");
    }
}

/// One row, as [`super::row_with`] makes it.
fn write_row(
    out: &mut Vec<u8>,
    kind: &str,
    json: &[u8],
    now: Timestamp,
    include: IncludeObject,
) -> serde_json::Result<()> {
    let (obj, metadata) = printable(kind, json)?;
    out.extend_from_slice(br#"{"cells":"#);
    serde_json::to_writer(&mut *out, &cells(kind, &obj, now))?;
    if kind == "Pod"
        && let Some(conditions) = pod::row_conditions(&obj)
    {
        out.extend_from_slice(br#","conditions":"#);
        serde_json::to_writer(&mut *out, &conditions)?;
    }
    out.extend_from_slice(br#","object":"#);
    match include {
        IncludeObject::None => out.extend_from_slice(b"null"),
        IncludeObject::Object => out.extend_from_slice(json),
        IncludeObject::Metadata => {
            out.extend_from_slice(
                br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
            );
            out.extend_from_slice(metadata.map_or("{}", RawValue::get).as_bytes());
            out.push(b'}');
        }
    }
    out.push(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::table_with;
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-29T12:00:00Z".parse().expect("time")
    }

    fn managed() -> Value {
        json!([{"manager": "kubectl-client-side-apply", "operation": "Update",
            "apiVersion": "v1", "time": "2026-11-29T11:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:image": {}}}}}}])
    }

    fn objects() -> Vec<(&'static str, Value)> {
        vec![
            (
                "Pod",
                json!({"kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": "web-0", "namespace": "default", "uid": "u1",
                    "creationTimestamp": "2026-11-29T11:00:00Z", "labels": {"app": "web"},
                    "managedFields": managed()},
                "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "nginx"}]},
                "status": {"phase": "Running", "podIP": "10.0.0.5",
                    "containerStatuses": [{"name": "main", "ready": true, "restartCount": 2,
                        "state": {"running": {"startedAt": "2026-11-29T11:00:01Z"}}}]}}),
            ),
            (
                "Pod",
                json!({"kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": "leaving", "namespace": "default", "uid": "u3",
                    "creationTimestamp": "2026-11-29T11:00:00Z",
                    "deletionTimestamp": "2026-11-29T11:59:00Z", "labels": {"app": "web"},
                    "annotations": {"a": "b"}, "ownerReferences": [{"apiVersion": "apps/v1",
                        "kind": "ReplicaSet", "name": "web-1", "uid": "r1", "controller": true}]},
                "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "nginx"}]},
                "status": {"phase": "Running", "containerStatuses": [{"name": "main",
                    "ready": true, "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-11-29T11:00:01Z"}}}]}}),
            ),
            (
                // Everything the pod printer reads of a spec, beside what it never does.
                "Pod",
                json!({"kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": "gated", "namespace": "default",
                    "creationTimestamp": "2026-11-29T11:30:00Z", "managedFields": managed()},
                "spec": {"nodeName": "n2",
                    "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"},
                        {"name": "setup", "image": "busybox"}],
                    "containers": [{"name": "a", "image": "nginx", "env": [{"name": "X", "value": "1"}],
                        "resources": {"requests": {"cpu": "100m"}}}, {"name": "b", "image": "redis"}],
                    "readinessGates": [{"conditionType": "example.com/ready"}],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "k", "operator": "Exists"}]},
                "status": {"phase": "Pending", "podIP": "10.0.0.9",
                    "conditions": [{"type": "example.com/ready", "status": "True"},
                        {"type": "Ready", "status": "False"}],
                    "initContainerStatuses": [
                        {"name": "setup", "ready": false, "restartCount": 0,
                            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                        {"name": "proxy", "ready": true, "started": true, "restartCount": 1,
                            "state": {"running": {"startedAt": "2026-11-29T11:30:05Z"}}}],
                    "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0,
                        "state": {"waiting": {"reason": "ContainerCreating"}}}]}}),
            ),
            (
                "Pod",
                json!({"kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": "done", "namespace": "default",
                    "creationTimestamp": "2026-11-29T10:00:00Z"},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
                "status": {"phase": "Succeeded"}}),
            ),
            (
                "Deployment",
                json!({"kind": "Deployment", "apiVersion": "apps/v1",
                "metadata": {"name": "web", "namespace": "default",
                    "creationTimestamp": "2026-11-28T12:00:00Z", "managedFields": managed()},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"spec": {"containers": [{"name": "main", "image": "nginx"}]}}},
                "status": {"replicas": 3, "readyReplicas": 2}}),
            ),
            (
                "ConfigMap",
                json!({"kind": "ConfigMap", "apiVersion": "v1",
                "metadata": {"name": "c", "namespace": "default",
                    "creationTimestamp": "2026-11-28T12:00:00Z"},
                "data": {"a": "1", "b": "é\"\\"}}),
            ),
            (
                "Namespace",
                json!({"kind": "Namespace", "apiVersion": "v1",
                "metadata": {"name": "ns"}, "status": {"phase": "Active"}}),
            ),
        ]
    }

    /// The bytes written are those of the value [`table_with`] builds, for every `include`,
    /// with and without a `continue` token.
    #[test]
    fn a_written_table_is_byte_for_byte_the_built_one() {
        let mut kinds: Vec<&str> = objects().iter().map(|(k, _)| *k).collect();
        kinds.dedup();
        for kind in kinds {
            let objs: Vec<Value> = objects()
                .into_iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, o)| o)
                .collect();
            let stored: Vec<Vec<u8>> = objs
                .iter()
                .map(|o| serde_json::to_vec(o).expect("encode"))
                .collect();
            for include in [
                IncludeObject::None,
                IncludeObject::Metadata,
                IncludeObject::Object,
            ] {
                for cont in [None, Some("next")] {
                    let mut built = table_with(kind, &objs, Some("42"), now(), include);
                    if let Some(c) = cont {
                        built["metadata"]["continue"] = json!(c);
                    }
                    let mut written = Vec::new();
                    write_table(
                        &mut written,
                        kind,
                        stored.iter().map(Vec::as_slice),
                        Some("42"),
                        cont,
                        now(),
                        include,
                    )
                    .expect("write");
                    assert_eq!(
                        String::from_utf8(written).expect("utf-8"),
                        built.to_string(),
                        "{kind} {include:?} {cont:?}"
                    );
                }
            }
        }
    }

    /// Rows written in parts, in order, between the opening and the closing, are the bytes of
    /// one write.
    #[test]
    fn rows_written_in_parts_make_the_same_table() {
        let stored: Vec<Vec<u8>> = objects()
            .into_iter()
            .filter(|(k, _)| *k == "Pod")
            .map(|(_, o)| serde_json::to_vec(&o).expect("encode"))
            .collect();
        let list = TableList {
            kind: "Pod",
            resource_version: Some("42"),
            cont: Some("next"),
            now: now(),
            include: IncludeObject::Metadata,
        };
        let mut whole = Vec::new();
        write_table(
            &mut whole,
            list.kind,
            stored.iter().map(Vec::as_slice),
            list.resource_version,
            list.cont,
            list.now,
            list.include,
        )
        .expect("write");
        for split in 0..=stored.len() {
            let (a, b) = stored.split_at(split);
            let mut parts = Vec::new();
            list.write_head(&mut parts).expect("head");
            list.write_rows(&mut parts, a.iter().map(Vec::as_slice), true)
                .expect("rows");
            list.write_rows(&mut parts, b.iter().map(Vec::as_slice), a.is_empty())
                .expect("rows");
            TableList::write_tail(&mut parts);
            assert_eq!(parts, whole, "split after {split} rows");
        }
    }

    #[test]
    fn an_empty_list_is_a_table_without_rows() {
        let mut written = Vec::new();
        write_table(
            &mut written,
            "Pod",
            std::iter::empty(),
            Some("7"),
            None,
            now(),
            IncludeObject::Metadata,
        )
        .expect("write");
        let v: Value = serde_json::from_slice(&written).expect("json");
        assert_eq!(v["rows"], json!([]));
        assert_eq!(v["metadata"], json!({"resourceVersion": "7"}));
    }

    #[test]
    fn stored_bytes_that_are_not_an_object_are_an_error() {
        for bad in [&b"[1]"[..], b"[]", b"{\"metadata\": 3", b"nope"] {
            let mut out = Vec::new();
            let r = write_table(
                &mut out,
                "Pod",
                [bad],
                None,
                None,
                now(),
                IncludeObject::Metadata,
            );
            assert!(r.is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
