//! Ed25519 keys as the files `openssl genpkey -algorithm ed25519` writes
//! (PKCS#8 PEM) and `openssl pkey -pubout` writes (SPKI PEM), and their
//! key id: the sha256 of the public key's SubjectPublicKeyInfo DER, in hex
//! (`openssl pkey -pubin -in PUB.pem -outform DER | sha256sum`).

use ed25519_dalek::Signer as _;
use ed25519_dalek::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey,
    spki::der::pem::LineEnding,
};
use thiserror::Error;

use crate::kind::Kind;

/// A key file is never larger than this (a PEM Ed25519 key is ~120 bytes).
const MAX_KEY_FILE: u64 = 16 << 10;

/// A key file that cannot be used.
#[derive(Debug, Error)]
pub enum KeyError {
    /// Not readable.
    #[error("cannot read key file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not an Ed25519 key in the expected PEM form.
    #[error(
        "{path} is not an Ed25519 {what} in PEM ({detail}): make a key pair with `idem keygen` or `openssl genpkey -algorithm ed25519 -out KEY.pem` (public half: `openssl pkey -in KEY.pem -pubout -out PUB.pem`)"
    )]
    Format {
        /// The file.
        path: String,
        /// `private key (PKCS#8)` or `public key (SPKI)`.
        what: &'static str,
        /// The parser's reason.
        detail: String,
    },
    /// Making a new key failed.
    #[error("cannot make a key: {0}")]
    Generate(String),
}

impl KeyError {
    /// Its kind (exit 2: the command line names a bad file).
    pub fn kind(&self) -> Kind {
        Kind::Input
    }
}

/// A private signing key and its key id.
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
    keyid: String,
}

/// A public key (who may have signed) and its key id.
#[derive(Debug, Clone)]
pub struct PublicKey {
    key: ed25519_dalek::VerifyingKey,
    keyid: String,
    /// The file it was read from (for messages).
    pub source: String,
}

/// A new key pair as PEM text.
pub struct KeyPair {
    /// PKCS#8 PEM of the private key (keep it secret).
    pub private_pem: String,
    /// SPKI PEM of the public key (give it to verifiers).
    pub public_pem: String,
    /// The key id.
    pub keyid: String,
}

fn read_pem(path: &std::path::Path) -> Result<String, KeyError> {
    use std::io::Read as _;
    let err = |source| KeyError::Read {
        path: path.display().to_string(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(err)?
        .take(MAX_KEY_FILE)
        .read_to_string(&mut text)
        .map_err(err)?;
    Ok(text)
}

fn keyid_of(key: &ed25519_dalek::VerifyingKey) -> String {
    let der = key
        .to_public_key_der()
        .expect("an Ed25519 public key always encodes");
    crate::digest::Digest::of_bytes(der.as_bytes())
        .hex()
        .to_string()
}

impl std::fmt::Debug for SigningKey {
    /// The key id only: the key itself never goes to a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", self.keyid)
    }
}

impl SigningKey {
    /// Read a PKCS#8 PEM private key file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, KeyError> {
        Self::from_pem(&read_pem(path)?, &path.display().to_string())
    }

    /// Parse PKCS#8 PEM text; `source` names it in errors.
    pub fn from_pem(pem: &str, source: &str) -> Result<Self, KeyError> {
        let key = ed25519_dalek::SigningKey::from_pkcs8_pem(pem).map_err(|e| KeyError::Format {
            path: source.to_string(),
            what: "private key (PKCS#8)",
            detail: e.to_string(),
        })?;
        let keyid = keyid_of(&key.verifying_key());
        Ok(SigningKey { key, keyid })
    }

    /// The key id of its public half.
    pub fn keyid(&self) -> &str {
        &self.keyid
    }

    /// Its public half as SPKI PEM (what verifiers are given).
    pub fn public_pem(&self) -> String {
        self.key
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .expect("an Ed25519 public key always encodes")
    }

    /// The signature of `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }
}

