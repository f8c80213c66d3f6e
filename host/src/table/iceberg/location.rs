//! Where an Iceberg table is: a SQL catalog (in a SQLite file, or a
//! PostgreSQL database that many hosts share) and the table's name there,
//! and the table's folder:
//! `iceberg+sqlite://PATH#NAMESPACE.TABLE` (optionally
//! `?warehouse=URL&catalog=NAME`) or
//! `iceberg+postgres://[USER@]HOST[:PORT]/DB?warehouse=URL#NAMESPACE.TABLE`
//! (optionally `&catalog=NAME`).

use std::path::PathBuf;

use url::Url;

use crate::table::error::TableError;

/// The scheme prefix of Iceberg tables in a SQLite catalog.
pub const PREFIX: &str = "iceberg+sqlite://";
/// The scheme prefix of Iceberg tables in a PostgreSQL catalog.
pub const POSTGRES_PREFIX: &str = "iceberg+postgres://";

/// Whether `location` names an Iceberg table.
pub fn is_iceberg(location: &str) -> bool {
    location.starts_with("iceberg+")
}

/// The database a SQL catalog lives in.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Backend {
    /// A SQLite file (one machine).
    Sqlite(PathBuf),
    /// A PostgreSQL database (many hosts).
    Postgres(Server),
}

/// A PostgreSQL server and database. The password is never part of a
/// location (run specs and manifests record locations): it comes from
/// `PGPASSWORD`, as for libpq.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Server {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) dbname: String,
    /// The user named in the location, else `PGUSER`, else the OS user.
    pub(super) user: Option<String>,
}

impl Server {
    /// `[USER@]HOST[:PORT]/DB`, checked.
    fn parse(authority: &str) -> Result<Self, String> {
        let u = Url::parse(&format!("postgres://{authority}")).map_err(|e| e.to_string())?;
        if u.password().is_some() {
            return Err("a password in the location would be recorded in every run spec and manifest: set PGPASSWORD instead".into());
        }
        // Host names in one case (the run key records the location;
        // every host must still spell HOST:PORT/DB the same way).
        let host = match u.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string().to_ascii_lowercase(),
            None => return Err("no PostgreSQL host".into()),
        };
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|s| s.to_string())
                .map_err(|e| e.to_string())
        };
        let dbname = decode(u.path().trim_start_matches('/'))?;
        if dbname.is_empty() || dbname.contains('/') {
            return Err("no database name after the host (HOST[:PORT]/DB)".into());
        }
        let user = Some(decode(u.username())?).filter(|u| !u.is_empty());
        Ok(Server {
            host,
            port: u.port().unwrap_or(5432),
            dbname,
            user,
        })
    }

    /// `HOST:PORT/DB` without the user: who connects does not change
    /// which table it is.
    pub(super) fn address(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let db = percent_encoding::utf8_percent_encode(&self.dbname, DBNAME);
        format!("{host}:{}/{db}", self.port)
    }
}

const QUERY: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'#')
    .add(b'&')
    .add(b'%')
    .add(b'?')
    .add(b'=');
/// A database name in a location's path.
const DBNAME: &percent_encoding::AsciiSet = &QUERY.add(b'/').add(b'@').add(b':');

/// Where an Iceberg table is: its catalog and its name there.
#[derive(Debug, Clone)]
pub struct Location {
    /// The catalog's database.
    pub(super) db: Backend,
    /// `catalog_name` in the catalog's tables.
    pub(super) catalog: String,
    pub(super) namespace: String,
    pub(super) name: String,
    /// The table's folder (ends with `/`).
    pub(super) table_url: Url,
}

fn bad(location: &str, why: impl std::fmt::Display) -> TableError {
    TableError::Location {
        location: redacted(location),
        detail: format!(
            "{why} (an Iceberg table is iceberg+sqlite://CATALOG.db#NAMESPACE.TABLE, optionally ?warehouse=URL&catalog=NAME, or iceberg+postgres://[USER@]HOST[:PORT]/DB?warehouse=URL#NAMESPACE.TABLE)"
        ),
    }
}

