//! A real PostgreSQL server on 127.0.0.1 for the tests: Debian's
//! `postgresql` (installed by scripts/test), a fresh cluster made by
//! `initdb` in a temporary folder, password authentication (SCRAM), no
//! Unix socket. Started as the `postgres` user when the tests run as
//! root (PostgreSQL refuses root). Stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The superuser the cluster is made with, its password, the database.
pub const USER: &str = "idem";
pub const PASSWORD: &str = "s3cret-for-tests";
pub const DB: &str = "lake";

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
}

/// Where the server's programs are: `IDEM_PG_BIN`, else the newest
/// /usr/lib/postgresql/N/bin.
fn bin() -> PathBuf {
    if let Some(b) = std::env::var_os("IDEM_PG_BIN") {
        return PathBuf::from(b);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("pg_ctl").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b).unwrap_or_else(|| {
        panic!(
            "PostgreSQL's server is not installed (no /usr/lib/postgresql/N/bin/pg_ctl): \
             scripts/test installs Debian's `postgresql`; or set IDEM_PG_BIN"
        )
    })
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// `program` from the server's folder, as the `postgres` user under root.
fn server_cmd(bin: &Path, program: &str) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    }
}

fn ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Start the cluster in `data` on `port` (waiting until it answers).
fn start(bin: &Path, data: &Path, log: &Path, port: u16) -> Result<(), String> {
    let out = server_cmd(bin, "pg_ctl")
        .arg("-D")
        .arg(data)
        .arg("-l")
        .arg(log)
        .args(["-w", "-t", "60", "-o"])
        .arg(format!(
            "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories='' -c fsync=off -c max_connections=200"
        ))
        .arg("start")
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(log).unwrap_or_default()
    ))
}

impl Postgres {
    /// A fresh cluster with database [`DB`], listening on a free port.
    pub fn start() -> Postgres {
        let bin = bin();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        if is_root() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            ok(
                Command::new("chown")
                    .args(["-R", "postgres"])
                    .arg(dir.path()),
                "chown",
            );
        }
        ok(
            server_cmd(&bin, "initdb")
                .arg("-D")
                .arg(&data)
                .args([
                    "-U",
                    USER,
                    "--auth=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ])
                .arg(format!("--pwfile={}", pwfile.display())),
            "initdb",
        );
        // A port just freed may be taken again before the server binds
        // it: another one then.
        let mut attempt = 0;
        let port = loop {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            match start(&bin, &data, &dir.path().join("log"), port) {
                Ok(()) => break port,
                Err(e) if attempt < 3 => {
                    attempt += 1;
                    eprintln!("PostgreSQL did not start on port {port} ({e}): another port");
                }
                Err(e) => panic!("pg_ctl start: {e}"),
            }
        };
        let pg = Postgres { dir, bin, port };
        pg.psql("postgres", &format!("CREATE DATABASE {DB}"));
        pg
    }

    /// Run `sql` in `db` with psql; its output (unaligned, tuples only).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        ok(
            Command::new(self.bin.join("psql"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    USER,
                    "-d",
                    db,
                ])
                .args(["-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
                .env("PGPASSWORD", PASSWORD),
            &format!("psql {sql}"),
        )
    }

    /// The variables idem connects with (the password, as for libpq).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![("PGPASSWORD", PASSWORD.to_string())]
    }

    /// The idem location of table `ident` (`NAMESPACE.TABLE`) in this
    /// server's catalog, its files under `warehouse`.
    pub fn table(&self, warehouse: &str, ident: &str) -> String {
        format!(
            "iceberg+postgres://{USER}@127.0.0.1:{}/{DB}?warehouse={warehouse}#{ident}",
            self.port
        )
    }

    /// The SQLAlchemy URI PyIceberg's SqlCatalog opens the same catalog
    /// with.
    pub fn sqlalchemy_uri(&self) -> String {
        format!(
            "postgresql+psycopg2://{USER}:{PASSWORD}@127.0.0.1:{}/{DB}",
            self.port
        )
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = server_cmd(&self.bin, "pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}
