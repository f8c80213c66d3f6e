//! Iceberg's file I/O on idem's storage layer: tables on S3, GCS or Azure
//! are read and written through the same `object_store` clients (and
//! settings: `AWS_*`, ...) as every other location idem touches; local
//! files through the `iceberg` crate's own local storage.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorage,
    OutputFile, Storage, StorageConfig, StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload};

/// The file I/O for Iceberg tables: local paths (`file:` URLs, as
/// PyIceberg writes them, unencoded) through the `iceberg` crate's local
/// storage, every other URL through `object_store`. Chosen per file, not
/// per table: a table's location is what its metadata says, wherever the
/// catalog's warehouse is.
pub(super) fn file_io() -> FileIO {
    FileIOBuilder::new(Arc::new(StoreFactory)).build()
}

fn is_local(path: &str) -> bool {
    path.starts_with("file:") || path.starts_with('/')
}

fn fail(what: &str, path: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Unexpected, format!("{what} {path}: {e}"))
}

fn locate(path: &str) -> Result<(Arc<dyn ObjectStore>, ObjPath)> {
    let url = url::Url::parse(path).map_err(|e| fail("locating", path, e))?;
    crate::storage::object_store_for(&url).map_err(|e| fail("locating", path, e))
}

/// Every object-store location, by URL.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct StoreStorage;

#[async_trait::async_trait]
#[typetag::serde]
impl Storage for StoreStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        if is_local(path) {
            return LocalFsStorage::new().exists(path).await;
        }
        let (store, p) = locate(path)?;
        match store.head(&p).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(fail("reading", path, e)),
        }
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        if is_local(path) {
            return LocalFsStorage::new().metadata(path).await;
        }
        let (store, p) = locate(path)?;
        let meta = store.head(&p).await.map_err(|e| fail("reading", path, e))?;
        Ok(FileMetadata { size: meta.size })
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        if is_local(path) {
            return LocalFsStorage::new().read(path).await;
        }
        let (store, p) = locate(path)?;
        store
            .get(&p)
            .await
            .map_err(|e| fail("reading", path, e))?
            .bytes()
            .await
            .map_err(|e| fail("reading", path, e))
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        if is_local(path) {
            return LocalFsStorage::new().reader(path).await;
        }
        let (store, p) = locate(path)?;
        Ok(Box::new(Reader {
            store,
            path: p,
            name: path.to_string(),
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        if is_local(path) {
            // Whole or not at all (a metadata file is written this way):
            // a temporary file beside it, renamed over it.
            let file = std::path::PathBuf::from(path.strip_prefix("file://").unwrap_or(path));
            let dir = file
                .parent()
                .ok_or_else(|| fail("writing", path, "no folder"))?;
            std::fs::create_dir_all(dir).map_err(|e| fail("writing", path, e))?;
            let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail("writing", path, e))?;
            std::fs::write(tmp.path(), &bs).map_err(|e| fail("writing", path, e))?;
            tmp.persist(&file)
                .map_err(|e| fail("writing", path, e.error))?;
            return Ok(());
        }
        let (store, p) = locate(path)?;
        store
            .put(&p, PutPayload::from(bs))
            .await
            .map_err(|e| fail("writing", path, e))?;
        Ok(())
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        if is_local(path) {
            return LocalFsStorage::new().writer(path).await;
        }
        let (store, p) = locate(path)?;
        Ok(Box::new(Writer {
            store,
            path: p,
            name: path.to_string(),
            parts: Vec::new(),
            closed: false,
        }))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        if is_local(path) {
            return LocalFsStorage::new().delete(path).await;
        }
        let (store, p) = locate(path)?;
        match store.delete(&p).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(fail("deleting", path, e)),
        }
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        if is_local(path) {
            return LocalFsStorage::new().delete_prefix(path).await;
        }
        let (store, p) = locate(path)?;
        let mut listed = store.list(Some(&p));
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(|e| fail("listing", path, e))?;
            match store.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(fail("deleting", path, e)),
            }
        }
        Ok(())
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> Result<()> {
        while let Some(path) = paths.next().await {
            self.delete(&path).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

#[derive(Debug)]
struct Reader {
    store: Arc<dyn ObjectStore>,
    path: ObjPath,
    name: String,
}

#[async_trait::async_trait]
impl FileRead for Reader {
    async fn read(&self, range: Range<u64>) -> Result<Bytes> {
        self.store
            .get_range(&self.path, range)
            .await
            .map_err(|e| fail("reading", &self.name, e))
    }
}

/// Buffers the file and puts it whole at `close` (manifests and manifest
/// lists are small; an object-store put is atomic).
#[derive(Debug)]
struct Writer {
    store: Arc<dyn ObjectStore>,
    path: ObjPath,
    name: String,
    parts: Vec<Bytes>,
    closed: bool,
}

#[async_trait::async_trait]
impl FileWrite for Writer {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        if self.closed {
            return Err(fail("writing", &self.name, "the file is closed"));
        }
        self.parts.push(bs);
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        if self.closed {
            return Err(fail("closing", &self.name, "the file is closed"));
        }
        self.closed = true;
        let payload: PutPayload = std::mem::take(&mut self.parts).into_iter().collect();
        self.store
            .put(&self.path, payload)
            .await
            .map_err(|e| fail("writing", &self.name, e))?;
        Ok(())
    }
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct StoreFactory;

#[typetag::serde]
impl StorageFactory for StoreFactory {
    fn build(&self, _config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        Ok(Arc::new(StoreStorage))
    }
}
