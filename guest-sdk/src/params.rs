//! Declared parameters: a transform says which params it takes (name,
//! type, default, required) with [`crate::Transform::params`], and the SDK
//! checks `ctx.params` against that before `open` sees it. Without a
//! declaration a misspelled param (`min_amont`) would be silently ignored
//! and the default used; with one it fails the run, naming it.
//!
//! ```
//! use idem_guest::Param;
//! let declared = vec![
//!     Param::number("min_amount").default(0.0).doc("smallest amount kept"),
//!     Param::string("key").required(),
//! ];
//! let mut params = idem_guest::serde_json::json!({"min_amont": 10, "key": "id"});
//! let err = idem_guest::params::check(&declared, &mut params).unwrap_err();
//! assert!(err.0.contains("did you mean `min_amount`?"), "{err}");
//! ```

use serde_json::{Map, Value};

use crate::error::show_name;
use crate::{Error, Result, Transform};

/// The JSON type a declared parameter must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// Any JSON number.
    Number,
    /// A JSON number with no fraction (`3` or `3.0`; the latter is passed
    /// on as `3`).
    Integer,
    /// A JSON string.
    String,
    /// `true` or `false`.
    Boolean,
}

impl ParamType {
    /// The name errors use: `number`, `integer`, `string`, `boolean`.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Number => "number",
            ParamType::Integer => "integer",
            ParamType::String => "string",
            ParamType::Boolean => "boolean",
        }
    }
}

/// One declared parameter, built with [`Param::number`] and friends.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Its key in the params object.
    pub name: String,
    /// The type its value must have.
    pub ty: ParamType,
    /// Filled into `ctx.params` when the param is not given (or null).
    pub default: Option<Value>,
    /// The run fails when it is not given.
    pub required: bool,
    /// What it means, for people reading the declaration.
    pub doc: Option<String>,
}

impl Param {
    fn new(name: &str, ty: ParamType) -> Self {
        Param {
            name: name.to_string(),
            ty,
            default: None,
            required: false,
            doc: None,
        }
    }

    /// A number parameter (any JSON number).
    pub fn number(name: &str) -> Self {
        Param::new(name, ParamType::Number)
    }

    /// An integer parameter (a JSON number with no fraction).
    pub fn integer(name: &str) -> Self {
        Param::new(name, ParamType::Integer)
    }

    /// A string parameter.
    pub fn string(name: &str) -> Self {
        Param::new(name, ParamType::String)
    }

    /// A boolean parameter.
    pub fn boolean(name: &str) -> Self {
        Param::new(name, ParamType::Boolean)
    }

    /// The value `open` sees when the param is not given.
    pub fn default(mut self, value: impl Into<Value>) -> Self {
        self.default = Some(value.into());
        self
    }

    /// The run fails unless the param is given.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// A line saying what the param means.
    pub fn doc(mut self, text: &str) -> Self {
        self.doc = Some(text.to_string());
        self
    }

    /// `` `min_amount` (number, default 0.0) ``: how errors list it.
    fn describe(&self) -> String {
        let mut s = format!("`{}` ({}", self.name, self.ty.name());
        if self.required {
            s.push_str(", required");
        } else if let Some(d) = &self.default {
            s.push_str(&format!(", default {}", show_value(d)));
        }
        s.push(')');
        s
    }
}

/// Check `params` against `T`'s declaration ([`Transform::params`]) and
/// fill its defaults in; with no declaration, anything passes untouched.
/// The wasm glue and [`crate::native::run`] call this before `open`; so
/// should any other runner of a [`Transform`].
pub fn apply<T: Transform>(params: &mut Value) -> Result<()> {
    match T::params() {
        None => Ok(()),
        Some(declared) => check(&declared, params),
    }
}

