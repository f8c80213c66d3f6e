//! Inputs under adversity: files rewritten after pinning, partition values
//! that climb out of the dataset root, Hive files without a suffix,
//! symlinks, and `--files` ids that must not depend on how paths are typed.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use idem::slice::{ResolvedSlice, SliceError};
use parquet::arrow::ArrowWriter;
use parquet::basic::Encoding;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// Marks the value whose bytes a test flips inside the data page.
const MARK: i64 = 0x0000_7A5C_3E1F_0000;

/// A one-column Parquet file of the `n` values `MARK + i`, uncompressed and
/// plain-encoded: one flipped byte in its data page changes one value and
/// the file still decodes. Returns their sum.
fn plain_ints(path: &Path, n: i64) -> i64 {
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let values = Int64Array::from_iter_values((0..n).map(|i| MARK + i));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)]).unwrap();
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_encoding(Encoding::PLAIN)
        .set_statistics_enabled(EnabledStatistics::None)
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    (0..n).map(|i| MARK + i).sum()
}

/// Sum of column 0 over the whole slice, read as a run reads it.
fn sum(slice: &ResolvedSlice) -> Result<i64, SliceError> {
    let mut total = 0i64;
    for b in slice.reader(64)?.prefetch(2) {
        let b = b?;
        let col = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        total += col.values().iter().sum::<i64>();
    }
    Ok(total)
}

fn rows(slice: &ResolvedSlice) -> usize {
    slice
        .reader(1000)
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum()
}

#[test]
fn a_same_size_rewrite_between_pinning_and_reading_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let part = dir.path().join("data/date=1");
    std::fs::create_dir_all(&part).unwrap();
    let expected =
        plain_ints(&part.join("a.parquet"), 500) + plain_ints(&part.join("b.parquet"), 500);
    let slice = ResolvedSlice::from_partition(
        dir.path().join("data"),
        &idem::slice::Partition::one("date", "1"),
    )
    .unwrap();
    let pinned = slice.inputs[1].clone();

    // Rewrite one byte of one value in b.parquet's data page, in place.
    let path = part.join("b.parquet");
    let mut bytes = std::fs::read(&path).unwrap();
    let needle = (MARK + 7).to_le_bytes();
    let at = bytes.windows(8).position(|w| w == needle).unwrap();
    bytes[at + 1] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        bytes.len() as u64,
        pinned.size,
        "the rewrite keeps the size"
    );

    match sum(&slice) {
        Err(SliceError::Changed { path, detail }) => {
            assert_eq!(path, "date=1/b.parquet");
            assert!(
                detail.starts_with(&format!("pinned {}, now sha256:", pinned.digest)),
                "{detail}"
            );
        }
        Err(e) => panic!("expected Changed, got {e}"),
        Ok(total) => panic!("read bytes the manifest does not name (sum {total})"),
    }
    // The rewritten file decodes fine: only the digest check stands between
    // the run and a different value under the pinned digest.
    let repinned = ResolvedSlice::from_partition(
        dir.path().join("data"),
        &idem::slice::Partition::one("date", "1"),
    )
    .unwrap();
    assert_ne!(repinned.inputs[1].digest, pinned.digest);
    assert_eq!(sum(&repinned).unwrap(), expected + 0x4000);
}

#[test]
fn a_partition_value_that_climbs_out_of_the_root_is_refused_and_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    common::orders(&root, "x", 1_000, 1);
    // What the traversal would reach: ROOT/date=x/../../secret.
    let secret = dir.path().join("secret");
    common::orders(&secret, "2026-10-01", 50_000, 1);
    std::fs::rename(secret.join("date=2026-10-01"), secret.join("files")).unwrap();
    let secret = secret.join("files");
    let module = common::guest("examples/clean_orders");
    let table = dir.path().join("t");
    for value in ["x/../../secret/files", "x\\..\\..", ".."] {
        let partition = format!("date={value}");
        let (code, out, err) = common::idem(&[
            "run",
            "--module",
            &s(&module),
            "--input",
            &s(&root),
            "--partition",
            &partition,
            "--table",
            &s(&table),
            "--mode",
            "append",
        ]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.contains(&format!(
                "partition value `{}` is refused",
                value.replace('\\', "\\\\")
            )),
            "{err}"
        );
        assert!(!table.join("_delta_log").exists(), "committed: {out}");
    }
    assert!(secret.join("part-00000.parquet").is_file());
    // The library refuses it too, before touching the disk.
    assert!(matches!(
        ResolvedSlice::from_partition(
            &root,
            &idem::slice::Partition::one("date", "x/../../secret/files")
        ),
        Err(SliceError::BadName { .. })
    ));
}

