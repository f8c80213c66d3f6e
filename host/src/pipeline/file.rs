//! The pipeline file: an `idem.toml` as written, and how it is checked
//! (stage by stage, before anything runs) into a [`Pipeline`].

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Pipeline, PipelineError, Side, Source, Stage};
use crate::table::Mode;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    pipeline: Header,
    #[serde(rename = "stage", default)]
    stages: Vec<StageConfig>,
    /// Tables kept outside the pipeline that stages read whole as side
    /// inputs (`from = ["silver", "NAME"]`): NAME = "TABLE[@VERSION]".
    #[serde(default)]
    sides: std::collections::BTreeMap<String, String>,
}

/// `from`: an earlier stage, or a list of them (and `[sides]` names): the
/// first is the stage's input, the others its side inputs.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FromNames {
    One(String),
    Many(Vec<String>),
}

impl FromNames {
    /// The names, the input's first.
    fn names(&self) -> Vec<&str> {
        match self {
            FromNames::One(s) => vec![s.as_str()],
            FromNames::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    name: Option<String>,
    /// Where the stages' runs send OpenLineage events (`--lineage`
    /// overrides it).
    lineage: Option<String>,
    #[serde(rename = "lineage-namespace")]
    lineage_namespace: Option<String>,
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
    /// An earlier stage whose table this one reads, or a list: that stage
    /// first, then side inputs (earlier stages or `[sides]` names).
    from: Option<FromNames>,
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
    /// The columns of a first stage's CSV, TSV or JSON-lines input
    /// (`[{ name = "id", type = "int64" }, ...]`); inferred when absent.
    schema: Option<Vec<crate::slice::ColumnRecord>>,
    /// Bad rows of its text input skipped and counted.
    max_rejects: Option<u64>,
    /// Write-audit-publish on an Iceberg branch per slice
    /// (`wap/<slice>`).
    #[serde(default)]
    wap: bool,
    /// How often a later stage of an hourly pipeline runs: `1d` (once per
    /// day, over the day's hours upstream) or `1h` (the default).
    every: Option<String>,
    /// What output columns the table lacks do: `fail` (the default) or
    /// `append-new-columns` (as `--on-schema-change`).
    on_schema_change: Option<String>,
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
        let sides = check_sides(&file.sides, dir).map_err(invalid)?;
        // Where a table is, as a folder (`None`: not a location).
        let folder = |l: &str| {
            crate::table::table_url(l)
                .ok()
                .map(|u| crate::storage::as_dir(&u))
        };
        if let Some((side, s)) = sides.iter().find_map(|t| {
            let side = folder(&t.location)?;
            let same = |s: &&StageConfig| {
                folder(&locate(dir, &s.table)).is_some_and(|f| crate::storage::contains(&f, &side))
            };
            file.stages.iter().find(same).map(|s| (t, s))
        }) {
            return Err(invalid(format!(
                "[sides] `{}` is stage `{}`'s table: read it with `from = [.., \"{}\"]`, at the version that stage left it for the date (a [sides] table is pinned once for the whole run)",
                side.name, s.name, s.name
            )));
        }
        if let Some(s) = file
            .stages
            .iter()
            .find(|s| sides.iter().any(|t| t.name == s.name))
        {
            return Err(invalid(format!(
                "[sides] names `{}`, which is also a stage: rename one (a stage is read as a side input by its name in `from`)",
                s.name
            )));
        }
        let mut stages: Vec<Stage> = Vec::new();
        for (i, s) in file.stages.into_iter().enumerate() {
            let stage = check_stage(s, i, &stages, dir, &sides).map_err(invalid)?;
            stages.push(stage);
        }
        check_tables(&stages).map_err(invalid)?;
        // The slice columns: the first stage's partition (the first
        // stage always reads a dataset).
        let columns = match &stages[0].source {
            Source::Dataset { columns, .. } => columns.clone(),
            Source::Stage(_) => Vec::new(),
        };
        check_levels(&stages, &columns).map_err(invalid)?;
        let lineage = match &file.pipeline.lineage {
            Some(target) => Some(std::sync::Arc::new(
                crate::lineage::Lineage::new(target, file.pipeline.lineage_namespace.clone())
                    .map_err(|e| invalid(format!("[pipeline] lineage: {e}")))?,
            )),
            None => None,
        };
        let name = file.pipeline.name.unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "pipeline".into())
        });
        Ok(Pipeline {
            name,
            stages,
            columns,
            signer: None,
            lineage,
            lineage_parent: None,
            pinned_sides: Default::default(),
        })
    }
}

