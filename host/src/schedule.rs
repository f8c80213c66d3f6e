//! What a scheduler hands a run: its logical date. It goes into the run
//! key, the manifest and the guest's context, so garbage must never get
//! that far: `2026-13-45` or `yesterday` committed rows whose date column
//! said so, and audit then called them proven.

use arrow::compute::kernels::cast_utils::{Parser as _, string_to_timestamp_nanos};
use arrow::datatypes::Date32Type;

use crate::text::{MAX_GUEST_TEXT, clip_str};

/// Check a logical date: an ISO 8601 date (`2026-10-01`, Airflow's
/// `{{ ds }}`) or timestamp (`2026-10-01T00:00:00+00:00`, Airflow's
/// `{{ ts }}`), a real day of a real month. Returned unchanged: the text
/// is what the run key and the guest see.
pub fn check_logical_date(text: &str) -> Result<(), String> {
    let refuse = || {
        format!(
            "--logical-date `{}` is not an ISO 8601 date or timestamp: pass a day such as 2026-10-01 (Airflow: {{{{ ds }}}}) or a timestamp such as 2026-10-01T00:00:00+00:00 ({{{{ ts }}}})",
            text.escape_debug()
        )
    };
    let t = text.as_bytes();
    // A year of four digits and a dash: arrow's parsers alone would also
    // take `20261001` or a bare time.
    let shaped =
        t.len() >= 10 && t[..4].iter().all(u8::is_ascii_digit) && t[4] == b'-' && t[7] == b'-';
    if !shaped {
        return Err(refuse());
    }
    let ok = if t.len() == 10 {
        Date32Type::parse(text).is_some()
    } else {
        matches!(t[10], b'T' | b' ') && string_to_timestamp_nanos(text).is_ok()
    };
    ok.then_some(()).ok_or_else(refuse)
}

/// Parse `--params`: JSON, and an object of named parameters. The
/// errors name the flag and (cut) what was given.
pub fn parse_params(text: &str) -> Result<serde_json::Value, String> {
    let params: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "--params is not valid JSON ({e}): {}",
            clip_str(text, MAX_GUEST_TEXT)
        )
    })?;
    if !params.is_object() {
        return Err(format!(
            "--params must be a JSON object of named parameters, such as '{{\"min_amount\": 10}}', not `{}`",
            clip_str(text, MAX_GUEST_TEXT)
        ));
    }
    Ok(params)
}

/// The logical date a partition slice implies when the caller gives none,
/// as a scheduler would have passed it: the first level whose value is an
/// ISO date (`date=2026-10-01`, `ds=...`) as `{{ ds }}`; followed by an
/// `hour=HH` level, that hour as `{{ ts }}` (`2026-10-01T07:00:00+00:00`).
/// Without it, a run of the partition without `--logical-date` and a
/// rerun with it would be two different runs of the same data.
pub fn implied_by_partition(partition: &crate::slice::Partition) -> Option<String> {
    let levels = partition.levels();
    let at = levels.iter().position(|(_, v)| is_date(v))?;
    let date = &levels[at].1;
    // A bad hour (`hour=24`) leaves the date.
    match levels.get(at + 1).filter(|(c, _)| c == "hour") {
        Some((_, h)) => Some(hour_of(h).map_or_else(|| date.clone(), |h| timestamp(date, h))),
        None => Some(date.clone()),
    }
}

/// Whether `value` is an ISO date (`2026-10-01`).
fn is_date(value: &str) -> bool {
    value.len() == 10 && check_logical_date(value).is_ok()
}

/// The hour `HH` (or `H`, as Spark and Hive write integer partitions)
/// names: 0 to 23.
pub fn hour_of(text: &str) -> Option<u32> {
    let h: u32 = text.parse().ok()?;
    ((1..=2).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit()) && h < 24)
        .then_some(h)
}

