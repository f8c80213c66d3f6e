//! Which [`object_store`] client serves a URL, configured from the
//! environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`), with bounded retries.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path as ObjPath;
use object_store::{BackoffConfig, ObjectStore, RetryConfig};
use url::Url;

use super::error::StorageError;

/// The object-store configuration in effect for `url`, from the
/// environment: the endpoint (for messages).
pub fn endpoint_of(url: &Url) -> String {
    match url.scheme() {
        "s3" | "s3a" => std::env::var("AWS_ENDPOINT_URL")
            .or_else(|_| std::env::var("AWS_ENDPOINT"))
            .map(|e| format!(" at {e}"))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// Retries for transient failures: bounded, so an unreachable endpoint
/// fails in seconds rather than minutes.
fn retry() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 4,
        retry_timeout: Duration::from_secs(20),
    }
}

/// The store holding `url` and the path of `url` inside it. Every call
/// builds a new client (cheap next to the requests it makes).
pub fn object_store_for(url: &Url) -> Result<(Arc<dyn ObjectStore>, ObjPath), StorageError> {
    let bad = |detail: String| StorageError::BadLocation {
        location: url.to_string(),
        detail,
    };
    let path = ObjPath::from_url_path(url.path()).map_err(|e| bad(e.to_string()))?;
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "file" => Arc::new(object_store::local::LocalFileSystem::new()),
        "s3" | "s3a" => {
            let mut u = url.clone();
            let _ = u.set_scheme("s3");
            Arc::new(
                AmazonS3Builder::from_env()
                    .with_url(u.as_str())
                    .with_conditional_put(S3ConditionalPut::ETagMatch)
                    .with_retry(retry())
                    .build()
                    .map_err(|e| bad(e.to_string()))?,
            )
        }
        "gs" => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry())
                .build()
                .map_err(|e| bad(e.to_string()))?,
        ),
        "az" | "abfs" | "abfss" | "adl" | "azure" => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry())
                .build()
                .map_err(|e| bad(e.to_string()))?,
        ),
        other => return Err(bad(format!("the scheme `{other}` is not supported"))),
    };
    Ok((store, path))
}
