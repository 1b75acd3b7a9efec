//! List merging for strategic merge patch: keyed lists of objects, sets of scalars, the
//! `$patch` list directives, `$deleteFromPrimitiveList` and `$setElementOrder` ordering — upstream's
//! `mergeSlice`, `mergePatchIntoOriginal` and `normalizeElementOrder`.
//!
//! Ordering rule (upstream's): items named by the patch come in the patch's order, the target's
//! other items keep their relative order, and the two runs are interleaved using the target's
//! order; an item the target lacks goes after the target's items it is compared with. Worked
//! examples: target `[1,2,3]`, patch `[3,1]` gives `[2,3,1]` — `2` is only in the target and
//! precedes `3` there, so it goes first; `3` and `1` then follow in patch order. Target
//! `[nginx]`, patch adding `sidecar` gives `[nginx, sidecar]`: new items are appended.

use serde_json::{Map, Value};

use super::PatchError;
use super::positions::Positions;
use super::schema::{ListStrategy, list_strategy};
use super::strategic::{
    DIRECTIVE, JsonType, Merger, SET_ELEMENT_ORDER, clean, clean_list, json_eq, render, render_map,
    render_scalar,
};

impl Merger<'_> {
    /// Merges the list at the current path (upstream's `mergeSliceHandler`): atomic lists are
    /// replaced unless the patch value is a `$deleteFromPrimitiveList`.
    pub(super) fn merge_list_field(
        &mut self,
        original: Vec<Value>,
        patch: Vec<Value>,
        is_delete_list: bool,
    ) -> Result<Vec<Value>, PatchError> {
        let strategy = list_strategy(self.kind, &self.path);
        if strategy == ListStrategy::Atomic && !is_delete_list {
            return Ok(clean_list(patch));
        }
        self.merge_list(original, patch, merge_key(strategy), is_delete_list)
    }

    fn merge_list(
        &mut self,
        original: Vec<Value>,
        patch: Vec<Value>,
        key: Option<&'static str>,
        is_delete_list: bool,
    ) -> Result<Vec<Value>, PatchError> {
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        if element_type(&[&original, &patch])? != Some(JsonType::Object) {
            if is_delete_list {
                let doomed = Positions::new(&patch, None);
                return Ok(original
                    .into_iter()
                    .filter(|v| doomed.of(&patch, v, None).is_none())
                    .collect());
            }
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            let mut seen = Positions::default();
            for v in original.iter().chain(&patch) {
                if seen.of(&merged, v, None).is_none() {
                    seen.add(merged.len(), v, None);
                    merged.push(v.clone());
                }
            }
            return Ok(order(merged, &patch, &original, None));
        }
        let key = key.ok_or_else(|| PatchError::NoMergeKeyForList(self.path.join(".")))?;
        let (original, patch) = apply_item_directives(original, patch, key)?;
        let merged = self.merge_items(original.clone(), &patch, key)?;
        Ok(order(merged, &patch, &original, Some(key)))
    }

    /// Merges each patch item into the target item with the same key, or appends it.
    fn merge_items(
        &mut self,
        mut original: Vec<Value>,
        patch: &[Value],
        key: &str,
    ) -> Result<Vec<Value>, PatchError> {
        let mut positions = Positions::new(&original, Some(key));
        for item in patch {
            let Value::Object(item) = item else {
                return Err(wrong_type(JsonType::Object, item));
            };
            let wanted = key_of(item, key)?;
            // A merge keeps an item's key, unless the patch nulls it: then the recorded
            // position is stale and a scan finds the true first match.
            let found = match positions.find(&original, wanted, Some(key)) {
                Some(i) if has_key_value(&original[i], key, wanted) => Some(i),
                Some(_) => original.iter().position(|o| has_key_value(o, key, wanted)),
                None => None,
            };
            match found {
                Some(i) => {
                    let Value::Object(current) = original[i].take() else {
                        return Err(wrong_type(JsonType::Object, &original[i]));
                    };
                    original[i] = Value::Object(self.merge_map(current, item.clone())?);
                }
                None => {
                    if let Some(added) = clean(Value::Object(item.clone())) {
                        positions.add(original.len(), &added, Some(key));
                        original.push(added);
                    }
                }
            }
        }
        Ok(original)
    }

    /// Handles every `$setElementOrder/<field>` in `patch` (upstream's `mergePatchIntoOriginal`):
    /// merges `<field>` now, orders it by the directive, and removes both from `patch`.
    pub(super) fn apply_element_orders(
        &mut self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
    ) -> Result<(), PatchError> {
        let directives: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
            .cloned()
            .collect();
        for directive in directives {
            let order_list = patch.shift_remove(&directive).unwrap_or(Value::Null);
            let Value::Array(order_list) = order_list else {
                return Err(wrong_type(JsonType::Array, &order_list));
            };
            let field = directive[SET_ELEMENT_ORDER.len()..]
                .strip_prefix('/')
                .ok_or(PatchError::BadSetElementOrderFormat)?
                .to_string();
            let current = list_at(original, &field)?;
            let patched = list_at(patch, &field)?;
            let ordered = self.within(&field, |m| m.ordered_list(current, patched, &order_list))?;
            if let Some(list) = ordered {
                original.insert(field.clone(), Value::Array(list));
            }
            patch.shift_remove(&field);
        }
        Ok(())
    }

    /// Merges one list under `$setElementOrder` and orders the result; `None` when neither the
    /// target nor the patch has the list.
    fn ordered_list(
        &mut self,
        current: Option<Vec<Value>>,
        patched: Option<Vec<Value>>,
        order_list: &[Value],
    ) -> Result<Option<Vec<Value>>, PatchError> {
        let key = merge_key(list_strategy(self.kind, &self.path));
        validate_order(patched.as_deref().unwrap_or_default(), order_list, key)?;
        let server_order = current.clone().unwrap_or_default();
        let merged = match (current, patched) {
            (Some(current), None) => current,
            (None, Some(patched)) => clean_list(patched),
            (Some(current), Some(patched)) => self.merge_list_field(current, patched, false)?,
            (None, None) => return Ok(None),
        };
        let key = key.filter(|_| merged.iter().all(|v| JsonType::of(v) == JsonType::Object));
        Ok(Some(order(merged, order_list, &server_order, key)))
    }
}

