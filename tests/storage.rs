//! Every location a URL: inputs, tables, manifests and modules on a real
//! S3-compatible server on 127.0.0.1 (tests/s3_server.py: moto's S3 with
//! enforced credentials), read back by two independent readers (PyPI
//! deltalake + polars, and pyarrow's own S3 client replaying the log),
//! and compared row by row with the same runs on local disk.

mod common;

use common::{S3, field, read_table, read_table_s3};

fn ok(r: (i32, String, String)) -> String {
    assert_eq!(r.0, 0, "idem failed:\n{}\n{}", r.1, r.2);
    r.1
}

/// `idem run` of clean_orders over one day of `root`, into `table`.
fn day(module: &str, root: &str, date: &str, table: &str) -> Vec<String> {
    common::day_args(module, root, date, table, &[])
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `idem sample` of `rows` orders for `dates` into `out` (a path or URL).
fn sample(s3: &S3, out: &str, dates: &[&str], rows: &str) {
    let mut args = vec![
        "sample", "--out", out, "--rows", rows, "--files", "2", "--dates",
    ];
    args.extend_from_slice(dates);
    ok(s3.idem(&args, &[]));
}

#[test]
fn runs_memo_recommit_verify_and_audit_on_s3_equal_the_same_runs_on_disk() {
    let s3 = S3::start("lake");
    let module_path = common::guest("examples/clean_orders");
    let module = module_path.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local_root = dir.path().join("data");
    let local_table = dir.path().join("orders");
    let (lroot, ltable) = (local_root.to_str().unwrap(), local_table.to_str().unwrap());
    let (root, table) = (s3.url("data"), s3.url("tables/orders"));
    let days = ["2026-10-01", "2026-10-02"];
    sample(&s3, &root, &days, "3000");
    sample(&s3, lroot, &days, "3000");

    for d in days {
        let out = ok(s3.idem(&refs(&day(module, &root, d, &table)), &[]));
        assert!(
            field(&out, "result:").starts_with("committed version"),
            "{out}"
        );
        ok(s3.idem(&refs(&day(module, lroot, d, ltable)), &[]));
    }
    let remote = read_table_s3(&table, &s3, None);
    let local = read_table(&local_table, None);
    assert!(!remote.rows.is_empty());
    assert_eq!(
        remote, local,
        "the S3 table differs from the same runs on disk"
    );

    // A rerun is a memo: nothing executed, nothing committed.
    let out = ok(s3.idem(&refs(&day(module, &root, days[0], &table)), &[]));
    assert!(
        field(&out, "result:").contains("(memo: already run)"),
        "{out}"
    );
    assert_eq!(read_table_s3(&table, &s3, None), remote);

    // A pinned version of the S3 table is itself a slice (read through its
    // snapshot, by URL), and gives what the same read of the local table gives.
    let revenue = common::guest("examples/daily_revenue");
    let revenue = revenue.to_str().unwrap();
    let (rtable, lrtable) = (s3.url("tables/revenue"), dir.path().join("revenue"));
    let pinned = |input: &str, table: &str| -> Vec<String> {
        [
            "run",
            "--module",
            revenue,
            "--input",
            input,
            "--delta-version",
            "2",
            "--partition",
            "date=2026-10-01",
            "--table",
            table,
            "--logical-date",
            "2026-10-01",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let out = ok(s3.idem(&refs(&pinned(&table, &rtable)), &[]));
    assert_eq!(field(&out, "result:"), "committed version 1", "{out}");
    let delta_manifest = field(&out, "manifest:");
    ok(s3.idem(&refs(&pinned(ltable, lrtable.to_str().unwrap())), &[]));
    let r = read_table_s3(&rtable, &s3, None);
    assert!(!r.rows.is_empty());
    assert_eq!(r, read_table(&lrtable, None));
    // Its replay reads the same snapshot again (files and partition values).
    let out = ok(s3.idem(&["verify", &delta_manifest], &[]));
    assert!(out.contains("match: re-run produced"), "{out}");

    // One input changes on S3: that slice recommits, the other is a memo.
    sample(&s3, &root, &days[..1], "2500");
    sample(&s3, lroot, &days[..1], "2500");
    let out = ok(s3.idem(&refs(&day(module, &root, days[0], &table)), &[]));
    assert!(
        field(&out, "result:").starts_with("committed version"),
        "{out}"
    );
    let manifest = field(&out, "manifest:");
    assert!(
        manifest.starts_with("s3://lake/tables/orders/_idem/manifests/"),
        "{manifest}"
    );
    let out = ok(s3.idem(&refs(&day(module, &root, days[1], &table)), &[]));
    assert!(field(&out, "result:").contains("memo"), "{out}");
    ok(s3.idem(&refs(&day(module, lroot, days[0], ltable)), &[]));
    let remote = read_table_s3(&table, &s3, None);
    assert_eq!(remote, read_table(&local_table, None));

    // verify fetches the manifest, the module and the inputs by URL.
    let out = ok(s3.idem(&["verify", &manifest], &[]));
    assert!(out.contains("match: re-run produced"), "{out}");
    // audit re-reads the table's rows and replays every slice from S3.
    let out = ok(s3.idem(&["audit", &table, "--replay"], &[]));
    assert!(out.contains("all 2 slices proven"), "{out}");
    let out = ok(s3.idem(&["log", &table], &[]));
    assert!(out.contains("date=2026-10-01"), "{out}");

    // A module can be run from the bucket too.
    let bytes = std::fs::read(&module_path).unwrap();
    let staged = dir.path().join("m.wasm");
    std::fs::write(&staged, &bytes).unwrap();
    let copy = s3.url("modules/clean_orders.wasm");
    upload(&s3, &staged, &copy);
    let out = ok(s3.idem(&refs(&day(&copy, &root, days[1], &table)), &[]));
    assert!(
        field(&out, "result:").contains("memo"),
        "same module digest, same run key: {out}"
    );
}

/// Upload a local file to `url` with pyarrow's S3 client (not idem's).
fn upload(s3: &S3, file: &std::path::Path, url: &str) {
    pyarrow_s3(
        s3,
        "fs.open_output_stream(sys.argv[2][5:]).write(open(sys.argv[1],'rb').read())",
        &[file.to_str().unwrap(), url],
    );
}

/// Run `code` with `fs` bound to pyarrow's own S3 client for the test
/// server (not idem's); returns its stdout.
fn pyarrow_s3(s3: &S3, code: &str, args: &[&str]) -> Vec<u8> {
    let script = format!(
        "import os,sys,json,pyarrow.fs as f\n\
         from urllib.parse import urlparse\n\
         e=urlparse(os.environ['AWS_ENDPOINT_URL'])\n\
         fs=f.S3FileSystem(access_key=os.environ['AWS_ACCESS_KEY_ID'],secret_key=os.environ['AWS_SECRET_ACCESS_KEY'],region='us-east-1',endpoint_override=e.netloc,scheme=e.scheme)\n\
         {code}\n"
    );
    let mut cmd = std::process::Command::new(common::python());
    cmd.arg("-c").arg(&script).args(args);
    for (k, v) in s3.env() {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn wrong_credentials_a_missing_bucket_and_a_dead_endpoint_are_named_and_write_nothing() {
    let s3 = S3::start("lake");
    let module = common::guest("examples/clean_orders");
    let module = module.to_str().unwrap();
    let (root, table) = (s3.url("data"), s3.url("tables/t"));
    sample(&s3, &root, &["2026-10-01"], "500");
    let args = day(module, &root, "2026-10-01", &table);

    let (code, _, err) = s3.idem(&refs(&args), &[("AWS_SECRET_ACCESS_KEY", "wrong")]);
    assert_eq!(code, 4, "storage failures are exit 4: {err}");
    assert!(err.contains("access was refused"), "{err}");
    assert!(
        err.contains("s3://lake/") && err.contains(&s3.endpoint),
        "{err}"
    );

    let other = day(module, &root, "2026-10-01", "s3://nobucket/t");
    let (code, _, err) = s3.idem(&refs(&other), &[]);
    assert_eq!(code, 4, "storage failures are exit 4: {err}");
    assert!(
        err.contains("the bucket `nobucket` does not exist"),
        "{err}"
    );

    let dead = "http://127.0.0.1:9";
    let (code, _, err) = s3.idem(&refs(&args), &[("AWS_ENDPOINT_URL", dead)]);
    assert_eq!(code, 4, "storage failures are exit 4: {err}");
    assert!(err.contains("the endpoint cannot be reached"), "{err}");
    assert!(err.contains(&format!("at {dead}")), "{err}");

    // The same for inputs and modules, not only for the table.
    let local = tempfile::tempdir().unwrap();
    let ltable = local.path().join("t");
    let on_disk = day(module, &root, "2026-10-01", ltable.to_str().unwrap());
    let (code, _, err) = s3.idem(&refs(&on_disk), &[("AWS_SECRET_ACCESS_KEY", "wrong")]);
    assert_eq!(code, 4, "storage failures are exit 4: {err}");
    assert!(
        err.contains("access was refused") && err.contains("s3://lake/data/"),
        "{err}"
    );
    let remote_module = day(
        "s3://nobucket/m.wasm",
        &root,
        "2026-10-01",
        ltable.to_str().unwrap(),
    );
    let (code, _, err) = s3.idem(&refs(&remote_module), &[]);
    assert_eq!(code, 4, "a module's store failure is exit 4 too: {err}");
    assert!(
        err.contains("the bucket `nobucket` does not exist"),
        "{err}"
    );
    let (code, _, err) = s3.idem(&["inspect", "s3://nobucket/m.wasm"], &[]);
    assert_eq!(code, 4, "storage failures are exit 4: {err}");
    assert!(
        err.contains("the bucket `nobucket` does not exist"),
        "{err}"
    );
    let out = local.path().join("o.parquet");
    let exec = [
        "exec",
        "--module",
        module,
        "--input",
        "s3://nobucket/x.parquet",
        "--output",
        out.to_str().unwrap(),
    ];
    let (code, _, err) = s3.idem(&exec, &[]);
    assert_eq!(code, 4, "storage failures are exit 4: {err}");
    assert!(
        err.contains("the bucket `nobucket` does not exist"),
        "{err}"
    );
    assert!(
        !ltable.join("_delta_log").exists(),
        "a failed run created the table"
    );

    // Nothing was written: no object under the table's prefix.
    assert_eq!(s3_list(&s3, "lake/tables"), Vec::<String>::new());
    let probe = day(module, &root, "2026-10-01", &table);
    let out = ok(s3.idem(&refs(&probe), &[]));
    assert!(
        field(&out, "result:").starts_with("committed version 1"),
        "the first good run must create the table (nothing before it): {out}"
    );
}

#[test]
fn a_store_that_ignores_conditional_writes_is_refused_before_anything_is_committed() {
    let s3 = S3::start_with("lake", &["--ignore-if-none-match"]);
    let module = common::guest("examples/clean_orders");
    let module = module.to_str().unwrap();
    let (root, table) = (s3.url("data"), s3.url("tables/t"));
    sample(&s3, &root, &["2026-10-01"], "500");
    let (code, _, err) = s3.idem(&refs(&day(module, &root, "2026-10-01", &table)), &[]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("refusing to commit"), "{err}");
    assert!(err.contains("If-None-Match"), "{err}");
    // Refused before the first commit: no log entry, no data file.
    let left: Vec<String> = s3_list(&s3, "lake/tables/t")
        .into_iter()
        .filter(|p| !p.contains("/_idem/probe/"))
        .collect();
    assert!(
        left.iter()
            .all(|p| !p.contains("_delta_log/") && !p.ends_with(".parquet")),
        "{left:?}"
    );
}

/// Every object below `bucket/prefix`, listed with pyarrow's S3 client.
fn s3_list(s3: &S3, prefix: &str) -> Vec<String> {
    let out = pyarrow_s3(
        s3,
        "s=f.FileSelector(sys.argv[1],recursive=True,allow_not_found=True)\n\
         print(json.dumps(sorted(i.path for i in fs.get_file_info(s) if i.type==f.FileType.File)))",
        &[prefix],
    );
    serde_json::from_slice(&out).unwrap()
}

/// Two hosts commit two different slices to one S3 table at the same
/// instant (a barrier inside the commit, after the log was re-read and
/// before the log write, holds both until both are there): both want the
/// same next log entry. The conditional PUT lets exactly one have it; the
/// other sees the entry exists, re-reads and commits as the next version.
/// Without it, the second PUT would silently replace the first commit.
#[test]
fn two_hosts_writing_the_same_log_entry_on_s3_both_land() {
    let s3 = S3::start("lake");
    let module = common::guest("examples/clean_orders");
    let module = module.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (root, table) = (s3.url("data"), s3.url("tables/t"));
    let days = ["2026-10-01", "2026-10-02", "2026-10-03"];
    sample(&s3, &root, &days, "1500");
    // Version 1 first (the CREATE and one slice), so both race for version 2.
    ok(s3.idem(&refs(&day(module, &root, days[0], &table)), &[]));
    let barrier = dir.path().join("barrier");
    let spawn = |d: &str| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_idem"));
        cmd.args(day(module, &root, d, &table))
            .env("IDEM_CACHE_DIR", common::test_cache())
            .env(
                "IDEM_FAULT_BARRIER",
                format!("before-log-write:2:{}", barrier.display()),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        for (k, v) in s3.env() {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    };
    let (a, b) = (spawn(days[1]), spawn(days[2]));
    let results: Vec<String> = [a, b]
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            let out = ok((
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            ));
            field(&out, "result:")
        })
        .collect();
    assert_eq!(
        std::fs::read_dir(&barrier).unwrap().count(),
        2,
        "both at the barrier"
    );
    let mut versions: Vec<&str> = results.iter().map(|r| r.as_str()).collect();
    versions.sort();
    assert_eq!(
        versions,
        ["committed version 2", "committed version 3"],
        "each host's commit is its own log entry"
    );
    // Both commits are in the table: every day's rows, as on disk.
    let local = dir.path().join("data");
    let ltable = dir.path().join("t");
    sample(&s3, local.to_str().unwrap(), &days, "1500");
    for d in days {
        ok(s3.idem(
            &refs(&day(
                module,
                local.to_str().unwrap(),
                d,
                ltable.to_str().unwrap(),
            )),
            &[],
        ));
    }
    assert_eq!(
        read_table_s3(&table, &s3, None).rows,
        read_table(&ltable, None).rows
    );
    let out = ok(s3.idem(&["audit", &table], &[]));
    assert!(out.contains("all 3 slices proven"), "{out}");
}

/// Object names as other tools write them (non-ASCII, spaces, `&`, a
/// literal `%3A` as Spark escapes `:`), on S3 and on disk: listed, pinned,
/// read and committed under their own names, and read back through a
/// pinned Delta version whose partition values carry them.
#[test]
fn names_written_by_other_tools_are_read_as_they_are() {
    let s3 = S3::start("lake");
    let module = common::guest("examples/clean_orders");
    let module = module.to_str().unwrap();
    let revenue = common::guest("examples/daily_revenue");
    let revenue = revenue.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("gen");
    let local = dir.path().join("data");
    // Partitions with awkward names, and two files whose names differ
    // only after a `&` (a decoy that a decoder splitting at `&` would read).
    let parts = ["date=caf\u{e9}&b", "date=00%3A00"];
    for (i, p) in parts.iter().enumerate() {
        let files = common::orders(&scratch, &format!("{i}"), 700 + 100 * i as u64, 1);
        let name = format!("{p}/part #{i}.parquet");
        upload(&s3, &files[0], &s3.url(&format!("data/{name}")));
        std::fs::create_dir_all(local.join(p)).unwrap();
        std::fs::copy(&files[0], local.join(&name)).unwrap();
    }
    let real = common::orders(&scratch, "real", 300, 1);
    let decoy = common::orders(&scratch, "decoy", 100, 1);
    upload(&s3, &real[0], &s3.url("files/R&D/x.parquet"));
    upload(&s3, &decoy[0], &s3.url("files/R/x.parquet"));

    let (root, lroot) = (s3.url("data"), local.to_str().unwrap().to_string());
    let (table, ltable) = (s3.url("t"), dir.path().join("t"));
    let ltable_s = ltable.to_str().unwrap().to_string();
    for p in parts {
        let value = p.strip_prefix("date=").unwrap();
        for (r, t) in [(&root, &table), (&lroot, &ltable_s)] {
            let args = day(module, r, value, t);
            let out = ok(s3.idem(&refs(&args), &[]));
            assert!(field(&out, "result:").starts_with("committed"), "{out}");
        }
    }
    let remote = read_table_s3(&table, &s3, None);
    assert_eq!(remote, read_table(&ltable, None));
    assert!(
        remote.rows.iter().any(|r| r.contains("caf\\u00e9&b")),
        "{:?}",
        &remote.rows[..1]
    );
    assert!(remote.rows.iter().any(|r| r.contains("00%3A00")));

    // A pinned version of that table as a slice: Delta stores the
    // partition directories escaped; idem reads them by their names.
    let v = remote.version.to_string();
    for (t, target) in [
        (&table, s3.url("rev")),
        (
            &ltable_s,
            dir.path().join("rev").to_str().unwrap().to_string(),
        ),
    ] {
        let args = [
            "run",
            "--module",
            revenue,
            "--input",
            t,
            "--delta-version",
            &v,
            "--partition",
            parts[0],
            "--table",
            &target,
        ];
        let out = ok(s3.idem(&args, &[]));
        assert!(field(&out, "result:").starts_with("committed"), "{out}");
    }
    assert_eq!(
        read_table_s3(&s3.url("rev"), &s3, None),
        read_table(&dir.path().join("rev"), None)
    );

    // `--files` with a `&` in a directory name reads that file, not the decoy.
    let out_file = dir.path().join("o.parquet");
    let exec = [
        "exec",
        "--module",
        module,
        "--input",
        &s3.url("files/R&D/x.parquet"),
        "--output",
        out_file.to_str().unwrap(),
    ];
    let out = ok(s3.idem(&exec, &[]));
    assert!(out.contains("rows:    300 in"), "{out}");
}

/// A slice of many small objects on a store that answers each request
/// 20 ms later is pinned with its requests in flight together (at most
/// `IDEM_STORAGE_CONCURRENCY`), one GET an object (HEADs for a file list)
/// and the listing: requests O(objects), time O(objects / concurrency x
/// latency), and the same pins whatever the concurrency. Asserted on the
/// server's own count of requests held at once, not on a timing.
#[test]
fn a_slice_of_many_objects_is_pinned_with_its_requests_in_flight_together() {
    const OBJECTS: usize = 200;
    let s3 = S3::start_with("lake", &["--delay-ms", "20"]);
    let module = common::guest("examples/clean_orders");
    let module = module.to_str().unwrap();
    let n = OBJECTS.to_string();
    let out = s3.url("raw");
    let args = ["sample", "--out", &out, "--rows", &n, "--files", &n];
    ok(s3.idem(&[&args[..], &["--dates", "2026-10-01"]].concat(), &[]));
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let table = table.to_str().unwrap();
    let planned = |slice: &[&str], concurrency: &str| {
        s3.take_requests();
        s3.take_max_in_flight();
        let start = std::time::Instant::now();
        let mut args = vec!["explain", "--module", module, "--table", table];
        args.extend_from_slice(slice);
        let env = [("IDEM_STORAGE_CONCURRENCY", concurrency)];
        let out = ok(s3.idem(&args, &env));
        let secs = start.elapsed().as_secs_f64();
        let (requests, most) = (s3.take_requests(), s3.take_max_in_flight());
        let what = &slice[..2];
        eprintln!("{what:?}.. at {concurrency}: {secs:.2} s, at most {most} at once, {requests}");
        (field(&out, "planned run:"), requests, most)
    };
    let partition = ["--input", &out, "--partition", "date=2026-10-01"];
    let (key, requests, most) = planned(&partition, "32");
    let count = |k: &str| requests["keys"][k].as_u64().unwrap_or(0);
    // Each object read once by pinning (explain reads no private copy),
    // the partition listed once (a LIST is a GET of the bucket).
    assert_eq!(
        count("GET raw/date=2026-10-01/"),
        OBJECTS as u64,
        "{requests}"
    );
    assert_eq!(count("GET "), 1, "{requests}");
    assert_eq!(requests["GET"], OBJECTS as u64 + 1, "{requests}");
    assert!(requests["HEAD"].is_null(), "{requests}");
    // With 32 allowed, the server held well more at once than the two a
    // thread a core (this machine's old bound) could have sent.
    assert!(most >= 8, "{most} requests at once: {requests}");
    // One at a time: the knob bounds the requests; the pins are the same.
    let (key_one, _, most_one) = planned(&partition, "1");
    assert_eq!(most_one, 1);
    assert_eq!(key_one, key, "the run key depends on the requests' timing");

    // An explicit list of the same objects: each checked with a HEAD (the
    // slice id and the common root each check them), then read once.
    let urls: Vec<String> = (0..OBJECTS)
        .map(|i| s3.url(&format!("raw/date=2026-10-01/part-{i:05}.parquet")))
        .collect();
    let mut files = vec!["--mode", "append", "--files"];
    files.extend(urls.iter().map(String::as_str));
    let (_, requests, most) = planned(&files, "32");
    assert_eq!(requests["HEAD"], 2 * OBJECTS as u64, "{requests}");
    assert_eq!(requests["GET"], OBJECTS as u64, "{requests}");
    assert!(most >= 8, "{most} requests at once: {requests}");
}
