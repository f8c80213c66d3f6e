//! Object stores for delta-rs: idem's storage layer builds the store of
//! every scheme delta-rs has no factory for (s3, gs, az), so a table and
//! its inputs are reached with one configuration, and the Delta log is
//! written with delta-rs' default log store: a conditional PUT
//! (`PutMode::Create`, If-None-Match on S3) per commit, never a rename.

use std::sync::{Arc, Once};

use deltalake::DeltaResult;
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::{
    LogStore, LogStoreFactory, ObjectStoreFactory, ObjectStoreRef, StorageConfig, default_logstore,
    logstore_factories, object_store_factories,
};
use url::Url;

/// Schemes whose store idem builds.
const SCHEMES: &[&str] = &["s3", "s3a", "gs", "az", "abfs", "abfss", "adl", "azure"];

struct Stores;

impl ObjectStoreFactory for Stores {
    fn parse_url_opts(
        &self,
        url: &Url,
        _config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        crate::storage::object_store_for(url)
            .map_err(|e| deltalake::DeltaTableError::Generic(e.to_string()))
    }
}

impl LogStoreFactory for Stores {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}

/// Register idem's stores with delta-rs (once per process).
pub(super) fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let stores = Arc::new(Stores);
        for scheme in SCHEMES {
            let url = Url::parse(&format!("{scheme}://")).expect("a scheme URL");
            object_store_factories().insert(url.clone(), stores.clone());
            logstore_factories().insert(url, stores.clone());
        }
    });
}
