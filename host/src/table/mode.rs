//! Commit modes: how a slice's output replaces or joins the table's rows.

use std::collections::HashSet;

use arrow::array::{Array as _, RecordBatch};
use arrow::row::{RowConverter, SortField};
use arrow::util::display::array_value_to_string;

use super::error::TableError;
use crate::slice::Partition;

/// How a run's output is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Replace exactly the partition the slice owns (`date=D`, or
    /// `date=D/hour=H`: every level a string column of the table).
    OverwritePartition {
        /// The slice's partition (no level: not known yet).
        partition: Partition,
    },
    /// Upsert on the key columns: matching rows are updated, others inserted.
    Merge {
        /// Key columns; the output must have one row per key.
        keys: Vec<String>,
    },
    /// Append the output. Idempotent because a slice's output digest is never
    /// committed twice in a row.
    Append,
}

impl Mode {
    /// Every mode's name, as a user reads them (in the messages that
    /// refuse another name).
    pub const NAMES: &'static str = "overwrite-partition, merge or append";

    /// The mode called `name` (`None` when no mode has that name): merge
    /// on `keys`, or overwrite-partition of the partition that
    /// `partition` gives, asked for only by that mode. The CLI, the
    /// pipeline file and the service each word their own refusals and
    /// decide themselves whether a merge may lack its keys (see
    /// [`Mode::is_keyless_merge`]).
    pub fn parse<E>(
        name: &str,
        keys: &[String],
        partition: impl FnOnce() -> Result<Partition, E>,
    ) -> Result<Option<Mode>, E> {
        Ok(Some(match name {
            "overwrite-partition" => Mode::OverwritePartition {
                partition: partition()?,
            },
            "merge" => Mode::Merge {
                keys: keys.to_vec(),
            },
            "append" => Mode::Append,
            _ => return Ok(None),
        }))
    }

    /// A merge with no key column (which no commit can do).
    pub fn is_keyless_merge(&self) -> bool {
        matches!(self, Mode::Merge { keys } if keys.is_empty())
    }

    /// The mode's CLI name.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::OverwritePartition { .. } => "overwrite-partition",
            Mode::Merge { .. } => "merge",
            Mode::Append => "append",
        }
    }
}

/// The column of a merge table that names the slice owning each row.
pub const OWNER_COLUMN: &str = "_idem_slice";

/// Checks, batch by batch as the output streams past, that no merge key
/// repeats: MERGE with two source rows per key would be ambiguous.
pub struct KeyChecker {
    keys: Vec<String>,
    converter: Option<RowConverter>,
    seen: HashSet<Vec<u8>>,
    duplicates: usize,
    example: Option<String>,
    /// Null keys per key column: MERGE never matches a null key, so every
    /// rerun would insert those rows again.
    nulls: Vec<usize>,
}

impl KeyChecker {
    /// A checker for `keys`.
    pub fn new(keys: &[String]) -> Self {
        KeyChecker {
            keys: keys.to_vec(),
            converter: None,
            seen: HashSet::new(),
            duplicates: 0,
            example: None,
            nulls: vec![0; keys.len()],
        }
    }

    /// Look at one output batch.
    pub fn update(&mut self, b: &RecordBatch) -> Result<(), TableError> {
        let schema = b.schema();
        let mut cols = Vec::with_capacity(self.keys.len());
        for k in &self.keys {
            let c = b.column_by_name(k).ok_or_else(|| TableError::NoKeyColumn {
                column: k.clone(),
                columns: names(&schema),
            })?;
            cols.push(c.clone());
        }
        for (n, c) in self.nulls.iter_mut().zip(&cols) {
            *n += c.logical_null_count();
        }
        if self.converter.is_none() {
            let fields = cols
                .iter()
                .map(|c| SortField::new(c.data_type().clone()))
                .collect();
            self.converter =
                Some(RowConverter::new(fields).map_err(|e| TableError::Output(e.to_string()))?);
        }
        let Some(converter) = &self.converter else {
            return Ok(());
        };
        let rows = converter
            .convert_columns(&cols)
            .map_err(|e| TableError::Output(e.to_string()))?;
        for (i, row) in rows.iter().enumerate() {
            if !self.seen.insert(row.as_ref().to_vec()) {
                self.duplicates += 1;
                if self.example.is_none() {
                    let vals: Vec<String> = cols
                        .iter()
                        .map(|c| array_value_to_string(c, i).unwrap_or_default())
                        .collect();
                    self.example = Some(vals.join(", "));
                }
            }
        }
        Ok(())
    }

    /// `Ok` when every key was unique.
    pub fn finish(self) -> Result<(), TableError> {
        if let Some((column, &rows)) = self.keys.iter().zip(&self.nulls).find(|(_, n)| **n > 0) {
            return Err(TableError::NullKeys {
                column: column.clone(),
                rows,
            });
        }
        match self.example {
            None => Ok(()),
            Some(example) => Err(TableError::DuplicateKeys {
                keys: self.keys.join(", "),
                duplicates: self.duplicates,
                example,
            }),
        }
    }
}

fn names(schema: &arrow::datatypes::Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_parsed_from_its_name() {
        let none = || Err::<Partition, &str>("no partition");
        let date = || Ok::<_, &str>(Partition::one("date", "2026-10-01"));
        assert_eq!(Mode::parse("append", &[], none), Ok(Some(Mode::Append)));
        let keys = vec!["id".to_string()];
        assert_eq!(
            Mode::parse("merge", &keys, none),
            Ok(Some(Mode::Merge { keys: keys.clone() }))
        );
        assert_eq!(
            Mode::parse("overwrite-partition", &keys, date),
            Ok(Some(Mode::OverwritePartition {
                partition: Partition::one("date", "2026-10-01")
            }))
        );
        // The partition is asked for only by overwrite-partition.
        assert_eq!(
            Mode::parse("overwrite-partition", &[], none),
            Err("no partition")
        );
        assert_eq!(Mode::parse("upsert", &keys, date), Ok(None));
        let keyless = Mode::parse("merge", &[], none).unwrap().unwrap();
        assert!(keyless.is_keyless_merge());
        assert!(!Mode::Append.is_keyless_merge());
    }
}
