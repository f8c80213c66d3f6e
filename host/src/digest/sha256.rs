//! Content digests: [`Digest`], the sha256 of bytes, a file or a stream,
//! always written `sha256:<64 hex>`.

use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// A content digest, always written `sha256:<64 hex>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

const PREFIX: &str = "sha256:";

impl Digest {
    /// sha256 of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self::from_hash(Sha256::digest(bytes).as_slice())
    }

    /// sha256 of a file, streamed; also returns its size.
    pub fn of_file(path: &Path) -> std::io::Result<(Self, u64)> {
        let mut f = std::fs::File::open(path)?;
        Self::of_reader(&mut f)
    }

    /// sha256 of everything `r` yields, and how many bytes that was.
    pub fn of_reader(r: &mut impl Read) -> std::io::Result<(Self, u64)> {
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            let k = r.read(&mut buf)?;
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
            n += k as u64;
        }
        Ok((Self::from_hash(h.finalize().as_slice()), n))
    }

    /// The digest a finished sha256 computation stands for.
    pub fn from_sha256(h: Sha256) -> Self {
        Self::from_hash(h.finalize().as_slice())
    }

    pub(super) fn from_hash(h: &[u8]) -> Self {
        Digest(format!("{PREFIX}{}", hex::encode(h)))
    }

    /// The full `sha256:<hex>` text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Just the hex part, for file names.
    pub fn hex(&self) -> &str {
        &self.0[PREFIX.len()..]
    }

    /// Parse `sha256:<64 hex>`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let hexpart = s
            .strip_prefix(PREFIX)
            .ok_or_else(|| format!("digest `{s}` must start with `{PREFIX}`"))?;
        if hexpart.len() != 64
            || !hexpart
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(format!(
                "digest `{s}` must be `{PREFIX}` and 64 lowercase hex digits"
            ));
        }
        Ok(Digest(s.to_string()))
    }
}

impl TryFrom<String> for Digest {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Digest::parse(&s)
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_known_vector() {
        assert_eq!(
            Digest::of_bytes(b"abc").as_str(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn parse_rejects_malformed() {
        assert!(Digest::parse("md5:abc").is_err());
        assert!(Digest::parse("sha256:xyz").is_err());
        let d = Digest::of_bytes(b"x");
        assert_eq!(Digest::parse(d.as_str()).unwrap(), d);
    }
}