/// Check `params` against `declared`: a JSON object (null counts as `{}`),
/// every key declared (else an error naming it, with a did-you-mean),
/// every value of its declared type, every required one given (a null
/// value counts as not given). Then fills the declared defaults in and
/// writes integral numbers of integer params as integers. The first
/// problem found is the error.
pub fn check(declared: &[Param], params: &mut Value) -> Result<()> {
    check_declaration(declared)?;
    if params.is_null() {
        *params = Value::Object(Map::new());
    }
    let Value::Object(given) = params else {
        return Err(Error(format!(
            "params must be a JSON object, got {}",
            show_value(params)
        )));
    };
    // The least unknown key in sorted order: the same one in every SDK,
    // whatever order the map keeps.
    let declares = |k: &String| declared.iter().any(|p| &p.name == k);
    if let Some(k) = given.keys().filter(|k| !declares(k)).min() {
        return Err(Error(unknown(k, declared)));
    }
    for p in declared {
        match given.get_mut(&p.name) {
            Some(v) if !v.is_null() => *v = typed(p, v)?,
            _ if p.required => {
                return Err(Error(format!(
                    "missing required parameter {}",
                    p.describe()
                )));
            }
            _ => {
                if let Some(d) = &p.default {
                    given.insert(p.name.clone(), d.clone());
                }
            }
        }
    }
    Ok(())
}

/// The declaration itself: names unique, defaults of their declared type.
fn check_declaration(declared: &[Param]) -> Result<()> {
    for (i, p) in declared.iter().enumerate() {
        if declared[..i].iter().any(|q| q.name == p.name) {
            return Err(Error(format!(
                "params(): `{}` is declared twice",
                show_name(&p.name)
            )));
        }
        if let Some(d) = &p.default {
            typed(p, d).map_err(|e| Error(format!("params(): the default of {}", e.0)))?;
        }
    }
    Ok(())
}

/// `v` if it has `p`'s type (an integral float of an integer param
/// rewritten as an integer), else an error naming the param and the type.
fn typed(p: &Param, v: &Value) -> Result<Value> {
    let ok = match p.ty {
        ParamType::Number => v.is_number(),
        ParamType::String => v.is_string(),
        ParamType::Boolean => v.is_boolean(),
        // Written as an i64 when it fits (so `3.0` reads as 3); a larger
        // integral number passes as it is.
        ParamType::Integer => match (as_integer(v), v.as_f64()) {
            (Some(i), _) => return Ok(Value::from(i)),
            (None, Some(f)) => f.fract() == 0.0,
            (None, None) => false,
        },
    };
    if ok {
        return Ok(v.clone());
    }
    let article = if p.ty == ParamType::Integer {
        "an"
    } else {
        "a"
    };
    Err(Error(format!(
        "parameter `{}` must be {article} {}, got {} ({})",
        show_name(&p.name),
        p.ty.name(),
        show_value(v),
        kind(v)
    )))
}

/// `v` as an i64 if it is a number with no fraction (`3` or `3.0`) in
/// i64's range.
pub(crate) fn as_integer(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        // Below 2^63 in magnitude an integral float is exactly an i64.
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
            .map(|f| f as i64)
    })
}

/// The error for a key no param declares.
fn unknown(key: &str, declared: &[Param]) -> String {
    let hint = declared
        .iter()
        .map(|p| (distance(key, &p.name), p))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, p)| format!(" (did you mean `{}`?)", p.name))
        .unwrap_or_default();
    let takes = if declared.is_empty() {
        "no parameters".to_string()
    } else {
        declared
            .iter()
            .map(Param::describe)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "unknown parameter `{}`{hint}: this transform takes {takes}",
        show_name(key)
    )
}

/// What kind of JSON value `v` is, for errors.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() != 0.0) => {
            "a number with a fraction"
        }
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `v` as JSON, cut at 100 characters (params come from the user).
fn show_value(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 100 {
        return s;
    }
    let mut cut: String = s.chars().take(100).collect();
    cut.push('…');
    cut
}