fn merge_key(strategy: ListStrategy) -> Option<&'static str> {
    match strategy {
        ListStrategy::MergeByKey(key) => Some(key),
        ListStrategy::Atomic | ListStrategy::MergePrimitives => None,
    }
}

/// The list stored under `field`, if any; anything but a list is an error.
fn list_at(map: &Map<String, Value>, field: &str) -> Result<Option<Vec<Value>>, PatchError> {
    match map.get(field) {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items.clone())),
        Some(other) => Err(wrong_type(JsonType::Array, other)),
    }
}

/// Applies `{"$patch": "delete", key: v}` (drop matching target items) and
/// `{"$patch": "replace"}` (the patch's other items become the list); returns the target and
/// the patch items still to merge.
fn apply_item_directives(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut rest = Vec::with_capacity(patch.len());
    let mut replace = false;
    let mut doomed = Vec::new();
    for item in patch {
        let Some(directive) = item.get(DIRECTIVE) else {
            rest.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let Value::Object(map) = &item else {
                    return Err(wrong_type(JsonType::Object, &item));
                };
                doomed.push(key_of(map, key)?.clone());
            }
            Some("replace") => replace = true,
            Some("merge") => return Err(PatchError::ListMergeDirective),
            _ => {
                return Err(PatchError::UnknownDirective {
                    directive: render_scalar(directive),
                    item: render(&item),
                });
            }
        }
    }
    if replace {
        return Ok((clean_list(rest), Vec::new()));
    }
    let positions = Positions::new(&doomed, None);
    original.retain(|o| {
        o.get(key)
            .is_none_or(|v| positions.find(&doomed, v, None).is_none())
    });
    Ok((original, rest))
}

/// Checks the patch's items appear in the `$setElementOrder` list in the same relative order
/// (upstream's `validatePatchWithSetOrderList`); deletions and directives are skipped.
fn validate_order(
    patch: &[Value],
    order_list: &[Value],
    key: Option<&str>,
) -> Result<(), PatchError> {
    if patch.is_empty() || order_list.is_empty() {
        return Ok(());
    }
    let mut items = Vec::with_capacity(patch.len());
    for item in patch {
        if key.is_some() && JsonType::of(item) != JsonType::Object {
            return Err(wrong_type(JsonType::Object, item));
        }
        if item.get(DIRECTIVE).is_none() {
            items.push(item);
        }
    }
    let (mut p, mut o) = (0, 0);
    while p < items.len() && o < order_list.len() {
        if same_item(items[p], &order_list[o], key)? {
            p += 1;
        }
        o += 1;
    }
    if p < items.len() {
        return Err(PatchError::OrderMismatch {
            patch: render(&Value::Array(patch.to_vec())),
            order: render(&Value::Array(order_list.to_vec())),
        });
    }
    Ok(())
}

