//! Sub-daily and nested slices end to end: partitions `date=D/hour=HH`
//! (and `date=D/region=R`) read from nested directories, committed into
//! tables partitioned by every level (Delta read back by deltalake+polars
//! and the raw log replay, Iceberg by PyIceberg), the hour passed to the
//! guest as the logical timestamp, `idem backfill` over hours and over
//! listed values; reruns and backfills leave the tables as one clean run.

mod common;

use std::path::{Path, PathBuf};

use common::{field, read_table};
use serde_json::Value;

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// Orders for each hour of `date` in `root/date=D/hour=HH/` (each hour's
/// rows drawn from its own seed, `salt` changing them all).
fn hours_data(root: &Path, date: &str, hours: &[&str], rows: u64, salt: &str) {
    let scratch = tempfile::tempdir().unwrap();
    for h in hours {
        let key = format!("{date}T{h}{salt}");
        let files = common::orders(scratch.path(), &key, rows, 1);
        let dir = root.join(format!("date={date}")).join(format!("hour={h}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in files {
            std::fs::rename(&f, dir.join(f.file_name().unwrap())).unwrap();
        }
    }
}

fn module() -> PathBuf {
    common::guest("examples/daily_revenue")
}

fn idem(args: &[String]) -> (i32, String, String) {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    common::idem(&refs)
}

fn ok(r: (i32, String, String)) -> String {
    assert_eq!(r.0, 0, "idem failed:\n{}\n{}", r.1, r.2);
    r.1
}

fn run_args(data: &Path, partition: &str, table: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["run", "--module", &s(&module()), "--input", &s(data)]
        .iter()
        .map(|x| x.to_string())
        .collect();
    a.extend([
        "--partition".into(),
        partition.into(),
        "--table".into(),
        table.into(),
    ]);
    a.extend(extra.iter().map(|x| x.to_string()));
    a
}

fn backfill_args(data: &Path, table: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["backfill", "--module", &s(&module()), "--input", &s(data)]
        .iter()
        .map(|x| x.to_string())
        .collect();
    a.extend(["--table".into(), table.into(), "--json".into()]);
    a.extend(extra.iter().map(|x| x.to_string()));
    a
}

/// Each slice of a backfill's `--json` summary with its status.
fn statuses(out: &str) -> Vec<(String, String)> {
    common::slice_statuses(out)
}

fn manifest(table: &Path, stdout: &str) -> Value {
    let url = field(stdout, "manifest:");
    let name = url.rsplit('/').next().unwrap();
    let text = std::fs::read_to_string(table.join("_idem/manifests").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The (date, hour, day) of every row a reader returned.
fn keys(rows: &[String]) -> Vec<(String, String, String)> {
    let mut k: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_str(r).unwrap();
            let f = |c: &str| v[c].as_str().unwrap_or("?").to_string();
            (f("date"), f("hour"), f("day"))
        })
        .collect();
    k.sort();
    k.dedup();
    k
}

const HOURS: [&str; 3] = ["00", "01", "02"];

#[test]
fn hourly_slices_commit_nested_partitions_and_backfills_equal_one_clean_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("events");
    hours_data(&data, "2026-10-01", &HOURS, 400, "");
    let table = dir.path().join("hourly");
    let t = s(&table);

    // One hour: the table is partitioned by both levels, the guest got the
    // hour as its logical timestamp (the example tags rows with it).
    let out = ok(idem(&run_args(&data, "date=2026-10-01/hour=01", &t, &[])));
    assert_eq!(field(&out, "result:"), "committed version 1", "{out}");
    let whole = manifest(&table, &out);
    common::check_schemas(&[("manifest", &whole.to_string())]).unwrap();
    let m = &whole["predicate"]["run"];
    assert_eq!(m["logicalDate"], "2026-10-01T01:00:00+00:00", "{m}");
    assert_eq!(m["slice"]["id"], "date=2026-10-01/hour=01");
    assert_eq!(
        m["target"]["partition"],
        serde_json::json!([["date", "2026-10-01"], ["hour", "01"]])
    );
    let log0 = std::fs::read_to_string(table.join("_delta_log/00000000000000000000.json")).unwrap();
    assert!(
        log0.contains(r#""partitionColumns":["date","hour"]"#),
        "{log0}"
    );
    assert!(
        common::files_below(&table.join("date=2026-10-01/hour=01"))
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "parquet")),
        "no data file under date=2026-10-01/hour=01/"
    );
    let one = read_table(&table, None);
    assert_eq!(
        keys(&one.rows),
        [(
            "2026-10-01".to_string(),
            "01".to_string(),
            "2026-10-01T01:00:00+00:00".to_string()
        )]
    );
    // What a scheduler passes for that hour ({{ ts }}) is the same run.
    let again = ok(idem(&run_args(
        &data,
        "date=2026-10-01/hour=01",
        &t,
        &["--logical-date", "2026-10-01T01:00:00+00:00"],
    )));
    assert!(field(&again, "result:").contains("memo"), "{again}");

    // The hours of the day: the one run is a memo hit, the others commit.
    let out = ok(idem(&backfill_args(
        &data,
        &t,
        &["--from", "2026-10-01T00", "--to", "2026-10-01T02"],
    )));
    common::check_schemas(&[("backfill", &out)]).unwrap();
    let got = statuses(&out);
    assert_eq!(
        got,
        [
            (
                "date=2026-10-01/hour=00".to_string(),
                "committed".to_string()
            ),
            ("date=2026-10-01/hour=01".to_string(), "memo".to_string()),
            (
                "date=2026-10-01/hour=02".to_string(),
                "committed".to_string()
            ),
        ],
        "{out}"
    );
    let whole = read_table(&table, None);
    assert_eq!(keys(&whole.rows).len(), 3, "{:?}", keys(&whole.rows));
    // Again: nothing moves.
    let out = ok(idem(&backfill_args(
        &data,
        &t,
        &[
            "--from",
            "2026-10-01T00",
            "--to",
            "2026-10-01T02",
            "--jobs",
            "3",
        ],
    )));
    assert!(statuses(&out).iter().all(|(_, st)| st == "memo"), "{out}");
    assert_eq!(read_table(&table, None), whole);

    // One clean backfill of the same hours, by whole day: the same rows.
    let clean = dir.path().join("clean");
    ok(idem(&backfill_args(
        &data,
        &s(&clean),
        &[
            "--from",
            "2026-10-01",
            "--to",
            "2026-10-01",
            "--every",
            "1h",
            "--skip-missing",
        ],
    )));
    assert_eq!(read_table(&clean, None).rows, whole.rows);
}