/// Levenshtein distance between `a` and `b`, or 3 (too far to suggest)
/// when their lengths differ by more than 2: keys are untrusted and may be
/// long, names are short, so this stays O(len(name)^2).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 {
        return 3;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let swap = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + swap).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared() -> Vec<Param> {
        vec![
            Param::number("min_amount").default(0.0),
            Param::string("key").default("event_id"),
            Param::integer("limit"),
            Param::boolean("strict").default(false),
        ]
    }

    fn checked(params: Value) -> Result<Value> {
        let mut p = params;
        check(&declared(), &mut p).map(|()| p)
    }

    #[test]
    fn an_unknown_param_is_refused_with_a_suggestion_and_the_list() {
        let e = checked(json!({"min_amont": 10})).unwrap_err().0;
        assert!(
            e.starts_with("unknown parameter `min_amont` (did you mean `min_amount`?)"),
            "{e}"
        );
        assert!(
            e.contains("`min_amount` (number, default 0.0), `key` (string, default \"event_id\"), `limit` (integer)"),
            "{e}"
        );
        // Nothing within two edits: no suggestion.
        let e = checked(json!({"gap_minutes": 30})).unwrap_err().0;
        assert!(
            e.starts_with("unknown parameter `gap_minutes`: this transform takes"),
            "{e}"
        );
        let mut p = json!({"x": 1});
        let e = check(&[], &mut p).unwrap_err().0;
        assert!(e.ends_with("this transform takes no parameters"), "{e}");
    }

    #[test]
    fn an_ill_typed_param_is_refused_naming_it_and_the_type() {
        let e = checked(json!({"min_amount": "ten"})).unwrap_err().0;
        assert_eq!(
            e,
            "parameter `min_amount` must be a number, got \"ten\" (a string)"
        );
        let e = checked(json!({"key": 7})).unwrap_err().0;
        assert!(
            e.contains("`key` must be a string, got 7 (a number)"),
            "{e}"
        );
        let e = checked(json!({"strict": "yes"})).unwrap_err().0;
        assert!(e.contains("`strict` must be a boolean"), "{e}");
        let e = checked(json!(60)).unwrap_err().0;
        assert_eq!(e, "params must be a JSON object, got 60");
    }

    #[test]
    fn integers_have_no_fraction() {
        let e = checked(json!({"limit": 1.5})).unwrap_err().0;
        assert_eq!(
            e,
            "parameter `limit` must be an integer, got 1.5 (a number with a fraction)"
        );
        assert_eq!(checked(json!({"limit": 3})).unwrap()["limit"], json!(3));
        // 3.0 is an integer, passed on as one (so `as_i64` reads it).
        let p = checked(json!({"limit": 3.0})).unwrap();
        assert_eq!(p["limit"].as_i64(), Some(3));
        assert!(checked(json!({"limit": true})).is_err());
    }

    #[test]
    fn defaults_are_filled_and_given_values_kept() {
        let p = checked(json!({"key": "id"})).unwrap();
        assert_eq!(p, json!({"min_amount": 0.0, "key": "id", "strict": false}));
        // null counts as not given: the default again.
        let p = checked(json!({"min_amount": null})).unwrap();
        assert_eq!(p["min_amount"], json!(0.0));
        assert_eq!(checked(Value::Null).unwrap()["key"], json!("event_id"));
    }

    #[test]
    fn a_required_param_must_be_given() {
        let decl = [Param::number("max_total").required().doc("upper bound")];
        let mut p = json!({});
        let e = check(&decl, &mut p).unwrap_err().0;
        assert_eq!(
            e,
            "missing required parameter `max_total` (number, required)"
        );
        let mut p = json!({"max_total": null});
        assert!(check(&decl, &mut p).is_err());
        let mut p = json!({"max_total": 5});
        check(&decl, &mut p).unwrap();
        assert_eq!(p, json!({"max_total": 5}));
    }

    #[test]
    fn a_bad_declaration_is_named() {
        let mut p = json!({});
        let e = check(&[Param::number("a"), Param::string("a")], &mut p).unwrap_err();
        assert_eq!(e.0, "params(): `a` is declared twice");
        let e = check(&[Param::integer("n").default(0.5)], &mut p).unwrap_err();
        assert!(
            e.0.starts_with("params(): the default of parameter `n` must be an integer"),
            "{e}"
        );
    }

    #[test]
    fn edit_distance() {
        assert_eq!(distance("min_amont", "min_amount"), 1);
        assert_eq!(distance("gap_minute", "gap_minutes"), 1);
        assert_eq!(distance("kye", "key"), 2);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance(&"x".repeat(10_000), "key"), 3);
    }
}