/// `location` with the password of a PostgreSQL location's user, if
/// one was given, replaced by `***` (error messages are logged). A
/// password may hold any character, so everything from the first `:` to
/// the last `@` before the table name goes (more, if the warehouse holds
/// an `@`: never less).
pub(crate) fn redacted(location: &str) -> String {
    let Some(rest) = location.strip_prefix(POSTGRES_PREFIX) else {
        return location.into();
    };
    let head = rest.rsplit_once('#').map(|(h, _)| h).unwrap_or(rest);
    match (head.rfind('@'), head.find(':')) {
        (Some(at), Some(colon)) if colon < at => {
            format!("{POSTGRES_PREFIX}{}:***{}", &rest[..colon], &rest[at..])
        }
        _ => location.into(),
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
        let warehouse = self
            .table_url
            .join("../..")
            .map(|u| u.to_string())
            .unwrap_or_default();
        let db = match &self.db {
            Backend::Sqlite(path) => format!("{PREFIX}{}", path.display()),
            Backend::Postgres(server) => format!("{POSTGRES_PREFIX}{}", server.address()),
        };
        format!(
            "{db}?warehouse={}&catalog={}#{}.{}",
            percent_encoding::utf8_percent_encode(&warehouse, QUERY),
            percent_encoding::utf8_percent_encode(&self.catalog, QUERY),
            self.namespace,
            self.name
        )
    }

    /// Parse `iceberg+sqlite://PATH[?warehouse=URL&catalog=NAME]#NS.TABLE`
    /// or `iceberg+postgres://[USER@]HOST[:PORT]/DB?warehouse=URL[&catalog=NAME]#NS.TABLE`.
    pub fn parse(location: &str) -> Result<Self, TableError> {
        let (rest, postgres) = if let Some(rest) = location.strip_prefix(PREFIX) {
            (rest, false)
        } else if let Some(rest) = location.strip_prefix(POSTGRES_PREFIX) {
            (rest, true)
        } else {
            return Err(bad(
                location,
                "only SQL catalogs on SQLite (iceberg+sqlite://) and PostgreSQL (iceberg+postgres://) are supported",
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
        let db = if postgres {
            Backend::Postgres(Server::parse(path).map_err(|e| bad(location, e))?)
        } else {
            Backend::Sqlite(sqlite_path(path).map_err(|e| bad(location, e))?)
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
        let warehouse = match (warehouse, &db) {
            (Some(w), _) => crate::storage::locate(&w)?,
            (None, Backend::Sqlite(path)) => crate::storage::locate(
                path.parent()
                    .unwrap_or(std::path::Path::new("/"))
                    .join("warehouse")
                    .to_str()
                    .ok_or_else(|| bad(location, "the catalog path is not UTF-8"))?,
            )?,
            (None, Backend::Postgres(_)) => {
                return Err(bad(
                    location,
                    "a PostgreSQL catalog needs ?warehouse=URL (where its tables' files go: a folder every host reaches, or s3://...)",
                ));
            }
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

/// One spelling per catalog file (symlinks and `..` resolved where the
/// folder exists): the run key records it.
fn sqlite_path(path: &str) -> Result<PathBuf, std::io::Error> {
    let db = std::path::absolute(path)?;
    Ok(match (db.parent(), db.file_name()) {
        (Some(dir), Some(name)) => crate::storage::canonical_best_effort(dir).join(name),
        _ => db,
    })
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
        assert_eq!(l.db, Backend::Sqlite(PathBuf::from("/tmp/x/cat.db")));
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

    #[test]
    fn postgres_locations_name_server_database_and_table_never_a_password() {
        let l = Location::parse(
            "iceberg+postgres://ana@db.example:6432/lake?warehouse=s3://b/wh&catalog=prod#sales.orders",
        )
        .unwrap();
        let Backend::Postgres(server) = &l.db else {
            panic!("{l:?}")
        };
        assert_eq!(
            (server.host.as_str(), server.port, server.dbname.as_str()),
            ("db.example", 6432, "lake")
        );
        assert_eq!(server.user.as_deref(), Some("ana"));
        assert_eq!(l.table_url.as_str(), "s3://b/wh/sales.db/orders/");
        // The canonical spelling leaves the user out (who connects does
        // not change the table) and parses back to the same table.
        let c = l.canonical();
        assert_eq!(
            c,
            "iceberg+postgres://db.example:6432/lake?warehouse=s3://b/wh/&catalog=prod#sales.orders"
        );
        let again = Location::parse(&c).unwrap();
        assert_eq!(again.canonical(), c);
        let Backend::Postgres(s2) = &again.db else {
            panic!()
        };
        assert_eq!((s2.port, s2.user.as_deref()), (6432, None));
        // Defaults: port 5432, catalog idem; IPv6 hosts keep brackets.
        let l = Location::parse("iceberg+postgres://[::1]/d?warehouse=/wh#a.t").unwrap();
        assert_eq!(
            l.canonical(),
            "iceberg+postgres://[::1]:5432/d?warehouse=file:///wh/&catalog=idem#a.t"
        );
        // Host names in one case.
        let l = Location::parse("iceberg+postgres://DB.Example/d?warehouse=/wh#a.t").unwrap();
        assert!(
            l.canonical()
                .starts_with("iceberg+postgres://db.example:5432/d?")
        );
        // A password is never echoed, whatever it holds.
        for pw in [
            "secret", "se/cret", "se#cret", "se?cret", "se@cret", "se:cret",
        ] {
            let bad = format!("iceberg+postgres://u:{pw}@h/d?warehouse=/w#a.t");
            let e = Location::parse(&bad).unwrap_err().to_string();
            assert!(!e.contains("cret"), "{bad}: {e}");
            assert!(
                e.contains("iceberg+postgres://u:***@h/d?warehouse=/w#a.t"),
                "{bad}: {e}"
            );
        }
        for (bad, why) in [
            (
                "iceberg+postgres://u:secret@h/d?warehouse=/w#a.t",
                "PGPASSWORD",
            ),
            ("iceberg+postgres://h/d#a.t", "needs ?warehouse=URL"),
            ("iceberg+postgres://h?warehouse=/w#a.t", "no database name"),
            (
                "iceberg+postgres://h/d/e?warehouse=/w#a.t",
                "no database name",
            ),
            ("iceberg+postgres:///d?warehouse=/w#a.t", "host"),
        ] {
            let e = Location::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