/// A changed hour recommits alone; audit proves every hour, also the
/// hours of a table whose output carries the partition columns itself
/// (read back from the log into their places); a missing hour lists the
/// hours there are; a one-level slice cannot write into the hourly table.
#[test]
fn a_changed_hour_recommits_alone_and_audit_proves_nested_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("events");
    hours_data(&data, "2026-10-01", &HOURS, 400, "");
    let table = dir.path().join("hourly");
    let t = s(&table);
    let hours = ["--from", "2026-10-01T00", "--to", "2026-10-01T02"];
    ok(idem(&backfill_args(&data, &t, &hours)));

    // One hour's input changes: exactly that hour recommits.
    hours_data(&data, "2026-10-01", &["02"], 300, "-late");
    let out = ok(idem(&backfill_args(
        &data,
        &t,
        &["--from", "2026-10-01T00", "--to", "2026-10-01T02"],
    )));
    let got: Vec<String> = statuses(&out).into_iter().map(|(_, st)| st).collect();
    assert_eq!(got, ["memo", "memo", "committed"], "{out}");
    let fresh = dir.path().join("fresh");
    ok(idem(&backfill_args(
        &data,
        &s(&fresh),
        &["--from", "2026-10-01T00", "--to", "2026-10-01T02"],
    )));
    assert_eq!(read_table(&table, None).rows, read_table(&fresh, None).rows);
    let (code, audit, _) = common::idem(&["audit", &t]);
    assert_eq!(code, 0, "{audit}");

    // A missing hour names the hours there are; a one-level partition
    // into the hourly table names its partitioning.
    let (code, _, err) = idem(&run_args(&data, "date=2026-10-01/hour=05", &t, &[]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("hour=00") && err.contains("hour=02"), "{err}");
    hours_data(&data, "2026-10-02", &["00"], 100, "");
    let flat = dir.path().join("flat");
    std::fs::create_dir_all(flat.join("date=2026-10-02")).unwrap();
    for f in common::files_below(&data.join("date=2026-10-02/hour=00")) {
        std::fs::copy(
            &f,
            flat.join("date=2026-10-02").join(f.file_name().unwrap()),
        )
        .unwrap();
    }
    let (code, _, err) = idem(&run_args(&flat, "date=2026-10-02", &t, &[]));
    assert_ne!(code, 0);
    assert!(err.contains("partitioned by [date, hour]"), "{err}");

    // An hour of a Delta table read as a slice (its partition values come
    // from the log), passed through with its date and hour columns into a
    // table partitioned by both: audit reads both back into place.
    let bronze = dir.path().join("bronze");
    let clean = s(&common::guest("examples/clean_orders"));
    let mut a = backfill_args(&data, &s(&bronze), &hours);
    a[2] = clean.clone();
    ok(idem(&a));
    let silver = s(&dir.path().join("silver"));
    let out = ok(common::idem(&[
        "run",
        "--module",
        &s(&common::guest("examples/dedup_events")),
        "--params",
        r#"{"key": "event_id"}"#,
        "--input",
        &s(&bronze),
        "--table-version",
        "3",
        "--partition",
        "date=2026-10-01/hour=01",
        "--table",
        &silver,
    ]));
    assert_eq!(field(&out, "result:"), "committed version 1", "{out}");
    let rows = read_table(&dir.path().join("silver"), None).rows;
    let hours: Vec<String> = keys(&rows).into_iter().map(|k| k.1).collect();
    assert_eq!(hours, ["01"], "{:?}", &rows[..1]);
    let (code, audit, err) = common::idem(&["audit", &silver]);
    assert_eq!(code, 0, "{audit}{err}");
}

