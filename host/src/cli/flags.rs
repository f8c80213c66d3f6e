//! Flags several commands share, declared once and flattened into each
//! command's own (`#[command(flatten)]`): the sandbox's limits, what a run
//! commits and gives its transform, and the checks an output must pass
//! before it is published.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use idem::run::Run;
use idem::sandbox::{Limits, Sandbox, SandboxConfig};
use idem::table::Mode;

/// Sandbox limits a user can set on the command line.
#[derive(Args, Debug, Clone)]
pub struct LimitArgs {
    /// Most linear memory the guest may use, in MiB.
    #[arg(long, default_value_t = 512)]
    pub max_memory_mb: usize,
    /// Most output the guest may return over the run, in MiB.
    #[arg(long, default_value_t = 65536)]
    pub max_output_mb: usize,
    /// Most rows the guest may return over the run.
    #[arg(long, default_value_t = 1 << 34)]
    pub max_output_rows: u64,
    /// Most rows in one batch the guest returns.
    #[arg(long, default_value_t = 1 << 24)]
    pub max_output_batch_rows: u64,
    /// Most MiB one batch of decoded input may hold (and any one Parquet
    /// page once decompressed); capped by --max-memory-mb.
    #[arg(long, default_value_t = 256)]
    pub max_input_batch_mb: u64,
    /// Wall-clock budget of the run, in milliseconds.
    #[arg(long, default_value_t = 300_000)]
    pub deadline_ms: u64,
    /// Deterministic CPU budget in fuel units (costs ~2x; off by default).
    #[arg(long)]
    pub fuel: Option<u64>,
    /// Largest module accepted, in MiB (checked before it is compiled).
    #[arg(long, default_value_t = 64)]
    pub max_module_mb: usize,
    /// Wall-clock budget for compiling the module, in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    pub compile_deadline_ms: u64,
    /// Compiled-code cache directory (default: $IDEM_CACHE_DIR or ~/.cache/idem).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
}

impl LimitArgs {
    pub fn sandbox(&self) -> Result<Sandbox> {
        let mut cfg = SandboxConfig {
            limits: Limits {
                max_memory_bytes: self.max_memory_mb << 20,
                max_output_bytes: self.max_output_mb << 20,
                max_output_rows: self.max_output_rows,
                max_output_batch_rows: self.max_output_batch_rows,
                max_input_batch_bytes: self.max_input_batch_mb.saturating_mul(1 << 20),
                deadline_ms: self.deadline_ms,
                fuel: self.fuel,
                max_module_bytes: self.max_module_mb.saturating_mul(1 << 20),
                compile_deadline_ms: self.compile_deadline_ms,
                ..Limits::default()
            },
            ..SandboxConfig::default()
        };
        if let Some(d) = &self.cache_dir {
            cfg.cache_dir = Some(d.clone());
        }
        Ok(Sandbox::new(cfg)?)
    }
}

/// How a run commits and what its transform is given: the flags `run`,
/// `explain` and `backfill` share (`backfill` words two of them its own
/// way: see its `mut_arg`s).
#[derive(Args, Debug)]
pub struct RunFlags {
    /// overwrite-partition (default with --partition), merge or append.
    #[arg(long)]
    pub mode: Option<String>,
    /// Merge key columns, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub key: Vec<String>,
    /// Transform parameters as JSON.
    #[arg(long, default_value = "{}")]
    pub params: String,
    /// What output columns the table does not have do: `fail` (the run
    /// fails, naming them) or `append-new-columns` (added to the table,
    /// nullable, in the same commit; rows committed before read null). A
    /// column whose type changed is refused either way.
    #[arg(long, value_name = "POLICY", default_value = "fail")]
    pub on_schema_change: idem::table::SchemaChange,
    /// A side input (repeatable): a table the transform reads whole beside
    /// the slice, by NAME (`ctx.side_input("NAME")`), e.g. a dimension to
    /// join with: NAME=TABLE (a Delta or Iceberg table at its current
    /// version, pinned when the run starts; a backfill pins and hashes it
    /// once for every slice), NAME=TABLE@VERSION, or NAME=FILE.parquet /
    /// NAME=DIR (its .parquet files). Pinned and hashed into the run key
    /// like the slice: a changed dimension reruns the slices that read
    /// the old one.
    #[arg(long = "side", value_name = "NAME=TABLE[@V]")]
    pub sides: Vec<idem::run::SideSpec>,
}

impl RunFlags {
    /// `--mode` and `--key` as a mode, for the slice `names` (see
    /// [`idem::run::NamedSlice::mode`]).
    pub fn mode(&self, names: &idem::run::NamedSlice) -> Result<Option<Mode>> {
        Ok(names.mode(self.mode.as_deref(), &self.key)?)
    }
}