impl PublicKey {
    /// Read an SPKI PEM public key file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, KeyError> {
        Self::from_pem(&read_pem(path)?, &path.display().to_string())
    }

    /// Parse SPKI PEM text; `source` names it in errors.
    pub fn from_pem(pem: &str, source: &str) -> Result<Self, KeyError> {
        let key = ed25519_dalek::VerifyingKey::from_public_key_pem(pem).map_err(|e| {
            KeyError::Format {
                path: source.to_string(),
                what: "public key (SPKI)",
                detail: e.to_string(),
            }
        })?;
        Ok(PublicKey {
            keyid: keyid_of(&key),
            key,
            source: source.to_string(),
        })
    }

    /// The key id.
    pub fn keyid(&self) -> &str {
        &self.keyid
    }

    /// Whether `signature` is this key's over `message` (strict: no
    /// malleable or small-order forms).
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let Ok(sig) = ed25519_dalek::Signature::from_slice(signature) else {
            return false;
        };
        self.key.verify_strict(message, &sig).is_ok()
    }
}

impl KeyPair {
    /// A new key pair from the operating system's randomness.
    pub fn generate() -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Generate(e.to_string()))?;
        let key = ed25519_dalek::SigningKey::from_bytes(&seed);
        // PKCS#8 v1, the seed alone: what openssl writes and reads (v2,
        // with the public key, is refused by openssl and pyca/cryptography).
        let v1 = ed25519_dalek::pkcs8::KeypairBytes {
            secret_key: seed,
            public_key: None,
        };
        seed.fill(0);
        let private_pem = v1
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| KeyError::Generate(e.to_string()))?
            .to_string();
        let public = key.verifying_key();
        let public_pem = public
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| KeyError::Generate(e.to_string()))?;
        Ok(KeyPair {
            private_pem,
            public_pem,
            keyid: keyid_of(&public),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_pair_reads_back_signs_and_verifies() {
        let pair = KeyPair::generate().unwrap();
        // PKCS#8 v1 (version 0, no public key): what openssl writes.
        assert!(
            pair.private_pem.contains("\nMC4CAQAwBQYDK2VwBCIEI"),
            "{}",
            pair.private_pem
        );
        let sk = SigningKey::from_pem(&pair.private_pem, "k").unwrap();
        let pk = PublicKey::from_pem(&pair.public_pem, "p").unwrap();
        assert_eq!(sk.keyid(), pair.keyid);
        assert_eq!(pk.keyid(), pair.keyid);
        let sig = sk.sign(b"hello");
        assert!(pk.verifies(b"hello", &sig));
        assert!(!pk.verifies(b"hellO", &sig));
        assert!(!pk.verifies(b"hello", &sig[..63]));
        let other = KeyPair::generate().unwrap();
        assert_ne!(other.keyid, pair.keyid);
        let wrong = PublicKey::from_pem(&other.public_pem, "o").unwrap();
        assert!(!wrong.verifies(b"hello", &sig));
    }

    #[test]
    fn an_openssl_key_file_reads_and_a_public_key_is_not_a_private_one() {
        // `openssl genpkey -algorithm ed25519` (PKCS#8 v1, no public key).
        let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJQzq3XfJwpwHIj6t5l6qS8vi0pD5Y/8GoA9G8x4kQ1b\n-----END PRIVATE KEY-----\n";
        let sk = SigningKey::from_pem(pem, "openssl.pem").unwrap();
        assert_eq!(sk.keyid().len(), 64);
        let pair = KeyPair::generate().unwrap();
        let e = SigningKey::from_pem(&pair.public_pem, "pub.pem")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("pub.pem is not an Ed25519 private key"), "{e}");
        assert!(e.contains("idem keygen"), "{e}");
        let e = PublicKey::from_pem("junk", "j").err().unwrap().to_string();
        assert!(e.contains("j is not an Ed25519 public key"), "{e}");
    }
}