fn same_item(a: &Value, b: &Value, key: Option<&str>) -> Result<bool, PatchError> {
    let Some(key) = key else {
        return Ok(json_eq(a, b));
    };
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        let bad = if a.is_object() { b } else { a };
        return Err(wrong_type(JsonType::Object, bad));
    };
    Ok(json_eq(key_of(a, key)?, key_of(b, key)?))
}

/// Orders `merged`: items found in `patch_order` first sorted by it, the rest sorted by
/// `server_order`, then the two interleaved by `server_order` (see the module docs).
fn order(
    merged: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let in_patch = Positions::new(patch_order, key);
    let in_server = Positions::new(server_order, key);
    let patch_index = |v: &Value| in_patch.of(patch_order, v, key);
    let server_index = |v: &Value| in_server.of(server_order, v, key);
    let (mut from_patch, mut server_only): (Vec<Value>, Vec<Value>) =
        merged.into_iter().partition(|v| patch_index(v).is_some());
    from_patch.sort_by_cached_key(|v| patch_index(v).unwrap_or(usize::MAX));
    server_only.sort_by_cached_key(|v| server_index(v).unwrap_or(usize::MAX));

    let mut out = Vec::with_capacity(from_patch.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = from_patch.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            // Upstream's `mergeSortedSlice`: with both in the server's order, the earlier
            // first; otherwise an item the server has goes before one it does not.
            (Some(l), Some(r)) => {
                let index = |v: &Value| server_index(v).map_or(-1, |i| i as i64);
                let (li, ri) = (index(l), index(r));
                if li >= 0 && ri >= 0 { li < ri } else { li > ri }
            }
        };
        out.extend(if take_left { left.next() } else { right.next() });
    }
    out
}

fn has_key_value(item: &Value, key: &str, wanted: &Value) -> bool {
    item.get(key).is_some_and(|v| json_eq(v, wanted))
}

fn key_of<'m>(item: &'m Map<String, Value>, key: &str) -> Result<&'m Value, PatchError> {
    item.get(key).ok_or_else(|| PatchError::NoMergeKey {
        item: render_map(item),
        key: key.to_string(),
    })
}

/// The common element type of the lists (`None` if all are empty); lists of lists and mixed
/// element types are errors.
fn element_type(lists: &[&[Value]]) -> Result<Option<JsonType>, PatchError> {
    let mut found = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        let t = JsonType::of(v);
        if t == JsonType::Array {
            return Err(PatchError::ListOfLists);
        }
        match found {
            None => found = Some(t),
            Some(prev) if prev != t => {
                let shown: Vec<String> = lists
                    .iter()
                    .map(|l| render(&Value::Array(l.to_vec())))
                    .collect();
                return Err(PatchError::MixedListElements(shown.join(" ")));
            }
            Some(_) => {}
        }
    }
    Ok(found)
}

