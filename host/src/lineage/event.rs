//! OpenLineage RunEvents (spec 2-0-2) from what a run knows: its run spec
//! and run key when it starts, its manifest and outcome when it ends.
//! Pure: values in, JSON out (the clock's reading is an argument).

use serde_json::{Value, json};

use crate::digest::Digest;
use crate::manifest::{Manifest, RunSpec};

const SPEC: &str = "https://openlineage.io/spec/2-0-2/OpenLineage.json";
const FACETS: &str = "https://openlineage.io/spec/facets";
/// The schema of idem's own facets (`idem_run`, `idem_manifest`).
const IDEM_FACETS: &str = "https://idem.dev/schemas/openlineage-facets.json";

/// Who produced the events.
pub fn producer() -> String {
    format!("https://idem.dev/producer/v{}", env!("CARGO_PKG_VERSION"))
}

/// A facet's `_producer` and `_schemaURL` with its `fields`.
fn facet(schema: &str, fields: Value) -> Value {
    let mut v = json!({"_producer": producer(), "_schemaURL": schema});
    if let (Some(o), Value::Object(f)) = (v.as_object_mut(), fields) {
        o.extend(f);
    }
    v
}

fn standard(file: &str, def: &str, fields: Value) -> Value {
    facet(&format!("{FACETS}/{file}#/$defs/{def}"), fields)
}