/// A dataset partition with a Hive file without suffix, a text file, writer
/// bookkeeping, and symlinks into and out of the root.
fn hive_partition(d: &Path) -> (PathBuf, usize) {
    let root = d.join("data");
    let files = common::orders(&root, "1", 3_000, 3);
    let part = root.join("date=1");
    // Hive names its files part-00000, without a suffix.
    std::fs::rename(&files[0], part.join("part-00000")).unwrap();
    std::fs::write(part.join("notes.txt"), b"not data").unwrap();
    std::fs::write(part.join("_SUCCESS"), b"").unwrap();
    std::fs::write(part.join(".part-00000.crc"), b"crc").unwrap();
    // Inside the root: followed. Outside: skipped and reported.
    common::orders(&root.join("shared"), "1", 500, 1);
    std::os::unix::fs::symlink(root.join("shared/date=1"), part.join("more")).unwrap();
    common::orders(&d.join("outside"), "1", 700, 1);
    std::os::unix::fs::symlink(d.join("outside/date=1"), part.join("ext")).unwrap();
    (root, 3_000 + 500)
}

#[test]
fn parquet_files_are_read_by_content_and_symlinks_only_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let (root, expected) = hive_partition(dir.path());
    let slice =
        ResolvedSlice::from_partition(&root, &idem::slice::Partition::one("date", "1")).unwrap();
    let names: Vec<&str> = slice.inputs.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(
        names,
        [
            "date=1/more/part-00000.parquet",
            "date=1/part-00000",
            "date=1/part-00001.parquet",
            "date=1/part-00002.parquet"
        ]
    );
    assert_eq!(rows(&slice), expected);
}

#[test]
fn what_a_partition_walk_skips_is_reported_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let (root, _) = hive_partition(dir.path());
    let slice =
        ResolvedSlice::from_partition(&root, &idem::slice::Partition::one("date", "1")).unwrap();
    let mut skipped = slice.skipped.clone();
    skipped.sort();
    assert_eq!(
        skipped,
        [
            (
                "date=1/ext".to_string(),
                "symlink leaves the dataset root".to_string()
            ),
            (
                "date=1/notes.txt".to_string(),
                "not Parquet (no PAR1 magic at start and end)".to_string()
            ),
        ]
    );

    // The command line shows them.
    let module = common::guest("examples/clean_orders");
    let (code, out, err) = common::idem(&[
        "run",
        "--module",
        &s(&module),
        "--input",
        &s(&root),
        "--partition",
        "date=1",
        "--table",
        &s(&dir.path().join("t")),
        "--mode",
        "append",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("skipped date=1/notes.txt: not Parquet")
            && err.contains("skipped date=1/ext: symlink leaves the dataset root"),
        "{err}"
    );
}

/// Run `idem` in `cwd`; returns (exit code, stdout, stderr).
fn idem_in(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .current_dir(cwd)
        .env("IDEM_CACHE_DIR", common::test_cache())
        .output()
        .expect("running idem");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn files_slice_ids_follow_the_files_not_how_their_paths_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::orders(&d.join("a"), "1", 2_000, 2);
    common::orders(&d.join("b"), "2", 2_000, 2);
    // Same relative names in both directories.
    std::fs::rename(d.join("b/date=2"), d.join("b/date=1")).unwrap();
    let module = s(&common::guest("examples/clean_orders"));
    let table = s(&d.join("t"));
    let run = |cwd: &Path, files: [&str; 2]| {
        let mut args = vec![
            "run",
            "--module",
            module.as_str(),
            "--table",
            table.as_str(),
        ];
        args.extend(["--mode", "append", "--files"]);
        args.extend(files);
        let (code, out, err) = idem_in(cwd, &args);
        assert_eq!(code, 0, "{out}{err}");
        (
            common::field(&out, "slice:"),
            common::field(&out, "result:"),
        )
    };
    let (id, result) = run(
        d,
        ["a/date=1/part-00000.parquet", "a/date=1/part-00001.parquet"],
    );
    assert!(id.starts_with("files-"), "{id}");
    assert!(result.starts_with("committed"), "{result}");
    for (cwd, files) in [
        (
            d.to_path_buf(),
            [
                "./a/date=1/part-00001.parquet",
                "a/./date=1/part-00000.parquet",
            ],
        ),
        (
            d.join("a/date=1"),
            ["part-00000.parquet", "../date=1/part-00001.parquet"],
        ),
    ] {
        let (again, result) = run(&cwd, files);
        assert_eq!(again, id, "same files, typed otherwise");
        assert!(result.contains("memo"), "{result}");
    }
    let (other, result) = run(
        &d.join("b"),
        ["date=1/part-00000.parquet", "date=1/part-00001.parquet"],
    );
    assert_ne!(other, id, "other files with the same relative names");
    assert!(result.starts_with("committed"), "{result}");
}