/// The `i`th `[[stage]]` (after `earlier`) checked; an error is the
/// detail of [`PipelineError::Invalid`].
fn check_stage(
    s: StageConfig,
    i: usize,
    earlier: &[Stage],
    dir: &Path,
    sides: &[crate::run::SideSpec],
) -> Result<Stage, String> {
    check_name(&s.name)?;
    let at = |detail: String| format!("stage `{}`: {detail}", s.name);
    if earlier.iter().any(|t| t.name == s.name) {
        return Err(at("two stages have this name".into()));
    }
    let source = source_of(&s, i, earlier, dir).map_err(at)?;
    let side_inputs = sides_of(&s, earlier, sides).map_err(at)?;
    let mode = mode_of(&s, &source).map_err(at)?;
    let expect = s
        .expect
        .iter()
        .map(|e| e.parse().map_err(|err| at(format!("expect `{e}`: {err}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let params = json_text(&s.params).map_err(|e| at(format!("params: {e}")))?;
    let audit = audit_of(&s, dir).map_err(at)?;
    if s.batch_rows == Some(0) {
        return Err(at("batch-rows must be at least 1".into()));
    }
    let text = text_of(&s, &source).map_err(at)?;
    let wap = wap_of(&s).map_err(at)?;
    let daily = daily_of(&s, &source, earlier).map_err(at)?;
    let schema_change = match &s.on_schema_change {
        Some(p) => p
            .parse()
            .map_err(|e: String| at(format!("on-schema-change: {e}")))?,
        None => Default::default(),
    };
    Ok(Stage {
        name: s.name.clone(),
        module: PathBuf::from(locate(dir, &s.module)),
        table: locate(dir, &s.table),
        source,
        mode,
        params,
        batch_rows: s.batch_rows.unwrap_or(8192),
        expect,
        audit,
        text,
        wap,
        daily,
        schema_change,
        sides: side_inputs,
    })
}

/// The `[sides]` table: each NAME = "TABLE[@VERSION]", its path relative
/// to the file's folder.
fn check_sides(
    sides: &std::collections::BTreeMap<String, String>,
    dir: &Path,
) -> Result<Vec<crate::run::SideSpec>, String> {
    sides
        .iter()
        .map(|(name, location)| {
            // Located first: whether `dim@7` is a path is asked of the
            // path relative to this file, as the run will read it.
            format!("{name}={}", locate(dir, location))
                .parse()
                .map_err(|e| format!("[sides] {e}"))
        })
        .collect()
}

/// The stage's side inputs: the names after the first in `from`, each an
/// earlier stage (its table, read whole) or a `[sides]` table.
fn sides_of(
    s: &StageConfig,
    earlier: &[Stage],
    sides: &[crate::run::SideSpec],
) -> Result<Vec<Side>, String> {
    let names = s.from.as_ref().map(FromNames::names).unwrap_or_default();
    let mut out = Vec::new();
    for (k, name) in names.iter().enumerate().skip(1) {
        if names[..k].contains(name) {
            return Err(format!("`from` names `{name}` twice"));
        }
        if let Some(j) = earlier.iter().position(|t| t.name == *name) {
            crate::run::SideSpec::check_name_of_stage(name)?;
            out.push(Side::Stage(j));
        } else if let Some(spec) = sides.iter().find(|t| t.name == *name) {
            out.push(Side::Table(spec.clone()));
        } else {
            return Err(format!(
                "`from` names `{name}`, which is no earlier stage and not in [sides] (a table read whole: add `[sides]` with {name} = \"TABLE\")"
            ));
        }
    }
    if out.len() > crate::run::MAX_SIDES {
        return Err(format!(
            "{} side inputs: at most {}",
            out.len(),
            crate::run::MAX_SIDES
        ));
    }
    Ok(out)
}

/// Whether a later stage of an hourly pipeline runs once per day: its
/// `every = "1d"`, or its upstream's (a stage after a daily one is
/// daily). A first stage's slices are its partition's.
fn daily_of(s: &StageConfig, source: &Source, earlier: &[Stage]) -> Result<bool, String> {
    let hourly = match earlier.first().map(|f| &f.source) {
        Some(Source::Dataset { columns, .. }) => columns.len() == 2,
        _ => false,
    };
    let up_daily = match source {
        Source::Stage(j) => earlier[*j].daily,
        Source::Dataset { .. } => {
            if let Some(e) = &s.every {
                return Err(format!(
                    "every = \"{e}\" is for a later stage: the first stage's slices are its partition's (partition = \"date\" for days, \"date/hour\" for hours)"
                ));
            }
            return Ok(false);
        }
    };
    match s.every.as_deref() {
        None => Ok(up_daily),
        Some("1d") => Ok(hourly),
        Some("1h") if !hourly => Err(
            "every = \"1h\" needs hourly slices: give the first stage partition = \"date/hour\""
                .into(),
        ),
        Some("1h") if up_daily => Err(format!(
            "every = \"1h\", but it reads stage `{}`, which runs once per day: a stage after a daily one is daily",
            s.from
                .as_ref()
                .and_then(|f| f.names().first().map(|n| n.to_string()))
                .unwrap_or_default()
        )),
        Some("1h") => Ok(false),
        Some(e) => Err(format!(
            "every = \"{}\": give \"1d\" (once per day, over the day's hours upstream) or \"1h\" (every hour, the default of an hourly pipeline)",
            crate::text::clip_str(e, 40)
        )),
    }
}

/// The stage's write-audit-publish branch, as `Run::wap` takes it: one
/// per slice (a pipeline runs many dates), on an Iceberg table.
fn wap_of(s: &StageConfig) -> Result<Option<Option<String>>, String> {
    if !s.wap {
        return Ok(None);
    }
    if !crate::table::iceberg::is_iceberg(&s.table) {
        return Err(crate::table::NO_BRANCHES.replace("--wap-branch", "wap"));
    }
    Ok(Some(None))
}

/// How a first stage reads text inputs; a later stage reads a table.
fn text_of(s: &StageConfig, source: &Source) -> Result<crate::slice::TextOptions, String> {
    if matches!(source, Source::Stage(_)) && (s.schema.is_some() || s.max_rejects.is_some()) {
        return Err(
            "schema and max-rejects are for a first stage's CSV, TSV or JSON-lines input; this stage reads a table".into(),
        );
    }
    let schema = match &s.schema {
        Some(columns) => {
            Some(crate::slice::schema_of(columns).map_err(|e| format!("schema: {e}"))?)
        }
        None => None,
    };
    Ok(crate::slice::TextOptions {
        schema,
        max_rejects: s.max_rejects.unwrap_or(0),
    })
}

/// A stage name: letters, digits, `_` or `-`.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "stage name `{name}` must be letters, digits, `_` or `-`"
        ));
    }
    Ok(())
}