/// The run id every emission of one run shares: a UUID (version 8, RFC
/// 9562's custom layout) made of the first bytes of `digest` (the run
/// key), so retries and twins of a run are one run to a lineage store.
pub fn run_id(digest: &Digest) -> String {
    let mut b = [0u8; 16];
    hex::decode_to_slice(&digest.hex()[..32], &mut b).unwrap_or_default();
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// A dataset's OpenLineage namespace and name (the naming conventions:
/// `file` + the path, `s3://bucket` + the key, a catalog URL + `ns.table`).
pub fn dataset(location: &str) -> (String, String) {
    if let Some((catalog, table)) = location.split_once('#') {
        return (catalog.to_string(), table.to_string());
    }
    match url::Url::parse(location) {
        Ok(u) if u.scheme() == "file" => ("file".into(), u.path().trim_end_matches('/').into()),
        Ok(u) if u.host_str().is_some() => (
            format!("{}://{}", u.scheme(), u.host_str().unwrap_or_default()),
            u.path().trim_matches('/').to_string(),
        ),
        _ => ("file".into(), location.trim_end_matches('/').to_string()),
    }
}

/// Where the events of a run belong: its job and, for a slice of a
/// backfill or pipeline, the parent run.
#[derive(Debug, Clone)]
pub struct JobName {
    /// The job namespace (`--lineage-namespace`, default `idem`).
    pub namespace: String,
    /// The job: the table it writes (`namespace/name` of the dataset).
    pub name: String,
}

/// The parent of a run (a backfill's or pipeline's run).
#[derive(Debug, Clone)]
pub struct Parent {
    /// Its run id.
    pub run_id: String,
    /// Its job.
    pub job: JobName,
}

/// The event's envelope: type, time, producer, run and job.
fn base(kind: &str, at: &str, run: Value, job: &JobName) -> Value {
    let job_type = standard(
        "2-0-4/JobTypeJobFacet.json",
        "JobTypeJobFacet",
        json!({"processingType": "BATCH", "integration": "IDEM", "jobType": "TASK"}),
    );
    json!({
        "eventType": kind,
        "eventTime": at,
        "producer": producer(),
        "schemaURL": format!("{SPEC}#/$defs/RunEvent"),
        "run": run,
        "job": {"namespace": job.namespace, "name": job.name, "facets": {"jobType": job_type}},
    })
}

/// The run object: its id and facets (parent, nominal time, idem's run).
fn run_of(run_id: &str, spec: Option<&RunSpec>, parent: Option<&Parent>, extra: Value) -> Value {
    let mut facets = serde_json::Map::new();
    if let Some(p) = parent {
        facets.insert(
            "parent".into(),
            standard(
                "1-2-0/ParentRunFacet.json",
                "ParentRunFacet",
                json!({"run": {"runId": p.run_id},
                       "job": {"namespace": p.job.namespace, "name": p.job.name}}),
            ),
        );
    }
    if let Some(t) = spec
        .and_then(|s| s.logical_date.as_deref())
        .and_then(nominal)
    {
        facets.insert(
            "nominalTime".into(),
            standard(
                "1-0-1/NominalTimeRunFacet.json",
                "NominalTimeRunFacet",
                json!({"nominalStartTime": t}),
            ),
        );
    }
    if let Some(s) = spec {
        facets.insert(
            "idem_run".into(),
            facet(
                &format!("{IDEM_FACETS}#/$defs/IdemRunFacet"),
                json!({"slice": s.slice.id, "module": s.module.as_str(), "engine": s.engine,
                       "mode": s.target.mode, "batchRows": s.batch_rows}),
            ),
        );
    }
    if let Value::Object(e) = extra {
        facets.extend(e);
    }
    json!({"runId": run_id, "facets": facets})
}

/// A logical date (a day, or a timestamp with its offset) as RFC 3339 UTC.
fn nominal(d: &str) -> Option<String> {
    if d.len() == 10 {
        return Some(format!("{d}T00:00:00Z"));
    }
    let ns = arrow::compute::kernels::cast_utils::string_to_timestamp_nanos(d).ok()?;
    Some(super::rfc3339(ns.div_euclid(1_000_000)))
}

/// The run's inputs: the slice, then each side input (read whole: its
/// table or files, versioned as the slice is, with no subset).
fn inputs_of(spec: &RunSpec) -> Value {
    let mut all = vec![input_of(spec)];
    for side in &spec.sides {
        // A table by the name it has as a target (an Iceberg catalog
        // entry, not its folder): the lineage graph joins there.
        let (namespace, name) = dataset(side.table.as_deref().unwrap_or(&side.input.root));
        all.push(json!({
            "namespace": namespace,
            "name": name,
            "facets": {"version": standard("1-0-1/DatasetVersionDatasetFacet.json",
                "DatasetVersionDatasetFacet", json!({"datasetVersion": version_of(&side.input)}))},
        }));
    }
    Value::Array(all)
}

/// A read's version: the pinned table version, or a digest of its
/// inputs' digests.
fn version_of(slice: &crate::manifest::SliceRecord) -> String {
    match slice.delta_version {
        Some(v) => v.to_string(),
        None => {
            let all: String = slice.inputs.iter().map(|i| i.digest.as_str()).collect();
            Digest::of_bytes(all.as_bytes()).to_string()
        }
    }
}

/// The slice's input: its root, versioned by the pinned Delta version or
/// a digest of its inputs' digests, and the slice as a subset.
fn input_of(spec: &RunSpec) -> Value {
    let (namespace, name) = dataset(&spec.slice.root);
    let version = version_of(&spec.slice);
    let partition = crate::slice::Partition::from_spelled(&spec.slice.id);
    let condition = match partition {
        Some(p) if spec.slice.kind != "files" => json!({
            "type": "partition",
            "partitions": [{
                "identifier": spec.slice.id,
                "dimensions": p
                    .levels()
                    .iter()
                    .map(|(c, v)| (c.clone(), json!(v)))
                    .collect::<serde_json::Map<String, serde_json::Value>>(),
            }],
        }),
        _ => json!({
            "type": "location",
            "locations": spec.slice.inputs.iter().map(|i| i.path.as_str()).collect::<Vec<_>>(),
        }),
    };
    json!({
        "namespace": namespace,
        "name": name,
        "facets": {"version": standard("1-0-1/DatasetVersionDatasetFacet.json",
            "DatasetVersionDatasetFacet", json!({"datasetVersion": version}))},
        "inputFacets": {"subset": standard("1-0-0/BaseSubsetDatasetFacet.json",
            "InputSubsetInputDatasetFacet", json!({"inputCondition": condition}))},
    })
}

/// START: the run planned (inputs pinned, run key known).
pub fn start(
    at: &str,
    job: &JobName,
    parent: Option<&Parent>,
    spec: &RunSpec,
    key: &Digest,
) -> Value {
    let mut e = base(
        "START",
        at,
        run_of(&run_id(key), Some(spec), parent, json!({})),
        job,
    );
    let (namespace, name) = dataset(&spec.target.table);
    e["inputs"] = inputs_of(spec);
    e["outputs"] = json!([{"namespace": namespace, "name": name}]);
    e
}

/// What a run that ended well left: its manifest, outcome and the table.
pub struct Ended<'a> {
    /// The manifest (committed now, or found: memo).
    pub manifest: &'a Manifest,
    pub manifest_digest: &'a Digest,
    pub envelope_digest: Option<&'a Digest>,
    /// `committed`, `unchanged` or `memo`.
    pub outcome: &'a str,
    /// The table version holding the output.
    pub version: Option<u64>,
    /// The table's columns: (name, type).
    pub columns: Vec<(String, String)>,
}

