//! Listing the objects below a directory: on an object store its keys,
//! locally a walk that never leaves its root (symlinks followed only to
//! targets inside it, each file once).

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use futures::TryStreamExt;
use url::Url;

use super::error::StorageError;
use super::runtime::block;
use super::store::Store;

/// One object found by [`Store::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Name relative to the store's directory, `/`-separated.
    pub rel: String,
    /// Size in bytes.
    pub size: u64,
}

/// What [`Store::list`] found below a directory.
#[derive(Debug, Default)]
pub struct Listing {
    /// Regular objects, sorted by name.
    pub files: Vec<Listed>,
    /// Entries not listed, each with why. Hidden and `_` entries (writer
    /// bookkeeping: `_SUCCESS`, `.crc`) are left out silently.
    pub skipped: Vec<(String, String)>,
}

impl Store {
    /// Every object below `rel_dir`, sorted. Locally, symlinks are followed
    /// only to targets inside the store's directory, each file once.
    pub fn list(&self, rel_dir: &str) -> Result<Listing, StorageError> {
        if let Some(root) = self.local_dir() {
            if !rel_dir.is_empty() {
                self.path(rel_dir)?;
            }
            let dir = root.join(rel_dir);
            let mut walk = Walk::default();
            let canon = |p: &Path, url: Url| {
                std::fs::canonicalize(p).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => StorageError::NotFound(url.to_string()),
                    _ => StorageError::Io {
                        what: "listing".into(),
                        path: p.display().to_string(),
                        source: e,
                    },
                })
            };
            let root = canon(&root, self.url.clone())?;
            let real = canon(&dir, self.url_of(rel_dir))?;
            if !real.starts_with(&root) {
                return Err(StorageError::Outside {
                    path: dir.display().to_string(),
                    target: real.display().to_string(),
                    root: root.display().to_string(),
                });
            }
            let io = |e| StorageError::Io {
                what: "listing".into(),
                path: dir.display().to_string(),
                source: e,
            };
            walk.dirs.insert(real);
            walk.list(&root, &root.join(rel_dir)).map_err(io)?;
            walk.files.sort_by(|a, b| a.rel.cmp(&b.rel));
            return Ok(Listing {
                files: walk.files,
                skipped: walk.skipped,
            });
        }
        let prefix = self.path(rel_dir)?;
        let inner = self.inner.clone();
        let p = prefix.clone();
        let metas: Vec<object_store::ObjectMeta> =
            block(async move { inner.list(Some(&p)).try_collect().await })
                .map_err(|e| self.fail_list("listing", rel_dir, e))?;
        let mut out = Listing::default();
        for m in metas {
            let Some(rest) = m.location.prefix_match(&prefix) else {
                continue;
            };
            let parts: Vec<String> = rest.map(|p| p.as_ref().to_string()).collect();
            if parts
                .iter()
                .any(|s| s.starts_with('.') || s.starts_with('_'))
            {
                continue;
            }
            let rel = if rel_dir.is_empty() {
                parts.join("/")
            } else {
                format!("{}/{}", rel_dir.trim_end_matches('/'), parts.join("/"))
            };
            out.files.push(Listed { rel, size: m.size });
        }
        out.files.sort_by(|a, b| a.rel.cmp(&b.rel));
        Ok(out)
    }
}

impl Store {
    /// The names of the directories directly below the store's directory
    /// (on an object store: the key prefixes one `/` deeper), sorted, at
    /// most `limit` of them, and how many there are in all. For messages
    /// (which partitions exist); hidden and `_` names are left out.
    pub fn folders(&self, limit: usize) -> Result<(Vec<String>, usize), StorageError> {
        let (mut names, _) = self.top_level()?;
        names.retain(|n| !n.starts_with('.') && !n.starts_with('_'));
        names.sort();
        let all = names.len();
        names.truncate(limit);
        Ok((names, all))
    }

