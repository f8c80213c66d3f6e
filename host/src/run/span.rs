//! A backfill's slices: the partitions of a date range (`date=D`), of an
//! hour range (`date=D/hour=HH`), each crossed with listed values of
//! further columns (`region=eu`, `region=us`), or the listed values alone.

use super::RunError;
use super::batch::{dates, day_number};
use crate::schedule::{date_of, hour_named, hour_of};
use crate::slice::{MAX_LEVELS, Partition};

/// Most slices one backfill plans (eleven years of hours).
pub const MAX_SLICES: usize = 100_000;

/// What a backfill covers.
#[derive(Debug, Clone, Default)]
pub struct Span {
    /// First slot: `YYYY-MM-DD`, or `YYYY-MM-DDTHH` for hours.
    pub from: Option<String>,
    /// Last slot, included (the same form as `from`).
    pub to: Option<String>,
    /// `1d` or `1h` (default: `1h` when `from` names an hour, else `1d`).
    pub every: Option<String>,
    /// The column holding the date.
    pub column: String,
    /// The column holding the hour (`HH`), for hourly slices.
    pub hour_column: String,
    /// Further levels, each `COLUMN=V1,V2,...`, crossed with every slot.
    pub each: Vec<String>,
}

impl Span {
    /// Every slice's partition, in order: slot by slot, each slot's
    /// listed values in the order given.
    pub fn partitions(&self) -> Result<Vec<Partition>, RunError> {
        check_column("--column", &self.column)?;
        check_column("--hour-column", &self.hour_column)?;
        let slots = self.slots()?;
        if slots.len() > MAX_SLICES {
            return Err(usage(format!(
                "the backfill would run {} slices (more than {MAX_SLICES}): narrow the range",
                slots.len()
            )));
        }
        let mut out: Vec<Vec<(String, String)>> = slots;
        for each in &self.each {
            let (column, values) = parse_each(each)?;
            if out
                .first()
                .is_some_and(|p| p.iter().any(|(c, _)| *c == column))
            {
                return Err(usage(format!(
                    "--each {column}=... names a column the range already fills: give another column"
                )));
            }
            let crossed = out.len().saturating_mul(values.len());
            if crossed > MAX_SLICES {
                return Err(usage(format!(
                    "the backfill would run {crossed} slices (more than {MAX_SLICES}): narrow the range or the listed values"
                )));
            }
            out = out
                .iter()
                .flat_map(|p| {
                    values.iter().map(|v| {
                        let mut p = p.clone();
                        p.push((column.clone(), v.clone()));
                        p
                    })
                })
                .collect();
        }
        let levels = out.first().map_or(0, Vec::len);
        if levels > MAX_LEVELS {
            return Err(usage(format!(
                "the backfill's slices have {levels} partition levels; at most {MAX_LEVELS}"
            )));
        }
        let text = out.first().map(|p| Partition::of(p.clone()).to_string());
        // Every name becomes a directory name: checked as `--partition` is.
        if let Some(text) = text {
            super::parse_partition(&text)?;
        }
        Ok(out.into_iter().map(Partition::of).collect())
    }

    /// The time slots' levels (one empty slot without a range).
    fn slots(&self) -> Result<Vec<Vec<(String, String)>>, RunError> {
        let (from, to) = match (&self.from, &self.to) {
            (Some(f), Some(t)) => (f.as_str(), t.as_str()),
            (None, None) if !self.each.is_empty() => {
                if self.every.is_some() {
                    return Err(usage("--every needs --from and --to".into()));
                }
                return Ok(vec![Vec::new()]);
            }
            (None, None) => {
                return Err(usage(
                    "give a range (--from and --to), listed values (--each COLUMN=V1,V2), or both"
                        .into(),
                ));
            }
            _ => return Err(usage("give both --from and --to".into())),
        };
        let hourly_bounds = from.contains('T') || to.contains('T');
        let every = self
            .every
            .as_deref()
            .unwrap_or(if hourly_bounds { "1h" } else { "1d" });
        let date = |d: String| vec![(self.column.clone(), d)];
        match every {
            "1d" if hourly_bounds => Err(usage(format!(
                "--every 1d steps whole days: give --from and --to as dates (YYYY-MM-DD), not hours ({from}, {to})"
            ))),
            "1d" => Ok(dates(from, to)?.into_iter().map(date).collect()),
            "1h" => {
                // A date bound: the first hour of `from`, the last of `to`.
                let from = if from.contains('T') {
                    from.to_string()
                } else {
                    format!("{from}T00")
                };
                let to = if to.contains('T') {
                    to.to_string()
                } else {
                    format!("{to}T23")
                };
                Ok(hours(&from, &to)?
                    .into_iter()
                    .map(|(d, h)| {
                        let mut p = date(d);
                        p.push((self.hour_column.clone(), format!("{h:02}")));
                        p
                    })
                    .collect())
            }
            other => Err(usage(format!(
                "--every {other}: give 1d (daily slices) or 1h (hourly slices)"
            ))),
        }
    }
}