#[test]
fn bad_nested_partitions_and_ranges_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("events");
    hours_data(&data, "2026-10-01", &["00"], 10, "");
    let t = s(&dir.path().join("t"));
    for (partition, says) in [
        ("date=2026-10-01/hour", "must look like column=value"),
        ("date=2026-10-01/date=x", "names column `date` twice"),
        ("a=1/b=2/c=3/d=4/e=5", "at most 4"),
        ("date=2026-10-01/hour=..", "relative path component"),
    ] {
        let (code, _, err) = idem(&run_args(&data, partition, &t, &[]));
        assert_eq!(code, 2, "{partition}: {err}");
        assert!(err.contains(says), "{partition}: {err}");
    }
    for (range, says) in [
        (
            vec![
                "--from",
                "2026-10-01",
                "--to",
                "2026-10-01T03",
                "--every",
                "1d",
            ],
            "--every 1d steps whole days",
        ),
        (
            vec!["--from", "2026-10-01T00", "--to", "2026-10-01T24"],
            "YYYY-MM-DDTHH",
        ),
        (vec!["--from", "2026-10-01T03"], "both --from and --to"),
        (
            vec!["--each", "region=eu", "--every", "1h"],
            "--every needs --from and --to",
        ),
    ] {
        let (code, _, err) = idem(&backfill_args(&data, &t, &range));
        assert_eq!(code, 2, "{range:?}: {err}");
        assert!(err.contains(says), "{range:?}: {err}");
    }
    assert!(
        !dir.path().join("t").exists(),
        "a refused run created the table"
    );
}

