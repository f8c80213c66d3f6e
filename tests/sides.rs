//! Side inputs end to end: the real `idem` binary joins a day's orders
//! with a customer dimension (a Delta table another writer keeps: PyPI
//! deltalake) given as `--side customers=TABLE`, through
//! examples/revenue_by_segment. The dimension is pinned and hashed into
//! each slice's run key, so a changed dimension reruns the slices that
//! read the old one, commits only those whose output it changes, and an
//! auditor's replay reads the version the run read.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{idem, read_table};

const DAYS: [&str; 3] = ["2026-10-01", "2026-10-02", "2026-10-03"];
const ROWS: u64 = 300;

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// The segment every sample customer starts in.
fn segment_of(i: usize) -> &'static str {
    match i % 10 {
        0 => "gold",
        3 | 6 | 9 => "silver",
        _ => "bronze",
    }
}

/// (Re)write the dimension at `dim` with PyPI deltalake (another writer):
/// one row per sample customer, `moved` put in segment `platinum`, and
/// `extra` customers no order names.
fn write_dimension(dim: &Path, moved: &[String], extra: &[&str]) {
    let mut customers: Vec<String> = (0..1000).map(|i| format!("c-{i:04}")).collect();
    let mut segments: Vec<String> = (0..1000).map(|i| segment_of(i).to_string()).collect();
    for (c, seg) in customers.iter().zip(segments.iter_mut()) {
        if moved.contains(c) {
            *seg = "platinum".into();
        }
    }
    for e in extra {
        customers.push(e.to_string());
        segments.push("gold".into());
    }
    let script = format!(
        "import pyarrow as pa\nfrom deltalake import write_deltalake\nwrite_deltalake({:?}, pa.table({{'customer': {:?}, 'segment': {:?}}}), mode='overwrite')\n",
        s(dim),
        customers,
        segments
    );
    common::python_script(&script);
}

/// The customers with an order on `date` in the sample data.
fn customers_on(date: &str) -> BTreeSet<String> {
    customers_in(date, ROWS)
}

/// The customers of the first `rows` sample orders of `date`.
fn customers_in(date: &str, rows: u64) -> BTreeSet<String> {
    let b = idem::sample::orders_batch(idem::sample::seed_of(date), 0, rows as usize);
    let c = b.column_by_name("customer").unwrap();
    let c = arrow::array::AsArray::as_string::<i32>(c);
    c.iter().flatten().map(str::to_string).collect()
}

/// The arguments of a backfill of the three days of `data` through
/// `module` into `gold`, with `dim` as side input `customers`.
fn backfill_args(data: &Path, module: &Path, gold: &Path, dim: &Path) -> Vec<String> {
    let side = format!("customers={}", s(dim));
    let args = [
        "backfill",
        "--module",
        &s(module),
        "--input",
        &s(data),
        "--table",
        &s(gold),
        "--from",
        DAYS[0],
        "--to",
        DAYS[2],
        "--side",
        &side,
        "--json",
    ];
    args.iter().map(|a| a.to_string()).collect()
}

