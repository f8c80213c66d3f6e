//! Conditional writes: proof that a store refuses to overwrite an object
//! (`PUT If-None-Match: *`) before idem commits there.

use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::client::endpoint_of;
use super::error::StorageError;
use super::runtime::block;
use super::store::Store;

impl Store {
    /// Prove that the store refuses to overwrite with a conditional PUT
    /// (what keeps two hosts from overwriting each other's Delta log
    /// entries): create a probe object twice under `_idem/probe/`; the
    /// second must be refused. Local directories always can.
    pub fn check_conditional_put(&self) -> Result<(), StorageError> {
        if self.local_dir().is_some() {
            return Ok(());
        }
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| StorageError::BadLocation {
            location: self.url.to_string(),
            detail: format!("no randomness for the probe: {e}"),
        })?;
        let rel = format!("_idem/probe/{}", hex::encode(nonce));
        let p = self.path(&rel)?;
        let inner = self.inner.clone();
        let unsafe_ = |detail: String| StorageError::Unsafe {
            url: self.url.to_string(),
            endpoint: endpoint_of(&self.url),
            detail,
        };
        let r = block(async move {
            let create = || PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            };
            let first = inner
                .put_opts(&p, PutPayload::from_static(b"1"), create())
                .await;
            let second = match &first {
                Ok(_) => Some(
                    inner
                        .put_opts(&p, PutPayload::from_static(b"2"), create())
                        .await,
                ),
                Err(_) => None,
            };
            let _ = inner.delete(&p).await;
            (first, second)
        });
        match r {
            (Err(object_store::Error::NotImplemented { .. }), _) => Err(unsafe_(
                "the store does not implement conditional writes".into(),
            )),
            (Err(e), _) => Err(self.fail("writing", &rel, e)),
            (Ok(_), Some(Err(object_store::Error::AlreadyExists { .. })))
            | (Ok(_), Some(Err(object_store::Error::Precondition { .. }))) => Ok(()),
            (Ok(_), Some(Ok(_))) => Err(unsafe_(
                "it accepted a second PUT If-None-Match: * of the same object (it ignores the condition)".into(),
            )),
            (Ok(_), Some(Err(e))) => Err(self.fail("writing", &rel, e)),
            (Ok(_), None) => unreachable!("a second put follows a first that succeeded"),
        }
    }
}