#[test]
fn listed_values_of_a_partition_column_backfill_like_dates() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    let scratch = tempfile::tempdir().unwrap();
    for region in ["eu", "us"] {
        let files = common::orders(scratch.path(), &format!("2026-10-01{region}"), 200, 1);
        let d = data
            .join("date=2026-10-01")
            .join(format!("region={region}"));
        std::fs::create_dir_all(&d).unwrap();
        for f in files {
            std::fs::rename(&f, d.join(f.file_name().unwrap())).unwrap();
        }
    }
    let table = dir.path().join("regions");
    let t = s(&table);
    let out = ok(idem(&backfill_args(
        &data,
        &t,
        &[
            "--from",
            "2026-10-01",
            "--to",
            "2026-10-01",
            "--each",
            "region=eu,us",
        ],
    )));
    assert_eq!(
        statuses(&out),
        [
            (
                "date=2026-10-01/region=eu".to_string(),
                "committed".to_string()
            ),
            (
                "date=2026-10-01/region=us".to_string(),
                "committed".to_string()
            ),
        ],
        "{out}"
    );
    let rows = read_table(&table, None).rows;
    let regions: std::collections::BTreeSet<String> = rows
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_str(r).unwrap();
            // The logical date is the date (no hour level).
            assert_eq!(v["day"], "2026-10-01", "{r}");
            v["region"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(regions.into_iter().collect::<Vec<_>>(), ["eu", "us"]);
    // The same slice by hand is the same run: a memo hit.
    let again = ok(idem(&run_args(&data, "date=2026-10-01/region=us", &t, &[])));
    assert!(field(&again, "result:").contains("memo"), "{again}");

    // Listed values alone (no range): a dataset partitioned by region.
    let by_region = dir.path().join("by_region");
    for region in ["eu", "us"] {
        let files = common::orders(scratch.path(), &format!("r{region}"), 100, 1);
        let d = by_region.join(format!("region={region}"));
        std::fs::create_dir_all(&d).unwrap();
        for f in files {
            std::fs::rename(&f, d.join(f.file_name().unwrap())).unwrap();
        }
    }
    let out = ok(idem(&backfill_args(
        &by_region,
        &s(&dir.path().join("per_region")),
        &["--each", "region=eu,us"],
    )));
    assert_eq!(
        statuses(&out),
        [
            ("region=eu".to_string(), "committed".to_string()),
            ("region=us".to_string(), "committed".to_string()),
        ],
        "{out}"
    );
}

