//! Arguments checked against a tool's JSON schema before the tool runs: the subset the
//! built-in tools use (type, properties, required, additionalProperties false, enum,
//! items, minimum/maximum). What fails is told to the model as the tool's error.

use serde_json::Value;

pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "arguments")
}

fn type_ok(kind: &str, v: &Value) -> bool {
    match kind {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
        "number" => v.is_number(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn check(schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    match schema.get("type") {
        Some(Value::String(t)) if !type_ok(t, v) => {
            return Err(format!("{at} must be of type {t}, not {v}"));
        }
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)) => {
            return Err(format!("{at} has the wrong type: {v}"));
        }
        _ => {}
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(v)
    {
        return Err(format!(
            "{at} must be one of {}",
            Value::Array(options.clone())
        ));
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!("{at} must be at least {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!("{at} must be at most {max}"));
        }
    }
    if let Some(obj) = v.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = schema.get("required") {
            for r in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    return Err(format!("{at} lacks the required field {r:?}"));
                }
            }
        }
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(s, val, &format!("{at}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{at} has an unknown field {k:?}"));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, item) in arr.iter().enumerate() {
            check(items, item, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checks_types_required_and_unknown_fields() {
        let s = json!({"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
                       "required": ["path"], "additionalProperties": false});
        assert!(validate(&s, &json!({"path": "a"})).is_ok());
        assert!(validate(&s, &json!({"path": 1})).is_err());
        assert!(validate(&s, &json!({})).is_err());
        assert!(validate(&s, &json!({"path": "a", "x": 1})).is_err());
        assert!(validate(&s, &json!({"path": "a", "n": 0})).is_err());
        assert!(validate(&s, &json!("a")).is_err());
    }
}