fn wrong_type(expected: JsonType, found: &Value) -> PatchError {
    PatchError::WrongType {
        expected: expected.go_name(),
        found: JsonType::of(found).go_name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(v: Value) -> Vec<Value> {
        v.as_array().cloned().unwrap()
    }

    #[test]
    fn order_interleaves_patch_items_with_server_only_items() {
        // (merged, patch order, server order, want)
        let cases = [
            (
                json!([1, 2, 3]),
                json!([3, 1]),
                json!([1, 2, 3]),
                json!([2, 3, 1]),
            ),
            (
                json!([1, 2, 3]),
                json!([2, 3]),
                json!([1, 2]),
                json!([1, 2, 3]),
            ),
            (
                json!(["a", "b", "c"]),
                json!(["c"]),
                json!(["a", "b"]),
                json!(["a", "b", "c"]),
            ),
            (json!([1, 2]), json!([]), json!([2, 1]), json!([2, 1])),
        ];
        for (merged, patch, server, want) in cases {
            let got = order(list(merged), &list(patch.clone()), &list(server), None);
            assert_eq!(Value::Array(got), want, "patch order {patch}");
        }
    }

    #[test]
    fn order_compares_objects_by_merge_key() {
        let merged = list(json!([{"name": "a", "v": 1}, {"name": "b"}, {"name": "c"}]));
        let patch = list(json!([{"name": "c"}, {"name": "a"}]));
        let server = list(json!([{"name": "a"}, {"name": "b"}]));
        let got = order(merged, &patch, &server, Some("name"));
        assert_eq!(
            Value::Array(got),
            json!([{"name": "b"}, {"name": "c"}, {"name": "a", "v": 1}])
        );
    }

    #[test]
    fn patch_items_must_follow_the_set_element_order_list() {
        let order_list = list(json!([{"name": "a"}, {"name": "b"}]));
        let cases = [
            (json!([{"name": "a"}, {"name": "b"}]), true),
            (json!([{"name": "b"}]), true),
            (
                json!([{"name": "x", "$patch": "delete"}, {"name": "a"}]),
                true,
            ),
            (json!([{"name": "b"}, {"name": "a"}]), false),
            (json!([{"name": "c"}]), false),
        ];
        for (patch, ok) in cases {
            let got = validate_order(&list(patch.clone()), &order_list, Some("name"));
            assert_eq!(got.is_ok(), ok, "{patch}");
        }
    }

    #[test]
    fn long_lists_merge_in_linear_time() {
        // Regression: every lookup scanned the list, so a 170 KB patch of 20,000 finalizers
        // took a minute of CPU (and 20,000 new containers two).
        let target: Vec<Value> = (0..20_000).map(|i| json!(format!("t{i}"))).collect();
        let patch: Vec<Value> = (0..20_000).map(|i| json!(format!("p{i}"))).collect();
        let got = crate::patch::apply_strategic_merge_patch(
            &json!({"metadata": {"finalizers": target}}),
            &json!({"metadata": {"finalizers": patch}}),
            "Pod",
        )
        .unwrap();
        let got = got["metadata"]["finalizers"].as_array().cloned().unwrap();
        assert_eq!(
            (got.len(), &got[0], &got[39_999]),
            (40_000, &json!("t0"), &json!("p19999"))
        );
        let containers: Vec<Value> = (0..20_000)
            .map(|i| json!({"name": format!("c{i}")}))
            .collect();
        let update: Vec<Value> = (0..20_000)
            .rev()
            .map(|i| json!({"name": format!("c{i}"), "image": "x"}))
            .collect();
        let got = crate::patch::apply_strategic_merge_patch(
            &json!({"spec": {"containers": containers}}),
            &json!({"spec": {"containers": update}}),
            "Pod",
        )
        .unwrap();
        let got = got["spec"]["containers"].as_array().cloned().unwrap();
        assert_eq!(got.len(), 20_000);
        assert_eq!(got[0], json!({"name": "c19999", "image": "x"}));
    }

    #[test]
    fn deleting_and_nulling_keys_still_match_the_first_item() {
        let got = crate::patch::apply_strategic_merge_patch(
            &json!({"spec": {"containers": [
                {"name": "a", "image": "1"}, {"name": "b"}, {"name": "a", "image": "2"}]}}),
            &json!({"spec": {"containers": [
                {"name": "b", "$patch": "delete"}, {"name": "a", "image": "3"}]}}),
            "Pod",
        )
        .unwrap();
        assert_eq!(
            got["spec"]["containers"],
            json!([{"name": "a", "image": "3"}, {"name": "a", "image": "2"}])
        );
    }

    #[test]
    fn element_types_must_agree_and_not_nest() {
        assert_eq!(
            element_type(&[&list(json!([1])), &list(json!([2.5]))]),
            Ok(Some(JsonType::Number))
        );
        assert_eq!(element_type(&[&[], &[]]), Ok(None));
        assert_eq!(
            element_type(&[&list(json!([[1]]))]),
            Err(PatchError::ListOfLists)
        );
        assert!(matches!(
            element_type(&[&list(json!([1])), &list(json!(["x"]))]),
            Err(PatchError::MixedListElements(_))
        ));
    }
}
