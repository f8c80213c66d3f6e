//! Reading an object whole, bounded: refused, before anything is read,
//! past [`MAX_READ_WHOLE`] (or a tighter bound).

use bytes::Bytes;
use object_store::ObjectStoreExt;

use super::error::StorageError;
use super::runtime::block;
use super::store::Store;

/// Most bytes idem reads whole from one object it needs whole: an
/// `_idem/` file, a Delta log entry, a manifest.
/// Anyone who can write the table can put a file of any size there; a
/// manifest, a run index or a commit is kilobytes, a module at most
/// `--max-module-mb`.
pub const MAX_READ_WHOLE: u64 = 256 << 20;

/// The bytes of `r`, refused when the object is larger than
/// [`MAX_READ_WHOLE`], before anything is read (the error says why).
pub async fn whole(r: object_store::GetResult) -> Result<bytes::Bytes, String> {
    whole_at_most(r, MAX_READ_WHOLE).await
}

/// [`whole`] with another bound.
pub async fn whole_at_most(r: object_store::GetResult, most: u64) -> Result<bytes::Bytes, String> {
    if r.meta.size > most {
        return Err(format!(
            "{} bytes, more than the {} MiB idem reads of such a file: it was not written by idem (remove it)",
            r.meta.size,
            most >> 20
        ));
    }
    r.bytes().await.map_err(|e| e.to_string())
}

impl Store {
    /// The whole of `rel`, `None` when it does not exist; refused, before
    /// it is read, past [`MAX_READ_WHOLE`] (a tenant's manifest, say, is
    /// kilobytes; a planted one could be gigabytes).
    pub fn get(&self, rel: &str) -> Result<Option<Bytes>, StorageError> {
        self.get_at_most(rel, MAX_READ_WHOLE)
    }

    /// [`Store::get`] with a tighter bound (a manifest a service shows).
    pub fn get_at_most(&self, rel: &str, most: u64) -> Result<Option<Bytes>, StorageError> {
        let p = self.path(rel)?;
        let inner = self.inner.clone();
        let got = block(async move {
            let r = inner.get(&p).await?;
            Ok::<_, object_store::Error>(whole_at_most(r, most).await)
        });
        match got {
            Ok(Ok(b)) => Ok(Some(b)),
            Ok(Err(detail)) => Err(StorageError::BadLocation {
                location: self.url_of(rel).to_string(),
                detail,
            }),
            Err(object_store::Error::NotFound { .. }) => self.absent(),
            Err(e) => Err(self.fail("reading", rel, e)),
        }
    }
}

/// Read a whole file named by a location (a module, a manifest).
pub fn read_location(location: &str) -> Result<Bytes, StorageError> {
    let (store, name, _) = Store::of_file(location)?;
    store
        .get(&name)?
        .ok_or_else(|| StorageError::NotFound(location.to_string()))
}
