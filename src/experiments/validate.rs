//! Checking a JSON value against one of pimdes's JSON Schemas ([`super::schema`]), for the
//! subset of JSON Schema 2020-12 that schemars writes: `$ref` into `$defs`, `type`,
//! `properties`, `required`, `additionalProperties`, `items`, `const`, `enum`, `oneOf`,
//! `anyOf`, `allOf`, `if`/`then`, `minimum`, `maximum`, `minLength`. A rule outside it is
//! itself a violation, so a schema cannot pass a value by a rule this checker ignores.

use serde_json::{Map, Value};

/// One way a value breaks a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where, as `$.a.b[2]`.
    pub at: String,
    pub reason: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.reason)
    }
}

/// Every violation of `schema` by `value`, in the order of the schema's rules and keys
/// (sorted by name).
pub fn validate(schema: &Value, value: &Value) -> Vec<Violation> {
    violations(schema, value, false)
}

/// As [`validate`], but every key may be absent, at any depth (inside an alternative of
/// `oneOf` too, which then needs one alternative to match, not exactly one): only the
/// values present are checked. For a result written by another
/// version of the same report shape, which may lack fields added since.
pub fn validate_present(schema: &Value, value: &Value) -> Vec<Violation> {
    violations(schema, value, true)
}

fn violations(schema: &Value, value: &Value, absent_allowed: bool) -> Vec<Violation> {
    let mut out = Vec::new();
    let checker = Checker {
        root: schema,
        absent_allowed,
    };
    checker.check(schema, value, "$", &mut out);
    out
}

struct Checker<'a> {
    root: &'a Value,
    /// Whether `required` is waived.
    absent_allowed: bool,
}

fn violation(at: &str, reason: String) -> Violation {
    Violation {
        at: at.to_owned(),
        reason,
    }
}

impl Checker<'_> {
    fn check(&self, s: &Value, v: &Value, at: &str, out: &mut Vec<Violation>) {
        let Some(rules) = s.as_object() else {
            if s == &Value::Bool(false) {
                out.push(violation(at, "not allowed".to_owned()));
            }
            return;
        };
        for (rule, arg) in rules {
            let known = value_rule(rule, arg, v, at, out)
                || self.object_rule(rules, rule, arg, v, at, out)
                || self.combined_rule(rules, rule, arg, v, at, out);
            if !known {
                out.push(violation(
                    at,
                    format!("the schema's rule `{rule}` is unknown"),
                ));
            }
        }
    }

    fn passes(&self, s: &Value, v: &Value) -> bool {
        let mut out = Vec::new();
        self.check(s, v, "", &mut out);
        out.is_empty()
    }

    /// The rules on an object's keys and an array's items; false when `rule` is not one.
    fn object_rule(
        &self,
        rules: &Map<String, Value>,
        rule: &str,
        arg: &Value,
        v: &Value,
        at: &str,
        out: &mut Vec<Violation>,
    ) -> bool {
        match rule {
            "properties" => {
                for (key, sub) in arg.as_object().into_iter().flatten() {
                    if let Some(x) = v.get(key) {
                        self.check(sub, x, &format!("{at}.{key}"), out);
                    }
                }
            }
            "required" if self.absent_allowed => {}
            "required" => {
                let keys = arg
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str);
                for key in keys.filter(|k| v.is_object() && v.get(k).is_none()) {
                    out.push(violation(at, format!("lacks `{key}`")));
                }
            }
            "additionalProperties" => {
                let known = rules.get("properties").and_then(Value::as_object);
                for (key, x) in v.as_object().into_iter().flatten() {
                    if !known.is_some_and(|k| k.contains_key(key)) {
                        self.check(arg, x, &format!("{at}.{key}"), out);
                    }
                }
            }
            "items" => {
                for (i, x) in v.as_array().into_iter().flatten().enumerate() {
                    self.check(arg, x, &format!("{at}[{i}]"), out);
                }
            }
            _ => return false,
        }
        true
    }

    /// References and combinations of schemas; false when `rule` is not one of them.
    fn combined_rule(
        &self,
        rules: &Map<String, Value>,
        rule: &str,
        arg: &Value,
        v: &Value,
        at: &str,
        out: &mut Vec<Violation>,
    ) -> bool {
        match rule {
            "$ref" => {
                let name = arg.as_str().and_then(|r| r.strip_prefix("#/$defs/"));
                match name.and_then(|n| self.root.get("$defs")?.get(n)) {
                    Some(def) => self.check(def, v, at, out),
                    None => out.push(violation(
                        at,
                        format!("the schema's `$ref` {arg} is unknown"),
                    )),
                }
            }
            "oneOf" | "anyOf" => {
                let alternatives = arg.as_array().map_or(&[][..], Vec::as_slice);
                let passing = alternatives.iter().filter(|s| self.passes(s, v)).count();
                // With absent keys allowed, the keys that tell alternatives apart may be
                // absent, so several may match: one is enough.
                let ok = if rule == "oneOf" && !self.absent_allowed {
                    passing == 1
                } else {
                    passing >= 1
                };
                if !ok {
                    let reason = format!("{passing} alternatives of {rule} match {}", shown(v));
                    out.push(violation(at, reason));
                }
            }
            "allOf" => {
                for sub in arg.as_array().into_iter().flatten() {
                    self.check(sub, v, at, out);
                }
            }
            "if" => {
                if let Some(then) = rules.get("then").filter(|_| self.passes(arg, v)) {
                    self.check(then, v, at, out);
                }
            }
            _ => return false,
        }
        true
    }
}

