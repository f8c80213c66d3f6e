//! Opening an Iceberg table (registering its catalog to write it),
//! re-reading its metadata, and what it is: its version, its schema, a
//! pinned snapshot to read.

use arrow::datatypes::SchemaRef;
use iceberg::spec::TableMetadata;
use url::Url;

use super::location::{Location, folder_url};
use super::schema::{arrow_fields_of, arrow_schema_of, with_field_ids};
use super::{Iceberg, catalog, ice_err, io};
use crate::table::commit::attempt_id;
use crate::table::error::TableError;

impl Iceberg {
    /// Open the table at `location`: to write it (`create`: its catalog is
    /// made now, the table by its first commit), or an existing one to
    /// read it.
    pub async fn open(location: &str, create: bool) -> Result<Self, TableError> {
        let loc = Location::parse(location)?;
        if create {
            catalog::ensure(&loc).await?;
        }
        let (store, prefix) = crate::storage::object_store_for(&loc.table_url)?;
        let mut t = Iceberg {
            location: location.to_string(),
            io: io::file_io(),
            url: loc.table_url.clone(),
            store,
            prefix,
            current: None,
            pinned: None,
            attempt: attempt_id(location)?,
            branched: None,
            commits: 0,
            loc,
        };
        t.refresh().await?;
        if !create && t.current.is_none() {
            return Err(TableError::NoTable {
                location: location.into(),
            });
        }
        Ok(t)
    }

    /// The table's folder.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The catalog entry's canonical location (what run specs name).
    pub fn canonical(&self) -> String {
        self.loc.canonical()
    }

    /// The current snapshot's sequence number (`None` before the first;
    /// an unpublished branch write's is not `main`'s).
    pub fn version(&self) -> Option<u64> {
        let m = self.metadata()?;
        m.current_snapshot()
            .map(|s| s.sequence_number().max(0) as u64)
    }

    /// Re-read the table's metadata through the catalog.
    pub async fn refresh(&mut self) -> Result<(), TableError> {
        let Some(path) = catalog::load(&self.loc).await? else {
            self.current = None;
            return Ok(());
        };
        if self.current.as_ref().is_some_and(|(p, _)| *p == path) {
            return Ok(());
        }
        let m = TableMetadata::read_from(&self.io, &path)
            .await
            .map_err(ice_err(format!("reading {path}")))?;
        let url = folder_url(m.location()).map_err(|e| TableError::Location {
            location: m.location().to_string(),
            detail: format!("the table's location in {path}: {e}"),
        })?;
        if url != self.url {
            (self.store, self.prefix) = crate::storage::object_store_for(&url)?;
            self.url = url;
        }
        self.current = Some((path, m));
        Ok(())
    }

    /// The current metadata, `None` before the table exists.
    pub(super) fn metadata(&self) -> Option<&TableMetadata> {
        self.current.as_ref().map(|(_, m)| m)
    }

    /// The sequence number of the snapshot with id `id`.
    pub fn version_of_snapshot(&self, id: i64) -> Result<u64, TableError> {
        self.refuse_unpublished(id)?;
        self.snapshot_version(id)
    }

    /// A branch write that was never published is no version to read.
    fn refuse_unpublished(&self, id: i64) -> Result<(), TableError> {
        match self.unpublished(id) {
            Some(why) => Err(TableError::Pin(format!(
                "iceberg table {}: {why}",
                self.location
            ))),
            None => Ok(()),
        }
    }

    /// The sequence number of snapshot `id`, published or not.
    fn snapshot_version(&self, id: i64) -> Result<u64, TableError> {
        self.metadata()
            .and_then(|m| m.snapshot_by_id(id))
            .map(|s| s.sequence_number().max(0) as u64)
            .ok_or_else(|| {
                TableError::Pin(format!(
                    "iceberg table {}: reading snapshot {id}: the table has no snapshot with that id (see `idem log` for the versions; expired snapshots cannot be read)",
                    self.location
                ))
            })
    }

    /// Read the table as of the snapshot with sequence number `version`
    /// (what `committed version N` names).
    pub fn load_version(&mut self, version: u64) -> Result<(), TableError> {
        let m = self.metadata().ok_or_else(|| TableError::NoTable {
            location: self.location.clone(),
        })?;
        let id = m
            .snapshots()
            .find(|s| s.sequence_number() as u64 == version)
            .map(|s| s.snapshot_id())
            .ok_or_else(|| {
                TableError::Pin(format!(
                    "iceberg table {}: reading version {version}: the table has no snapshot with that sequence number (see `idem log`; expired snapshots cannot be read)",
                    self.location
                ))
            })?;
        self.refuse_unpublished(id)?;
        self.pinned = Some(id);
        Ok(())
    }

    /// Read the table as of snapshot `id`, published or not (the audit
    /// of a branch write reads its own snapshot).
    pub fn pin_snapshot(&mut self, id: i64) -> Result<(), TableError> {
        self.snapshot_version(id)?;
        self.pinned = Some(id);
        Ok(())
    }

    /// The table's schema as Arrow (the types idem writes for each
    /// Iceberg type).
    pub fn arrow_schema(&self) -> Result<SchemaRef, TableError> {
        let m = self.metadata().ok_or(TableError::NoSchema)?;
        match self.pinned_schema() {
            Some(schema) => arrow_fields_of(schema.as_ref()),
            None => arrow_schema_of(m),
        }
    }

    /// [`Iceberg::arrow_schema`] with each column's field id (Parquet's
    /// `PARQUET:field_id`): what a read matches data files' columns by, so
    /// a renamed column keeps its values and a dropped and re-added one
    /// does not get the old ones back.
    pub fn read_columns(&self) -> Result<SchemaRef, TableError> {
        let m = self.metadata().ok_or(TableError::NoSchema)?;
        let schema = self
            .pinned_schema()
            .unwrap_or_else(|| m.current_schema().clone());
        Ok(with_field_ids(
            self.arrow_schema()?.as_ref(),
            schema.as_ref(),
        ))
    }

    /// The schema of the pinned snapshot, when it names one.
    fn pinned_schema(&self) -> Option<iceberg::spec::SchemaRef> {
        let m = self.metadata()?;
        self.pinned
            .and_then(|id| m.snapshot_by_id(id))
            .and_then(|s| s.schema_id())
            .and_then(|id| m.schema_by_id(id))
            .cloned()
    }
}