/// The hour an hour bound or a scheduler's timestamp names, as its date
/// and hour: `2026-10-01T07`, or on the hour `2026-10-01T07:00[:00]`
/// followed by nothing, `Z` or `+00:00` (Airflow's `{{ ts }}`). The date
/// is not checked here (the ranges check it).
pub fn hour_named(text: &str) -> Option<(&str, u32)> {
    let (day, time) = text.split_once('T')?;
    let digits = time.bytes().take_while(u8::is_ascii_digit).count();
    let (hour, rest) = time.split_at(digits);
    let on_the_hour = ["", ":00", ":00:00"]
        .iter()
        .flat_map(|m| ["", "Z", "+00:00"].map(|z| format!("{m}{z}")))
        .any(|tail| rest == tail);
    Some((day, hour_of(hour).filter(|_| on_the_hour)?))
}

/// The logical timestamp of hour `h` of `date`, as Airflow's `{{ ts }}`.
pub fn timestamp(date: &str, h: u32) -> String {
    format!("{date}T{h:02}:00:00+00:00")
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of Unix milliseconds.
pub fn time_of(ms: u64) -> String {
    let secs = ms / 1000;
    let day = date_of((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!("{day} {:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// `YYYY-MM-DD` of a day number (civil_from_days).
pub fn date_of(z: i64) -> String {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_real_iso_dates_and_timestamps_pass() {
        for ok in [
            "2026-10-01",
            "2024-02-29",
            "2026-10-01T00:00:00+00:00",
            "2026-10-01T06:30:00Z",
            "2026-10-01T06:30:00.123456Z",
            "2026-10-01 06:30:00",
        ] {
            assert_eq!(check_logical_date(ok), Ok(()), "{ok}");
        }
        for bad in [
            "2026-13-45",
            "2026-02-30",
            "2025-02-29",
            "yesterday",
            "",
            "20261001",
            "2026-10-01X",
            "2026-10-01T25:00:00Z",
            "10/01/2026",
        ] {
            let e = check_logical_date(bad).unwrap_err();
            assert!(
                e.contains("ISO 8601") && e.contains("{{ ds }}"),
                "{bad}: {e}"
            );
        }
        let implied = |p: &str| {
            let levels = p.split('/').map(|l| {
                let (c, v) = l.split_once('=').unwrap();
                (c.to_string(), v.to_string())
            });
            implied_by_partition(&crate::slice::Partition::of(levels.collect()))
        };
        assert_eq!(implied("date=2026-10-01").as_deref(), Some("2026-10-01"));
        assert_eq!(implied("ts=2026-10-01T00:00:00Z"), None);
        assert_eq!(implied("region=eu"), None);
        // An hour below a date: that hour, as Airflow's {{ ts }}.
        assert_eq!(
            implied("date=2026-10-01/hour=07").as_deref(),
            Some("2026-10-01T07:00:00+00:00")
        );
        assert_eq!(
            implied("region=eu/ds=2026-10-01/hour=23").as_deref(),
            Some("2026-10-01T23:00:00+00:00")
        );
        // Other levels below a date leave the date; a bad hour too.
        assert_eq!(
            implied("date=2026-10-01/region=eu").as_deref(),
            Some("2026-10-01")
        );
        assert_eq!(
            implied("date=2026-10-01/hour=24").as_deref(),
            Some("2026-10-01")
        );
        // Spark's unpadded integer partitions.
        assert_eq!(
            implied("date=2026-10-01/hour=7").as_deref(),
            Some("2026-10-01T07:00:00+00:00")
        );
        for (text, named) in [
            ("2026-10-01T07", Some(("2026-10-01", 7))),
            ("2026-10-01T7", Some(("2026-10-01", 7))),
            ("2026-10-01T07:00", Some(("2026-10-01", 7))),
            ("2026-10-01T07:00:00+00:00", Some(("2026-10-01", 7))),
            ("2026-10-01T23:00:00Z", Some(("2026-10-01", 23))),
            ("2026-10-01T24", None),
            ("2026-10-01t07", None),
            ("2026-10-01", None),
            ("2026-10-01T07:30:00+00:00", None),
            ("2026-10-01T07:00:00+02:00", None),
            ("2026-10-01T007", None),
        ] {
            assert_eq!(hour_named(text), named, "{text}");
        }
    }
}
