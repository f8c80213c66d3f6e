//! Locations: what a user typed parsed into a URL (a path made absolute
//! and canonical), and the arithmetic of directory URLs: joining,
//! containment, the store two URLs share.

use std::path::{Component, Path, PathBuf};

use url::Url;

use super::error::StorageError;

/// Parse what a user typed: a URL with a scheme idem supports, or a path
/// (made absolute and canonical as far as it exists).
pub fn locate(location: &str) -> Result<Url, StorageError> {
    let bad = |detail: String| StorageError::BadLocation {
        location: location.into(),
        detail,
    };
    if location.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if location.contains("://") {
        let url = Url::parse(location).map_err(|e| bad(e.to_string()))?;
        return match url.scheme() {
            "file" => {
                let p = url
                    .to_file_path()
                    .map_err(|_| bad("not a local file URL".into()))?;
                file_url(location, &canonical_best_effort(&p))
            }
            "s3" | "s3a" | "gs" | "az" | "abfs" | "abfss" | "adl" | "azure" => {
                if url.host_str().unwrap_or("").is_empty() {
                    return Err(bad(format!(
                        "no bucket or container: write {}://BUCKET/path",
                        url.scheme()
                    )));
                }
                Ok(url)
            }
            other => Err(bad(format!(
                "the scheme `{other}` is not supported (use a path, file://, s3://, gs:// or az://)"
            ))),
        };
    }
    file_url(location, &canonical_best_effort(Path::new(location)))
}

fn file_url(location: &str, p: &Path) -> Result<Url, StorageError> {
    Url::from_file_path(p).map_err(|_| StorageError::BadLocation {
        location: location.into(),
        detail: "it does not resolve to an absolute path (is the working directory gone?)".into(),
    })
}

/// The canonical form of `p` as far as it exists, with the rest appended
/// (a table directory is created by its first commit).
pub fn canonical_best_effort(p: &Path) -> PathBuf {
    let mut cur = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .unwrap_or_default();
    for c in p.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => cur = PathBuf::from(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                cur.pop();
            }
            Component::Normal(n) => {
                let next = cur.join(n);
                cur = std::fs::canonicalize(&next).unwrap_or(next);
            }
        }
    }
    cur
}

/// `url` as a directory (ends with `/`), so relative names join below it.
pub fn as_dir(url: &Url) -> Url {
    let mut u = url.clone();
    if !u.path().ends_with('/') {
        let p = format!("{}/", u.path());
        u.set_path(&p);
    }
    u
}

/// Does the directory `outer` contain `inner` (or equal it)? Both on the
/// same store, compared by path segments.
pub fn contains(outer: &Url, inner: &Url) -> bool {
    if !same_store(outer, inner) {
        return false;
    }
    // Decoded, so `%C3%A9`, `%c3%a9` and `é` are one segment.
    let seg = |u: &Url| -> Vec<String> {
        u.path()
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| decode_segment(s).unwrap_or_else(|_| s.to_string()))
            .collect()
    };
    let (o, i) = (seg(outer), seg(inner));
    i.len() >= o.len() && i[..o.len()] == o[..]
}

/// Do two URLs name objects of one store (scheme, bucket or container,
/// account, port)? `s3a` is `s3`.
pub fn same_store(a: &Url, b: &Url) -> bool {
    let scheme = |u: &Url| match u.scheme() {
        "s3a" => "s3".to_string(),
        s => s.to_string(),
    };
    (scheme(a), a.host_str(), a.port(), a.username())
        == (scheme(b), b.host_str(), b.port(), b.username())
}

/// Percent-decode one URL path segment into the object name it stands for.
pub fn decode_segment(s: &str) -> Result<String, StorageError> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| StorageError::BadLocation {
            location: s.into(),
            detail: "not UTF-8 once percent-decoded".into(),
        })
}

/// A file's URL as (its directory, its name).
pub fn split_last(url: &Url) -> (Url, String) {
    let name = url
        .path_segments()
        .and_then(|mut s| s.next_back())
        .unwrap_or("")
        .to_string();
    let dir = url.join("./").unwrap_or_else(|_| url.clone());
    let name = decode_segment(&name).unwrap_or(name);
    (dir, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_to_urls() {
        let d = tempfile::tempdir().unwrap();
        let u = locate(d.path().to_str().unwrap()).unwrap();
        assert_eq!(u.scheme(), "file");
        assert_eq!(
            locate("s3://bucket/a/b").unwrap().as_str(),
            "s3://bucket/a/b"
        );
        assert!(locate("ftp://x/y").is_err());
        assert!(locate("s3:///nobucket").is_err());
        assert!(locate("").is_err());
    }

    #[test]
    fn containment_is_by_whole_segments() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(contains(&u("s3://b/data/"), &u("s3://b/data/t/")));
        assert!(!contains(&u("s3://b/data/"), &u("s3://b/database/")));
        assert!(!contains(&u("s3://b/data/"), &u("s3://c/data/")));
        assert!(!contains(&u("s3://b/data/"), &u("file:///data/")));
        assert!(contains(&u("s3://b/caf%C3%A9/"), &u("s3://b/caf%c3%a9/x")));
        assert!(contains(&u("s3://b/A/"), &u("s3a://b/%41/x")));
    }
}