/// Backfill the three days with the dimension; each slice's status.
fn backfill(data: &Path, module: &Path, gold: &Path, dim: &Path) -> BTreeMap<String, String> {
    let args = backfill_args(data, module, gold, dim);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = idem(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    common::slice_statuses(&out).into_iter().collect()
}

fn statuses(list: [&str; 3]) -> BTreeMap<String, String> {
    DAYS.iter()
        .zip(list)
        .map(|(d, s)| (format!("date={d}"), s.to_string()))
        .collect()
}

/// The segments the gold table holds for `date`, read by the independent
/// readers, with their orders.
fn segments(gold: &Path, date: &str) -> BTreeMap<String, i64> {
    read_table(gold, None)
        .rows
        .iter()
        .map(|r| serde_json::from_str::<serde_json::Value>(r).unwrap())
        .filter(|r| r["date"] == date)
        .map(|r| {
            (
                r["segment"].as_str().unwrap().to_string(),
                r["orders"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_join_whose_dimension_changes_reruns_exactly_the_slices_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    for d in DAYS {
        common::orders(&data, d, ROWS, 1);
    }
    let (gold, dim) = (dir.path().join("gold"), dir.path().join("dim_customers"));
    let module = common::guest("examples/revenue_by_segment");
    write_dimension(&dim, &[], &[]);
    assert_eq!(
        backfill(&data, &module, &gold, &dim),
        statuses(["committed"; 3])
    );
    assert_eq!(backfill(&data, &module, &gold, &dim), statuses(["memo"; 3]));

    // A customer who ordered on the second day only moves segment.
    let (d1, d2, d3) = (
        customers_on(DAYS[0]),
        customers_on(DAYS[1]),
        customers_on(DAYS[2]),
    );
    let moved = d2
        .iter()
        .find(|c| !d1.contains(*c) && !d3.contains(*c))
        .expect("a customer of the second day only")
        .clone();
    write_dimension(&dim, std::slice::from_ref(&moved), &[]);
    // explain names the side input that changed, and only it.
    let side = format!("customers={}", s(&dim));
    let (code, out, err) = idem(&[
        "explain",
        "--module",
        &s(&module),
        "--input",
        &s(&data),
        "--partition",
        &format!("date={}", DAYS[0]),
        "--table",
        &s(&gold),
        "--side",
        &side,
        "--json",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let fields: Vec<String> = serde_json::from_str::<serde_json::Value>(&out).unwrap()["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap().to_string())
        .collect();
    assert!(!fields.is_empty(), "{out}");
    assert!(
        fields.iter().all(|f| f.starts_with("sides[customers]")),
        "{fields:?}"
    );
    assert!(
        fields.contains(&"sides[customers].input.deltaVersion".to_string()),
        "{fields:?}"
    );

    // Every slice ran against the old dimension, so each runs again; only
    // the second day's output changes, so only it is committed.
    let before = common::commits_per_slice(&gold);
    assert_eq!(
        backfill(&data, &module, &gold, &dim),
        statuses(["unchanged", "committed", "unchanged"])
    );
    let after = common::commits_per_slice(&gold);
    let day2 = format!("date={}", DAYS[1]);
    for (slice, n) in &after {
        let grew = if *slice == day2 { 1 } else { 0 };
        assert_eq!(*n, before[slice] + grew, "{slice}: {before:?} -> {after:?}");
    }
    assert_eq!(segments(&gold, DAYS[1]).get("platinum"), Some(&1));
    for d in [DAYS[0], DAYS[2]] {
        assert!(!segments(&gold, d).contains_key("platinum"), "{d}");
    }
    // The second day is a memo hit now. The others run again each time
    // and commit nothing: a memo hit needs the slice's commit to name this
    // run key, and an unchanged output is never committed.
    let before = common::commits_per_slice(&gold);
    assert_eq!(
        backfill(&data, &module, &gold, &dim),
        statuses(["unchanged", "memo", "unchanged"])
    );
    assert_eq!(common::commits_per_slice(&gold), before);

    // A dimension change no order reads (a new customer) reruns every
    // slice and commits none.
    write_dimension(&dim, std::slice::from_ref(&moved), &["c-new"]);
    let before = common::commits_per_slice(&gold);
    assert_eq!(
        backfill(&data, &module, &gold, &dim),
        statuses(["unchanged"; 3])
    );
    assert_eq!(common::commits_per_slice(&gold), before);

    // An auditor's replay reads the dimension at the version the run
    // pinned, whatever it holds now.
    write_dimension(&dim, &[], &[]);
    let (code, out, err) = idem(&["verify", &format!("{}#{day2}", s(&gold))]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("match"), "{out}");
}

#[test]
fn side_inputs_are_checked_before_anything_runs_and_an_old_module_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    common::orders(&data, DAYS[0], 50, 1);
    let (gold, dim) = (dir.path().join("gold"), dir.path().join("dim"));
    write_dimension(&dim, &[], &[]);
    let module = common::guest("examples/revenue_by_segment");
    let run = |module: &Path, extra: &[&str]| {
        let mut args = common::day_args(&s(module), &s(&data), DAYS[0], &s(&gold), &[]);
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        idem(&args)
    };
    let side = format!("customers={}", s(&dim));
    // Without the side input the transform says how to give it.
    let (code, _, err) = run(&module, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("--side customers=TABLE"), "{err}");
    // Bad names, twice the same name, a version of no table.
    for (bad, says) in [
        ("customers", "must look like NAME=TABLE"),
        ("cust omers=x", "must be 1 to 64 letters"),
        ("customers=", "names no table"),
    ] {
        let (code, _, err) = run(&module, &["--side", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
    }
    let (code, _, err) = run(&module, &["--side", &side, "--side", &side]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("given twice"), "{err}");
    let file = common::files_below(&data)[0].clone();
    let (code, _, err) = run(&module, &["--side", &format!("customers={}@3", s(&file))]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no version"), "{err}");
    // A version the table does not have.
    let (code, _, err) = run(&module, &["--side", &format!("{side}@99")]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("99"), "{err}");
    // The target table as its own side input: refused, it would read its
    // own output.
    let (code, _, err) = run(&module, &["--side", &side]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&module, &["--side", &format!("customers={}", s(&gold))]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("its own output"), "{err}");
    // ... even while it is empty (no file of it to find inside it).
    let empty = dir.path().join("empty");
    let script = format!(
        "import pyarrow as pa\nfrom deltalake import DeltaTable\nDeltaTable.create({:?}, pa.schema([('day', pa.string())]))\n",
        s(&empty)
    );
    common::python_script(&script);
    let args = common::day_args(&s(&module), &s(&data), DAYS[0], &s(&empty), &[]);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    let own = format!("customers={}", s(&empty));
    args.extend(["--side", &own]);
    let (code, _, err) = idem(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("its own output"), "{err}");
    // Side inputs together larger than the guest's memory: refused before
    // anything is read.
    let big = common::orders(&dir.path().join("big"), "2026-10-05", 200_000, 1)[0].clone();
    assert!(std::fs::metadata(&big).unwrap().len() > 2 << 20);
    let big = format!("customers={}", s(&big));
    let (code, _, err) = run(&module, &["--side", &big, "--max-memory-mb", "2"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the guest's memory"), "{err}");
    // A module built before side inputs existed runs as before, and is
    // refused by the export it lacks when a run gives it one.
    let old = common::root().join("tests/wat/no-side-inputs.wat");
    let other = dir.path().join("other");
    let args = common::day_args(&s(&old), &s(&data), DAYS[0], &s(&other), &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = idem(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    let mut with_side = args.clone();
    with_side.extend(["--side", &side]);
    let (code, _, err) = idem(&with_side);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("does not export idem:transform/side-inputs@0.2.0"),
        "{err}"
    );
    assert!(err.contains("idem build"), "{err}");
}

/// A pipeline stage joins its upstream's slice with a side input:
/// `from = ["bronze", "customers"]`, `customers` a `[sides]` table. A
/// rerun is a memo hit; a changed dimension reruns the stage that reads
/// it, not the one upstream of it.
#[test]
fn a_pipeline_stage_reads_a_side_input_named_in_from() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    common::orders(&data, DAYS[0], ROWS, 1);
    let dim = dir.path().join("dim");
    write_dimension(&dim, &[], &[]);
    let clean = common::guest("examples/clean_orders");
    let join = common::guest("examples/revenue_by_segment");
    let file = dir.path().join("idem.toml");
    std::fs::write(
        &file,
        format!(
            r#"[sides]
customers = "dim"

[[stage]]
name = "bronze"
module = {clean:?}
input = "orders"
table = "lake/bronze"

[[stage]]
name = "gold"
module = {join:?}
from = ["bronze", "customers"]
table = "lake/gold"
partition = "date"
"#,
            clean = s(&clean),
            join = s(&join),
        ),
    )
    .unwrap();
    let run = || {
        let (code, out, err) = idem(&[
            "pipeline",
            "run",
            &s(&file),
            "--logical-date",
            DAYS[0],
            "--json",
        ]);
        assert_eq!(code, 0, "{out}\n{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["dates"][0]["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), ["committed", "committed"]);
    assert_eq!(run(), ["memo", "memo"]);
    let gold = dir.path().join("lake/gold");
    assert!(!segments(&gold, DAYS[0]).contains_key("platinum"));
    let moved = customers_on(DAYS[0]).into_iter().next().unwrap();
    write_dimension(&dim, &[moved], &[]);
    assert_eq!(run(), ["memo", "committed"]);
    assert_eq!(segments(&gold, DAYS[0]).get("platinum"), Some(&1));
    // The gold manifest names the side input it read, as a table at a
    // version, with its files.
    let (code, out, err) = idem(&["show", &format!("{}#date={}", s(&gold), DAYS[0]), "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("\"sides\""), "{out}");
    assert!(
        out.contains("\"name\":\"customers\"") || out.contains("\"name\": \"customers\""),
        "{out}"
    );
}

/// A backfill pins its side inputs once, before its first slice: a
/// dimension rewritten while the backfill runs (here while its first slice
/// is held at its execution) is not what its later slices read.
#[test]
fn a_backfill_reads_one_version_of_its_side_inputs_whoever_writes_them_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    for d in DAYS {
        common::orders(&data, d, 50, 1);
    }
    let (gold, dim) = (dir.path().join("gold"), dir.path().join("dim"));
    write_dimension(&dim, &[], &[]);
    let module = common::guest("examples/revenue_by_segment");
    let mut args = backfill_args(&data, &module, &gold, &dim);
    args.extend(["--jobs".to_string(), "1".to_string()]);
    let at = format!("execute@date={}", DAYS[0]);
    let held = dir.path().join("held");
    let mut cmd = common::barrier_command(&args, &at, 1, &held);
    cmd.env("IDEM_FAULT_SLEEP_MS", format!("{at}:8000"));
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while std::fs::read_dir(&held).map_or(0, |d| d.count()) == 0 {
        if child.try_wait().unwrap().is_some() {
            let (code, out, err) = common::wait(child);
            panic!("the backfill ended before its first slice ran: {code}\n{out}\n{err}");
        }
        assert!(
            start.elapsed().as_secs() < 120,
            "the backfill never reached its first slice"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The first slice is held: another writer moves a customer who has an
    // order on the second day to another segment.
    let moved = customers_in(DAYS[1], 50).into_iter().next().unwrap();
    write_dimension(&dim, &[moved], &[]);
    let (code, out, err) = common::wait(child);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(common::slice_statuses(&out).len(), 3, "{out}");
    let mut versions = Vec::new();
    for f in std::fs::read_dir(gold.join("_idem/manifests")).unwrap() {
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(f.unwrap().path()).unwrap()).unwrap();
        versions.push(m["predicate"]["run"]["sides"][0]["input"]["deltaVersion"].clone());
    }
    assert_eq!(
        versions,
        vec![serde_json::json!(0); 3],
        "every slice read version 0"
    );
    assert!(!segments(&gold, DAYS[1]).contains_key("platinum"));
}