impl Span {
    /// The logical date of slice `p`: for an hour (its date and hour
    /// levels, whatever `--hour-column` calls the hour), `{{ ts }}`;
    /// otherwise what `idem run --partition` of it implies.
    pub fn logical_date(&self, p: &Partition) -> Option<String> {
        let hour = p.value_of(&self.hour_column).and_then(hour_of);
        match (p.value_of(&self.column), hour) {
            (Some(date), Some(h)) if self.from.is_some() => {
                Some(crate::schedule::timestamp(date, h))
            }
            _ => crate::schedule::implied_by_partition(p),
        }
    }
}

/// A column name a partition level can have: letters, digits and `_`.
fn check_column(flag: &str, name: &str) -> Result<(), RunError> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(usage(format!(
            "{flag} `{}` must be a column name: letters, digits and _",
            crate::text::clip_str(name, 100)
        )));
    }
    Ok(())
}

/// The hours from `from` to `to` inclusive (`YYYY-MM-DDTHH`), each as
/// its date and hour.
pub fn hours(from: &str, to: &str) -> Result<Vec<(String, u32)>, RunError> {
    let (a, b) = (hour_number(from)?, hour_number(to)?);
    if b < a {
        return Err(usage(format!("--to {to} is before --from {from}")));
    }
    if b - a >= 36_600 * 24 {
        return Err(usage(format!(
            "{from}..{to} is more than 100 years of hourly slices: check the range"
        )));
    }
    Ok((a..=b)
        .map(|n| (date_of(n.div_euclid(24)), n.rem_euclid(24) as u32))
        .collect())
}

/// Hours since 1970-01-01T00 of an hour ([`hour_named`]).
fn hour_number(s: &str) -> Result<i64, RunError> {
    let (day, h) = hour_named(s).ok_or_else(|| {
        usage(format!(
            "`{}` is not an hour: use YYYY-MM-DDTHH (e.g. 2026-10-01T07), or a timestamp on the hour (2026-10-01T07:00:00+00:00)",
            crate::text::clip_str(s, 100)
        ))
    })?;
    Ok(day_number(day)? * 24 + i64::from(h))
}

/// `COLUMN=V1,V2,...`: the column and its values (distinct, in order).
fn parse_each(text: &str) -> Result<(String, Vec<String>), RunError> {
    let (column, values) = text
        .split_once('=')
        .filter(|(c, v)| !c.is_empty() && !v.is_empty())
        .ok_or_else(|| {
            usage(format!(
                "--each `{}` must look like COLUMN=V1,V2 (e.g. region=eu,us)",
                crate::text::clip_str(text, 300)
            ))
        })?;
    let mut out: Vec<String> = Vec::new();
    for v in values.split(',') {
        // Each value is checked as a partition level.
        super::parse_partition(&format!("{column}={v}"))?;
        if out.iter().any(|o| o == v) {
            return Err(usage(format!("--each {column}: `{v}` is listed twice")));
        }
        out.push(v.to_string());
    }
    Ok((column.to_string(), out))
}

