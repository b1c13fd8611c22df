//! RFC 7396 JSON merge patches: how a change through the API applies to an object's document,
//! and how `vantage ctl` drafts a change over an object it read, the same way.

use serde_json::Value;

/// Applies `patch` to `target`: an object's fields are merged member by member, a `null`
/// removes its member, anything else replaces what was there.
pub fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The RFC's own examples: members merged, nulls removed, lists and scalars replaced.
    #[test]
    fn merges_as_rfc_7396_says() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge(&mut doc, json!({"a": "z", "c": {"f": null}, "l": [3]}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}, "l": [3]}));
        let mut doc = json!(["a"]);
        merge(&mut doc, json!({"a": "b"}));
        assert_eq!(doc, json!({"a": "b"}));
    }
}