/// Where the `i`th stage reads: the first one a Parquet dataset's date
/// partitions, every later one an earlier stage's table.
fn source_of(s: &StageConfig, i: usize, earlier: &[Stage], dir: &Path) -> Result<Source, String> {
    match (&s.input, &s.from, i) {
        (Some(root), None, 0) => {
            let column = s.partition.clone().unwrap_or_else(|| "date".into());
            let columns = check_columns(&column)?;
            Ok(Source::Dataset {
                root: locate(dir, root),
                columns,
            })
        }
        (None, Some(from), i) if i > 0 => {
            let names = from.names();
            let Some(up) = names.first() else {
                return Err("`from = []` names no stage: give the stage this one reads first".into());
            };
            let j = earlier.iter().position(|t| t.name == *up).ok_or_else(|| {
                format!("`from = \"{up}\"` names no earlier stage (stages run in file order)")
            })?;
            Ok(Source::Stage(j))
        }
        (_, _, 0) => Err(
            "the first stage reads a Parquet dataset: give `input = \"ROOT\"` (with `partition = \"date\"`), not `from`".into(),
        ),
        _ => Err(
            "a later stage reads an earlier stage's table: give `from = \"STAGE\"`, not `input`".into(),
        ),
    }
}

/// How the stage commits (overwrite-partition by default). The column
/// overwrite-partition replaces is the stage's `partition`, else its
/// dataset's; the value is left empty (each date's run overwrites its
/// date).
fn mode_of(s: &StageConfig, source: &Source) -> Result<Mode, String> {
    let name = s.mode.as_deref().unwrap_or("overwrite-partition");
    let partition = || {
        let columns = match (source, &s.partition) {
            (_, Some(c)) => check_columns(c)?,
            (Source::Dataset { columns, .. }, None) => columns.clone(),
            (Source::Stage(_), None) => {
                return Err(
                    "overwrite-partition needs `partition = \"COLUMN\"`: the table column that holds the date (\"DATE_COLUMN/HOUR_COLUMN\" for hourly slices)".to_string(),
                );
            }
        };
        // The values are each slice's (see `Pipeline::run_of`).
        let levels = columns.into_iter().map(|c| (c, String::new()));
        Ok(crate::slice::Partition::of(levels.collect()))
    };
    let mode = Mode::parse(name, &s.key, partition)?
        .ok_or_else(|| format!("unknown mode `{name}`: use {}", Mode::NAMES))?;
    if mode.is_keyless_merge() {
        return Err("mode merge needs `key = [\"COL\"]`".into());
    }
    Ok(mode)
}