/// COMPLETE: the output committed (or found current: `idem_manifest`
/// says which), with the table's version, schema and row count and the
/// expectations' verdicts.
pub fn complete(at: &str, job: &JobName, parent: Option<&Parent>, end: &Ended<'_>) -> Value {
    let m = end.manifest;
    let manifest = facet(
        &format!("{IDEM_FACETS}#/$defs/IdemManifestRunFacet"),
        json!({"runKey": m.run_key.as_str(), "manifestDigest": end.manifest_digest.as_str(),
               "outputDigest": m.result.output_digest.as_str(),
               "envelopeDigest": end.envelope_digest.map(|d| d.as_str()),
               "outcome": end.outcome}),
    );
    let run = run_of(
        &run_id(&m.run_key),
        Some(&m.spec),
        parent,
        json!({"idem_manifest": manifest}),
    );
    let mut e = base("COMPLETE", at, run, job);
    let (namespace, name) = dataset(&m.spec.target.table);
    let fields: Vec<Value> = end
        .columns
        .iter()
        .map(|(n, t)| json!({"name": n, "type": t}))
        .collect();
    let mut facets = json!({"schema": standard("1-2-0/SchemaDatasetFacet.json",
        "SchemaDatasetFacet", json!({"fields": fields}))});
    if let Some(v) = end.version {
        facets["version"] = standard(
            "1-0-1/DatasetVersionDatasetFacet.json",
            "DatasetVersionDatasetFacet",
            json!({"datasetVersion": v.to_string()}),
        );
    }
    let mut output_facets = json!({"outputStatistics": standard(
        "1-0-2/OutputStatisticsOutputDatasetFacet.json",
        "OutputStatisticsOutputDatasetFacet", json!({"rowCount": m.result.rows_out}))});
    if !m.result.audits.is_empty() {
        let assertions: Vec<Value> = m
            .result
            .audits
            .iter()
            .map(|v| {
                let (name, column) = assertion_of(&v.expectation);
                let mut a = json!({"assertion": name, "success": v.passed});
                if let Some(c) = column {
                    a["column"] = c.into();
                }
                a
            })
            .collect();
        output_facets["dataQualityAssertions"] = standard(
            "1-1-0/DataQualityAssertionsDatasetFacet.json",
            "DataQualityAssertionsDatasetFacet",
            json!({"assertions": assertions}),
        );
    }
    e["inputs"] = inputs_of(&m.spec);
    e["outputs"] = json!([{"namespace": namespace, "name": name, "facets": facets,
                           "outputFacets": output_facets}]);
    e
}

