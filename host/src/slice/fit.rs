//! A table's files read as the table's columns at the version read: a file
//! written before columns were appended to the table lacks them and reads
//! null there, as every engine reads it; a file's column the table does not
//! have is not read (a partition column a writer also put in its files:
//! the log's value counts). Columns are matched by name, and one column's
//! type must be the same in every file that holds it.

use std::sync::Arc;

use arrow::array::{ArrayRef, new_null_array};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::error::SliceError;
use super::pin::InputObject;

/// The columns every batch of a table's slice has: the table's columns
/// (`table`, its partition columns left out), in its order, each typed as
/// the files that hold it type it (the table's type when none does), and
/// nullable where a file lacks it. `files` are the slice's files with
/// the schemas their footers give, in read order.
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
            let Ok(f) = s.field_with_name(t.name()) else {
                if !t.is_nullable() {
                    return Err(lacks_required(input, t.name()));
                }
                nullable = true;
                continue;
            };
            nullable |= f.is_nullable();
            match first {
                None => first = Some((input, f)),
                Some((at, f0)) if !same_column(f0, f) => {
                    return Err(SliceError::SchemaMismatch {
                        path: input.path.clone(),
                        first: at.path.clone(),
                        expected: format!("column {f0:?}"),
                        got: format!("column {f:?}"),
                    });
                }
                Some(_) => {}
            }
        }
        let field = first.map_or_else(|| t.as_ref().clone(), |(_, f)| f.clone());
        fields.push(field.with_nullable(nullable || first.is_none()));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// One file's part in a read: the columns of the read schema decoded
/// from it, which it holds (by name) and which it lacks.
pub(super) struct Fit {
    /// Its own top-level columns decoded (indices into its schema).
    pub(super) roots: Vec<usize>,
    /// For each column handed on, its name in the file, or `None`: null.
    columns: Vec<Option<String>>,
    /// The batch handed on: the read schema's decoded columns.
    out: SchemaRef,
}

impl Fit {
    /// The file `input`, of schema `file`, read as the columns `decode` of
    /// `read` (all when `None`), typed as `typed` (`read` with the columns
    /// taken as dictionaries, when some are). Checked again from the
    /// private copy: what [`read_schema`] accepted from the footer read in
    /// place must still hold.
    pub(super) fn of(
        input: &InputObject,
        file: &Schema,
        read: &Schema,
        typed: &Schema,
        decode: Option<&[usize]>,
    ) -> Result<Fit, SliceError> {
        unique_names(input, file)?;
        let wanted: Vec<usize> = match decode {
            Some(at) => at.to_vec(),
            None => (0..read.fields().len()).collect(),
        };
        let mut roots = Vec::new();
        let mut columns = Vec::with_capacity(wanted.len());
        let mut out = Vec::with_capacity(wanted.len());
        for i in wanted {
            let r = read.field(i);
            match file.index_of(r.name()) {
                Ok(j) => {
                    let f = file.field(j);
                    if !same_column(r, f) || (f.is_nullable() && !r.is_nullable()) {
                        return Err(SliceError::SchemaMismatch {
                            path: input.path.clone(),
                            first: "(the slice's other files)".into(),
                            expected: format!("column {r:?}"),
                            got: format!("column {f:?}"),
                        });
                    }
                    roots.push(j);
                    columns.push(Some(r.name().clone()));
                }
                Err(_) if r.is_nullable() => columns.push(None),
                Err(_) => return Err(lacks_required(input, r.name())),
            }
            out.push(typed.field(i).clone().with_nullable(true));
        }
        roots.sort_unstable();
        Ok(Fit {
            roots,
            columns,
            out: Arc::new(Schema::new(out)),
        })
    }

    /// A batch decoded from the file (its [`Fit::roots`], in its order)
    /// as the read's columns: each by name, or nulls.
    pub(super) fn apply(&self, batch: &RecordBatch) -> Result<RecordBatch, SliceError> {
        let n = batch.num_rows();
        let columns: Vec<ArrayRef> = self
            .columns
            .iter()
            .zip(self.out.fields())
            .map(
                |(name, f)| match name.as_deref().and_then(|c| batch.column_by_name(c)) {
                    Some(c) => c.clone(),
                    None => new_null_array(f.data_type(), n),
                },
            )
            .collect();
        RecordBatch::try_new(self.out.clone(), columns).map_err(|e| SliceError::Malformed {
            path: "(a table's columns)".into(),
            detail: e.to_string(),
        })
    }
}

/// One column as two files hold it: the same type and field metadata (a
/// field id), whether or not nullable.
fn same_column(a: &Field, b: &Field) -> bool {
    a.data_type() == b.data_type() && a.metadata() == b.metadata()
}

/// A file naming one column twice cannot be read by name.
fn unique_names(input: &InputObject, s: &Schema) -> Result<(), SliceError> {
    let mut names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
    names.sort_unstable();
    match names.windows(2).find(|w| w[0] == w[1]) {
        None => Ok(()),
        Some(w) => Err(SliceError::Refused {
            path: input.path.clone(),
            why: format!(
                "it has two columns named `{}`",
                crate::text::clip_str(w[0], 128)
            ),
            fix:
                "a table's files are read by column name: rewrite the file with one column per name"
                    .into(),
        }),
    }
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
        let names: Vec<&str> = all
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["id", "name", "coupon"]);
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

    /// What the table's columns do not excuse: a file without a column the
    /// table declares required, and one column typed differently by two
    /// files.
    #[test]
    fn a_missing_required_column_and_a_retyped_one_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let files = two_files(dir.path());
        let no_id = dir.path().join("c-no-id.parquet");
        write(&no_id, vec![("name", texts(&[Some("w")]), true)]);
        let slice = ResolvedSlice::from_files("t", &[&files[0], &no_id])
            .unwrap()
            .with_table_columns(&table());
        let err = slice.reader(100).err().unwrap().to_string();
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
        let slice = ResolvedSlice::from_files("t", &[&files[0], &retyped])
            .unwrap()
            .with_table_columns(&table());
        let err = slice.reader(100).err().unwrap();
        assert!(
            matches!(&err, SliceError::SchemaMismatch { path, .. } if path.contains("c-retyped")),
            "{err}"
        );
    }
}
