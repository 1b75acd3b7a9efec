//! Printers for core configuration and event kinds: ConfigMap, Secret and Event.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::duration::age;
use super::lookup::{has, int_at, map_len, opt_str, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col, wide};

pub(crate) fn config_map_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col("Data", "string", "Number of keys in data and binaryData."),
        age_col(),
    ]
}

pub(crate) fn config_map_cells(cm: &Value, now: Timestamp) -> Vec<Value> {
    let keys = map_len(cm, &["data"]) + map_len(cm, &["binaryData"]);
    vec![name(cm), json!(keys), created(cm, now)]
}

pub(crate) fn secret_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Type",
            "string",
            "Used to facilitate programmatic handling of secret data.",
        ),
        col("Data", "string", "Number of keys in data."),
        age_col(),
    ]
}

pub(crate) fn secret_cells(secret: &Value, now: Timestamp) -> Vec<Value> {
    // The API server defaults an empty type to Opaque before anything is printed.
    let type_ = match str_at(secret, &["type"]) {
        "" => "Opaque",
        t => t,
    };
    vec![
        name(secret),
        json!(type_),
        json!(map_len(secret, &["data"])),
        created(secret, now),
    ]
}

/// Upstream's Event columns are interleaved: the wide ones sit between the plain ones, and the
/// event's own Name comes last (kubectl shows `Last Seen` first).
pub(crate) fn event_columns() -> Vec<ColumnDefinition> {
    let mut name = name_col();
    name.priority = 1;
    vec![
        col(
            "Last Seen",
            "string",
            "Time the event was most recently seen.",
        ),
        col("Type", "string", "Type of this event (Normal, Warning)."),
        col(
            "Reason",
            "string",
            "Short, machine understandable reason for the event.",
        ),
        col("Object", "string", "The object this event is about."),
        wide(
            "Subobject",
            "string",
            "The part of the object the event is about (fieldPath).",
        ),
        wide("Source", "string", "The component reporting this event."),
        col(
            "Message",
            "string",
            "A human-readable description of the event.",
        ),
        wide("First Seen", "string", "Time the event was first seen."),
        wide(
            "Count",
            "string",
            "The number of times this event has occurred.",
        ),
        name,
    ]
}

/// The time since an optional timestamp, `<unknown>` when it is absent.
fn since(event: &Value, path: &[&str], now: Timestamp) -> String {
    age(opt_str(event, path), now)
}

pub(crate) fn event_cells(event: &Value, now: Timestamp) -> Vec<Value> {
    let first_seen = if has(event, &["firstTimestamp"]) {
        since(event, &["firstTimestamp"], now)
    } else {
        since(event, &["eventTime"], now)
    };
    let mut last_seen = if has(event, &["lastTimestamp"]) {
        since(event, &["lastTimestamp"], now)
    } else {
        first_seen.clone()
    };
    let mut count = int_at(event, &["count"]);
    if has(event, &["series"]) {
        last_seen = since(event, &["series", "lastObservedTime"], now);
        count = int_at(event, &["series", "count"]);
    } else if count == 0 {
        // Singleton events of the events.k8s.io API have no count.
        count = 1;
    }
    let kind = str_at(event, &["involvedObject", "kind"]).to_lowercase();
    let target = match str_at(event, &["involvedObject", "name"]) {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = first_non_empty(
        str_at(event, &["source", "component"]),
        str_at(event, &["reportingComponent"]),
    );
    let host = first_non_empty(
        str_at(event, &["source", "host"]),
        str_at(event, &["reportingInstance"]),
    );
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last_seen),
        json!(str_at(event, &["type"])),
        json!(str_at(event, &["reason"])),
        json!(target),
        json!(str_at(event, &["involvedObject", "fieldPath"])),
        json!(source),
        json!(str_at(event, &["message"]).trim()),
        json!(first_seen),
        json!(count),
        name(event),
    ]
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture::now;

    #[test]
    fn config_maps_count_data_and_binary_data() {
        let cm = json!({"metadata": {"name": "cfg", "creationTimestamp": "2024-05-01T11:58:00Z"},
                        "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(
            config_map_cells(&cm, now()),
            vec![json!("cfg"), json!(3), json!("2m")]
        );
        assert_eq!(config_map_cells(&json!({}), now())[1], json!(0));
    }

    #[test]
    fn secrets_show_type_and_data_count() {
        let s = json!({"metadata": {"name": "tls", "creationTimestamp": "2024-05-01T11:00:00Z"},
                       "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            secret_cells(&s, now()),
            vec![
                json!("tls"),
                json!("kubernetes.io/tls"),
                json!(2),
                json!("60m")
            ]
        );
        assert_eq!(secret_cells(&json!({}), now())[1], json!("Opaque"));
    }

    fn event() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "nginx.17c9a", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "nginx", "namespace": "default",
                               "fieldPath": "spec.containers{nginx}"},
            "reason": "Pulled", "message": "Successfully pulled image \"nginx:1.16.1\"\n",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2024-05-01T11:50:00Z", "lastTimestamp": "2024-05-01T11:58:00Z",
            "count": 3, "type": "Normal",
        })
    }

    #[test]
    fn events_print_in_upstream_column_order() {
        assert_eq!(
            event_cells(&event(), now()),
            vec![
                json!("2m"),
                json!("Normal"),
                json!("Pulled"),
                json!("pod/nginx"),
                json!("spec.containers{nginx}"),
                json!("kubelet, node-1"),
                json!("Successfully pulled image \"nginx:1.16.1\""),
                json!("10m"),
                json!(3),
                json!("nginx.17c9a"),
            ]
        );
        let names: Vec<(String, i32)> = event_columns()
            .into_iter()
            .map(|c| (c.name, c.priority))
            .collect();
        assert_eq!(names[0], ("Last Seen".to_string(), 0));
        assert_eq!(names[9], ("Name".to_string(), 1));
    }

    #[test]
    fn event_times_fall_back_like_upstream() {
        let mut e = event();
        e["lastTimestamp"] = json!(null);
        assert_eq!(event_cells(&e, now())[0], json!("10m"));
        e["firstTimestamp"] = json!(null);
        e["eventTime"] = json!("2024-05-01T11:59:00.000000Z");
        e["count"] = json!(null);
        let c = event_cells(&e, now());
        assert_eq!(
            (c[0].clone(), c[7].clone(), c[8].clone()),
            (json!("60s"), json!("60s"), json!(1))
        );
        e["series"] = json!({"count": 7, "lastObservedTime": "2024-05-01T11:59:30.000000Z"});
        let c = event_cells(&e, now());
        assert_eq!((c[0].clone(), c[8].clone()), (json!("30s"), json!(7)));
        assert_eq!(event_cells(&json!({}), now())[0], json!("<unknown>"));
    }

    #[test]
    fn event_source_and_object_use_reporting_fields_when_needed() {
        let mut e = event();
        e["source"] = json!({});
        e["reportingComponent"] = json!("deployment-controller");
        e["involvedObject"] = json!({"kind": "Deployment", "name": ""});
        let c = event_cells(&e, now());
        assert_eq!(c[3], json!("deployment"));
        assert_eq!(c[5], json!("deployment-controller"));
    }
}