fn usage(message: String) -> RunError {
    RunError::Usage(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(from: Option<&str>, to: Option<&str>, every: Option<&str>, each: &[&str]) -> Span {
        Span {
            from: from.map(String::from),
            to: to.map(String::from),
            every: every.map(String::from),
            column: "date".into(),
            hour_column: "hour".into(),
            each: each.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn names(s: &Span) -> Vec<String> {
        s.partitions()
            .unwrap()
            .iter()
            .map(|p| p.to_string())
            .collect()
    }

    #[test]
    fn ranges_of_days_and_hours_cross_listed_values() {
        let days = span(Some("2026-10-01"), Some("2026-10-02"), None, &[]);
        assert_eq!(names(&days), ["date=2026-10-01", "date=2026-10-02"]);
        let hours = span(Some("2026-10-01T22"), Some("2026-10-02T01"), None, &[]);
        assert_eq!(
            names(&hours),
            [
                "date=2026-10-01/hour=22",
                "date=2026-10-01/hour=23",
                "date=2026-10-02/hour=00",
                "date=2026-10-02/hour=01"
            ]
        );
        // Whole days of hours; a year's end and a leap day.
        let days_of_hours = span(Some("2024-02-29"), Some("2024-03-01"), Some("1h"), &[]);
        let all = names(&days_of_hours);
        assert_eq!(all.len(), 48);
        assert_eq!(all[0], "date=2024-02-29/hour=00");
        assert_eq!(all[47], "date=2024-03-01/hour=23");
        let crossed = span(
            Some("2026-10-01"),
            Some("2026-10-02"),
            None,
            &["region=eu,us"],
        );
        assert_eq!(
            names(&crossed),
            [
                "date=2026-10-01/region=eu",
                "date=2026-10-01/region=us",
                "date=2026-10-02/region=eu",
                "date=2026-10-02/region=us"
            ]
        );
        // A date bound next to an hour: its first (or last) hour; an
        // unpadded hour and {{ ts }} are hours too.
        let mixed = span(Some("2026-10-01"), Some("2026-10-01T1"), None, &[]);
        assert_eq!(
            names(&mixed),
            ["date=2026-10-01/hour=00", "date=2026-10-01/hour=01"]
        );
        let ts = span(
            Some("2026-10-01T23:00:00+00:00"),
            Some("2026-10-02"),
            None,
            &[],
        );
        assert_eq!(names(&ts).len(), 25);
        let listed = span(None, None, None, &["region=eu,us", "kind=a"]);
        assert_eq!(names(&listed), ["region=eu/kind=a", "region=us/kind=a"]);
    }

    #[test]
    fn a_bad_range_or_list_is_refused_naming_what_to_give() {
        let refused = |s: Span, needle: &str| {
            let e = s.partitions().unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        };
        refused(
            span(
                Some("2026-10-01T00"),
                Some("2026-10-01T05"),
                Some("1d"),
                &[],
            ),
            "--every 1d",
        );
        refused(
            span(Some("2026-10-01"), Some("2026-10-02"), Some("15m"), &[]),
            "1d",
        );
        refused(
            span(Some("2026-10-01T24"), Some("2026-10-02T01"), None, &[]),
            "YYYY-MM-DDTHH",
        );
        refused(
            span(Some("2026-10-01t07"), Some("2026-10-02T01"), None, &[]),
            "`2026-10-01t07` is not a date",
        );
        refused(
            span(Some("2026-10-02T01"), Some("2026-10-01T05"), None, &[]),
            "before",
        );
        refused(span(None, None, None, &[]), "--each");
        refused(
            span(Some("2026-10-01"), None, None, &[]),
            "both --from and --to",
        );
        refused(span(None, None, None, &["region=eu,eu"]), "twice");
        refused(
            span(None, None, None, &[r"region=eu,a\b"]),
            "path separator",
        );
        refused(span(None, None, None, &["region"]), "COLUMN=V1,V2");
        refused(
            span(Some("2026-10-01"), Some("2026-10-01"), None, &["date=x"]),
            "already",
        );
        refused(
            span(Some("1900-01-01T00"), Some("2026-01-01T00"), None, &[]),
            "100 years",
        );
    }
}