#[test]
fn a_slice_id_with_a_separator_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(dir.path(), "1", 100, 1);
    let module = common::guest("examples/clean_orders");
    let table = dir.path().join("t");
    let (code, out, err) = common::idem(&[
        "run",
        "--module",
        &s(&module),
        "--table",
        &s(&table),
        "--mode",
        "append",
        "--slice-id",
        "../x",
        "--files",
        &s(&files[0]),
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("slice id `../x` is refused"), "{err}");
    assert!(!table.join("_delta_log").exists());
}

#[test]
fn an_integer_param_the_run_key_would_round_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(dir.path(), "1", 100, 1);
    let module = common::guest("examples/clean_orders");
    let table = dir.path().join("t");
    let (code, out, err) = common::idem(&[
        "run",
        "--module",
        &s(&module),
        "--table",
        &s(&table),
        "--mode",
        "append",
        "--params",
        r#"{"min_amount": 1, "limits": [9007199254740993]}"#,
        "--files",
        &s(&files[0]),
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("params.limits[0] = 9007199254740993 is above 2^53")
            && err.contains("pass it as a string"),
        "{err}"
    );
    assert!(!table.join("_delta_log").exists());
}

/// A Delta table as a slice is read through its pinned snapshot: only the
/// files of that version (not what the directory holds now), with the
/// partition values its log keeps (Delta writes no partition column into
/// the files).
#[test]
fn a_delta_input_is_read_through_its_pinned_snapshot_with_partition_values() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let orders = dir.path().join("orders");
    common::orders(&orders, "2026-10-01", 2_000, 1);
    common::orders(&orders, "2026-10-02", 1_000, 1);
    // Version 0: both days; version 1 (the source moves on): day 1 again.
    let script = format!(
        r#"
import pyarrow as pa, pyarrow.parquet as pq, glob
from deltalake import write_deltalake
def day(d):
    t = pa.concat_tables([pq.ParquetFile(f).read() for f in sorted(glob.glob({orders:?} + "/date=" + d + "/*.parquet"))])
    return t.append_column("date", pa.array([d] * t.num_rows))
write_deltalake({src:?}, pa.concat_tables([day("2026-10-01"), day("2026-10-02")]), partition_by=["date"])
write_deltalake({src:?}, day("2026-10-01"), mode="append")
"#,
        orders = s(&orders),
        src = s(&src)
    );
    common::python_script(&script);
    let module = common::guest("examples/clean_orders");
    let table = dir.path().join("t");
    let (code, stdout, stderr) = common::idem(&[
        "run",
        "--module",
        &s(&module),
        "--input",
        &s(&src),
        "--delta-version",
        "0",
        "--partition",
        "date=2026-10-01",
        "--table",
        &s(&table),
        "--mode",
        "append",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let view = common::read_table(&table, None);
    // Version 0 holds 2,000 orders of the day (version 1 would be 4,000);
    // clean_orders drops only null amounts.
    assert!(
        view.rows.len() > 1_500 && view.rows.len() <= 2_000,
        "{}",
        view.rows.len()
    );
    assert!(
        view.rows
            .iter()
            .all(|r| r.contains("\"date\": \"2026-10-01\"")),
        "the partition column was not restored: {}",
        view.rows[0]
    );
}

/// A Delta input with column mapping (its files' column names are not the
/// table's) is refused as an input problem (exit 2), naming the feature
/// and the way out, never read under the wrong names.
#[test]
fn a_column_mapping_delta_input_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let script = format!(
        r#"
import pyarrow as pa
from deltalake import write_deltalake
t = pa.table({{"date": ["2026-10-01"], "amount": [1.0], "quantity": [2]}})
write_deltalake({src:?}, t, partition_by=["date"], configuration={{"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}})
"#,
        src = s(&src)
    );
    common::python_script(&script);
    let log = std::fs::read_to_string(src.join("_delta_log/00000000000000000000.json")).unwrap();
    assert!(
        log.contains("delta.columnMapping.physicalName"),
        "no column mapping: {log}"
    );
    let module = common::guest("examples/clean_orders");
    let table = dir.path().join("t");
    let (code, stdout, stderr) = common::idem(&[
        "run",
        "--module",
        &s(&module),
        "--input",
        &s(&src),
        "--delta-version",
        "0",
        "--table",
        &s(&table),
        "--mode",
        "append",
    ]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("column mapping (mode `name`)") && stderr.contains("Copy the version"),
        "{stderr}"
    );
    assert!(!table.join("_delta_log").exists(), "committed");
}
