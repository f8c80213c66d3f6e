//! The inputs bronze layers get: CSV, TSV and JSON lines (gzipped or not)
//! as slice inputs, through the real CLI and real .wasm transforms, the
//! tables read back by readers that share no code with idem. The schema
//! is declared or inferred from the pinned bytes and recorded in the
//! manifest; a bad row fails the run naming file, line and column, or is
//! skipped and counted within --max-rejects.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn gz(path: &Path, text: &str) {
    let f = std::fs::File::create(path).unwrap();
    let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap();
}

/// `idem run` of example `module` over partition `date` of `root` into
/// `table`, with `extra` flags.
fn run(
    module: &str,
    root: &Path,
    date: &str,
    table: &Path,
    extra: &[&str],
) -> (i32, String, String) {
    let module = common::guest(module);
    let partition = format!("date={date}");
    let mut args = vec![
        "run",
        "--module",
        s(&module),
        "--input",
        s(root),
        "--partition",
        &partition,
        "--table",
        s(table),
    ];
    args.extend_from_slice(extra);
    common::idem(&args)
}

/// The manifest a run printed (valid under schemas/manifest.schema.json).
fn manifest(stdout: &str) -> Value {
    let url = common::field(stdout, "manifest:");
    let path = url.strip_prefix("file://").unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    common::check_schemas(&[("manifest", &text)]).unwrap();
    let m: Value = serde_json::from_str(&text).unwrap();
    m["predicate"].clone()
}

/// The table's rows (read by deltalake+polars and by a raw log replay),
/// each as a JSON object.
fn rows(table: &Path) -> Vec<Value> {
    common::read_table(table, None)
        .rows
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect()
}

