//! A CustomResourceDefinition read for serving: its accepted names, scope and versions (each
//! with its schema, subresources, printer columns and selectable fields) and its conversion
//! webhook.

use serde_json::Value;

use crate::conversion::webhook::ConversionWebhook;
use crate::resource::{self, ResourceType};

/// The parts of a definition the API server serves from.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// `<plural>.<group>`.
    pub name: String,
    pub uid: String,
    pub group: String,
    pub names: Names,
    pub namespaced: bool,
    pub versions: Vec<Version>,
    /// `spec.conversion`'s webhook when its strategy is `Webhook`; `None` converts by
    /// rewriting `apiVersion`.
    pub conversion_webhook: Option<ConversionWebhook>,
}

/// The names a definition is served under (its accepted names).
#[derive(Debug, Clone, PartialEq)]
pub struct Names {
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
}

/// One version of a definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    /// `schema.openAPIV3Schema`.
    pub schema: Option<Value>,
    pub status: bool,
    pub scale: Option<ScalePaths>,
    /// `additionalPrinterColumns`, as written.
    pub columns: Vec<Value>,
    /// `selectableFields[*].jsonPath`.
    pub selectable_fields: Vec<String>,
    /// `deprecationWarning`, or upstream's default text when `deprecated` without one.
    pub deprecation: Option<String>,
}

/// The scale subresource's paths (`.spec.replicas` form).
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// Reads a stored definition. The names served are the accepted ones (`status.acceptedNames`)
/// when the definition has them, else the spec's.
pub fn parse_definition(crd: &Value) -> Result<Definition, String> {
    let s = |v: &Value| v.as_str().map(str::to_string);
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let spec = &crd["spec"];
    let accepted = &crd["status"]["acceptedNames"];
    let names = if accepted["plural"].as_str().is_some_and(|p| !p.is_empty()) {
        accepted
    } else {
        &spec["names"]
    };
    let group = s(&spec["group"]).ok_or("spec.group is missing")?;
    let kind = s(&names["kind"]).ok_or("spec.names.kind is missing")?;
    let plural = s(&names["plural"]).ok_or("spec.names.plural is missing")?;
    let versions = spec["versions"]
        .as_array()
        .ok_or("spec.versions is missing")?
        .iter()
        .map(parse_version)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Definition {
        name: s(&crd["metadata"]["name"]).unwrap_or_default(),
        uid: s(&crd["metadata"]["uid"]).unwrap_or_default(),
        group,
        names: Names {
            list_kind: s(&names["listKind"]).unwrap_or_else(|| format!("{kind}List")),
            singular: s(&names["singular"])
                .filter(|x| !x.is_empty())
                .unwrap_or_else(|| kind.to_lowercase()),
            kind,
            plural,
            short_names: strs(&names["shortNames"]),
            categories: strs(&names["categories"]),
        },
        namespaced: spec["scope"] != "Cluster",
        versions,
        conversion_webhook: ConversionWebhook::parse(&spec["conversion"]),
    })
}

fn parse_version(v: &Value) -> Result<Version, String> {
    let name = v["name"]
        .as_str()
        .ok_or("a version has no name")?
        .to_string();
    let scale = &v["subresources"]["scale"];
    let scale = scale.is_object().then(|| ScalePaths {
        spec_replicas: scale["specReplicasPath"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        status_replicas: scale["statusReplicasPath"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        label_selector: scale["labelSelectorPath"].as_str().map(str::to_string),
    });
    let deprecation = v["deprecated"].as_bool().unwrap_or(false).then(|| {
        v["deprecationWarning"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_default()
    });
    Ok(Version {
        served: v["served"].as_bool().unwrap_or(false),
        storage: v["storage"].as_bool().unwrap_or(false),
        schema: v.pointer("/schema/openAPIV3Schema").cloned(),
        status: v["subresources"]["status"].is_object(),
        scale,
        columns: v["additionalPrinterColumns"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        selectable_fields: v["selectableFields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f["jsonPath"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        deprecation,
        name,
    })
}

impl Definition {
    /// The storage version's name.
    pub fn storage_version(&self) -> Option<&str> {
        self.versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.as_str())
    }

    /// The resource type `version` is served as; `storage` is the storage version's name.
    pub fn resource_type(&self, version: &Version, storage: &'static str) -> ResourceType {
        let leak_list = |items: &[String]| -> &'static [&'static str] {
            let interned: Vec<&'static str> = items.iter().map(|s| resource::intern(s)).collect();
            intern_list(interned)
        };
        ResourceType {
            group: resource::intern(&self.group),
            version: resource::intern(&version.name),
            kind: resource::intern(&self.names.kind),
            plural: resource::intern(&self.names.plural),
            singular: resource::intern(&self.names.singular),
            namespaced: self.namespaced,
            short_names: leak_list(&self.names.short_names),
            categories: leak_list(&self.names.categories),
            has_status: version.status,
            has_scale: version.scale.is_some(),
            create_only: false,
            read_only: false,
            stored_as: (version.name != storage).then_some(storage),
            custom: true,
        }
    }
}

/// A `'static` list of interned strings, leaked once per distinct list.
fn intern_list(items: Vec<&'static str>) -> &'static [&'static str] {
    use std::sync::Mutex;
    static LISTS: Mutex<Vec<&'static [&'static str]>> = Mutex::new(Vec::new());
    if items.is_empty() {
        return &[];
    }
    let mut lists = LISTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = lists.iter().find(|l| **l == items.as_slice()) {
        return found;
    }
    let leaked: &'static [&'static str] = Box::leak(items.into_boxed_slice());
    lists.push(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_definition_is_served_under_its_accepted_names() {
        let crd = json!({
            "metadata": {"name": "crontabs.stable.example.com", "uid": "u"},
            "spec": {
                "group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}},
                    {"name": "v1beta1", "served": true, "storage": false, "deprecated": true}
                ]
            },
            "status": {"acceptedNames": {"plural": "crontabs", "kind": "CronTab", "singular": "crontab", "listKind": "CronTabList", "shortNames": ["ct"]}}
        });
        let def = parse_definition(&crd).expect("parses");
        assert_eq!(def.storage_version(), Some("v1"));
        let rt = def.resource_type(&def.versions[1], "v1");
        assert_eq!(
            (
                rt.kind,
                rt.plural,
                rt.namespaced,
                rt.stored_as,
                rt.short_names
            ),
            ("CronTab", "crontabs", true, Some("v1"), &["ct"][..])
        );
        let v1 = def.resource_type(&def.versions[0], "v1");
        assert!(v1.has_status && v1.has_scale && v1.stored_as.is_none() && v1.custom);
        assert_eq!(def.versions[1].deprecation.as_deref(), Some(""));
    }
}
