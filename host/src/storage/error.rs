//! Why a location could not be used: [`StorageError`], each naming the
//! location, and an object store's failure in words a user can act on.

use std::path::Path;

use thiserror::Error;
use url::Url;

use crate::kind::Kind;

/// Why a location could not be used. Each names the location.
#[derive(Debug, Error)]
pub enum StorageError {
    /// The text is not a location idem can use.
    #[error("`{location}` is not a usable location: {detail}")]
    BadLocation {
        /// What was given.
        location: String,
        /// What is wrong.
        detail: String,
    },
    /// Nothing at the location.
    #[error("`{0}` does not exist: check the path or URL")]
    NotFound(String),
    /// The store answered, but refused or failed.
    #[error("{what} `{url}`{endpoint}: {detail}")]
    Store {
        /// What idem was doing.
        what: String,
        /// The location.
        url: String,
        /// The endpoint, when not the default one.
        endpoint: String,
        /// The cause and the fix.
        detail: String,
    },
    /// The store cannot make the writes a commit needs safe.
    #[error(
        "refusing to commit to `{url}`{endpoint}: {detail}. Without conditional writes (PUT If-None-Match) two hosts could overwrite each other's Delta log entries; idem never falls back to an unsafe rename. Use a store that supports them (AWS S3, MinIO, Cloudflare R2, GCS, Azure) or a local path"
    )]
    Unsafe {
        /// The table.
        url: String,
        /// The endpoint.
        endpoint: String,
        /// What the probe saw.
        detail: String,
    },
    /// A symlinked directory that leads outside the root being listed.
    #[error(
        "`{path}` is a symlink to {target}, outside the dataset root {root}: idem reads only files inside the root; copy the data in or point --input at its real location"
    )]
    Outside {
        /// The link.
        path: String,
        /// Where it leads.
        target: String,
        /// The root.
        root: String,
    },
    /// A setting in the environment is not one idem can use.
    #[error("{0}")]
    Setting(String),
    /// Local I/O.
    #[error("{what} `{path}`: {source}")]
    Io {
        /// What idem was doing.
        what: String,
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

impl StorageError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            StorageError::BadLocation { .. }
            | StorageError::NotFound(_)
            | StorageError::Outside { .. }
            | StorageError::Setting(_) => Kind::Input,
            StorageError::Store { .. } | StorageError::Unsafe { .. } | StorageError::Io { .. } => {
                Kind::Storage
            }
        }
    }
}

/// A local I/O error while `what`ing `path`.
pub(super) fn io_error(what: &str, path: &Path) -> impl Fn(std::io::Error) -> StorageError {
    let (what, path) = (what.to_string(), path.display().to_string());
    move |source| StorageError::Io {
        what: what.clone(),
        path: path.clone(),
        source,
    }
}

/// An object-store failure in words a user can act on, from the error's
/// kind and its source chain (not from the text of the URL).
pub fn explain(url: &Url, e: &object_store::Error) -> String {
    let mut chain = String::new();
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    while let Some(c) = cur {
        chain.push_str(&c.to_string());
        chain.push('\n');
        cur = c.source();
    }
    let has = |needles: &[&str]| needles.iter().any(|n| chain.contains(n));
    let hint = if has(&["<Code>NoSuchBucket</Code>"]) {
        format!(
            "the bucket `{}` does not exist: create it or fix the URL",
            url.host_str().unwrap_or("")
        )
    } else if matches!(
        e,
        object_store::Error::Unauthenticated { .. } | object_store::Error::PermissionDenied { .. }
    ) || has(&[
        "<Code>InvalidAccessKeyId</Code>",
        "<Code>SignatureDoesNotMatch</Code>",
        "<Code>AccessDenied</Code>",
    ]) {
        "access was refused: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the GOOGLE_/AZURE_ credentials) and the bucket's policy".into()
    } else if has(&[
        "Connection refused",
        "tcp connect error",
        "dns error",
        "failed to lookup address",
        "error trying to connect",
        "operation timed out",
        "connection reset",
    ]) {
        "the endpoint cannot be reached: check AWS_ENDPOINT_URL (and AWS_ALLOW_HTTP=true for http://)".into()
    } else {
        return e.to_string();
    };
    format!("{hint} ({e})")
}
