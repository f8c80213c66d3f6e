//! Pipelines: an `idem.toml` chains stages. Each stage is one idempotent
//! run per logical date. The first reads a date partition of a Parquet
//! dataset; every later one reads the previous stage's Delta table pinned
//! at the version that holds what that stage committed for the same date,
//! and only that slice's rows (`SliceSpec::Delta { slice }`). The pinned
//! version and the slice are part of the run key, so a rerun whose
//! upstream did not move is a memo hit all the way down, and a changed
//! upstream slice reruns exactly the downstream slices of its date.
//!
//! The slice id is the same at every stage (`date=2026-10-01`): the first
//! stage's partition names it, and each later stage reads the rows that
//! slice owns upstream and owns them in turn.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde::Deserialize;

use crate::backfill::{SliceResult, Status};
use crate::error::Kind;
use crate::run::{Run, RunError, RunOutcome, SliceSpec};
use crate::sandbox::Sandbox;
use crate::table::{Mode, Table, TableError};

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    pipeline: Header,
    #[serde(rename = "stage", default)]
    stages: Vec<StageConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    name: Option<String>,
}

/// One `[[stage]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct StageConfig {
    name: String,
    module: String,
    table: String,
    /// A Parquet dataset root (the first stage).
    input: Option<String>,
    /// An earlier stage whose table this one reads.
    from: Option<String>,
    /// The date's column: of the input dataset, and of the table for
    /// overwrite-partition.
    partition: Option<String>,
    mode: Option<String>,
    #[serde(default)]
    key: Vec<String>,
    params: Option<toml::Table>,
    batch_rows: Option<u32>,
    #[serde(default)]
    expect: Vec<String>,
    audit_module: Option<String>,
    audit_params: Option<toml::Table>,
}

/// Why a pipeline file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The file cannot be read.
    #[error("cannot read the pipeline file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A stage's params, mode or module was refused before anything ran.
    #[error("stage `{stage}`: {source}")]
    Stage {
        /// The stage.
        stage: String,
        /// Why.
        #[source]
        source: Box<RunError>,
    },
    /// The file is not a valid pipeline.
    #[error("{path}: {detail}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, and where.
        detail: String,
    },
}

impl PipelineError {
    /// The kind of the failure (and the CLI's exit code): a failed
    /// stage's own; anything else is the pipeline file's.
    pub fn kind(&self) -> Kind {
        match self {
            PipelineError::Stage { source, .. } => source.kind(),
            _ => Kind::Input,
        }
    }
}

/// Where a stage's rows come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A date partition `column=DATE` of a Parquet dataset.
    Dataset {
        /// The dataset root.
        root: String,
        /// The partition column.
        column: String,
    },
    /// The stage at this index: its table, at the version that holds the
    /// same slice.
    Stage(usize),
}

/// How a stage commits (the partition value is the date).
#[derive(Debug, Clone)]
enum ModeConfig {
    Append,
    Merge(Vec<String>),
    Overwrite(String),
}

/// A checked stage.
#[derive(Debug, Clone)]
pub struct Stage {
    /// Its name.
    pub name: String,
    /// The module.
    pub module: PathBuf,
    /// The target table (path or URL).
    pub table: String,
    /// Its input.
    pub source: Source,
    mode: ModeConfig,
    params: String,
    batch_rows: u32,
    expect: Vec<crate::expect::Expectation>,
    audit: Option<(PathBuf, String)>,
}

/// A checked pipeline file.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// `[pipeline] name`, or the file's stem.
    pub name: String,
    /// The stages, in run order.
    pub stages: Vec<Stage>,
    /// The slice column (the first stage's partition column).
    pub column: String,
}

/// How one stage of one date ended.
#[derive(Debug, Clone)]
pub struct StageRun {
    /// The stage.
    pub stage: String,
    /// The upstream table and the version pinned (later stages).
    pub input: Option<(String, u64)>,
    /// The outcome (`NotStarted`: an earlier stage of the date failed).
    pub result: SliceResult,
    /// The version that holds the stage's output for the date.
    pub version: Option<u64>,
}

/// Paths in the file are relative to its folder; URLs are kept.
fn locate(dir: &Path, p: &str) -> String {
    if p.contains("://") || Path::new(p).is_absolute() || dir == Path::new(".") {
        p.to_string()
    } else {
        dir.join(p).to_string_lossy().into_owned()
    }
}