/// A stage's `partition`: the date's column (`date`), or the date's and
/// the hour's (`date/hour`: hourly slices), each a directory name.
fn check_columns(text: &str) -> Result<Vec<String>, String> {
    let columns: Vec<String> = text.split('/').map(String::from).collect();
    if columns.len() > 2 {
        return Err(format!(
            "partition = \"{text}\": give the date's column (\"date\"), or the date's and the hour's (\"date/hour\": the second column holds the hour, 00 to 23)"
        ));
    }
    let spelled: Vec<String> = columns.iter().map(|c| format!("{c}=x")).collect();
    crate::run::parse_partition(&spelled.join("/")).map_err(|e| e.to_string())?;
    Ok(columns)
}

/// Every overwrite-partition stage's table is partitioned by as many
/// levels as its slices have (a date, or a date and an hour).
fn check_levels(stages: &[Stage], columns: &[String]) -> Result<(), String> {
    for s in stages {
        let columns = if s.daily { &columns[..1] } else { columns };
        if let Mode::OverwritePartition { partition } = &s.mode
            && partition.levels().len() != columns.len()
        {
            return Err(format!(
                "stage `{}`: partition = \"{}\" has {} level(s), but the stage's slices are {} ({}): give as many columns, e.g. partition = \"{}\"",
                s.name,
                partition.columns().join("/"),
                partition.levels().len(),
                if columns.len() == 2 { "hours" } else { "dates" },
                columns.join("/"),
                columns.join("/")
            ));
        }
    }
    Ok(())
}

/// The audit module (its path and JSON params), if any.
fn audit_of(s: &StageConfig, dir: &Path) -> Result<Option<(PathBuf, String)>, String> {
    match &s.audit_module {
        None if s.audit_params.is_some() => Err("audit-params needs audit-module".into()),
        None => Ok(None),
        Some(m) => Ok(Some((
            PathBuf::from(locate(dir, m)),
            json_text(&s.audit_params).map_err(|e| format!("audit-params: {e}"))?,
        ))),
    }
}

