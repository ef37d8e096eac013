//! `filter = { types, providers, where }` on a `[[destinations]]` entry: which processed events
//! get an outbox row for that destination. Decided by the processing stage inside the
//! processing commit (`worker::prepare`), so a filter changed later never rewrites history and
//! a replay uses the filter in force.
//!
//! `types` and `providers` are OR within (any glob, any provider); `where` predicates all must
//! hold (a range is two of them); the keys AND across; a key left out matches everything. `types` are globs where `*` stands for any run of
//! characters (an event without a type is matched as the empty string). A `where` predicate
//! reads the verified payload at a JSON pointer; a missing pointer, a body that is not JSON or
//! a value of another type never matches (`ne` included: it matches values of the same type
//! that differ).

use std::fmt::Write;

use serde::Deserialize;

use crate::config::{ConfigError, err};

/// The operators of a `where` predicate, spelled as in the config.
const OPS: &[&str] = &["eq", "ne", "in", "exists", "gt", "lt"];

/// `filter` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFilter {
    types: Option<Vec<String>>,
    providers: Option<Vec<String>>,
    #[serde(rename = "where")]
    predicates: Option<Vec<toml::Value>>,
}

/// One `where` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPredicate {
    pointer: Option<String>,
    op: Option<String>,
    value: Option<toml::Value>,
}

/// A resolved destination filter.
#[derive(Debug, Clone, PartialEq)]
pub struct DestinationFilter {
    /// Event type globs; `None`: any type.
    pub types: Option<Vec<String>>,
    /// Provider ids; `None`: any provider.
    pub providers: Option<Vec<String>>,
    /// Predicates on the payload; empty: no payload is read.
    pub predicates: Vec<Predicate>,
}

/// `{ pointer, op, value }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    /// RFC 6901.
    pub pointer: String,
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Eq(serde_json::Value),
    Ne(serde_json::Value),
    In(Vec<serde_json::Value>),
    Exists,
    Gt(serde_json::Number),
    Lt(serde_json::Number),
}

/// What a filter looks at for one event.
pub struct FilterInput<'a> {
    pub provider: &'a str,
    pub event_type: Option<&'a str>,
    /// The verified body as JSON; `None` when it is not JSON (no predicate matches then) or
    /// was not read (no predicate asked for it).
    pub payload: Option<&'a serde_json::Value>,
}

impl DestinationFilter {
    /// Whether `where` predicates need the payload opened.
    pub fn reads_payload(&self) -> bool {
        !self.predicates.is_empty()
    }

    pub fn matches(&self, event: &FilterInput<'_>) -> bool {
        let event_type = event.event_type.unwrap_or("");
        self.types
            .as_ref()
            .is_none_or(|globs| globs.iter().any(|g| glob_matches(g, event_type)))
            && self
                .providers
                .as_ref()
                .is_none_or(|ps| ps.iter().any(|p| p == event.provider))
            && (self.predicates.is_empty()
                || event
                    .payload
                    .is_some_and(|body| self.predicates.iter().all(|p| p.matches(body))))
    }

    /// `config check`'s line: the filter as a TOML inline table.
    pub(in crate::config) fn render(&self, out: &mut String) {
        let mut parts = Vec::new();
        if let Some(types) = &self.types {
            parts.push(format!("types = {}", toml_strings(types)));
        }
        if let Some(providers) = &self.providers {
            parts.push(format!("providers = {}", toml_strings(providers)));
        }
        if !self.predicates.is_empty() {
            let items: Vec<String> = self.predicates.iter().map(Predicate::render).collect();
            parts.push(format!("where = [{}]", items.join(", ")));
        }
        let _ = writeln!(out, "filter = {{ {} }}", parts.join(", "));
    }
}

fn toml_strings(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| serde_json::Value::from(s.as_str()).to_string())
        .collect();
    format!("[{}]", quoted.join(", "))
}