fn json_text(t: &Option<toml::Table>) -> Result<String, String> {
    match t {
        None => Ok("{}".into()),
        Some(t) => Ok(to_json(&toml::Value::Table(t.clone()), "")?.to_string()),
    }
}

/// TOML as JSON, value by value: what has no JSON form (a datetime, a
/// NaN or infinite float) is refused, never passed on in some other shape.
fn to_json(v: &toml::Value, at: &str) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match v {
        toml::Value::String(s) => J::String(s.clone()),
        toml::Value::Integer(i) => J::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(J::Number)
            .ok_or_else(|| format!("`{at}` is {f}, which JSON params cannot hold"))?,
        toml::Value::Boolean(b) => J::Bool(*b),
        toml::Value::Datetime(d) => {
            return Err(format!(
                "`{at}` is a TOML date/time ({d}); params are JSON: quote it (\"{d}\")"
            ));
        }
        toml::Value::Array(items) => J::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, x)| to_json(x, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(t) => J::Object(
            t.iter()
                .map(|(k, x)| {
                    let path = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    Ok((k.clone(), to_json(x, &path)?))
                })
                .collect::<Result<_, String>>()?,
        ),
    })
}

impl Pipeline {
    /// Read and check `path`.
    pub fn load(path: &Path) -> Result<Pipeline, PipelineError> {
        let text = std::fs::read_to_string(path).map_err(|e| PipelineError::Read {
            path: path.display().to_string(),
            source: e,
        })?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Self::parse(&text, dir, path)
    }