/// An expectation's name and column: `not_null(id)` -> (`not_null`, `id`),
/// `rows(1..)` -> (`rows(1..)`, none).
fn assertion_of(expectation: &str) -> (String, Option<String>) {
    match expectation.split_once('(') {
        Some((name, rest)) if ["not_null", "unique", "between", "in"].contains(&name) => {
            let column = rest.split([',', ')']).next().unwrap_or_default().trim();
            (name.to_string(), Some(column.to_string()))
        }
        _ => (expectation.to_string(), None),
    }
}

/// FAIL: the run failed with `kind` (the CLI's) and `message`; `spec` and
/// `key` when it got as far as its plan.
pub fn fail(
    at: &str,
    job: &JobName,
    parent: Option<&Parent>,
    run_id: &str,
    spec: Option<&RunSpec>,
    kind: &str,
    message: &str,
) -> Value {
    let error = standard(
        "1-0-1/ErrorMessageRunFacet.json",
        "ErrorMessageRunFacet",
        json!({"message": format!("{kind}: {message}"), "programmingLanguage": "Rust"}),
    );
    let run = run_of(run_id, spec, parent, json!({"errorMessage": error}));
    with_datasets(base("FAIL", at, run, job), spec)
}

/// An end without output: the slice's input and the table, when the run
/// got as far as its plan.
fn with_datasets(mut e: Value, spec: Option<&RunSpec>) -> Value {
    if let Some(s) = spec {
        let (namespace, name) = dataset(&s.target.table);
        e["inputs"] = inputs_of(s);
        e["outputs"] = json!([{"namespace": namespace, "name": name}]);
    }
    e
}

/// ABORT: the process was interrupted (a signal) before the run ended.
pub fn abort(
    at: &str,
    job: &JobName,
    parent: Option<&Parent>,
    run_id: &str,
    spec: Option<&RunSpec>,
) -> Value {
    let run = run_of(run_id, spec, parent, json!({}));
    with_datasets(base("ABORT", at, run, job), spec)
}

/// A bare START of a run that failed before its plan (no run key yet):
/// the pair a lineage store expects, with an id made from the request.
pub fn start_unplanned(at: &str, job: &JobName, parent: Option<&Parent>, run_id: &str) -> Value {
    base("START", at, run_of(run_id, None, parent, json!({})), job)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_uuids_fixed_by_the_run_key() {
        let k = Digest::of_bytes(b"spec");
        let id = run_id(&k);
        assert_eq!(id, run_id(&k));
        assert_ne!(id, run_id(&Digest::of_bytes(b"other")));
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "8", "version 8: {id}");
        assert!("89ab".contains(&id[19..20]), "RFC variant: {id}");
    }

    #[test]
    fn datasets_are_named_as_openlineage_names_them() {
        assert_eq!(
            dataset("file:///lake/t/"),
            ("file".into(), "/lake/t".into())
        );
        assert_eq!(
            dataset("s3://bucket/lake/t"),
            ("s3://bucket".into(), "lake/t".into())
        );
        assert_eq!(
            dataset("iceberg+sqlite:///w/c.db#sales.t"),
            ("iceberg+sqlite:///w/c.db".into(), "sales.t".into())
        );
        assert_eq!(
            assertion_of("not_null(id)"),
            ("not_null".into(), Some("id".into()))
        );
        assert_eq!(
            assertion_of("unique(a,b)"),
            ("unique".into(), Some("a".into()))
        );
        assert_eq!(assertion_of("rows(1..)"), ("rows(1..)".into(), None));
        assert_eq!(nominal("2026-10-01").unwrap(), "2026-10-01T00:00:00Z");
        assert_eq!(
            nominal("2026-10-01T02:30:00+02:00").unwrap(),
            "2026-10-01T00:30:00.000Z"
        );
        assert_eq!(
            nominal("1969-12-31T23:59:59Z").unwrap(),
            "1969-12-31T23:59:59.000Z"
        );
    }
}