#[test]
fn hourly_slices_commit_into_an_iceberg_table_partitioned_by_both_levels() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("events");
    hours_data(&data, "2026-10-01", &HOURS, 300, "");
    let lake = dir.path().join("lake");
    std::fs::create_dir_all(&lake).unwrap();
    let db = lake.join("catalog.db");
    let t = format!("iceberg+sqlite://{}#sales.hourly", s(&db));
    let out = ok(idem(&backfill_args(
        &data,
        &t,
        &["--from", "2026-10-01T00", "--to", "2026-10-01T02"],
    )));
    assert!(
        statuses(&out).iter().all(|(_, st)| st == "committed"),
        "{out}"
    );
    let read = common::read_iceberg(&s(&db), &lake, "sales.hourly");
    let partition: Vec<String> = read["partition"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(partition.len(), 2, "{partition:?}");
    assert!(
        partition[0].contains("date") && partition[1].contains("hour"),
        "{partition:?}"
    );
    let rows: Vec<String> = read["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    // The same rows as the Delta table of the same hours.
    let delta = dir.path().join("delta");
    ok(idem(&backfill_args(
        &data,
        &s(&delta),
        &["--from", "2026-10-01T00", "--to", "2026-10-01T02"],
    )));
    assert_eq!(rows, read_table(&delta, None).rows);
    assert_eq!(keys(&rows).len(), 3);
    // A rerun of one hour with its timestamp is a memo hit; the table
    // does not move.
    let again = ok(idem(&run_args(
        &data,
        "date=2026-10-01/hour=02",
        &t,
        &["--logical-date", "2026-10-01T02:00:00+00:00"],
    )));
    assert!(field(&again, "result:").contains("memo"), "{again}");
    let after = common::read_iceberg(&s(&db), &lake, "sales.hourly");
    assert_eq!(after["version"], read["version"]);
    // Read as a slice by its date alone: every hour of it (the partition
    // levels are matched by column name).
    let snapshot = read["snapshot"].as_i64().unwrap().to_string();
    let whole_day = dir.path().join("day");
    let out = ok(common::idem(&[
        "run",
        "--module",
        &s(&common::guest("examples/dedup_events")),
        "--params",
        r#"{"key": "customer"}"#,
        "--input",
        &t,
        "--iceberg-snapshot",
        &snapshot,
        "--partition",
        "date=2026-10-01",
        "--table",
        &s(&whole_day),
        "--mode",
        "append",
    ]));
    let m = manifest(&whole_day, &out);
    assert_eq!(
        m["predicate"]["result"]["rowsIn"].as_u64(),
        Some(rows.len() as u64),
        "{out}"
    );
    let (code, audit, _) = common::idem(&["audit", &t]);
    assert_eq!(code, 0, "{audit}");
    // Read by its hourly slices (`date=D/*`, a daily stage's read): the
    // same rows, hour by hour, as the slice date=D; audit re-reads them.
    let by_slices = dir.path().join("by_slices");
    let out = ok(common::idem(&[
        "run",
        "--module",
        &s(&common::guest("examples/dedup_events")),
        "--params",
        r#"{"key": "customer"}"#,
        "--input",
        &t,
        "--iceberg-snapshot",
        &snapshot,
        "--table-slice",
        "date=2026-10-01/*",
        "--table",
        &s(&by_slices),
        "--mode",
        "append",
    ]));
    let m = manifest(&by_slices, &out);
    let slice = &m["predicate"]["run"]["slice"];
    assert_eq!(slice["id"], "date=2026-10-01", "{m}");
    assert_eq!(
        m["predicate"]["result"]["rowsIn"].as_u64(),
        Some(rows.len() as u64),
        "{out}"
    );
    let hours: Vec<String> = slice["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let p = i["path"].as_str().unwrap();
            p.split('/')
                .find(|l| l.starts_with("hour="))
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(hours, ["hour=00", "hour=01", "hour=02"], "{m}");
    let (code, audit, err) = common::idem(&["audit", &s(&by_slices)]);
    assert_eq!(code, 0, "{audit}{err}");
}

/// `idem --json pipeline ARGS`: each stage run as `when stage status`.
fn pipeline(args: &[&str]) -> (i32, Vec<String>, String) {
    let mut all = vec!["--json", "pipeline"];
    all.extend_from_slice(args);
    let (code, out, err) = common::idem(&all);
    let v = serde_json::from_str::<Value>(&out).unwrap_or_default();
    let Some(dates) = v["dates"].as_array() else {
        return (code, Vec::new(), format!("{out}{err}"));
    };
    let mut stages = Vec::new();
    for d in dates {
        for st in d["stages"].as_array().unwrap() {
            stages.push(format!(
                "{} {} {} {}",
                d["date"].as_str().unwrap(),
                st["slice"].as_str().unwrap(),
                st["stage"].as_str().unwrap(),
                st["status"].as_str().unwrap()
            ));
        }
    }
    (code, stages, err)
}

/// An hourly pipeline (its first stage's partition is `date/hour`): every
/// stage's slice is the hour, the logical date its `{{ ts }}`, and the
/// chain is idempotent hour by hour.
#[test]
fn an_hourly_pipeline_runs_every_stage_per_hour() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("events");
    hours_data(&data, "2026-10-01", &HOURS, 300, "");
    let file = dir.path().join("idem.toml");
    let toml = |gold_partition: &str| {
        format!(
            r#"
[pipeline]
name = "hourly"

[[stage]]
name = "bronze"
module = "{clean}"
input = "events"
partition = "date/hour"
table = "lake/bronze"
mode = "append"

[[stage]]
name = "gold"
module = "{revenue}"
from = "bronze"
table = "lake/gold"
partition = "{gold_partition}"
"#,
            clean = s(&common::guest("examples/clean_orders")),
            revenue = s(&module()),
        )
    };
    std::fs::write(&file, toml("date/hour")).unwrap();
    let f = s(&file);
    let back = [
        "backfill",
        f.as_str(),
        "--from",
        "2026-10-01T00",
        "--to",
        "2026-10-01T02",
    ];
    let (code, stages, err) = pipeline(&back);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        stages,
        [
            "2026-10-01T00 date=2026-10-01/hour=00 bronze committed",
            "2026-10-01T00 date=2026-10-01/hour=00 gold committed",
            "2026-10-01T01 date=2026-10-01/hour=01 bronze committed",
            "2026-10-01T01 date=2026-10-01/hour=01 gold committed",
            "2026-10-01T02 date=2026-10-01/hour=02 bronze committed",
            "2026-10-01T02 date=2026-10-01/hour=02 gold committed",
        ]
    );
    let gold = dir.path().join("lake/gold");
    let log0 = std::fs::read_to_string(gold.join("_delta_log/00000000000000000000.json")).unwrap();
    assert!(
        log0.contains(r#""partitionColumns":["date","hour"]"#),
        "{log0}"
    );
    let rows = read_table(&gold, None).rows;
    assert_eq!(
        keys(&rows),
        HOURS
            .iter()
            .map(|h| (
                "2026-10-01".to_string(),
                h.to_string(),
                format!("2026-10-01T{h}:00:00+00:00")
            ))
            .collect::<Vec<_>>()
    );
    // Airflow's {{ ts }} of one hour, and the hour unpadded: every stage
    // a memo hit.
    for hour in ["2026-10-01T01:00:00+00:00", "2026-10-01T1"] {
        let (code, stages, err) = pipeline(&["run", &f, "--logical-date", hour]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(stages.len(), 2, "{stages:?}");
        assert!(stages.iter().all(|s| s.ends_with("memo")), "{stages:?}");
    }
    assert_eq!(read_table(&gold, None).rows, rows);
    // The whole day by dates: hours 03-23 have not landed. Without
    // --skip-missing that fails; with it, the hours there are memo hits.
    let day = [
        "backfill",
        f.as_str(),
        "--from",
        "2026-10-01",
        "--to",
        "2026-10-01",
    ];
    let (code, stages, _) = pipeline(&day);
    assert_eq!((code, stages.len()), (2, 48), "{stages:?}");
    let (code, out, err) =
        common::idem(&[&["--json", "pipeline"][..], &day, &["--skip-missing"]].concat());
    assert_eq!(code, 0, "{err}");
    common::check_schemas(&[("pipeline", &out)]).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    let statuses: Vec<&str> = v["dates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["stages"][0]["status"].as_str().unwrap())
        .collect();
    assert_eq!(&statuses[..3], ["memo", "memo", "memo"]);
    assert!(
        statuses[3..].iter().all(|s| *s == "missing"),
        "{statuses:?}"
    );
    assert_eq!(read_table(&gold, None).rows, rows);
    // A day where the pipeline takes hours, off the hour, hour 24 and a
    // lowercase t are refused.
    for bad in [
        "2026-10-01",
        "2026-10-01T01:30:00+00:00",
        "2026-10-01T24",
        "2026-10-01t01",
    ] {
        let (code, _, err) = pipeline(&["run", &f, "--logical-date", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("is not an hour"), "{bad}: {err}");
    }
    // A later stage partitioned by the date alone cannot hold hours.
    std::fs::write(&file, toml("date")).unwrap();
    let (code, _, err) = pipeline(&back);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("stage `gold`: partition = \"date\" has 1 level(s)"),
        "{err}"
    );
}

/// The event ids of a reader's rows, each once, sorted.
fn event_ids(rows: &[String], date: Option<&str>) -> Vec<String> {
    let mut ids: Vec<String> = rows
        .iter()
        .map(|r| serde_json::from_str::<Value>(r).unwrap())
        .filter(|v| date.is_none_or(|d| v["date"] == d))
        .map(|v| v["event_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// A daily read of an hourly table (`--table-slice 'date=D/*'`, what a
/// pipeline's `every = "1d"` stage runs): the rows of every hour of D
/// the pinned version holds, not another day's, as the slice `date=D`,
/// hour by hour; from an overwrite-partition table (files by slice) and
/// from a merge table (rows by owner); audit re-reads it; a day without
/// hours is refused by name.
#[test]
fn a_day_reads_every_hour_an_hourly_table_committed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("events");
    hours_data(&data, "2026-10-01", &HOURS, 200, "");
    hours_data(&data, "2026-10-02", &["00"], 100, "");
    let bronze = dir.path().join("bronze");
    let clean = s(&common::guest("examples/clean_orders"));
    let mut a = backfill_args(
        &data,
        &s(&bronze),
        &["--from", "2026-10-01T00", "--to", "2026-10-02T00"],
    );
    a[2] = clean;
    // Hours 03 to 23 of the first day have not landed.
    let _ = idem(&a);
    let view = read_table(&bronze, None);
    let day1 = event_ids(&view.rows, Some("2026-10-01"));
    assert!(!day1.is_empty() && event_ids(&view.rows, Some("2026-10-02")).len() > 10);
    let dedup = s(&common::guest("examples/dedup_events"));
    let day_of = |input: &Path, version: i64, table: &Path| {
        common::idem(&[
            "run",
            "--module",
            &dedup,
            "--params",
            r#"{"key": "event_id"}"#,
            "--input",
            &s(input),
            "--table-version",
            &version.to_string(),
            "--table-slice",
            "date=2026-10-01/*",
            "--table",
            &s(table),
            "--mode",
            "merge",
            "--key",
            "event_id",
        ])
    };
    let silver = dir.path().join("silver");
    let out = ok(day_of(&bronze, view.version, &silver));
    let m = manifest(&silver, &out);
    let slice = &m["predicate"]["run"]["slice"];
    assert_eq!(slice["id"], "date=2026-10-01", "{m}");
    assert_eq!(slice["deltaSlice"], "date=2026-10-01/*", "{m}");
    // Hour by hour, whatever the files are called.
    let read: Vec<&str> = slice["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    let hours: Vec<&str> = read.iter().map(|p| p.split('/').nth(1).unwrap()).collect();
    let mut sorted = hours.clone();
    sorted.sort();
    assert_eq!(hours, sorted, "{read:?}");
    assert_eq!(sorted.first(), Some(&"hour=00"), "{read:?}");
    assert_eq!(sorted.last(), Some(&"hour=02"), "{read:?}");
    assert!(
        read.iter().all(|p| p.starts_with("date=2026-10-01/")),
        "{read:?}"
    );
    assert_eq!(event_ids(&read_table(&silver, None).rows, None), day1);
    let (code, audit, err) = common::idem(&["audit", &s(&silver)]);
    assert_eq!(code, 0, "{audit}{err}");
    // Again: a memo hit.
    let out = ok(day_of(&bronze, view.version, &silver));
    assert!(field(&out, "result:").contains("(memo"), "{out}");
    // Another writer deletes hour 01's rows: the day read at the new
    // version is refused naming that hour, not read short.
    let py = std::process::Command::new(common::python())
        .args([
            "-c",
            "import sys, deltalake; deltalake.DeltaTable(sys.argv[1]).delete(\"hour = '01'\")",
            &s(&bronze),
        ])
        .output()
        .unwrap();
    assert!(py.status.success(), "{py:?}");
    let deleted = read_table(&bronze, None).version;
    assert!(deleted > view.version);
    let (code, _, err) = day_of(&bronze, deleted, &dir.path().join("short"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("slice `date=2026-10-01/hour=01` no longer holds at version"),
        "{err}"
    );

    // From a merge table whose rows each hour owns.
    let merged = dir.path().join("merged");
    for h in HOURS {
        let mut args: Vec<String> = [
            "run",
            "--module",
            &dedup,
            "--params",
            r#"{"key": "event_id"}"#,
            "--input",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        args.extend([
            s(&bronze),
            "--table-version".into(),
            view.version.to_string(),
            "--table-slice".into(),
            format!("date=2026-10-01/hour={h}"),
            "--table".into(),
            s(&merged),
            "--mode".into(),
            "merge".into(),
            "--key".into(),
            "event_id".into(),
        ]);
        ok(idem(&args));
    }
    let merged_view = read_table(&merged, None);
    let daily = dir.path().join("daily");
    ok(day_of(&merged, merged_view.version, &daily));
    assert_eq!(event_ids(&read_table(&daily, None).rows, None), day1);

    // A day no hour of which was committed.
    let (code, _, err) = common::idem(&[
        "run",
        "--module",
        &dedup,
        "--input",
        &s(&bronze),
        "--table-version",
        &view.version.to_string(),
        "--table-slice",
        "date=2026-10-03/*",
        "--table",
        &s(&dir.path().join("none")),
        "--mode",
        "append",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("holds no commit of a slice under `date=2026-10-03/`"),
        "{err}"
    );
}
