//! A new Iceberg table's metadata, made for a slice's first commit: its
//! schema (the output's, plus the partition or owner column), its
//! partition spec and idem's properties. It is written and registered
//! only with the first snapshot, so a failed first run leaves no table.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use futures::TryStreamExt as _;
use iceberg::TableCreation;
use iceberg::io::FileIO;
use iceberg::spec::{
    NestedField, TableMetadata, TableMetadataBuilder, Transform, Type, UnboundPartitionSpec,
};
use url::Url;

use super::schema::{iceberg_type, plain_schema};
use super::{Iceberg, MODE_PROP, TABLE_PROP, ice_err};
use crate::table::commit::CommitRequest;
use crate::table::error::TableError;
use crate::table::mode::{Mode, OWNER_COLUMN};

impl Iceberg {
    /// The metadata of a new table for this output (written and
    /// registered only with its first snapshot, by [`Self::replace`]).
    pub(super) async fn new_metadata(
        &self,
        req: &CommitRequest<'_>,
    ) -> Result<TableMetadata, TableError> {
        self.check_folder_free().await?;
        let out = req.schema.clone().ok_or(TableError::NoSchema)?;
        let fields = table_fields(&out, req.mode)?;
        let creation = TableCreation::builder()
            .name(self.loc.name.clone())
            .location(self.new_location())
            .schema(iceberg_schema(&fields)?)
            .partition_spec(partition_spec(&fields, req.mode)?)
            .properties([
                (MODE_PROP.to_string(), req.mode.name().to_string()),
                // Which catalog entry this table is for: what tells a first
                // commit's leftovers from another catalog's table here.
                (TABLE_PROP.to_string(), self.loc.canonical()),
            ])
            .build();
        Ok(TableMetadataBuilder::from_table_creation(creation)
            .map_err(ice_err("creating the table"))?
            .build()
            .map_err(ice_err("creating the table"))?
            .metadata)
    }

    /// A folder that holds a table already (registered under another
    /// catalog name, or in another catalog) is not taken over: two
    /// tables in one folder would delete each other's files. What a
    /// first commit of idem's own left when it was killed before its
    /// catalog INSERT (a first metadata file, idem's manifests) is not
    /// a table and does not count.
    async fn check_folder_free(&self) -> Result<(), TableError> {
        let metas: Vec<_> = self
            .store
            .list(Some(&self.prefix.clone().join("metadata")))
            .try_collect()
            .await
            .map_err(|e| TableError::Location {
                location: self.location.clone(),
                detail: e.to_string(),
            })?;
        for meta in metas {
            let name = meta.location.filename().unwrap_or_default().to_string();
            let ours = if name.ends_with(".metadata.json") {
                name.starts_with("00000-")
                    && orphan_first_metadata(&self.io, &self.url, &name, &self.loc.canonical())
                        .await
            } else {
                name.starts_with("idem-") || name.contains("-idem-")
            };
            if !ours {
                return Err(TableError::Location {
                    location: self.location.clone(),
                    detail: format!(
                        "the catalog has no table {}.{} (catalog name `{}`), but {} already holds another table's Iceberg metadata ({name}): name that table's catalog with ?catalog=NAME, or use another table name or warehouse",
                        self.loc.namespace, self.loc.name, self.loc.catalog, self.url
                    ),
                });
            }
        }
        Ok(())
    }

    /// The new table's location as its metadata records it: local paths
    /// as `file://` + the path, unencoded (what PyIceberg writes, and what
    /// every reader opens as is).
    fn new_location(&self) -> String {
        match self.loc.table_url.to_file_path() {
            Ok(dir) if self.loc.table_url.scheme() == "file" => format!("file://{}", dir.display()),
            _ => self
                .loc
                .table_url
                .as_str()
                .trim_end_matches('/')
                .to_string(),
        }
    }
}

/// Whether `metadata/<name>` under the table folder `url` is a first
/// metadata file an idem commit wrote (its table properties carry the
/// idem mode, it has no history) and no catalog registered.
pub(super) async fn orphan_first_metadata(io: &FileIO, url: &Url, name: &str, table: &str) -> bool {
    let path = match url.to_file_path() {
        Ok(dir) if url.scheme() == "file" => format!("file://{}/metadata/{name}", dir.display()),
        _ => format!("{url}metadata/{name}"),
    };
    match TableMetadata::read_from(io, &path).await {
        Ok(m) => {
            m.properties().get(TABLE_PROP).map(String::as_str) == Some(table)
                && m.metadata_log().is_empty()
        }
        Err(_) => false,
    }
}

/// The new table's columns: the output's (dictionaries as their values),
/// plus the partition column (overwrite-partition) or the owner column
/// (merge, which the output must not have).
fn table_fields(out: &Schema, mode: &Mode) -> Result<Vec<Field>, TableError> {
    let mut fields: Vec<Field> = plain_schema(out)
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    if let Mode::OverwritePartition { partition } = mode {
        for column in partition.columns() {
            if !fields.iter().any(|f| *f.name() == column) {
                fields.push(Field::new(column, DataType::Utf8, false));
            }
        }
    }
    if let Mode::Merge { .. } = mode {
        if fields.iter().any(|f| f.name() == OWNER_COLUMN) {
            return Err(TableError::Output(format!(
                "the output has a column named `{OWNER_COLUMN}`, which idem keeps for itself in merge tables (the slice owning each row): rename it"
            )));
        }
        fields.push(Field::new(OWNER_COLUMN, DataType::Utf8, false));
    }
    Ok(fields)
}

/// The Iceberg schema of `fields` (field ids from 1, in order); a type
/// without an exact Iceberg equivalent is refused.
fn iceberg_schema(fields: &[Field]) -> Result<iceberg::spec::Schema, TableError> {
    let mut nested = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let t = iceberg_type(f.data_type()).ok_or_else(|| {
            TableError::Output(format!(
                "the output's column `{}` is {}, which has no exact Iceberg type: cast it in the transform (to Int32/Int64, Float32/Float64, Utf8, Binary, Boolean, Date32, Timestamp(µs) without a zone or in \"UTC\", Decimal128)",
                f.name(),
                f.data_type()
            ))
        })?;
        let id = i as i32 + 1;
        nested.push(Arc::new(if f.is_nullable() {
            NestedField::optional(id, f.name(), Type::Primitive(t))
        } else {
            NestedField::required(id, f.name(), Type::Primitive(t))
        }));
    }
    iceberg::spec::Schema::builder()
        .with_fields(nested)
        .build()
        .map_err(|e| TableError::Output(format!("output schema: {e}")))
}

/// The new table's partition spec: identity on each of the slice's
/// partition columns, in order (overwrite-partition), else none.
fn partition_spec(fields: &[Field], mode: &Mode) -> Result<UnboundPartitionSpec, TableError> {
    let mut spec = UnboundPartitionSpec::builder();
    if let Mode::OverwritePartition { partition } = mode {
        for column in partition.columns() {
            let id = fields.iter().position(|f| *f.name() == column).unwrap_or(0) as i32 + 1;
            spec = spec
                .add_partition_field(id, &column, Transform::Identity)
                .map_err(ice_err("partition spec"))?;
        }
    }
    Ok(spec.build())
}