impl Predicate {
    pub fn matches(&self, body: &serde_json::Value) -> bool {
        let Some(found) = body.pointer(&self.pointer) else {
            return false;
        };
        match &self.op {
            Op::Exists => true,
            Op::Eq(want) => json_eq(found, want),
            Op::Ne(want) => same_type(found, want) && !json_eq(found, want),
            Op::In(wants) => wants.iter().any(|w| json_eq(found, w)),
            Op::Gt(n) => compare(found, n).is_some_and(|o| o.is_gt()),
            Op::Lt(n) => compare(found, n).is_some_and(|o| o.is_lt()),
        }
    }

    fn render(&self) -> String {
        let pointer = serde_json::Value::from(self.pointer.as_str());
        let (op, value) = match &self.op {
            Op::Eq(v) => ("eq", Some(v.to_string())),
            Op::Ne(v) => ("ne", Some(v.to_string())),
            Op::In(vs) => {
                let items: Vec<String> = vs.iter().map(ToString::to_string).collect();
                ("in", Some(format!("[{}]", items.join(", "))))
            }
            Op::Exists => ("exists", None),
            Op::Gt(n) => ("gt", Some(n.to_string())),
            Op::Lt(n) => ("lt", Some(n.to_string())),
        };
        match value {
            // JSON scalars and arrays of them are valid TOML inline values (objects are not
            // allowed in a predicate's value).
            Some(v) => format!("{{ pointer = {pointer}, op = \"{op}\", value = {v} }}"),
            None => format!("{{ pointer = {pointer}, op = \"{op}\" }}"),
        }
    }
}

/// `*` is any run of characters (dots included); everything else is literal.
fn glob_matches(glob: &str, text: &str) -> bool {
    let mut parts = glob.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the whole text must be the glob.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Equal JSON values, numbers by value (`100` equals `100.0`).
fn json_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a, b) {
        (serde_json::Value::Number(_), serde_json::Value::Number(y)) => {
            compare(a, y).is_some_and(|o| o.is_eq())
        }
        _ => a == b,
    }
}

fn same_type(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// `found` against `n` when `found` is a number: exactly for integers, else as floats.
fn compare(found: &serde_json::Value, n: &serde_json::Number) -> Option<std::cmp::Ordering> {
    let serde_json::Value::Number(f) = found else {
        return None;
    };
    if let (Some(a), Some(b)) = (f.as_i64(), n.as_i64()) {
        return Some(a.cmp(&b));
    }
    if let (Some(a), Some(b)) = (f.as_u64(), n.as_u64()) {
        return Some(a.cmp(&b));
    }
    f.as_f64()?.partial_cmp(&n.as_f64()?)
}

/// A predicate's `value` as JSON: scalars only (and arrays of them for `in`).
fn scalar(value: &toml::Value, key: &str) -> Result<serde_json::Value, ConfigError> {
    match value {
        toml::Value::String(s) => Ok(serde_json::Value::from(s.as_str())),
        toml::Value::Integer(i) => Ok(serde_json::Value::from(*i)),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| err(key, "must be a finite number")),
        toml::Value::Boolean(b) => Ok(serde_json::Value::from(*b)),
        _ => Err(err(
            key,
            "must be a string, a number or a boolean (JSON null, objects and dates are not compared)",
        )),
    }
}

fn nonempty_list(list: Option<Vec<String>>, key: &str) -> Result<Option<Vec<String>>, ConfigError> {
    match list {
        Some(items) if items.is_empty() => Err(err(
            key,
            "must not be empty (leave the key out to match every event)",
        )),
        Some(items) => {
            for (j, item) in items.iter().enumerate() {
                if item.trim().is_empty() {
                    return Err(err(format!("{key}[{j}]"), "must not be empty"));
                }
            }
            Ok(Some(items))
        }
        None => Ok(None),
    }
}