/// Two stages writing one table would own each other's slices (compared
/// as URLs: `lake/x`, `./lake/x/` and file:// are one).
fn check_tables(stages: &[Stage]) -> Result<(), String> {
    let url = |t: &str| {
        crate::table::table_url(t)
            .map(|u| u.as_str().trim_end_matches('/').to_string())
            .unwrap_or_else(|_| t.to_string())
    };
    for (i, s) in stages.iter().enumerate() {
        if let Some(t) = stages[..i].iter().find(|t| url(&t.table) == url(&s.table)) {
            return Err(format!(
                "stages `{}` and `{}` write the same table {}: give each stage its own",
                t.name, s.name, s.table
            ));
        }
    }
    Ok(())
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

    /// `from` as a list: the input stage first, then side inputs (earlier
    /// stages, or `[sides]` tables with paths relative to the file).
    #[test]
    fn from_lists_name_side_inputs_from_earlier_stages_or_the_sides_table() {
        let good = GOOD
            .replacen(
                "input = \"raw\"",
                "input = \"raw\"\ntable = \"lake/bronze\"",
                1,
            )
            .replace(
                "from = \"silver\"",
                "from = [\"silver\", \"bronze\", \"customers\"]",
            )
            .replace(
                "[pipeline]",
                "[sides]\ncustomers = \"lake/dim@7\"\n\n[pipeline]",
            );
        let p = parse(&good).unwrap();
        assert!(matches!(p.stages[2].source, Source::Stage(1)));
        assert!(p.stages[1].sides.is_empty());
        match &p.stages[2].sides[..] {
            [Side::Stage(0), Side::Table(t)] => {
                assert_eq!(t.name, "customers");
                assert_eq!(t.location, "/p/lake/dim");
                assert_eq!(t.version, Some(7));
            }
            other => panic!("{other:?}"),
        }
        for (from, to, why) in [
            (
                "\"customers\"]",
                "\"regions\"]",
                "`regions`, which is no earlier stage and not in [sides]",
            ),
            (
                "\"bronze\", \"customers\"]",
                "\"customers\", \"customers\"]",
                "names `customers` twice",
            ),
            (
                "[\"silver\", \"bronze\", \"customers\"]",
                "[]",
                "names no stage",
            ),
            (
                "customers = \"lake/dim@7\"",
                "\"bad name\" = \"x\"",
                "must be 1 to 64 letters",
            ),
            (
                "customers = \"lake/dim@7\"",
                "customers = \"./lake/silver/\"",
                "is stage `silver`'s table",
            ),
            (
                "customers = \"lake/dim@7\"",
                "customers = \"lake/silver/part\"",
                "is stage `silver`'s table",
            ),
        ] {
            let e = parse(&good.replace(from, to)).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
    }

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
        assert_eq!(p.columns, ["date"]);
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
            (
                "partition = \"date\"\n",
                "partition = \"date\"\nwap = true\n",
                "a Delta table has no branches",
            ),
            (
                "partition = \"date\"\n",
                "partition = \"date\"\nwap-branch = \"b\"\n",
                "unknown field `wap-branch`",
            ),
        ] {
            assert!(good.contains(from), "{from}");
            let e = parse(&good.replacen(from, to, 1)).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
        let iceberg = good.replacen(
            "table = \"s3://b/gold\"\npartition = \"date\"\n",
            "table = \"iceberg+sqlite://c.db#s.gold\"\npartition = \"date\"\nwap = true\n",
            1,
        );
        assert_eq!(parse(&iceberg).unwrap().stages[2].wap, Some(None));
        assert_eq!(p.stages[2].wap, None);
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

    /// Hourly bronze, daily silver and gold: `every = "1d"` makes a stage
    /// and every stage after it daily, with the date as its slice.
    #[test]
    fn a_daily_stage_after_hourly_ones_takes_the_date() {
        let good = GOOD.replacen(
            "input = \"raw\"",
            "input = \"raw\"\ntable = \"lake/bronze\"",
            1,
        );
        let hourly = good
            .replacen(
                "mode = \"append\"",
                "mode = \"append\"\npartition = \"date/hour\"",
                1,
            )
            .replacen("mode = \"merge\"", "mode = \"merge\"\nevery = \"1d\"", 1);
        let p = parse(&hourly).unwrap();
        let daily: Vec<bool> = p.stages.iter().map(|s| s.daily).collect();
        assert_eq!(daily, [false, true, true]);
        assert!(p.reads_hours(1) && !p.reads_hours(2));
        assert_eq!(
            p.slice_of(0, "2026-10-01T07").to_string(),
            "date=2026-10-01/hour=07"
        );
        assert_eq!(
            p.slice_of(1, "2026-10-01T07").to_string(),
            "date=2026-10-01"
        );
        assert_eq!(p.when_at(2, "2026-10-01T07"), "2026-10-01");
        let whens = p.whens("2026-10-01", "2026-10-02").unwrap();
        assert_eq!(
            p.days_of(&whens),
            [
                ("2026-10-01".to_string(), 23),
                ("2026-10-02".to_string(), 47)
            ]
        );
        assert_eq!(p.backfill_steps(&whens), 50);
        // Without `every`, every stage is hourly (and gold's one-column
        // partition is refused).
        let e = parse(&hourly.replacen("every = \"1d\"\n", "", 1)).unwrap_err();
        assert!(e.contains("stage `gold`: partition = \"date\" has 1 level(s), but the stage's slices are hours"), "{e}");
        for (from, to, why) in [
            (
                "mode = \"append\"",
                "mode = \"append\"\nevery = \"1d\"",
                "is for a later stage",
            ),
            (
                "every = \"1d\"",
                "every = \"2h\"",
                "every = \"2h\": give \"1d\"",
            ),
            (
                "expect = [",
                "every = \"1h\"\nexpect = [",
                "a stage after a daily one is daily",
            ),
        ] {
            let e = parse(&hourly.replacen(from, to, 1)).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
        // A daily pipeline: `1d` changes nothing, `1h` has no hours.
        let p = parse(&good.replacen("mode = \"merge\"", "mode = \"merge\"\nevery = \"1d\"", 1))
            .unwrap();
        assert!(p.stages.iter().all(|s| !s.daily));
        let e = parse(&good.replacen("mode = \"merge\"", "mode = \"merge\"\nevery = \"1h\"", 1))
            .unwrap_err();
        assert!(e.contains("needs hourly slices"), "{e}");
    }
}
