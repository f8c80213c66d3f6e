//! Where an Iceberg table is: a SQL catalog in a SQLite file and the
//! table's name there (`iceberg+sqlite://PATH#NAMESPACE.TABLE`, optionally
//! `?warehouse=URL&catalog=NAME`), and the table's folder.

use std::path::PathBuf;

use url::Url;

use crate::table::error::TableError;

/// The scheme prefix of Iceberg table locations.
pub const PREFIX: &str = "iceberg+sqlite://";

/// Whether `location` names an Iceberg table.
pub fn is_iceberg(location: &str) -> bool {
    location.starts_with("iceberg+")
}

/// Where an Iceberg table is: its catalog and its name there.
#[derive(Debug, Clone)]
pub struct Location {
    /// The SQLite catalog file.
    pub(super) db: PathBuf,
    /// `catalog_name` in the catalog's tables.
    pub(super) catalog: String,
    pub(super) namespace: String,
    pub(super) name: String,
    /// The table's folder (ends with `/`).
    pub(super) table_url: Url,
}

fn bad(location: &str, why: impl std::fmt::Display) -> TableError {
    TableError::Location {
        location: location.into(),
        detail: format!(
            "{why} (an Iceberg table is iceberg+sqlite://CATALOG.db#NAMESPACE.TABLE, optionally ?warehouse=URL&catalog=NAME)"
        ),
    }
}

impl Location {
    /// The table's folder.
    pub fn url(&self) -> &Url {
        &self.table_url
    }

    /// The location in one spelling (absolute catalog path, warehouse
    /// URL, catalog name): what a manifest records; it parses back to
    /// this table.
    pub fn canonical(&self) -> String {
        const QUERY: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
            .add(b' ')
            .add(b'#')
            .add(b'&')
            .add(b'%')
            .add(b'?')
            .add(b'=');
        let warehouse = self
            .table_url
            .join("../..")
            .map(|u| u.to_string())
            .unwrap_or_default();
        format!(
            "{PREFIX}{}?warehouse={}&catalog={}#{}.{}",
            self.db.display(),
            percent_encoding::utf8_percent_encode(&warehouse, QUERY),
            percent_encoding::utf8_percent_encode(&self.catalog, QUERY),
            self.namespace,
            self.name
        )
    }

    /// Parse `iceberg+sqlite://PATH[?warehouse=URL&catalog=NAME]#NS.TABLE`.
    pub fn parse(location: &str) -> Result<Self, TableError> {
        let Some(rest) = location.strip_prefix(PREFIX) else {
            return Err(bad(
                location,
                "only SQL catalogs on SQLite are supported (iceberg+sqlite://)",
            ));
        };
        let (rest, ident) = rest
            .rsplit_once('#')
            .ok_or_else(|| bad(location, "no table name after `#`"))?;
        let (namespace, name) = ident
            .rsplit_once('.')
            .filter(|(n, t)| !n.is_empty() && !t.is_empty())
            .ok_or_else(|| bad(location, format!("`{ident}` is not NAMESPACE.TABLE")))?;
        let ok = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        };
        if !ok(namespace) || !ok(name) {
            return Err(bad(
                location,
                format!("`{ident}`: names may use letters, digits, `_`, `-` and `.`"),
            ));
        }
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() {
            return Err(bad(location, "no catalog file"));
        }
        // One spelling per file (symlinks and `..` resolved where the
        // folder exists): the run key records it.
        let db = std::path::absolute(path).map_err(|e| bad(location, e))?;
        let db = match (db.parent(), db.file_name()) {
            (Some(dir), Some(name)) => crate::storage::canonical_best_effort(dir).join(name),
            _ => db,
        };
        let mut warehouse = None;
        let mut catalog = "idem".to_string();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_encoding::percent_decode_str(v)
                .decode_utf8()
                .map_err(|e| bad(location, e))?
                .to_string();
            match k {
                "warehouse" => warehouse = Some(v),
                "catalog" if !v.is_empty() => catalog = v,
                _ => return Err(bad(location, format!("unknown option `{k}`"))),
            }
        }
        let warehouse = match warehouse {
            Some(w) => crate::storage::locate(&w)?,
            None => crate::storage::locate(
                db.parent()
                    .unwrap_or(std::path::Path::new("/"))
                    .join("warehouse")
                    .to_str()
                    .ok_or_else(|| bad(location, "the catalog path is not UTF-8"))?,
            )?,
        };
        let table_url = crate::storage::as_dir(&warehouse)
            .join(&format!("{namespace}.db/{name}/"))
            .map_err(|e| bad(location, e))?;
        Ok(Location {
            db,
            catalog,
            namespace: namespace.to_string(),
            name: name.to_string(),
            table_url,
        })
    }
}

/// A table location as written in Iceberg metadata (`file:///raw path`,
/// unencoded, or a URL) as a folder URL.
pub(super) fn folder_url(location: &str) -> Result<Url, String> {
    let url = match location.strip_prefix("file://") {
        Some(path) => {
            Url::from_directory_path(path).map_err(|_| "not an absolute path".to_string())?
        }
        None if location.starts_with('/') => {
            Url::from_directory_path(location).map_err(|_| "not an absolute path".to_string())?
        }
        None => Url::parse(location).map_err(|e| e.to_string())?,
    };
    Ok(crate::storage::as_dir(&url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_with_defaults_and_options() {
        let l = Location::parse("iceberg+sqlite:///tmp/x/cat.db#sales.orders").unwrap();
        assert_eq!(l.db, PathBuf::from("/tmp/x/cat.db"));
        assert_eq!(l.catalog, "idem");
        assert_eq!((l.namespace.as_str(), l.name.as_str()), ("sales", "orders"));
        assert_eq!(
            l.table_url.as_str(),
            "file:///tmp/x/warehouse/sales.db/orders/"
        );
        let l =
            Location::parse("iceberg+sqlite:///tmp/x/cat.db?warehouse=/data/wh&catalog=prod#a.b.t")
                .unwrap();
        assert_eq!(l.catalog, "prod");
        assert_eq!(l.namespace, "a.b");
        assert_eq!(l.table_url.as_str(), "file:///data/wh/a.b.db/t/");
        // The canonical spelling parses back to the same table.
        let c = l.canonical();
        assert_eq!(
            c,
            "iceberg+sqlite:///tmp/x/cat.db?warehouse=file:///data/wh/&catalog=prod#a.b.t"
        );
        let again = Location::parse(&c).unwrap();
        assert_eq!(again.canonical(), c);
        assert_eq!(again.table_url, l.table_url);
        for bad in [
            "iceberg+sqlite:///tmp/cat.db",
            "iceberg+sqlite:///tmp/cat.db#t",
            "iceberg+rest://host#a.b",
            "iceberg+sqlite:///tmp/cat.db?color=red#a.b",
            "iceberg+sqlite:///tmp/cat.db#a.b c",
        ] {
            let e = Location::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains("iceberg+sqlite://CATALOG.db#NAMESPACE.TABLE"),
                "{bad}: {e}"
            );
        }
    }
}