/// Write-audit-publish: what an output must pass before it is published
/// (`run`, `explain` and `backfill`).
#[derive(Args, Debug)]
pub struct PublishArgs {
    /// An expectation the output must meet before it is published
    /// (repeatable): not_null(col), unique(col[,col]), rows(MIN..MAX),
    /// between(col, MIN, MAX), in(col, a|b|c). A run that fails one
    /// publishes nothing and exits 1.
    #[arg(long = "expect", value_name = "CHECK")]
    pub expect: Vec<idem::expect::Expectation>,
    /// An audit module: a transform that reads the staged output and
    /// returns rows `pass: bool, reason: text`; the output is published
    /// only when every row passes.
    #[arg(long)]
    pub audit_module: Option<PathBuf>,
    /// The audit module's params (JSON).
    #[arg(long, default_value = "{}", requires = "audit_module")]
    pub audit_params: String,
    /// Write-audit-publish on an Iceberg branch: commit the output to
    /// branch NAME, audit the branch's rows (--expect, --audit-module),
    /// then fast-forward main to it. A failed audit leaves main as it was
    /// and the branch to inspect.
    #[arg(long, value_name = "NAME")]
    pub wap_branch: Option<String>,
    /// As --wap-branch, on a branch per slice: `wap/<slice id>`.
    #[arg(long, conflicts_with = "wap_branch")]
    pub wap: bool,
}

impl PublishArgs {
    /// `run` with these checks.
    pub fn apply(&self, run: Run) -> Run {
        let wap = match (self.wap, &self.wap_branch) {
            (true, _) => Some(None),
            (false, name) => name.clone().map(Some),
        };
        run.expect(self.expect.clone())
            .audit_module(self.audit_module.clone(), self.audit_params.clone())
            .wap(wap)
    }
}

/// How text inputs (CSV, TSV, JSON lines) are read (`run`, `explain`,
/// `backfill`).
#[derive(Args, Debug, Clone)]
pub struct TextArgs {
    /// The columns of CSV, TSV or JSON-lines inputs, by name, with their
    /// types: a JSON list like '[{"name":"id","type":"int64"}]', or a file
    /// holding one. Without it, the schema is inferred from all the
    /// slice's rows (and recorded in the manifest).
    #[arg(long, value_name = "JSON|FILE", value_parser = declared_schema)]
    pub schema: Option<arrow::datatypes::SchemaRef>,
    /// Skip and count up to N rows of text inputs that do not decode (the
    /// count is in the manifest); the first bad row past N fails the run,
    /// naming its file, line and column. Default 0: the first fails it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_rejects: u64,
}

impl TextArgs {
    /// `run` reading text inputs so.
    pub fn apply(&self, run: Run) -> Run {
        run.text(idem::slice::TextOptions {
            schema: self.schema.clone(),
            max_rejects: self.max_rejects,
        })
    }
}

/// `--schema`: the JSON itself, or a file of it (at most 1 MiB).
fn declared_schema(s: &str) -> Result<arrow::datatypes::SchemaRef, String> {
    if s.trim_start().starts_with(['[', '{']) {
        return idem::slice::parse_declared(s);
    }
    let path = std::path::Path::new(s);
    let size = std::fs::metadata(path)
        .map_err(|e| {
            format!("`{s}` is neither a JSON list of columns nor a file it can read ({e})")
        })?
        .len();
    if size > 1 << 20 {
        return Err(format!(
            "`{s}` is {size} bytes: a schema file is at most 1 MiB"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading `{s}`: {e}"))?;
    idem::slice::parse_declared(&text)
}

/// Signing a run's manifests (`run`, `backfill`, `pipeline run|backfill`).
#[derive(Args, Debug, Clone)]
pub struct SignArgs {
    /// Sign each manifest with this Ed25519 private key (PKCS#8 PEM, from
    /// `idem keygen` or `openssl genpkey -algorithm ed25519`): a DSSE
    /// envelope stored beside it and named by the commit.
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
}

impl SignArgs {
    /// The key, read once.
    pub fn signer(&self) -> Result<Option<std::sync::Arc<idem::attest::SigningKey>>> {
        Ok(match &self.sign_key {
            Some(p) => Some(std::sync::Arc::new(idem::attest::SigningKey::from_file(p)?)),
            None => None,
        })
    }
}

/// Where runs send their OpenLineage events (`run`, `backfill`,
/// `pipeline run|backfill`).
#[derive(Args, Debug, Clone)]
pub struct LineageArgs {
    /// Emit OpenLineage events (START, COMPLETE, FAIL) of each run to
    /// `file:///DIR` (one JSON file per event) or
    /// `http(s)://HOST/api/v1/lineage` (POST; a bearer token from
    /// OPENLINEAGE_API_KEY). A failed delivery never fails the run.
    #[arg(long, value_name = "URL")]
    pub lineage: Option<String>,
    /// The namespace of the runs' jobs (default `idem`).
    #[arg(long, value_name = "NS", requires = "lineage")]
    pub lineage_namespace: Option<String>,
}

impl LineageArgs {
    /// The receiver, checked once.
    pub fn lineage(&self) -> Result<Option<std::sync::Arc<idem::lineage::Lineage>>> {
        Ok(match &self.lineage {
            Some(target) => Some(std::sync::Arc::new(
                idem::lineage::Lineage::new(target, self.lineage_namespace.clone())
                    .map_err(idem::run::RunError::Usage)?,
            )),
            None => None,
        })
    }
}

/// Public keys a verifier trusts (`verify`, `audit`).
#[derive(Args, Debug, Clone)]
pub struct KeyArgs {
    /// Require every manifest relied on to be signed by one of these
    /// Ed25519 public keys (SPKI PEM; repeatable).
    #[arg(long = "key", value_name = "PUB.pem")]
    pub keys: Vec<PathBuf>,
}

impl KeyArgs {
    /// The keys, read.
    pub fn keys(&self) -> Result<Vec<idem::attest::PublicKey>> {
        self.keys
            .iter()
            .map(|p| Ok(idem::attest::PublicKey::from_file(p)?))
            .collect()
    }
}