    /// The names directly below the store's directory: its directories
    /// (key prefixes one `/` deeper) and its files, unsorted, hidden and
    /// `_` names included. One listing call, never recursive.
    pub fn top_level(&self) -> Result<(Vec<String>, Vec<String>), StorageError> {
        match self.local_dir() {
            Some(dir) => {
                let io = |e| StorageError::Io {
                    what: "listing".into(),
                    path: dir.display().to_string(),
                    source: e,
                };
                let (mut dirs, mut files) = (Vec::new(), Vec::new());
                for entry in std::fs::read_dir(&dir).map_err(io)? {
                    let entry = entry.map_err(io)?;
                    let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                        continue;
                    };
                    match entry.file_type().map_err(io)?.is_dir() {
                        true => dirs.push(name),
                        false => files.push(name),
                    }
                }
                Ok((dirs, files))
            }
            None => {
                let prefix = self.path("")?;
                let inner = self.inner.clone();
                let p = prefix.clone();
                let found = block(async move { inner.list_with_delimiter(Some(&p)).await })
                    .map_err(|e| self.fail_list("listing", "", e))?;
                let name = |p: &object_store::path::Path| p.filename().map(str::to_string);
                Ok((
                    found.common_prefixes.iter().filter_map(name).collect(),
                    found
                        .objects
                        .iter()
                        .filter_map(|o| name(&o.location))
                        .collect(),
                ))
            }
        }
    }
}

/// A local directory walk that never leaves its root.
#[derive(Default)]
struct Walk {
    files: Vec<Listed>,
    skipped: Vec<(String, String)>,
    /// Canonical directories already walked (symlink loops).
    dirs: HashSet<PathBuf>,
    /// Canonical file -> the name it was first listed under.
    seen: HashMap<PathBuf, String>,
    /// Symlinks met, followed only after every real entry was listed, so a
    /// real file always wins over a link to it.
    links: VecDeque<(PathBuf, String)>,
}

impl Walk {
    /// List `dir` (below the canonical `root`, already in `dirs`): its real
    /// tree first, then the symlinks whose targets stay inside `root`.
    fn list(&mut self, root: &Path, dir: &Path) -> std::io::Result<()> {
        self.walk(root, dir)?;
        while let Some((p, rel)) = self.links.pop_front() {
            let Ok(real) = std::fs::canonicalize(&p) else {
                self.skip(rel, "broken symlink");
                continue;
            };
            if !real.starts_with(root) {
                self.skip(rel, "symlink leaves the dataset root");
            } else if std::fs::metadata(&real)?.is_dir() {
                if self.dirs.insert(real) {
                    self.walk(root, &p)?;
                } else {
                    self.skip(rel, "symlink to a directory already read");
                }
            } else {
                self.file(rel, real)?;
            }
        }
        Ok(())
    }

    /// The real entries of `dir`, recursively, in name order; symlinks are
    /// queued.
    fn walk(&mut self, root: &Path, dir: &Path) -> std::io::Result<()> {
        let mut entries = std::fs::read_dir(dir)?.collect::<Result<Vec<_>, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name();
            if name.as_encoded_bytes().starts_with(b".")
                || name.as_encoded_bytes().starts_with(b"_")
            {
                continue;
            }
            let p = entry.path();
            let Some(rel) = p
                .strip_prefix(root)
                .unwrap_or(&p)
                .to_str()
                .map(String::from)
            else {
                self.skip(p.to_string_lossy().into_owned(), "the name is not UTF-8");
                continue;
            };
            if name.as_encoded_bytes().contains(&b'\\') {
                self.skip(rel, "a backslash in the name");
                continue;
            }
            let ty = entry.file_type()?;
            if ty.is_symlink() {
                self.links.push_back((p, rel));
            } else if ty.is_dir() {
                if self.dirs.insert(std::fs::canonicalize(&p)?) {
                    self.walk(root, &p)?;
                }
            } else if ty.is_file() {
                let real = std::fs::canonicalize(&p)?;
                self.file(rel, real)?;
            } else {
                self.skip(rel, "not a regular file");
            }
        }
        Ok(())
    }

    /// A regular file (canonically `real`): listed unless listed already.
    fn file(&mut self, rel: String, real: PathBuf) -> std::io::Result<()> {
        let meta = std::fs::metadata(&real)?;
        if !meta.is_file() {
            self.skip(rel, "not a regular file");
        } else if let Some(first) = self.seen.get(&real) {
            let why = format!("same file as {first}");
            self.skip(rel, &why);
        } else {
            self.seen.insert(real, rel.clone());
            self.files.push(Listed {
                rel,
                size: meta.len(),
            });
        }
        Ok(())
    }

    fn skip(&mut self, rel: String, why: &str) {
        self.skipped.push((rel, why.to_string()));
    }
}