/// The rules on the value itself; false when `rule` is not one of them.
fn value_rule(rule: &str, arg: &Value, v: &Value, at: &str, out: &mut Vec<Violation>) -> bool {
    // A bound that is not a number fails every value.
    let below = |x: f64| arg.as_f64().is_none_or(|bound| x < bound);
    let above = |x: f64| arg.as_f64().is_none_or(|bound| x > bound);
    match rule {
        "type" => {
            let types: Vec<&str> = match arg {
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                t => t.as_str().into_iter().collect(),
            };
            if !types.iter().any(|t| has_type(v, t)) {
                let named = types.join(" or ");
                out.push(violation(at, format!("{v} is not of type {named}")));
            }
        }
        "const" if v != arg => out.push(violation(at, format!("{v} is not {arg}"))),
        "enum" if !arg.as_array().is_some_and(|a| a.contains(v)) => {
            out.push(violation(at, format!("{v} is not one of {arg}")));
        }
        "minimum" if v.as_f64().is_some_and(below) => {
            out.push(violation(at, format!("{v} is below {arg}")));
        }
        "maximum" if v.as_f64().is_some_and(above) => {
            out.push(violation(at, format!("{v} is above {arg}")));
        }
        "minLength"
            if v.as_str()
                .is_some_and(|t| (t.chars().count() as u64) < arg.as_u64().unwrap_or(u64::MAX)) =>
        {
            out.push(violation(at, format!("{v} is shorter than {arg}")));
        }
        "minItems"
            if v.as_array()
                .is_some_and(|a| a.len() < count(arg, usize::MAX)) =>
        {
            out.push(violation(
                at,
                format!("{} has fewer than {arg} items", shown(v)),
            ));
        }
        "maxItems" if v.as_array().is_some_and(|a| a.len() > count(arg, 0)) => {
            out.push(violation(
                at,
                format!("{} has more than {arg} items", shown(v)),
            ));
        }
        "const" | "enum" | "minimum" | "maximum" | "minLength" | "minItems" | "maxItems"
        | "then" => {}
        "$schema" | "$defs" | "title" | "description" | "format" | "default" => {}
        _ => return false,
    }
    true
}

/// A schema's count `arg`, or `otherwise` when it is not one (so that it fails every value).
fn count(arg: &Value, otherwise: usize) -> usize {
    arg.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(otherwise)
}

/// `v` as JSON, cut short when long (a whole record would bury the message).
fn shown(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(80) {
        Some((end, _)) => format!("{} ...", &text[..end]),
        None => text,
    }
}

/// Whether `v` is of the JSON Schema type `t` (an unknown type matches nothing).
fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_rule_refuses_what_breaks_it() {
        let schema = json!({
            "type": "object",
            "required": ["n", "name"],
            "properties": {
                "n": {"type": "integer", "minimum": 1, "maximum": 9},
                "name": {"type": "string", "minLength": 1},
                "kind": {"enum": ["a", "b"]},
                "list": {"type": "array", "items": {"$ref": "#/$defs/X"}, "maxItems": 2},
                "some": {"type": "array", "minItems": 1},
                "either": {"oneOf": [{"type": "string"}, {"type": "number"}]}
            },
            "additionalProperties": false,
            "$defs": {"X": {"const": 1}}
        });
        let ok = json!({"n": 3, "name": "x", "kind": "a", "list": [1, 1], "either": 2});
        assert_eq!(validate(&schema, &ok), []);
        let bad = json!({"n": 0, "name": "", "kind": "c", "list": [1, 2, 1], "either": null,
                         "some": [], "extra": 1});
        let found: Vec<String> = validate(&schema, &bad)
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(
            found,
            [
                "$.extra: not allowed",
                "$.either: 0 alternatives of oneOf match null",
                "$.kind: \"c\" is not one of [\"a\",\"b\"]",
                "$.list[1]: 2 is not 1",
                "$.list: [1,2,1] has more than 2 items",
                "$.n: 0 is below 1",
                "$.name: \"\" is shorter than 1",
                "$.some: [] has fewer than 1 items",
            ]
        );
        let missing = validate(&schema, &json!({"n": 1.5}));
        assert_eq!(missing.len(), 2, "{missing:?}");
        assert_eq!(missing[0].to_string(), "$.n: 1.5 is not of type integer");
        assert_eq!(missing[1].reason, "lacks `name`");
    }

    #[test]
    fn absent_keys_pass_present_ones_are_checked_at_any_depth() {
        let schema = json!({
            "type": "object",
            "required": ["r"],
            "properties": {"r": {"oneOf": [
                {"type": "object", "required": ["a", "b"], "properties": {"a": {"const": 1}}},
                {"type": "object", "required": ["c"], "properties": {"c": {"type": "string"}}}
            ]}}
        });
        // The first alternative without its `b`: refused by `validate`, not by this.
        let older = json!({"r": {"a": 1}});
        assert_eq!(validate(&schema, &older).len(), 1);
        assert_eq!(validate_present(&schema, &older), []);
        assert_eq!(validate_present(&schema, &json!({})), []);
        // One alternative is enough, since the keys that tell them apart may be absent.
        assert_eq!(validate_present(&schema, &json!({"r": {"c": "x"}})), []);
        let wrong = validate_present(&schema, &json!({"r": {"a": 2, "c": 3}}));
        assert_eq!(
            wrong[0].to_string(),
            "$.r: 0 alternatives of oneOf match {\"a\":2,\"c\":3}"
        );
    }

    #[test]
    fn an_unknown_rule_or_reference_is_a_violation_not_a_pass() {
        let found = validate(&json!({"pattern": "^a"}), &json!("b"));
        assert_eq!(found[0].reason, "the schema's rule `pattern` is unknown");
        let found = validate(&json!({"$ref": "#/$defs/Y"}), &json!(1));
        assert_eq!(
            found[0].reason,
            "the schema's `$ref` \"#/$defs/Y\" is unknown"
        );
    }
}
