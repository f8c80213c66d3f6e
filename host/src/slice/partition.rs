//! A partition key: one or more levels, `date=2026-10-01` or
//! `date=2026-10-01/hour=07`, each a column with its value, in the order
//! the directories nest. An overwrite-partition slice owns exactly one.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most levels a partition key has (`date/hour/minute/region` is four).
pub const MAX_LEVELS: usize = 4;

/// A partition key: columns in order, each with its value. Spelled
/// `column=value[/column=value...]`, its directory path below a dataset
/// root or a table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Partition {
    levels: Vec<(String, String)>,
}

impl Partition {
    /// The one-level partition `column=value`.
    pub fn one(column: impl Into<String>, value: impl Into<String>) -> Self {
        Partition {
            levels: vec![(column.into(), value.into())],
        }
    }

    /// The partition of `levels` (checked by `crate::run::parse_partition`
    /// where a person or a file spells them).
    pub fn of(levels: Vec<(String, String)>) -> Self {
        Partition { levels }
    }

    /// The partition a table record spells `date=D[/hour=H]` (`None` when
    /// the text is no such spelling).
    pub fn from_spelled(text: &str) -> Option<Self> {
        let levels = text
            .split('/')
            .map(|l| {
                l.split_once('=')
                    .map(|(c, v)| (c.to_string(), v.to_string()))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Partition { levels })
    }

    /// No level: overwrite-partition asked for before the slice is known.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The levels, outermost first.
    pub fn levels(&self) -> &[(String, String)] {
        &self.levels
    }

    /// The columns, outermost first.
    pub fn columns(&self) -> Vec<String> {
        self.levels.iter().map(|(c, _)| c.clone()).collect()
    }

    /// The value of `column`, if it is a level.
    pub fn value_of(&self, column: &str) -> Option<&str> {
        self.levels
            .iter()
            .find(|(c, _)| c == column)
            .map(|(_, v)| v.as_str())
    }

    /// Whether a file whose partition values `value_of` gives lies in
    /// this partition: every level's column holds its value.
    pub fn holds<'a>(&self, value_of: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.levels
            .iter()
            .all(|(c, v)| value_of(c) == Some(v.as_str()))
    }

    /// The same columns with other values (`values` in column order).
    pub fn with_values(&self, values: &[String]) -> Self {
        Partition {
            levels: self
                .levels
                .iter()
                .zip(values)
                .map(|((c, _), v)| (c.clone(), v.clone()))
                .collect(),
        }
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (c, v)) in self.levels.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            write!(f, "{c}={v}")?;
        }
        Ok(())
    }
}

/// How a manifest spells a partition: one level as `["date", "D"]` (as
/// every manifest before nested partitions did, so their run keys stay),
/// nested levels as `[["date", "D"], ["hour", "07"]]`.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Spelled {
    One(String, String),
    Nested(Vec<(String, String)>),
}

impl Serialize for Partition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.levels.as_slice() {
            [(c, v)] => Spelled::One(c.clone(), v.clone()),
            levels => Spelled::Nested(levels.to_vec()),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Partition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Spelled::deserialize(d)? {
            Spelled::One(c, v) => Partition::one(c, v),
            Spelled::Nested(levels) => Partition::of(levels),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_spelled_as_its_directory_path_and_holds_files_of_every_level() {
        let hour = Partition::of(vec![
            ("date".into(), "2026-10-01".into()),
            ("hour".into(), "07".into()),
        ]);
        assert_eq!(hour.to_string(), "date=2026-10-01/hour=07");
        assert_eq!(
            Partition::one("date", "2026-10-01").to_string(),
            "date=2026-10-01"
        );
        assert_eq!(hour.columns(), ["date", "hour"]);
        assert_eq!(hour.value_of("hour"), Some("07"));
        let of = |d: &'static str, h: Option<&'static str>| {
            move |c: &str| match c {
                "date" => Some(d),
                "hour" => h,
                _ => None,
            }
        };
        assert!(hour.holds(of("2026-10-01", Some("07"))));
        assert!(!hour.holds(of("2026-10-01", Some("08"))));
        assert!(!hour.holds(of("2026-10-01", None)));
        assert!(Partition::one("date", "2026-10-01").holds(of("2026-10-01", Some("08"))));
        // A manifest spells one level as before, nested levels as pairs.
        let one = Partition::one("date", "2026-10-01");
        assert_eq!(
            serde_json::to_string(&one).unwrap(),
            r#"["date","2026-10-01"]"#
        );
        let spelled = serde_json::to_string(&hour).unwrap();
        assert_eq!(spelled, r#"[["date","2026-10-01"],["hour","07"]]"#);
        assert_eq!(serde_json::from_str::<Partition>(&spelled).unwrap(), hour);
        assert_eq!(
            serde_json::from_str::<Partition>(r#"["date","2026-10-01"]"#).unwrap(),
            one
        );
        assert_eq!(
            hour.with_values(&["2026-10-02".into(), "00".into()])
                .to_string(),
            "date=2026-10-02/hour=00"
        );
    }
}