fn day(root: &Path, date: &str) -> PathBuf {
    let d = root.join(format!("date={date}"));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The columns a manifest records for its text inputs, as `name:type`.
fn recorded(m: &Value) -> Vec<String> {
    m["run"]["slice"]["text"]["columns"]
        .as_array()
        .unwrap_or_else(|| panic!("no text record in {m}"))
        .iter()
        .map(|c| {
            format!(
                "{}:{}",
                c["name"].as_str().unwrap(),
                c["type"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn csv_tsv_and_gzipped_files_are_read_with_an_inferred_schema_recorded_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bronze");
    let d = day(&root, "2026-10-01");
    // A byte-order mark, a quoted field with a comma and a newline, an
    // empty amount (null, which clean_orders drops), CRLF line ends.
    std::fs::write(
        d.join("a.csv"),
        "\u{feff}customer,amount,quantity\r\n\"c, \ninc\",5.5,1\r\nb,20,3\r\nx,,1\r\n",
    )
    .unwrap();
    // Another file, gzipped, its columns in another order.
    gz(&d.join("b.csv.gz"), "quantity,customer,amount\n2,d,10\n");
    let table = dir.path().join("silver");
    let (code, out, err) = run("examples/clean_orders", &root, "2026-10-01", &table, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let m = manifest(&out);
    assert_eq!(
        recorded(&m),
        ["customer:string", "amount:float64", "quantity:int64"]
    );
    assert_eq!(m["run"]["slice"]["text"]["format"], "csv");
    assert_eq!(m["run"]["slice"]["text"]["inferred"], true);
    assert_eq!(m["result"]["rowsIn"], 4);
    assert!(m["result"].get("rejectedRows").is_none(), "{m}");
    // The provenance states the decoding too (it is derived from the spec).
    assert_eq!(
        m["buildDefinition"]["externalParameters"]["inputDecoding"],
        m["run"]["slice"]["text"]
    );
    let mut got: Vec<(String, f64)> = rows(&table)
        .iter()
        .map(|r| {
            (
                r["customer"].as_str().unwrap().to_string(),
                r["total"].as_f64().unwrap(),
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        [
            ("b".to_string(), 60.0),
            ("c, \ninc".to_string(), 5.5),
            ("d".to_string(), 20.0)
        ]
    );
    // The same bytes are the same run: nothing new is committed.
    let key = common::field(&out, "run key:");
    let (code, again, err) = run("examples/clean_orders", &root, "2026-10-01", &table, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(common::field(&again, "run key:"), key);
    assert!(!again.contains("committed version 2"), "{again}");
    // An auditor replays the manifest: the recorded schema, the same bytes.
    let (code, out, err) = common::idem(&["audit", s(&table), "--replay"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("replay reproduced it"), "{out}");

    // TSV, declared by file: the columns taken by name, in the order given.
    let tsv = dir.path().join("tsv");
    let d = day(&tsv, "2026-10-01");
    std::fs::write(
        d.join("x.tsv"),
        "note\tquantity\tamount\tcustomer\nhi\t2\t1.25\tq\n",
    )
    .unwrap();
    let schema = dir.path().join("schema.json");
    std::fs::write(
        &schema,
        r#"[{"name":"customer","type":"string"},{"name":"amount","type":"double"},{"name":"quantity","type":"int64"}]"#,
    )
    .unwrap();
    let table = dir.path().join("from_tsv");
    let (code, out, err) = run(
        "examples/clean_orders",
        &tsv,
        "2026-10-01",
        &table,
        &["--schema", s(&schema)],
    );
    assert_eq!(code, 0, "{out}{err}");
    let m = manifest(&out);
    assert_eq!(m["run"]["slice"]["text"]["format"], "tsv");
    assert!(m["run"]["slice"]["text"].get("inferred").is_none(), "{m}");
    let r = rows(&table);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["total"], 2.5);
    assert!(r[0].get("note").is_none(), "{:?}", r[0]);
}

#[test]
fn json_lines_are_inferred_in_one_order_whatever_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("events");
    let d = day(&root, "2026-10-01");
    let mut lines = String::new();
    for i in 0..50 {
        // Many keys, some missing, a nested object, blank lines: the
        // schema must come out the same in every process (arrow's
        // inference returns the fields in a hash map's order).
        lines.push_str(&format!(
            "{{\"z{i}\":{i},\"event_id\":\"e{}\",\"amount\":{i}.5,\"meta\":{{\"k{i}\":true,\"a\":\"x\"}}}}\n\n",
            i % 40
        ));
    }
    gz(&d.join("part-0.json.gz"), &lines);
    std::fs::write(d.join("part-1.ndjson"), "{\"event_id\":\"e99\"}\n").unwrap();
    let mut records = Vec::new();
    let mut schemas = Vec::new();
    for n in 0..2 {
        let table = dir.path().join(format!("t{n}"));
        let (code, out, err) = run("examples/dedup_events", &root, "2026-10-01", &table, &[]);
        assert_eq!(code, 0, "{out}{err}");
        let m = manifest(&out);
        records.push(m["run"]["slice"]["text"].to_string());
        assert_eq!(m["run"]["slice"]["text"]["format"], "jsonl");
        schemas.push(recorded(&m));
        assert_eq!(m["result"]["rowsIn"], 51);
        assert_eq!(
            m["result"]["rowsOut"], 41,
            "dedup keeps one row per event_id"
        );
    }
    assert_eq!(
        records[0], records[1],
        "two processes inferred different schemas"
    );
    // Spark's order: columns by name (nested fields too).
    assert_eq!(&schemas[0][..2], ["amount:float64", "event_id:string"]);
    assert_eq!(schemas[0][3], "z0:int64");
    assert!(
        schemas[0].iter().any(|c| c.starts_with("meta:Struct(")),
        "{:?}",
        schemas[0]
    );
    let r = rows(&dir.path().join("t0"));
    assert_eq!(r.len(), 41);
    assert!(
        r.iter()
            .any(|r| r["event_id"] == "e99" && r["amount"].is_null())
    );
}

#[test]
fn a_bad_row_fails_the_run_naming_file_line_and_column_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bronze");
    let d = day(&root, "2026-10-01");
    let declared = r#"[{"name":"customer","type":"string"},{"name":"amount","type":"float64"},{"name":"quantity","type":"int64"}]"#;
    let table = dir.path().join("t");
    std::fs::write(
        d.join("a.csv"),
        "customer,amount,quantity\na,1,1\nb,twenty,3\nc,1,2,9\nd,10,2\n",
    )
    .unwrap();
    let (code, out, err) = run(
        "examples/clean_orders",
        &root,
        "2026-10-01",
        &table,
        &["--schema", declared],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("input `date=2026-10-01/a.csv`, line 3, column `amount`: `twenty` is not a float64. Nothing was committed; fix the row, declare a wider type in --schema, or let up to N bad rows be skipped and counted with --max-rejects N"),
        "{err}"
    );
    assert!(!table.join("_delta_log").exists());
    // Inferred, `twenty` makes amount a string, which the transform refuses
    // by name; the ragged row is named by line.
    let (code, _, err) = run(
        "examples/clean_orders",
        &root,
        "2026-10-01",
        &table,
        &["--max-rejects", "1"],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("column `amount` must be Float64, the input has Utf8"),
        "{err}"
    );
    // Within --max-rejects: skipped and counted, in the manifest.
    let (code, out, err) = run(
        "examples/clean_orders",
        &root,
        "2026-10-01",
        &table,
        &["--schema", declared, "--max-rejects", "2"],
    );
    assert_eq!(code, 0, "{out}{err}");
    let m = manifest(&out);
    assert_eq!(m["result"]["rejectedRows"], 2);
    assert_eq!(m["run"]["slice"]["text"]["maxRejects"], 2);
    assert_eq!(m["result"]["rowsIn"], 2);
    assert_eq!(rows(&table).len(), 2);
    let (code, out, err) = common::idem(&["audit", s(&table), "--replay"]);
    assert_eq!(code, 0, "{out}{err}");
    // One fewer allowed: the second bad row is the one named.
    let (code, _, err) = run(
        "examples/clean_orders",
        &root,
        "2026-10-01",
        &table,
        &["--schema", declared, "--max-rejects", "1"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("line 4: it has 4 fields, the header 3")
            && err.contains("2 rows were rejected, more than --max-rejects 1 allows"),
        "{err}"
    );

    // JSON lines: an object split over two lines, and a line that is not
    // an object, are named by line.
    let json = dir.path().join("json");
    let d = day(&json, "2026-10-01");
    std::fs::write(
        d.join("e.jsonl"),
        "{\"event_id\":\"a\"}\n{\"event_id\":\n\"b\"}\n[1]\n{\"event_id\":\"c\"}\n",
    )
    .unwrap();
    let t = dir.path().join("tj");
    let (code, _, err) = run("examples/dedup_events", &json, "2026-10-01", &t, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("input `date=2026-10-01/e.jsonl`, line 2: it is not a whole JSON object. Nothing was committed"),
        "{err}"
    );
    let (code, out, err) = run(
        "examples/dedup_events",
        &json,
        "2026-10-01",
        &t,
        &["--max-rejects", "3"],
    );
    assert_eq!(code, 0, "{out}{err}");
    let m = manifest(&out);
    assert_eq!(m["result"]["rejectedRows"], 3);
    assert_eq!(m["result"]["rowsIn"], 2);
}

#[test]
fn schemas_and_text_files_that_cannot_be_read_are_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bronze");
    let d = day(&root, "2026-10-01");
    std::fs::write(d.join("a.csv"), "customer,amount\na,1\n").unwrap();
    let table = dir.path().join("t");
    for (schema, says) in [
        (
            "[{\"name\":\"quantity\",\"type\":\"int64\"}]",
            "line 1: the header has no column `quantity` (it has customer, amount)",
        ),
        (
            "{\"a\": \"int64\"}",
            "--schema is not a JSON list of columns",
        ),
        (
            "[{\"name\":\"a\",\"type\":\"money\"}]",
            "type `money` is not one idem knows",
        ),
        (
            "no-such-file.json",
            "is neither a JSON list of columns nor a file it can read",
        ),
    ] {
        let (code, _, err) = run(
            "examples/clean_orders",
            &root,
            "2026-10-01",
            &table,
            &["--schema", schema],
        );
        assert_eq!(code, 2, "{schema}: {err}");
        assert!(err.contains(says), "{schema}: {err}");
    }
    // Text options for Parquet inputs are refused, not ignored.
    let parquet = dir.path().join("parquet");
    common::orders(&parquet, "2026-10-01", 10, 1);
    let (code, _, err) = run(
        "examples/clean_orders",
        &parquet,
        "2026-10-01",
        &table,
        &["--max-rejects", "5"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--schema and --max-rejects apply to CSV, TSV and JSON-lines inputs, and this slice's are Parquet"), "{err}");
    // A slice of two formats is refused naming both.
    std::fs::write(d.join("b.jsonl"), "{}\n").unwrap();
    let (code, _, err) = run("examples/clean_orders", &root, "2026-10-01", &table, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("of the same slice is"), "{err}");
    std::fs::remove_file(d.join("b.jsonl")).unwrap();
    // A "gzip" file that is not, and a line past the cap, are refused by
    // name before anything is committed.
    std::fs::write(d.join("c.csv.gz"), "customer,amount\n").unwrap();
    let (code, _, err) = run("examples/clean_orders", &root, "2026-10-01", &table, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("c.csv.gz` is refused: it cannot be read as text"),
        "{err}"
    );
    std::fs::remove_file(d.join("c.csv.gz")).unwrap();
    let mut long = String::from("customer,amount\n");
    long.push_str(&"x".repeat(idem::slice::MAX_LINE_BYTES + 10));
    std::fs::write(d.join("d.csv"), long).unwrap();
    let (code, _, err) = run("examples/clean_orders", &root, "2026-10-01", &table, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a line longer than 16 MiB"), "{err}");
    assert!(!table.join("_delta_log").exists());
}

#[test]
fn hourly_json_lines_appended_to_a_prefix_are_taken_in_order_by_next() {
    let dir = tempfile::tempdir().unwrap();
    let landing = dir.path().join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    let table = dir.path().join("bronze");
    let module = common::guest("examples/dedup_events");
    let next = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--module",
            s(&module),
            "--input",
            s(&landing),
            "--next",
            "--table",
            s(&table),
            "--mode",
            "append",
        ];
        args.extend_from_slice(extra);
        common::idem(&args)
    };
    for hour in 0..2 {
        std::fs::write(
            landing.join(format!("2026-10-01T{hour:02}.jsonl")),
            format!("{{\"event_id\":\"h{hour}\",\"n\":{hour}}}\n"),
        )
        .unwrap();
        let (code, out, err) = next(&[]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let (code, out, _) = next(&[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("up to date: no new object in") && out.contains("after 2026-10-01T01.jsonl"),
        "{out}"
    );
    let mut ids: Vec<String> = rows(&table)
        .iter()
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["h0", "h1"]);
}

/// Revenue per (day, customer) and orders, from the landed JSON lines
/// directly: each event once, cut-off lines left out.
fn expected_gold(landing: &Path) -> Vec<(String, String, i64, f64)> {
    let mut seen = std::collections::HashSet::new();
    let mut sums: std::collections::BTreeMap<(String, String), (i64, f64)> = Default::default();
    let mut days: Vec<_> = std::fs::read_dir(landing)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    days.sort();
    for d in days {
        let day = d
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .trim_start_matches("date=")
            .to_string();
        let mut hours: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        hours.sort();
        // Each hour's folder (date=D/hour=HH/), its files in name order.
        for h in hours.iter().flat_map(|h| walk(h)) {
            for line in std::fs::read_to_string(h).unwrap().lines() {
                let Ok(e) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                if !seen.insert(e["event_id"].as_str().unwrap().to_string()) {
                    continue;
                }
                let s = sums
                    .entry((day.clone(), e["customer"].as_str().unwrap().to_string()))
                    .or_default();
                s.0 += 1;
                s.1 += e["amount"].as_f64().unwrap() * e["quantity"].as_f64().unwrap();
            }
        }
    }
    sums.into_iter()
        .map(|((d, c), (n, r))| (d, c, n, r))
        .collect()
}

/// Gold's rows as (day, customer, orders, revenue), sorted.
fn gold(table: &Path) -> Vec<(String, String, i64, f64)> {
    let mut g: Vec<_> = rows(table)
        .iter()
        .map(|r| {
            (
                r["day"].as_str().unwrap().to_string(),
                r["customer"].as_str().unwrap().to_string(),
                r["orders"].as_i64().unwrap(),
                r["revenue"].as_f64().unwrap(),
            )
        })
        .collect();
    g.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    g
}

fn assert_gold(table: &Path, landing: &Path) {
    let (got, want) = (gold(table), expected_gold(landing));
    assert_eq!(got.len(), want.len(), "{got:?}\n{want:?}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.0, &g.1, g.2), (&w.0, &w.1, w.2), "{got:?}\n{want:?}");
        assert!((g.3 - w.3).abs() < 1e-6, "{g:?} != {w:?}");
    }
}

/// `idem pipeline ARGS` on `file` with --json: (exit code, per-stage
/// `date stage status`, the JSON).
fn pipeline(args: &[&str]) -> (i32, Vec<String>, Value) {
    let mut all = vec!["--json", "pipeline"];
    all.extend_from_slice(args);
    let (code, out, err) = common::idem(&all);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    let mut stages = Vec::new();
    for d in v["dates"].as_array().unwrap() {
        for st in d["stages"].as_array().unwrap() {
            stages.push(format!(
                "{} {} {}",
                d["date"].as_str().unwrap(),
                st["stage"].as_str().unwrap(),
                st["status"].as_str().unwrap()
            ));
        }
    }
    (code, stages, v)
}

/// The bronze example (examples/bronze): hourly JSON lines, redelivered
/// events and a line cut off mid-write, through bronze (every hour: typed
/// by the declared schema, bad lines counted), silver (once per day over
/// the day's hours, merged on the event key) and gold (revenue per
/// customer per day), all idempotent: a rerun is a memo hit, a late hour
/// reruns its hour and its day's daily stages only, an hourly run is the
/// backfill's, and the result is what one clean run over everything gives.
#[test]
fn the_bronze_example_lands_hourly_json_lines_into_silver_and_gold_idempotently() {
    let dir = tempfile::tempdir().unwrap();
    let copy = |to: &Path| {
        let src = common::root().join("examples/bronze");
        for e in walk(&src) {
            let rel = e.strip_prefix(&src).unwrap();
            let dst = to.join(rel);
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::copy(&e, &dst).unwrap();
        }
        std::fs::create_dir_all(to.join("wasm")).unwrap();
        for m in ["clean_orders", "dedup_events", "daily_revenue"] {
            std::fs::copy(
                common::guest(&format!("examples/{m}")),
                to.join(format!("wasm/{m}.wasm")),
            )
            .unwrap();
        }
    };
    let ex = dir.path().join("events");
    copy(&ex);
    let file = ex.join("idem.toml");
    let back = [
        "backfill",
        s(&file),
        "--from",
        "2026-10-01",
        "--to",
        "2026-10-02",
        "--skip-missing",
    ];
    // The hours that landed (00 to 03 of each day), and each day once.
    let landed = |stages: &[String]| -> Vec<String> {
        stages
            .iter()
            .filter(|s| !s.ends_with(" missing"))
            .cloned()
            .collect()
    };
    let (code, stages, v) = pipeline(&back);
    assert_eq!(code, 0, "{v}");
    let mut want: Vec<String> = Vec::new();
    for day in ["2026-10-01", "2026-10-02"] {
        for h in 0..4 {
            want.push(format!("{day}T{h:02} bronze committed"));
        }
        want.push(format!("{day}T23 silver committed"));
        want.push(format!("{day}T23 gold committed"));
    }
    assert_eq!(landed(&stages), want, "{v}");
    common::check_schemas(&[("pipeline", &v.to_string())]).unwrap();
    // Silver's day is its own slice, read from bronze's hours.
    let silver = v["dates"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["stages"].as_array().unwrap())
        .find(|s| s["stage"] == "silver")
        .unwrap();
    assert_eq!(silver["slice"], "date=2026-10-01", "{silver}");
    let landing = ex.join("landing/events");
    assert_gold(&ex.join("lake/gold"), &landing);
    let manifests = |t: &str| -> Vec<Value> {
        walk(&ex.join(format!("lake/{t}/_idem/manifests")))
            .iter()
            .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
            .collect()
    };
    // The cut-off line was counted in bronze's manifest of its hour.
    let m = manifests("bronze")
        .into_iter()
        .find(|m| m["predicate"]["run"]["slice"]["id"] == "date=2026-10-01/hour=02")
        .unwrap();
    assert_eq!(m["predicate"]["result"]["rejectedRows"], 1, "{m}");
    assert_eq!(m["predicate"]["run"]["slice"]["text"]["format"], "jsonl");
    assert_eq!(
        m["predicate"]["run"]["logicalDate"],
        "2026-10-01T02:00:00+00:00"
    );
    // Silver's manifest: every hour of the day, at one bronze version, as
    // the day's slice with the day as its logical date.
    let m = manifests("silver")
        .into_iter()
        .find(|m| m["predicate"]["run"]["slice"]["id"] == "date=2026-10-01")
        .unwrap();
    let run = &m["predicate"]["run"];
    assert_eq!(run["slice"]["deltaSlice"], "date=2026-10-01/*", "{m}");
    assert_eq!(run["logicalDate"], "2026-10-01", "{m}");
    common::check_schemas(&[("manifest", &m.to_string())]).unwrap();

    // A rerun: every stage a memo hit, nothing committed.
    let (code, stages, _) = pipeline(&back);
    assert_eq!(code, 0);
    let again = landed(&stages);
    assert_eq!(again.len(), want.len(), "{again:?}");
    assert!(again.iter().all(|s| s.ends_with("memo")), "{again:?}");

    // A late hour lands on the first day (one event redelivered from the
    // hour before, one new), and the scheduler runs that hour: the hour,
    // then the day's silver and gold over all its hours.
    let day1 = landing.join("date=2026-10-01");
    let last = std::fs::read_to_string(day1.join("hour=03/events.jsonl")).unwrap();
    let redelivered = last.lines().last().unwrap();
    std::fs::create_dir_all(day1.join("hour=04")).unwrap();
    std::fs::write(
        day1.join("hour=04/events.jsonl"),
        format!("{redelivered}\n{{\"event_id\":\"ev-late\",\"customer\":\"acme\",\"amount\":10.0,\"quantity\":2}}\n"),
    )
    .unwrap();
    let hour = [
        "run",
        s(&file),
        "--logical-date",
        "2026-10-01T04:00:00+00:00",
    ];
    let (code, stages, v) = pipeline(&hour);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        stages,
        [
            "2026-10-01T04 bronze committed",
            "2026-10-01T04 silver committed",
            "2026-10-01T04 gold committed"
        ]
    );
    assert_gold(&ex.join("lake/gold"), &landing);
    // The backfill after it: memo everywhere, the new hour included.
    let (code, stages, _) = pipeline(&back);
    assert_eq!(code, 0);
    let again = landed(&stages);
    assert_eq!(again.len(), want.len() + 1, "{again:?}");
    assert!(again.iter().all(|s| s.ends_with("memo")), "{again:?}");
    // The same as one clean run over everything as it is now.
    let clean = dir.path().join("clean");
    copy(&clean);
    let late = clean.join("landing/events/date=2026-10-01/hour=04");
    std::fs::create_dir_all(&late).unwrap();
    std::fs::copy(day1.join("hour=04/events.jsonl"), late.join("events.jsonl")).unwrap();
    let file2 = clean.join("idem.toml");
    let (code, _, _) = pipeline(&[
        "backfill",
        s(&file2),
        "--from",
        "2026-10-01",
        "--to",
        "2026-10-02",
        "--skip-missing",
    ]);
    assert_eq!(code, 0);
    assert_eq!(gold(&clean.join("lake/gold")), gold(&ex.join("lake/gold")));
    assert_eq!(
        rows(&clean.join("lake/silver")).len(),
        rows(&ex.join("lake/silver")).len()
    );

    // Past max-rejects (5 an hour), the hour fails naming the file and
    // line, its day's daily stages are skipped, and no table moves.
    let mut bad = String::new();
    for _ in 0..6 {
        bad.push_str("{\"event_id\":\n");
    }
    std::fs::create_dir_all(day1.join("hour=05")).unwrap();
    std::fs::write(day1.join("hour=05/events.jsonl"), bad).unwrap();
    let before = (
        gold(&ex.join("lake/gold")),
        rows(&ex.join("lake/silver")).len(),
    );
    let (code, stages, v) = pipeline(&["run", s(&file), "--logical-date", "2026-10-01T05"]);
    assert_eq!(code, 2, "{v}");
    let text = v.to_string();
    assert!(
        text.contains("events.jsonl`, line 6: it is not a whole JSON object")
            && text.contains("6 rows were rejected, more than --max-rejects 5"),
        "{text}"
    );
    assert_eq!(
        stages,
        [
            "2026-10-01T05 bronze failed",
            "2026-10-01T05 silver skipped",
            "2026-10-01T05 gold skipped"
        ]
    );
    let after = (
        gold(&ex.join("lake/gold")),
        rows(&ex.join("lake/silver")).len(),
    );
    assert_eq!(after, before);
    // A backfill over the day: the failed hour fails, the day's daily
    // stages are skipped (a day with a failed hour is not published).
    let (code, stages, v) = pipeline(&back);
    assert_eq!(code, 2, "{v}");
    assert!(
        stages.contains(&"2026-10-01T05 bronze failed".to_string()),
        "{stages:?}"
    );
    assert!(
        stages.contains(&"2026-10-01T23 silver skipped".to_string()),
        "{stages:?}"
    );
    assert!(
        stages.contains(&"2026-10-02T23 silver memo".to_string()),
        "{stages:?}"
    );
}

use common::files_below as walk;

/// CSV that could mislead a line-based reader: an unclosed quote, CRLF
/// and lone-CR line ends, a trailing comma in a header, a record or a
/// header past the caps, TSV with quote marks, an empty file.
#[test]
fn malformed_csv_is_counted_line_by_line_and_capped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    let d = day(&root, "2026-10-01");
    let table = dir.path().join("t");
    let csv_run = |extra: &[&str]| run("examples/dedup_events", &root, "2026-10-01", &table, extra);
    let clear = || {
        for e in std::fs::read_dir(&d).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
    };
    // An unclosed quote takes every later line into one record: each of
    // those lines is a reject, not one in all.
    std::fs::write(d.join("a.csv"), "event_id,name\n1,\"oops\n2,b\n3,c\n").unwrap();
    let (code, _, err) = csv_run(&["--max-rejects", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("line 3: it is inside the record starting on line 2, which does not parse (a quote left open?)")
            && err.contains("2 rows were rejected, more than --max-rejects 1"),
        "{err}"
    );
    // Exactly the lines it took (2 to 4), not one more for the last newline.
    let t5 = dir.path().join("t5");
    let (code, out, err) = run(
        "examples/dedup_events",
        &root,
        "2026-10-01",
        &t5,
        &["--max-rejects", "3"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(manifest(&out)["result"]["rejectedRows"], 3);
    // CRLF lines are numbered as lines.
    clear();
    std::fs::write(d.join("a.csv"), "event_id,n\r\n1,2\r\nx,3\r\n").unwrap();
    let declared = r#"[{"name":"event_id","type":"int64"},{"name":"n","type":"int64"}]"#;
    let (code, _, err) = csv_run(&["--schema", declared]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("a.csv`, line 3, column `event_id`: `x` is not a int64"),
        "{err}"
    );
    // And after blank lines, and on a last line with no newline.
    std::fs::write(d.join("a.csv"), "event_id,n\n1,2\n\n\nx,3\n").unwrap();
    let (code, _, err) = csv_run(&["--schema", declared]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a.csv`, line 5, column `event_id`"), "{err}");
    std::fs::write(d.join("a.csv"), "event_id,n\n1,2\nx,3").unwrap();
    let (code, _, err) = csv_run(&["--schema", declared]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a.csv`, line 3, column `event_id`"), "{err}");
    // The last column of a CRLF file is read without its \r, also when the
    // file starts with a blank line; in an LF file a quoted \r is data.
    std::fs::write(d.join("a.csv"), "\r\nevent_id,n\r\n1,2\r\n3,4\r\n").unwrap();
    let (code, out, err) = csv_run(&["--schema", declared]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(manifest(&out)["result"]["rowsIn"], 2);
    clear();
    std::fs::write(d.join("a.csv"), "event_id,name\n1,\"x\r\"\n").unwrap();
    let t4 = dir.path().join("t4");
    let (code, out, err) = run("examples/dedup_events", &root, "2026-10-01", &t4, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(rows(&t4)[0]["name"], "x\r");
    // Lines ended by a lone \r (old Mac files) are refused, not read as
    // one header.
    std::fs::write(d.join("a.csv"), "event_id,name\r1,a\r").unwrap();
    let (code, _, err) = csv_run(&[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("its lines end in a lone \\r (old Mac line ends)"),
        "{err}"
    );
    // A header's empty name is `_c<i>`, as Spark names it; the run replays.
    clear();
    std::fs::write(d.join("b.csv"), "event_id,name,\n1,a,\n2,b,x\n").unwrap();
    let t3 = dir.path().join("t3");
    let (code, out, err) = run("examples/dedup_events", &root, "2026-10-01", &t3, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        recorded(&manifest(&out)),
        ["event_id:int64", "name:string", "_c2:string"]
    );
    let (code, out, err) = common::idem(&["audit", s(&t3), "--replay"]);
    assert_eq!(code, 0, "{out}{err}");
    // TSV has no quoting: a quote mark is data. An empty file is no rows.
    clear();
    std::fs::write(d.join("a.tsv"), "event_id\tname\n1\t\"x\n2\ty\"\n").unwrap();
    std::fs::write(d.join("b.tsv"), "").unwrap();
    let t2 = dir.path().join("t2");
    let (code, out, err) = run("examples/dedup_events", &root, "2026-10-01", &t2, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let mut names: Vec<String> = rows(&t2)
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["\"x", "y\""]);
    // A record past the cap (an unclosed quote over 16 MiB of lines), and
    // a header of more columns than idem reads, are refused by name.
    clear();
    let mut long = String::from("event_id,name\n1,\"");
    long.push_str(&"xxxxxxx\n".repeat(idem::slice::MAX_LINE_BYTES / 8 + 200_000));
    std::fs::write(d.join("a.csv"), long).unwrap();
    let (code, _, err) = csv_run(&[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a record longer than 16 MiB"), "{err}");
    clear();
    let wide: Vec<String> = (0..=idem::slice::MAX_COLUMNS)
        .map(|i| format!("c{i}"))
        .collect();
    std::fs::write(d.join("a.csv"), format!("{}\n", wide.join(","))).unwrap();
    let (code, _, err) = csv_run(&[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the header names 10001 columns, more than idem reads (10000)"),
        "{err}"
    );
}

/// JSON: an object split over two lines, or two on one, is rejected line
/// by line whatever the batch size (the same rows, the same count).
#[test]
fn json_lines_are_rejected_line_by_line_whatever_the_batch_size() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    let d = day(&root, "2026-10-01");
    let clear = || {
        for e in std::fs::read_dir(&d).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
    };
    clear();
    std::fs::write(
        d.join("e.jsonl"),
        "{\"event_id\":\"a\"}\n{\"event_id\":\"b\"} {\"event_id\":\n\"c\"}\n{\"event_id\":\"d\"}\n",
    )
    .unwrap();
    let mut seen = Vec::new();
    for batch in ["1", "2", "8192"] {
        let t = dir.path().join(format!("j{batch}"));
        let (code, out, err) = run(
            "examples/dedup_events",
            &root,
            "2026-10-01",
            &t,
            &["--max-rejects", "2", "--batch-rows", batch],
        );
        assert_eq!(code, 0, "{out}{err}");
        let m = manifest(&out);
        seen.push((
            m["result"]["rejectedRows"].clone(),
            m["result"]["outputDigest"].clone(),
        ));
    }
    assert_eq!(seen[0].0, 2);
    assert!(seen.iter().all(|x| x.0 == seen[0].0), "{seen:?}");
    // One output digest per batch size is the same rows: compare the rows.
    let ids = |t: &str| {
        let mut v: Vec<String> = rows(&dir.path().join(t))
            .iter()
            .map(|r| r["event_id"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids("j1"), ["a", "d"]);
    assert_eq!(ids("j1"), ids("j8192"));
}

/// A landing prefix of JSON lines where a Parquet object lands: refused,
/// named, never skipped; a Parquet prefix with a stray CSV file beside its
/// objects reads the Parquet ones, as it always did.
#[test]
fn a_prefix_reads_one_format_and_names_an_object_of_another() {
    let dir = tempfile::tempdir().unwrap();
    let landing = dir.path().join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(landing.join("01.jsonl"), "{\"event_id\":\"a\"}\n").unwrap();
    let parquet = common::orders(&dir.path().join("p"), "2026-10-01", 5, 1);
    std::fs::copy(&parquet[0], landing.join("02.parquet")).unwrap();
    let module = common::guest("examples/dedup_events");
    let next = |table: &str| {
        common::idem(&[
            "run",
            "--module",
            s(&module),
            "--input",
            s(&landing),
            "--next",
            "--table",
            s(&dir.path().join(table)),
            "--mode",
            "append",
        ])
    };
    // The first run reads the JSON lines (the prefix's format from then on).
    std::fs::remove_file(landing.join("02.parquet")).unwrap();
    let (code, out, err) = next("tn");
    assert_eq!(code, 0, "{out}{err}");
    std::fs::copy(&parquet[0], landing.join("02.parquet")).unwrap();
    let (code, out, err) = next("tn");
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(
            "02.parquet` is refused: it is Parquet, and this prefix's runs read its text files"
        ),
        "{err}"
    );
    let pq = dir.path().join("pq");
    std::fs::create_dir_all(&pq).unwrap();
    std::fs::copy(&parquet[0], pq.join("01.parquet")).unwrap();
    std::fs::write(pq.join("00-stats.csv"), "n\n1\n").unwrap();
    // A Parquet prefix with a stray CSV file beside its objects (no
    // position yet) reads the Parquet ones, as it always did.
    let (code, out, err) = common::idem(&[
        "run",
        "--module",
        s(&module),
        "--input",
        s(&pq),
        "--next",
        "--table",
        s(&dir.path().join("tp")),
        "--mode",
        "append",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(manifest(&out)["result"]["rowsIn"], 5);
}
