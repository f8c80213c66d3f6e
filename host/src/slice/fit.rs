//! A table's files read as the table's columns at the version read: a
//! file written before columns were appended to the table lacks them and
//! reads null there; a file's column the table does not have is not read
//! (a partition column a writer also put in its files: the log's value
//! counts). Columns are matched by field id where the table has them
//! (Iceberg: a renamed column keeps its values, a dropped and re-added
//! one does not get the old ones back), else by name; one column's type
//! must be the same in every file that holds it.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatchOptions, new_null_array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use super::error::SliceError;
use super::pin::InputObject;

/// The columns every batch of a table's slice has: the table's columns
/// (`table`, its partition columns left out), in its order and by its
/// names, each typed as the files that hold it type it (the table's type
/// when none does), and nullable where a file lacks it. `files` are the
/// slice's distinct file schemas, each with the first file that has it.
pub(super) fn read_schema(
    table: &Schema,
    files: &[(&InputObject, SchemaRef)],
) -> Result<SchemaRef, SliceError> {
    for (input, s) in files {
        unique_names(input, s)?;
    }
    let mut fields = Vec::with_capacity(table.fields().len());
    for t in table.fields() {
        let mut first: Option<(&InputObject, &Field)> = None;
        let mut nullable = false;
        for (input, s) in files {
            let Some(f) = position(s, t).map(|j| s.field(j)) else {
                if !t.is_nullable() {
                    return Err(lacks_required(input, t.name()));
                }
                nullable = true;
                continue;
            };
            nullable |= f.is_nullable();
            match first {
                None => first = Some((input, f)),
                Some((at, f0)) if !same_column(f0, f) => return Err(retyped(input, f, at, f0)),
                Some(_) => {}
            }
        }
        let field = match first {
            Some((_, f)) => f.clone().with_name(t.name()),
            None => t.as_ref().clone(),
        };
        fields.push(field.with_nullable(nullable || first.is_none()));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// One file's part in a read: the columns of the read schema decoded
/// from it, which it holds and which it lacks.
pub(super) struct Fit {
    /// Its own top-level columns decoded (indices into its schema, in
    /// order: what the decoder yields).
    pub(super) roots: Vec<usize>,
    /// For each column handed on, where it is among the decoded columns,
    /// or `None`: null.
    columns: Vec<Option<usize>>,
    /// The batch handed on: the read schema's decoded columns.
    out: SchemaRef,
    /// Its own columns taken as dictionaries, with their types.
    dictionaries: Vec<(usize, DataType)>,
    /// Most bytes the null columns of one batch may take.
    budget: u64,
}

impl Fit {
    /// The file `input`, of schema `file`, read as the columns `decode` of
    /// `read` (all when `None`; the table's columns `table` found in it as
    /// [`read_schema`] found them), typed as `typed` (`read` with the
    /// columns taken as dictionaries, when some are). `budget` bounds a
    /// batch's null columns.
    pub(super) fn of(
        input: &InputObject,
        file: &Schema,
        (table, read, typed): (&Schema, &Schema, &Schema),
        decode: Option<&[usize]>,
        budget: u64,
    ) -> Result<Fit, SliceError> {
        unique_names(input, file)?;
        let wanted: Vec<usize> = match decode {
            Some(at) => at.to_vec(),
            None => (0..read.fields().len()).collect(),
        };
        let mut held = Vec::with_capacity(wanted.len());
        let mut out = Vec::with_capacity(wanted.len());
        let mut dictionaries = Vec::new();
        for i in wanted {
            let r = read.field(i);
            match position(file, table.field(i)) {
                Some(j) => {
                    let f = file.field(j);
                    if !same_column(r, f) || (f.is_nullable() && !r.is_nullable()) {
                        return Err(retyped(input, f, input, r));
                    }
                    if let DataType::Dictionary(..) = typed.field(i).data_type() {
                        dictionaries.push((j, typed.field(i).data_type().clone()));
                    }
                    held.push(Some(j));
                }
                None if r.is_nullable() => held.push(None),
                None => return Err(lacks_required(input, r.name())),
            }
            out.push(typed.field(i).clone().with_nullable(true));
        }
        let mut roots: Vec<usize> = held.iter().flatten().copied().collect();
        roots.sort_unstable();
        let columns = held
            .iter()
            .map(|j| j.and_then(|j| roots.iter().position(|&r| r == j)))
            .collect();
        Ok(Fit {
            roots,
            columns,
            out: Arc::new(Schema::new(out)),
            dictionaries,
            budget,
        })
    }

    /// The schema `file` is asked for: its columns taken as dictionaries
    /// (found by field id or name, not by the table's name: a renamed
    /// column's older files name it otherwise). `None`: as it is.
    pub(super) fn hint(&self, file: &Schema) -> Option<SchemaRef> {
        if self.dictionaries.is_empty() {
            return None;
        }
        let mut fields: Vec<Field> = file.fields().iter().map(|f| f.as_ref().clone()).collect();
        for (j, t) in &self.dictionaries {
            fields[*j] = fields[*j].clone().with_data_type(t.clone());
        }
        Some(Arc::new(Schema::new(fields)))
    }

    /// A batch decoded from the file at `path` (its [`Fit::roots`], in its
    /// order) as the read's columns, the ones it lacks null: within the
    /// budget, which a hostile type (a fixed size of 2 GiB) would not be.
    pub(super) fn apply(&self, path: &str, batch: &RecordBatch) -> Result<RecordBatch, SliceError> {
        let n = batch.num_rows();
        let mut nulls = 0u64;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        for (at, f) in self.columns.iter().zip(self.out.fields()) {
            match at.and_then(|k| batch.columns().get(k)) {
                Some(c) => columns.push(c.clone()),
                None if at.is_some() => {
                    return Err(malformed(
                        path,
                        format!("column `{}` was not decoded", f.name()),
                    ));
                }
                None => {
                    nulls =
                        nulls.saturating_add(null_bytes(f.data_type(), 0).saturating_mul(n as u64));
                    if nulls > self.budget {
                        return Err(SliceError::Refused {
                            path: path.to_string(),
                            why: format!(
                                "its rows would read null in column `{}`, and {n} rows of nulls of type {} take more than the input budget of {} bytes",
                                crate::text::clip_str(f.name(), 128),
                                crate::text::clip_str(&f.data_type().to_string(), 128),
                                self.budget
                            ),
                            fix: "lower --batch-rows, or rewrite the table's files with a narrower type".into(),
                        });
                    }
                    columns.push(new_null_array(f.data_type(), n));
                }
            }
        }
        let rows = RecordBatchOptions::new().with_row_count(Some(n));
        RecordBatch::try_new_with_options(self.out.clone(), columns, &rows)
            .map_err(|e| malformed(path, e.to_string()))
    }
}

/// Bytes one null row of type `t` takes at most (a bound, saturating):
/// fixed sizes in full, variable ones their offsets.
fn null_bytes(t: &DataType, depth: usize) -> u64 {
    if depth > 32 {
        return u64::MAX;
    }
    let each = |f: &Field| null_bytes(f.data_type(), depth + 1);
    match t {
        DataType::FixedSizeBinary(w) => u64::try_from(*w).unwrap_or(u64::MAX).saturating_add(1),
        DataType::FixedSizeList(f, w) => {
            each(f).saturating_mul(u64::try_from(*w).unwrap_or(u64::MAX))
        }
        DataType::Struct(fs) => fs.iter().map(|f| each(f)).fold(1, u64::saturating_add),
        DataType::Dictionary(k, _) => null_bytes(k, depth + 1),
        DataType::Utf8View | DataType::BinaryView => 17,
        DataType::ListView(_) | DataType::LargeListView(_) => 17,
        _ => t.primitive_width().map_or(9, |w| w as u64 + 1),
    }
}

/// Where `key` (a table column) is in `file`: by field id when it has one
/// and the file's columns have ids, else by name.
fn position(file: &Schema, key: &Field) -> Option<usize> {
    let id = |f: &Field| f.metadata().get(PARQUET_FIELD_ID_META_KEY).cloned();
    match id(key) {
        Some(k) if file.fields().iter().any(|f| id(f).is_some()) => file
            .fields()
            .iter()
            .position(|f| id(f).as_ref() == Some(&k)),
        _ => file.index_of(key.name()).ok(),
    }
}

/// One column as two files hold it: the same type and field metadata (a
/// field id), whether or not nullable.
fn same_column(a: &Field, b: &Field) -> bool {
    a.data_type() == b.data_type() && a.metadata() == b.metadata()
}

/// A file naming one column twice, or giving two the same field id,
/// cannot be read by name or id.
fn unique_names(input: &InputObject, s: &Schema) -> Result<(), SliceError> {
    let twice = |mut keys: Vec<&str>, what: &str| {
        keys.sort_unstable();
        match keys.windows(2).find(|w| w[0] == w[1]) {
            None => Ok(()),
            Some(w) => Err(SliceError::Refused {
                path: input.path.clone(),
                why: format!("it has two columns {what} `{}`", crate::text::clip_str(w[0], 128)),
                fix: "a table's files are read by column name or field id: rewrite the file with one column per name and id".into(),
            }),
        }
    };
    twice(
        s.fields().iter().map(|f| f.name().as_str()).collect(),
        "named",
    )?;
    let ids = s
        .fields()
        .iter()
        .filter_map(|f| f.metadata().get(PARQUET_FIELD_ID_META_KEY))
        .map(String::as_str)
        .collect();
    twice(ids, "with field id")
}

/// A file without a column the table declares required.
fn lacks_required(input: &InputObject, column: &str) -> SliceError {
    SliceError::Refused {
        path: input.path.clone(),
        why: format!(
            "it has no column `{}`, which the table declares required (not null)",
            crate::text::clip_str(column, 128)
        ),
        fix: "the table's files and its schema disagree: rewrite the file, or declare the column nullable".into(),
    }
}

/// A column `input` holds as `f` where `at` holds it as `f0`.
fn retyped(input: &InputObject, f: &Field, at: &InputObject, f0: &Field) -> SliceError {
    let shown = |f: &Field| {
        crate::text::clip_str(
            &format!(
                "{}{}",
                f.data_type(),
                if f.is_nullable() { "" } else { " not null" }
            ),
            160,
        )
    };
    let whose = if std::ptr::eq(input, at) {
        "the slice's other files have it as".to_string()
    } else {
        format!("`{}` has it as", at.path)
    };
    SliceError::Refused {
        path: input.path.clone(),
        why: format!(
            "its column `{}` is {} (field metadata {}), but {whose} {} ({})",
            crate::text::clip_str(f.name(), 128),
            shown(f),
            crate::text::clip_str(&format!("{:?}", f.metadata()), 160),
            shown(f0),
            crate::text::clip_str(&format!("{:?}", f0.metadata()), 160)
        ),
        fix: "one column of a table has one type in every data file: rewrite the file with the table's type".into(),
    }
}

fn malformed(path: &str, detail: String) -> SliceError {
    SliceError::Malformed {
        path: path.to_string(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use arrow::array::{AsArray, Int32Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Int64Type};

    use super::*;
    use crate::slice::narrow::Declared;
    use crate::slice::resolve::ResolvedSlice;

    fn write(path: &Path, columns: Vec<(&str, ArrayRef, bool)>) {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, a, null)| Field::new(*n, a.data_type().clone(), *null))
            .collect();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, a, _)| a).collect(),
        )
        .unwrap();
        let file = std::fs::File::create(path).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    fn ids(v: &[i64]) -> ArrayRef {
        Arc::new(Int64Array::from(v.to_vec()))
    }

    fn texts(v: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(v.to_vec()))
    }

    /// The table: `id` (required), `name`, and `coupon`, appended.
    fn table() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("coupon", DataType::Utf8, true),
        ])
    }

    /// `old.parquet` from before `coupon` was appended; `new.parquet` after,
    /// its columns in another order and with one the table does not have.
    fn two_files(dir: &Path) -> Vec<std::path::PathBuf> {
        let old = dir.join("a-old.parquet");
        write(
            &old,
            vec![
                ("id", ids(&[1, 2]), false),
                ("name", texts(&[Some("x"), None]), true),
            ],
        );
        let new = dir.join("b-new.parquet");
        write(
            &new,
            vec![
                ("coupon", texts(&[Some("C1"), None, Some("C3")]), true),
                ("extra", Arc::new(Int32Array::from(vec![7, 8, 9])), false),
                ("id", ids(&[3, 4, 5]), false),
                ("name", texts(&[Some("y"), Some("z"), None]), true),
            ],
        );
        vec![old, new]
    }

    fn names(batch: &RecordBatch) -> Vec<String> {
        let fields = batch.schema_ref().fields();
        fields.iter().map(|f| f.name().clone()).collect()
    }

    fn read_all(slice: &ResolvedSlice, declared: &Declared) -> Result<RecordBatch, SliceError> {
        let reader = slice.reader(100)?.narrow(declared)?;
        let schema = reader.schema();
        let batches = reader.collect::<Result<Vec<_>, _>>()?;
        Ok(arrow::compute::concat_batches(&schema, &batches).unwrap())
    }

    /// Files from both sides of an append read as the table's columns:
    /// the older file's rows null in the appended one, a file's columns
    /// taken by name whatever their order, a column the table does not
    /// have left unread. Without the table's columns, the files differ.
    #[test]
    fn files_from_both_sides_of_an_append_read_as_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let files = two_files(dir.path());
        let plain = ResolvedSlice::from_files("t", &files).unwrap();
        assert!(matches!(
            plain.reader(100).err(),
            Some(SliceError::SchemaMismatch { .. })
        ));
        let slice = plain.with_table_columns(&table());
        let all = read_all(&slice, &Declared::default()).unwrap();
        assert_eq!(names(&all), ["id", "name", "coupon"]);
        let id = all.column(0).as_primitive::<Int64Type>();
        assert_eq!(id.values().to_vec(), [1, 2, 3, 4, 5]);
        let coupon = all.column(2).as_string::<i32>();
        let got: Vec<Option<&str>> = coupon.iter().collect();
        assert_eq!(got, [None, None, Some("C1"), None, Some("C3")]);
        assert!(all.schema().field(2).is_nullable());
        // Narrowed to the appended column, taken as a dictionary: the
        // older file decodes nothing and reads nulls of that type.
        let declared = Declared {
            columns: Some(vec!["coupon".into(), "id".into()]),
            dictionaries: vec!["coupon".into()],
        };
        let some = read_all(&slice, &declared).unwrap();
        assert!(matches!(
            some.column(0).data_type(),
            DataType::Dictionary(..)
        ));
        let values = arrow::compute::cast(some.column(0), &DataType::Utf8).unwrap();
        let got: Vec<Option<&str>> = values.as_string::<i32>().iter().collect();
        assert_eq!(got, [None, None, Some("C1"), None, Some("C3")]);
        let id = some.column(1).as_primitive::<Int64Type>();
        assert_eq!(id.values().to_vec(), [1, 2, 3, 4, 5]);
    }

    /// Why `files`, read as [`table`], cannot be read.
    fn refused(files: &[&std::path::PathBuf]) -> String {
        let slice = ResolvedSlice::from_files("t", files)
            .unwrap()
            .with_table_columns(&table());
        slice.reader(100).err().unwrap().to_string()
    }

    /// What the table's columns do not excuse: a file without a column the
    /// table declares required, and one column typed differently by two
    /// files.
    #[test]
    fn a_missing_required_column_and_a_retyped_one_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let files = two_files(dir.path());
        let no_id = dir.path().join("c-no-id.parquet");
        write(&no_id, vec![("name", texts(&[Some("w")]), true)]);
        let err = refused(&[&files[0], &no_id]);
        assert!(
            err.contains("c-no-id.parquet")
                && err.contains("no column `id`")
                && err.contains("required"),
            "{err}"
        );
        let retyped = dir.path().join("c-retyped.parquet");
        write(
            &retyped,
            vec![
                ("id", ids(&[9]), false),
                ("name", Arc::new(Int32Array::from(vec![1])), true),
            ],
        );
        let err = refused(&[&files[0], &retyped]);
        assert!(
            err.contains("c-retyped.parquet")
                && err.contains("column `name` is Int32")
                && err.contains("`a-old.parquet` has it as Utf8"),
            "{err}"
        );
    }

    /// A field with Parquet's field id.
    fn with_id(f: Field, id: &str) -> Field {
        f.with_metadata([(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())].into())
    }

    fn write_fields(path: &Path, fields: Vec<Field>, columns: Vec<ArrayRef>) {
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let file = std::fs::File::create(path).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    /// Where the table has field ids (Iceberg), a file's columns are
    /// matched by them: a renamed column keeps its values, and a column
    /// dropped and added again under its old name does not get the old
    /// values back.
    #[test]
    fn columns_are_matched_by_field_id_where_the_table_has_them() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("a.parquet");
        write_fields(
            &old,
            vec![
                with_id(Field::new("id", DataType::Int64, false), "1"),
                with_id(Field::new("name", DataType::Utf8, true), "2"),
                with_id(Field::new("coupon", DataType::Utf8, true), "3"),
            ],
            vec![ids(&[1]), texts(&[Some("x")]), texts(&[Some("OLD")])],
        );
        // `name` renamed `label`; `coupon` dropped and added again (id 4).
        let table = Schema::new(vec![
            with_id(Field::new("id", DataType::Int64, false), "1"),
            with_id(Field::new("label", DataType::Utf8, true), "2"),
            with_id(Field::new("coupon", DataType::Utf8, true), "4"),
        ]);
        let slice = ResolvedSlice::from_files("t", &[&old])
            .unwrap()
            .with_table_columns(&table);
        let all = read_all(&slice, &Declared::default()).unwrap();
        assert_eq!(names(&all), ["id", "label", "coupon"]);
        assert_eq!(all.column(1).as_string::<i32>().value(0), "x");
        // Taken as a dictionary: the older file is asked for it by its id.
        let declared = Declared {
            columns: Some(vec!["label".into()]),
            dictionaries: vec!["label".into()],
        };
        let label = read_all(&slice, &declared).unwrap();
        let values = arrow::compute::cast(label.column(0), &DataType::Utf8).unwrap();
        assert_eq!(values.as_string::<i32>().value(0), "x");
        // Two columns with one id cannot be told apart.
        let twice = dir.path().join("b.parquet");
        write_fields(
            &twice,
            vec![
                with_id(Field::new("id", DataType::Int64, false), "1"),
                with_id(Field::new("other", DataType::Int64, false), "1"),
            ],
            vec![ids(&[1]), ids(&[2])],
        );
        let slice = ResolvedSlice::from_files("t", &[&twice])
            .unwrap()
            .with_table_columns(&table);
        let err = slice.reader(100).err().unwrap().to_string();
        assert!(err.contains("two columns with field id `1`"), "{err}");
        assert!(
            all.column(2).is_null(0),
            "the old coupon is not the new one"
        );
    }

    /// A guest that reads only a constant (partition) column decodes no
    /// column of the files: the rows still come, with their count.
    #[test]
    fn a_read_of_constant_columns_only_decodes_none_and_keeps_the_rows() {
        let dir = tempfile::tempdir().unwrap();
        let files = two_files(dir.path());
        let values = vec![
            ("a-old.parquet".to_string(), vec![Some("1".to_string())]),
            ("b-new.parquet".to_string(), vec![Some("2".to_string())]),
        ];
        let slice = ResolvedSlice::from_files("t", &files)
            .unwrap()
            .with_constants(vec![Field::new("part", DataType::Utf8, true)], values)
            .with_table_columns(&table());
        let declared = Declared {
            columns: Some(vec!["part".into()]),
            dictionaries: vec![],
        };
        let part = read_all(&slice, &declared).unwrap();
        let got: Vec<Option<&str>> = part.column(0).as_string::<i32>().iter().collect();
        assert_eq!(got, [Some("1"), Some("1"), Some("2"), Some("2"), Some("2")]);
    }

    /// A file another writer made, declaring a table column with a type
    /// whose nulls would take terabytes, cannot make the others' rows
    /// allocate them: the read is refused within the budget, naming the
    /// file that lacks the column.
    #[test]
    fn nulls_of_a_hostile_type_are_refused_before_they_are_allocated() {
        let dir = tempfile::tempdir().unwrap();
        let huge = dir.path().join("a-huge.parquet");
        let wide = DataType::FixedSizeBinary(1 << 30);
        write_fields(
            &huge,
            vec![
                Field::new("id", DataType::Int64, false),
                Field::new("x", wide.clone(), true),
            ],
            vec![ids(&[]), new_null_array(&wide, 0)],
        );
        let plain = dir.path().join("b-plain.parquet");
        write(
            &plain,
            vec![("id", ids(&(0..1000).collect::<Vec<_>>()), false)],
        );
        let table = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("x", DataType::Binary, true),
        ]);
        let slice = ResolvedSlice::from_files("t", &[&huge, &plain])
            .unwrap()
            .with_table_columns(&table);
        let err = read_all(&slice, &Declared::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("b-plain.parquet") && err.contains("input budget"),
            "{err}"
        );
    }
}