    /// Check the text of a pipeline file whose relative paths start at `dir`.
    pub fn parse(text: &str, dir: &Path, path: &Path) -> Result<Pipeline, PipelineError> {
        let invalid = |detail: String| PipelineError::Invalid {
            path: path.display().to_string(),
            detail,
        };
        let file: FileConfig = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if file.stages.is_empty() {
            return Err(invalid(
                "no [[stage]]: a pipeline needs at least one stage (name, module, table, and input or from)".into(),
            ));
        }
        let mut stages: Vec<Stage> = Vec::new();
        let mut column = String::new();
        for (i, s) in file.stages.into_iter().enumerate() {
            let at = |detail: String| invalid(format!("stage `{}`: {detail}", s.name));
            if s.name.is_empty()
                || !s
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(invalid(format!(
                    "stage name `{}` must be letters, digits, `_` or `-`",
                    s.name
                )));
            }
            if stages.iter().any(|t| t.name == s.name) {
                return Err(at("two stages have this name".into()));
            }
            let source = match (&s.input, &s.from, i) {
                (Some(root), None, 0) => {
                    column = s.partition.clone().unwrap_or_else(|| "date".into());
                    crate::run::parse_partition(&format!("{column}=x"))
                        .map_err(|e| at(e.to_string()))?;
                    Source::Dataset {
                        root: locate(dir, root),
                        column: column.clone(),
                    }
                }
                (None, Some(up), i) if i > 0 => {
                    let j = stages.iter().position(|t| &t.name == up).ok_or_else(|| {
                        at(format!(
                            "`from = \"{up}\"` names no earlier stage (stages run in file order)"
                        ))
                    })?;
                    Source::Stage(j)
                }
                (_, _, 0) => {
                    return Err(at(
                        "the first stage reads a Parquet dataset: give `input = \"ROOT\"` (with `partition = \"date\"`), not `from`".into(),
                    ));
                }
                _ => {
                    return Err(at(
                        "a later stage reads an earlier stage's table: give `from = \"STAGE\"`, not `input`".into(),
                    ));
                }
            };
            let mode = match s.mode.as_deref().unwrap_or("overwrite-partition") {
                "append" => ModeConfig::Append,
                "merge" if s.key.is_empty() => {
                    return Err(at("mode merge needs `key = [\"COL\"]`".into()));
                }
                "merge" => ModeConfig::Merge(s.key.clone()),
                "overwrite-partition" => ModeConfig::Overwrite(match (&source, &s.partition) {
                    (_, Some(c)) => c.clone(),
                    (Source::Dataset { column, .. }, None) => column.clone(),
                    (Source::Stage(_), None) => {
                        return Err(at(
                            "overwrite-partition needs `partition = \"COLUMN\"`: the table column that holds the date".into(),
                        ));
                    }
                }),
                other => {
                    return Err(at(format!(
                        "unknown mode `{other}`: use overwrite-partition, merge or append"
                    )));
                }
            };
            if let ModeConfig::Overwrite(c) = &mode {
                crate::run::parse_partition(&format!("{c}=x")).map_err(|e| at(e.to_string()))?;
            }
            let expect = s
                .expect
                .iter()
                .map(|e| e.parse().map_err(|err| at(format!("expect `{e}`: {err}"))))
                .collect::<Result<Vec<_>, _>>()?;
            let params = json_text(&s.params).map_err(|e| at(format!("params: {e}")))?;
            let audit = match &s.audit_module {
                None if s.audit_params.is_some() => {
                    return Err(at("audit-params needs audit-module".into()));
                }
                None => None,
                Some(m) => Some((
                    PathBuf::from(locate(dir, m)),
                    json_text(&s.audit_params).map_err(|e| at(format!("audit-params: {e}")))?,
                )),
            };
            if s.batch_rows == Some(0) {
                return Err(at("batch-rows must be at least 1".into()));
            }
            stages.push(Stage {
                name: s.name.clone(),
                module: PathBuf::from(locate(dir, &s.module)),
                table: locate(dir, &s.table),
                source,
                mode,
                params,
                batch_rows: s.batch_rows.unwrap_or(8192),
                expect,
                audit,
            });
        }
        // Two stages writing one table would own each other's slices
        // (compared as URLs: `lake/x`, `./lake/x/` and file:// are one).
        let url = |t: &str| {
            crate::table::table_url(t)
                .map(|u| u.as_str().trim_end_matches('/').to_string())
                .unwrap_or_else(|_| t.to_string())
        };
        for (i, s) in stages.iter().enumerate() {
            if let Some(t) = stages[..i].iter().find(|t| url(&t.table) == url(&s.table)) {
                return Err(invalid(format!(
                    "stages `{}` and `{}` write the same table {}: give each stage its own",
                    t.name, s.name, s.table
                )));
            }
        }
        let name = file.pipeline.name.unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "pipeline".into())
        });
        Ok(Pipeline {
            name,
            stages,
            column,
        })
    }

    /// The stage called `name`.
    pub fn stage(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name == name)
    }

    /// The slice id of `date` (the same at every stage).
    pub fn slice_id(&self, date: &str) -> String {
        format!("{}={date}", self.column)
    }

    /// Stage `i`'s run for `date`, reading `upstream` (its table's version)
    /// when the stage reads an earlier one.
    fn run_of(&self, i: usize, date: &str, upstream: Option<u64>) -> Run {
        let s = &self.stages[i];
        let slice = match &s.source {
            Source::Dataset { root, column } => SliceSpec::Partition {
                root: PathBuf::from(root),
                column: column.clone(),
                value: date.to_string(),
            },
            Source::Stage(j) => SliceSpec::Delta {
                table: self.stages[*j].table.clone(),
                version: upstream.unwrap_or(0),
                partition: None,
                slice: Some(self.slice_id(date)),
            },
        };
        let mode = match &s.mode {
            ModeConfig::Append => Mode::Append,
            ModeConfig::Merge(keys) => Mode::Merge { keys: keys.clone() },
            ModeConfig::Overwrite(column) => Mode::OverwritePartition {
                column: column.clone(),
                value: date.to_string(),
            },
        };
        let (audit, audit_params) = match &s.audit {
            Some((m, p)) => (Some(m.clone()), p.clone()),
            None => (None, "{}".to_string()),
        };
        Run::new(&s.module, slice, s.table.clone())
            .mode(mode)
            .params(s.params.clone())
            .logical_date(Some(date.to_string()))
            .batch_rows(s.batch_rows)
            .expect(s.expect.clone())
            .audit_module(audit, audit_params)
    }

    /// Check every stage's params and mode and load its modules, once,
    /// before any date runs.
    pub fn preflight(&self, sandbox: &Sandbox) -> Result<(), PipelineError> {
        for i in 0..self.stages.len() {
            self.run_of(i, "2000-01-01", Some(0))
                .preflight(sandbox)
                .map_err(|e| PipelineError::Stage {
                    stage: self.stages[i].name.clone(),
                    source: Box::new(e),
                })?;
        }
        Ok(())
    }

    /// The version of stage `i`'s table that holds its current output for
    /// `date` (to pin when the stage was not run just now).
    fn holding(&self, i: usize, date: &str) -> Result<u64, RunError> {
        let s = &self.stages[i];
        let slice = self.slice_id(date);
        let rt = crate::run::runtime()?;
        let found = rt.block_on(async {
            let t = match Table::open_existing(&s.table).await {
                Ok(t) => t,
                Err(TableError::NoTable { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            t.version_of_current(&slice).await
        })?;
        found.ok_or_else(|| {
            RunError::Usage(format!(
                "stage `{}` has no committed run for {slice} in {}: run it first (idem pipeline run FILE --logical-date {date} --stage {})",
                s.name, s.table, s.name
            ))
        })
    }

    /// Run the stages for `date` in order (or only stage `only`, reading
    /// its upstream's current output for the date), each pinned to the
    /// version the previous one committed or found. A stage whose upstream
    /// failed (or was skipped) is skipped; the others still run.
    pub fn run_date(&self, date: &str, only: Option<usize>, sandbox: &Sandbox) -> Vec<StageRun> {
        let mut out = Vec::new();
        let mut held: Vec<Option<u64>> = vec![None; self.stages.len()];
        let mut ok = vec![true; self.stages.len()];
        for i in 0..self.stages.len() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            let s = &self.stages[i];
            let upstream_ok = match s.source {
                Source::Stage(j) => ok[j],
                Source::Dataset { .. } => true,
            };
            if !upstream_ok {
                ok[i] = false;
                out.push(StageRun {
                    stage: s.name.clone(),
                    input: None,
                    result: crate::backfill::not_started(date),
                    version: None,
                });
                continue;
            }
            let run = self.run_stage(i, date, &held, sandbox);
            ok[i] = matches!(run.result.status, Status::Done(_));
            held[i] = run.version;
            out.push(run);
        }
        out
    }

    /// One stage for `date`. A later stage pins its upstream's version;
    /// when, after its run, the upstream holds the date at another version
    /// (another process reran the upstream meanwhile), it runs again on
    /// that one, so the last commit is never of a stale upstream.
    fn run_stage(&self, i: usize, date: &str, held: &[Option<u64>], sandbox: &Sandbox) -> StageRun {
        let s = &self.stages[i];
        let t = Instant::now();
        let ms = || t.elapsed().as_millis() as u64;
        let upstream = match s.source {
            Source::Dataset { .. } => Ok(None),
            Source::Stage(j) => match held[j] {
                Some(v) => Ok(Some(v)),
                None => self.holding(j, date).map(Some),
            },
        };
        let mut pinned = match upstream {
            Ok(v) => v,
            Err(e) => {
                return StageRun {
                    stage: s.name.clone(),
                    input: None,
                    result: crate::backfill::result(date, Err(e), ms()),
                    version: None,
                };
            }
        };
        let mut rounds = 0;
        loop {
            rounds += 1;
            let input = match (&s.source, pinned) {
                (Source::Stage(j), Some(v)) => Some((self.stages[*j].table.clone(), v)),
                _ => None,
            };
            let outcome = self.run_of(i, date, pinned).execute(sandbox);
            let version = match &outcome {
                Ok(r) => match &r.outcome {
                    RunOutcome::Committed { version, .. } => Some(*version),
                    RunOutcome::Unchanged { since, .. } | RunOutcome::Memo { since } => match since
                    {
                        Some(v) => Some(*v),
                        None => self.holding(i, date).ok(),
                    },
                },
                Err(_) => None,
            };
            let mut result = crate::backfill::result(date, outcome, ms());
            if matches!(result.status, Status::Done(_)) && version.is_none() {
                result.status = Status::Failed(
                    format!(
                        "stage `{}`: no version of {} holds the output for {} (was its log cleaned up?)",
                        s.name,
                        s.table,
                        self.slice_id(date)
                    ),
                    crate::error::Kind::Storage,
                );
            }
            // Still the upstream's current output for the date?
            if let (Source::Stage(j), Status::Done(_), Some(v)) =
                (&s.source, &result.status, pinned)
                && rounds < 4
                && let Ok(now) = self.holding(*j, date)
                && now != v
            {
                tracing::info!(
                    "stage `{}` {}: upstream `{}` moved from version {v} to {now} during the run; running again on {now}",
                    s.name,
                    self.slice_id(date),
                    self.stages[*j].name
                );
                pinned = Some(now);
                continue;
            }
            return StageRun {
                stage: s.name.clone(),
                input,
                result,
                version,
            };
        }
    }

    /// Run the pipeline for every date, `jobs` dates at a time (each date's
    /// stages in order); `done` sees each date as it ends.
    pub fn backfill(
        &self,
        dates: &[String],
        jobs: usize,
        sandbox: &Sandbox,
        stop: &AtomicBool,
        done: &(dyn Fn(&str, &[StageRun]) + Sync),
    ) -> Vec<(String, Vec<StageRun>)> {
        let work = |date: &str| {
            let runs = self.run_date(date, None, sandbox);
            (date.to_string(), runs)
        };
        let report = |r: &(String, Vec<StageRun>)| done(&r.0, &r.1);
        crate::backfill::for_each_date(dates, jobs, stop, &work, &report)
            .into_iter()
            .zip(dates)
            .map(|(r, date)| {
                r.unwrap_or_else(|| {
                    let runs = self
                        .stages
                        .iter()
                        .map(|s| StageRun {
                            stage: s.name.clone(),
                            input: None,
                            result: crate::backfill::not_started(date),
                            version: None,
                        })
                        .collect();
                    (date.clone(), runs)
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Pipeline, String> {
        Pipeline::parse(text, Path::new("/p"), Path::new("/p/idem.toml")).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"
[pipeline]
name = "orders"

[[stage]]
name = "bronze"
module = "m/clean.wasm"
input = "raw"
mode = "append"
params = { min_amount = 0.0 }

[[stage]]
name = "silver"
module = "m/dedup.wasm"
from = "bronze"
table = "lake/silver"
mode = "merge"
key = ["event_id"]

[[stage]]
name = "gold"
module = "m/rev.wasm"
from = "silver"
table = "s3://b/gold"
partition = "date"
expect = ["not_null(customer)"]
"#;

    #[test]
    fn a_pipeline_file_is_checked_before_anything_runs() {
        // Missing table in bronze: named with its stage.
        let e = parse(GOOD).unwrap_err();
        assert!(e.contains("missing field `table`"), "{e}");
        let good = GOOD.replacen(
            "input = \"raw\"",
            "input = \"raw\"\ntable = \"lake/bronze\"",
            1,
        );
        let p = parse(&good).unwrap();
        assert_eq!(p.name, "orders");
        assert_eq!(p.column, "date");
        assert_eq!(p.slice_id("2026-10-01"), "date=2026-10-01");
        assert_eq!(p.stages[0].table, "/p/lake/bronze");
        assert_eq!(p.stages[2].table, "s3://b/gold");
        assert_eq!(p.stages[0].params, r#"{"min_amount":0.0}"#);
        assert!(matches!(p.stages[2].source, Source::Stage(1)));
        for (from, to, why) in [
            (
                "from = \"silver\"\ntable = \"s3",
                "from = \"platinum\"\ntable = \"s3",
                "names no earlier stage",
            ),
            ("key = [\"event_id\"]", "", "mode merge needs"),
            ("partition = \"date\"\n", "", "overwrite-partition needs"),
            (
                "mode = \"append\"",
                "mode = \"upsert\"",
                "unknown mode `upsert`",
            ),
            (
                "not_null(customer)",
                "not_nul(customer)",
                "expect `not_nul(customer)`",
            ),
            (
                "table = \"lake/silver\"",
                "table = \"lake/bronze\"",
                "write the same table",
            ),
            (
                "name = \"gold\"",
                "name = \"silver\"",
                "two stages have this name",
            ),
            (
                "mode = \"append\"",
                "mode = \"append\"\nschedule = \"daily\"",
                "unknown field `schedule`",
            ),
            (
                "from = \"bronze\"",
                "input = \"raw2\"",
                "give `from = \"STAGE\"`",
            ),
        ] {
            assert!(good.contains(from), "{from}");
            let e = parse(&good.replacen(from, to, 1)).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
        let e = parse("[pipeline]\nname = \"x\"\n").unwrap_err();
        assert!(e.contains("no [[stage]]"), "{e}");
        // One table however it is spelled.
        let e = parse(&good.replacen("\"lake/silver\"", "\"./lake/bronze/\"", 1)).unwrap_err();
        assert!(e.contains("write the same table"), "{e}");
        // Params without a JSON form are refused, not reshaped.
        for (params, why) in [
            ("{ since = 2026-10-01 }", "`since` is a TOML date/time"),
            ("{ x = nan }", "`x` is NaN"),
            ("{ a = { b = [1, inf] } }", "`a.b[1]` is inf"),
        ] {
            let text = good.replacen("{ min_amount = 0.0 }", params, 1);
            let e = parse(&text).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
        let text = good.replacen(
            "{ min_amount = 0.0 }",
            "{ tags = [\"a\", 1], on = true }",
            1,
        );
        assert_eq!(
            parse(&text).unwrap().stages[0].params,
            r#"{"on":true,"tags":["a",1]}"#
        );
    }
}