/// Resolves `filter` of the destination whose keys start with `at` (`destinations[N]`).
pub(super) fn resolve(value: toml::Value, at: &str) -> Result<DestinationFilter, ConfigError> {
    let key = format!("{at}.filter");
    let raw = RawFilter::deserialize(value).map_err(|e| {
        err(
            &key,
            format!("{} (keys: types, providers, where)", e.message()),
        )
    })?;
    let types = nonempty_list(raw.types, &format!("{key}.types"))?;
    let providers = nonempty_list(raw.providers, &format!("{key}.providers"))?;
    let mut predicates = Vec::new();
    if let Some(items) = raw.predicates {
        if items.is_empty() {
            return Err(err(
                format!("{key}.where"),
                "must not be empty (leave the key out to match every event)",
            ));
        }
        for (j, item) in items.into_iter().enumerate() {
            predicates.push(resolve_predicate(item, &format!("{key}.where[{j}]"))?);
        }
    }
    Ok(DestinationFilter {
        types,
        providers,
        predicates,
    })
}

fn resolve_predicate(item: toml::Value, key: &str) -> Result<Predicate, ConfigError> {
    let raw = RawPredicate::deserialize(item)
        .map_err(|e| err(key, format!("{} (keys: pointer, op, value)", e.message())))?;
    let pointer = raw
        .pointer
        .ok_or_else(|| err(format!("{key}.pointer"), "is required"))?;
    if !(pointer.is_empty() || pointer.starts_with('/')) {
        return Err(err(
            format!("{key}.pointer"),
            "must be a JSON pointer, e.g. /data/object/amount",
        ));
    }
    let op_key = format!("{key}.op");
    let value_key = format!("{key}.value");
    let op = raw.op.ok_or_else(|| err(&op_key, "is required"))?;
    let need_value = || {
        raw.value
            .as_ref()
            .ok_or_else(|| err(&value_key, format!("is required for op = \"{op}\"")))
    };
    let number = |v: &toml::Value| match scalar(v, &value_key)? {
        serde_json::Value::Number(n) => Ok(n),
        _ => Err(err(
            &value_key,
            format!("must be a number for op = \"{op}\""),
        )),
    };
    let op = match op.as_str() {
        "eq" => Op::Eq(scalar(need_value()?, &value_key)?),
        "ne" => Op::Ne(scalar(need_value()?, &value_key)?),
        "in" => match need_value()? {
            toml::Value::Array(items) if !items.is_empty() => Op::In(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| scalar(v, &format!("{value_key}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            _ => {
                return Err(err(&value_key, "must be a non-empty array for op = \"in\""));
            }
        },
        "exists" => {
            if raw.value.is_some() {
                return Err(err(&value_key, "is not taken by op = \"exists\""));
            }
            Op::Exists
        }
        "gt" => Op::Gt(number(need_value()?)?),
        "lt" => Op::Lt(number(need_value()?)?),
        other => {
            return Err(err(
                &op_key,
                format!("unknown op {other:?}; known: {}", OPS.join(", ")),
            ));
        }
    };
    Ok(Predicate { pointer, op })
}

/// A filter's `providers` entry that no endpoint routing to the destination has would never
/// match (a typo such as `strpe` would silently drop every event): refused, naming it.
pub(crate) fn check_providers(
    destinations: &[super::DestinationConfig],
    endpoints: &[crate::config::EndpointConfig],
) -> Result<(), ConfigError> {
    for (i, d) in destinations.iter().enumerate() {
        let Some(providers) = d.filter.as_ref().and_then(|f| f.providers.as_ref()) else {
            continue;
        };
        let routed: Vec<&str> = endpoints
            .iter()
            .filter(|e| e.destinations.contains(&d.id))
            .map(|e| e.pack.id())
            .collect();
        // A destination no endpoint routes to yet gets nothing anyway.
        if routed.is_empty() {
            continue;
        }
        for (j, p) in providers.iter().enumerate() {
            if !routed.contains(&p.as_str()) {
                return Err(err(
                    format!("destinations[{i}].filter.providers[{j}]"),
                    format!(
                        "no endpoint that routes to {:?} has provider {p:?}, so it would never match",
                        d.id
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(toml_text: &str) -> Result<DestinationFilter, ConfigError> {
        let table: toml::Table = toml::from_str(&format!("filter = {toml_text}")).unwrap();
        resolve(table["filter"].clone(), "destinations[0]")
    }

    fn ok(toml_text: &str) -> DestinationFilter {
        filter(toml_text).unwrap_or_else(|e| panic!("{toml_text}: {e}"))
    }

    fn refused(toml_text: &str) -> String {
        match filter(toml_text) {
            Ok(f) => panic!("{toml_text} was accepted: {f:?}"),
            Err(e) => e.key,
        }
    }

    fn event<'a>(
        provider: &'a str,
        event_type: Option<&'a str>,
        payload: Option<&'a serde_json::Value>,
    ) -> FilterInput<'a> {
        FilterInput {
            provider,
            event_type,
            payload,
        }
    }

    #[test]
    fn globs() {
        for (glob, text, want) in [
            ("charge.*", "charge.succeeded", true),
            ("charge.*", "charge.", true),
            ("charge.*", "charge", false),
            ("charge.*", "customer.created", false),
            ("*", "", true),
            ("*", "anything.at.all", true),
            ("*.created", "customer.created", true),
            ("*.created", "customer.created.x", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "acb", false),
            ("a*a", "a", false),
            ("invoice.paid", "invoice.paid", true),
            ("invoice.paid", "invoice.paid2", false),
            ("**", "x", true),
        ] {
            assert_eq!(glob_matches(glob, text), want, "{glob} ~ {text}");
        }
    }

    #[test]
    fn types_and_providers_are_or_within_and_across_keys() {
        let f = ok(r#"{ types = ["charge.*", "invoice.paid"], providers = ["stripe", "svix"] }"#);
        assert!(f.matches(&event("stripe", Some("charge.refunded"), None)));
        assert!(f.matches(&event("svix", Some("invoice.paid"), None)));
        assert!(!f.matches(&event("stripe", Some("customer.created"), None)));
        assert!(!f.matches(&event("github", Some("charge.refunded"), None)));
        assert!(!f.matches(&event("stripe", None, None)), "no type is \"\"");
        assert!(!f.reads_payload());
        let any = ok(r#"{ types = ["*"] }"#);
        assert!(any.matches(&event("github", None, None)));
    }

    #[test]
    fn predicates() {
        let body = serde_json::json!({
            "type": "charge.succeeded",
            "data": {"object": {"amount": 2000, "currency": "usd", "paid": true,
                                "fee": 1.5, "nothing": null, "tags": ["a"]}}
        });
        let cases = [
            (
                r#"{ pointer = "/data/object/amount", op = "gt", value = 100 }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/amount", op = "gt", value = 2000 }"#,
                false,
            ),
            (
                r#"{ pointer = "/data/object/amount", op = "lt", value = 2000.5 }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/amount", op = "eq", value = 2000 }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/amount", op = "eq", value = 2000.0 }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/amount", op = "eq", value = "2000" }"#,
                false,
            ),
            (
                r#"{ pointer = "/data/object/fee", op = "gt", value = 1 }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/currency", op = "eq", value = "usd" }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/currency", op = "ne", value = "eur" }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/currency", op = "ne", value = "usd" }"#,
                false,
            ),
            // A type mismatch never matches, not even `ne`.
            (
                r#"{ pointer = "/data/object/currency", op = "ne", value = 5 }"#,
                false,
            ),
            (
                r#"{ pointer = "/data/object/currency", op = "gt", value = 5 }"#,
                false,
            ),
            (
                r#"{ pointer = "/data/object/currency", op = "in", value = ["eur", "usd"] }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/currency", op = "in", value = ["eur"] }"#,
                false,
            ),
            (
                r#"{ pointer = "/data/object/paid", op = "eq", value = true }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/nothing", op = "exists" }"#,
                true,
            ),
            (
                r#"{ pointer = "/data/object/tags/0", op = "exists" }"#,
                true,
            ),
            // A missing pointer never matches.
            (
                r#"{ pointer = "/data/object/missing", op = "exists" }"#,
                false,
            ),
            (
                r#"{ pointer = "/data/object/missing", op = "ne", value = "x" }"#,
                false,
            ),
            (
                r#"{ pointer = "/data/object/missing", op = "lt", value = 1 }"#,
                false,
            ),
        ];
        for (predicate, want) in cases {
            let f = ok(&format!("{{ where = [{predicate}] }}"));
            assert!(f.reads_payload());
            assert_eq!(
                f.matches(&event("stripe", Some("charge.succeeded"), Some(&body))),
                want,
                "{predicate}"
            );
            // Not JSON (or not read): no predicate matches.
            assert!(!f.matches(&event("stripe", Some("charge.succeeded"), None)));
        }
    }

    #[test]
    fn predicates_all_hold_and_with_the_other_keys() {
        let f = ok(r#"{ types = ["charge.*"], where = [
            { pointer = "/amount", op = "gt", value = 1000 },
            { pointer = "/amount", op = "lt", value = 10000 } ] }"#);
        let small = serde_json::json!({"amount": 5});
        let inside = serde_json::json!({"amount": 5000});
        let huge = serde_json::json!({"amount": 50000});
        assert!(!f.matches(&event("stripe", Some("charge.x"), Some(&small))));
        assert!(f.matches(&event("stripe", Some("charge.x"), Some(&inside))));
        assert!(!f.matches(&event("stripe", Some("charge.x"), Some(&huge))));
        assert!(!f.matches(&event("stripe", Some("invoice.x"), Some(&inside))));
    }

    #[test]
    fn bad_filters_name_their_key() {
        for (text, key) in [
            (r#"{ types = [] }"#, "destinations[0].filter.types"),
            (
                r#"{ providers = [""] }"#,
                "destinations[0].filter.providers[0]",
            ),
            (r#"{ kinds = ["x"] }"#, "destinations[0].filter"),
            (r#"{ where = [] }"#, "destinations[0].filter.where"),
            (
                r#"{ where = [{ pointer = "/a", op = "gte", value = 1 }] }"#,
                "destinations[0].filter.where[0].op",
            ),
            (
                r#"{ where = [{ pointer = "/a", op = "exists" }, { pointer = "a", op = "exists" }] }"#,
                "destinations[0].filter.where[1].pointer",
            ),
            (
                r#"{ where = [{ op = "exists" }] }"#,
                "destinations[0].filter.where[0].pointer",
            ),
            (
                r#"{ where = [{ pointer = "/a", value = 1 }] }"#,
                "destinations[0].filter.where[0].op",
            ),
            (
                r#"{ where = [{ pointer = "/a", op = "gt", value = "1" }] }"#,
                "destinations[0].filter.where[0].value",
            ),
            (
                r#"{ where = [{ pointer = "/a", op = "eq" }] }"#,
                "destinations[0].filter.where[0].value",
            ),
            (
                r#"{ where = [{ pointer = "/a", op = "in", value = "x" }] }"#,
                "destinations[0].filter.where[0].value",
            ),
            (
                r#"{ where = [{ pointer = "/a", op = "in", value = [{ a = 1 }] }] }"#,
                "destinations[0].filter.where[0].value[0]",
            ),
            (
                r#"{ where = [{ pointer = "/a", op = "exists", value = true }] }"#,
                "destinations[0].filter.where[0].value",
            ),
            (
                r#"{ where = [{ pointer = "/a", op = "eq", value = 1, extra = 2 }] }"#,
                "destinations[0].filter.where[0]",
            ),
        ] {
            assert_eq!(refused(text), key, "{text}");
        }
    }

    #[test]
    fn renders_as_written() {
        let text = r#"{ types = ["charge.*"], providers = ["stripe"], where = [{ pointer = "/data/object/amount", op = "gt", value = 100 }, { pointer = "/x", op = "exists" }, { pointer = "/c", op = "in", value = ["usd", 1, true] }] }"#;
        let f = ok(text);
        let mut out = String::new();
        f.render(&mut out);
        assert_eq!(out.trim_end(), format!("filter = {text}"));
        // What `config check` prints reads back as the same filter.
        assert_eq!(ok(out.trim_end().strip_prefix("filter = ").unwrap()), f);
    }
}
