"""`import idem` against the `idem` CLI on the same slices: the same run
keys, outcomes, commits, error kinds and messages. Run by tests/python.rs,
which builds the guests and the sample data and says where they are."""

import json
import os
import pathlib
import re
import subprocess
import sys
import threading
import time
from urllib.parse import urlparse

import pytest
from deltalake import DeltaTable

import idem

MODULE = os.environ["IDEM_TEST_MODULE"]
HOSTILE = os.environ["IDEM_TEST_HOSTILE"]
DATA = os.environ["IDEM_TEST_DATA"]
BIN = os.environ["IDEM_TEST_BIN"]
DAY = "date=2026-10-01"


def cli(*args, env=None):
    """The CLI with --json: (exit code, parsed stdout or None, stderr)."""
    p = subprocess.run(
        [BIN, "--json", "-q", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    out = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, out, p.stderr


def cli_run(table, *extra, module=MODULE, partition=DAY, env=None):
    return cli(
        "run", "--module", module, "--input", DATA, "--partition", partition,
        "--table", table, "--batch-rows", "1000", *extra, env=env,
    )


def rows(table):
    return DeltaTable(table).to_pyarrow_table().num_rows


def test_a_run_is_the_cli_run(tmp_path):
    table = str(tmp_path / "t")
    r = idem.run(MODULE, table, input=DATA, partition=DAY, batch_rows=1000)
    assert (r.outcome, r.slice) == ("committed", DAY) and r.version >= 0
    v = r.version
    assert r.rows_out == rows(table) > 0
    assert r.run_key.startswith("sha256:") and r.manifest.endswith(".json")
    assert set(r.timings_ms) == {"resolve", "load", "exec", "commit"}

    # The CLI plans the same run key and finds it committed.
    code, out, err = cli_run(table)
    assert code == 0, err
    assert out["outcome"]["kind"] == "memo"
    assert (out["runKey"], out["outputDigest"]) == (r.run_key, r.output_digest)

    again = idem.run(MODULE, table, input=DATA, partition=DAY, batch_rows=1000)
    assert (again.outcome, again.version, again.run_key) == ("memo", v, r.run_key)
    forced = idem.run(MODULE, table, input=DATA, partition=DAY, batch_rows=1000, force=True)
    assert (forced.outcome, forced.version) == ("unchanged", v)
    assert DeltaTable(table).version() == v

    # A run the CLI committed is a memo hit for the package.
    code, out, err = cli_run(table, partition="date=2026-10-02")
    assert code == 0 and out["outcome"]["kind"] == "committed", err
    other = idem.run(MODULE, table, input=DATA, partition="date=2026-10-02", batch_rows=1000)
    assert (other.outcome, other.run_key) == ("memo", out["runKey"])


def test_params_change_the_run_key_and_explain_says_which(tmp_path):
    table = str(tmp_path / "t")
    first = idem.run(MODULE, table, input=DATA, partition=DAY, params={"min_amount": 0})
    e = idem.explain(MODULE, table, input=DATA, partition=DAY, params={"min_amount": 0})
    assert e.memo and e.same_run_key and e.run_key == first.run_key
    assert e.current_version == first.version and e.changes == []
    e = idem.explain(MODULE, table, input=DATA, partition=DAY, params='{"min_amount": 50}')
    assert not e.memo and not e.same_run_key
    assert [c.field for c in e.changes] == ["params.min_amount"]
    assert (e.changes[0].before, e.changes[0].after) == ("0", "50")
    second = idem.run(MODULE, table, input=DATA, partition=DAY, params={"min_amount": 50})
    assert second.outcome == "committed" and second.version == first.version + 1
    assert second.rows_out < first.rows_out and second.rows_in == first.rows_in
    pair = idem.explain(runs=(first.run_key, second.run_key), table=table)
    assert [(c.field, c.before, c.after) for c in pair.changes] == [("params.min_amount", "0", "50")]
    assert (pair.current_run_key, pair.run_key, pair.same_run_key) == (first.run_key, second.run_key, False)
    # By manifest file and by TABLE#SLICE (the slice's current run: second).
    same = idem.explain(runs=(urlparse(second.manifest).path, f"{table}#{DAY}"))
    assert same.same_run_key and same.changes == [] and not same.memo
    code, out, err = cli("explain", first.run_key, second.run_key, "--table", table)
    assert code == 0, err
    assert [(c["field"], c["before"], c["after"]) for c in out["changes"]] == [("params.min_amount", 0, 50)]


def test_merge_keys_are_split_on_commas_as_the_cli_splits_them(tmp_path):
    table = str(tmp_path / "t")
    a = idem.explain(MODULE, table, input=DATA, partition=DAY, mode="merge", key="order_id,date")
    b = idem.explain(MODULE, table, input=DATA, partition=DAY, mode="merge", key=["order_id", "date"])
    code, out, err = cli(
        "explain", "--module", MODULE, "--input", DATA, "--partition", DAY, "--table", table,
        "--mode", "merge", "--key", "order_id,date",
    )
    assert code == 0, err
    assert a.run_key == b.run_key == out["b"]["runKey"]


def test_verify_audit_show_and_log_read_what_the_run_committed(tmp_path):
    table = str(tmp_path / "t")
    r = idem.run(MODULE, table, input=DATA, partition=DAY)
    v = idem.verify(r.manifest)
    assert v.matched and v.output_digest == r.output_digest and v.notes
    a = idem.audit(table)
    assert a.proven and [(s.slice, s.version, s.proof) for s in a.slices] == [(DAY, r.version, "proven")]
    assert idem.audit(table, slice=DAY, replay=True).proven
    s = idem.show(f"{table}#{DAY}")
    assert (s.run_key, s.held, s.held_version, s.rows_out) == (r.run_key, "current", r.version, r.rows_out)
    assert json.loads(s.json)["subject"][0]["digest"]["sha256"] == r.output_digest.split(":")[1]
    assert idem.show(r.run_key[7:19], table=table).digest == r.manifest_digest
    entries = idem.log(table)
    assert [(e.slice, e.outcome, e.version) for e in entries] == [(DAY, "committed", r.version)]
    assert entries[0].params.startswith("{")
    code, out, err = cli("audit", table)
    assert code == 0 and out["proven"] and out["slices"][0]["proof"] == "proven", err

    # A manifest whose output no longer matches: a result, not an exception.
    with open(urlparse(r.manifest).path) as f:
        doc = json.load(f)
    doc["predicate"]["result"]["rowsOut"] += 1
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc))
    v = idem.verify(str(forged))
    assert not v.matched and v.reason


def test_a_backfill_commits_each_day_once_and_reruns_as_memo(tmp_path):
    table = str(tmp_path / "t")
    b = idem.backfill(MODULE, DATA, table, "2026-10-01", "2026-10-03", jobs=2)
    assert b.ok and b.failed == 0
    assert [s.outcome for s in b.slices] == ["committed"] * 3
    first = min(s.version for s in b.slices)
    assert sorted(s.version for s in b.slices) == [first, first + 1, first + 2]
    assert sum(s.rows_out for s in b.slices) == rows(table)
    again = idem.backfill(MODULE, DATA, table, "2026-10-01", "2026-10-03")
    assert [s.outcome for s in again.slices] == ["memo"] * 3
    # A day with no input fails alone (unless skipped); the others hold.
    gap = idem.backfill(MODULE, DATA, table, "2026-09-30", "2026-10-01")
    assert not gap.ok and gap.failed == 1
    assert (gap.slices[0].outcome, gap.slices[0].error_kind) == ("missing", "input")
    assert "2026-09-30" in gap.slices[0].error and gap.slices[1].outcome == "memo"
    assert idem.backfill(MODULE, DATA, table, "2026-09-30", "2026-10-01", skip_missing=True).ok
    with pytest.raises(idem.InputError, match="jobs"):
        idem.backfill(MODULE, DATA, table, "2026-10-01", "2026-10-03", jobs=0)
    # A range with no input at all is not ok, even when missing days may be
    # skipped (the CLI exits 2).
    none = idem.backfill(MODULE, DATA, table, "2026-09-01", "2026-09-02", skip_missing=True)
    assert not none.ok and none.failed == 0
    code, out, _ = cli("backfill", "--module", MODULE, "--input", DATA, "--table", table,
                       "--from", "2026-09-01", "--to", "2026-09-02", "--skip-missing")
    assert (code, out["ok"]) == (2, False)


def test_signed_runs_and_backfills_are_audited_with_their_key(tmp_path):
    key, other = str(tmp_path / "k.pem"), str(tmp_path / "o.pem")
    for k in (key, other):
        code, out, err = cli("keygen", "--out", k)
        assert code == 0, err
    pub, other_pub = key.replace(".pem", ".pub.pem"), other.replace(".pem", ".pub.pem")
    table = str(tmp_path / "t")
    r = idem.run(MODULE, table, input=DATA, partition=DAY, sign_key=pathlib.Path(key))
    assert r.outcome == "committed" and r.envelope_digest.startswith("sha256:")
    assert r.envelope.endswith(r.envelope_digest[len("sha256:"):] + ".json")
    b = idem.backfill(MODULE, DATA, table, "2026-10-02", "2026-10-03", sign_key=key)
    assert b.ok
    a = idem.audit(table, keys=[pub])
    assert a.proven and len(a.slices) == 3
    assert all("signed by key" in s.detail for s in a.slices)
    assert not idem.audit(table, keys=[other_pub]).proven
    assert idem.audit(table).proven
    v = idem.verify(urlparse(r.envelope).path, keys=[pub])
    assert v.matched and any("envelope: signed by key" in n for n in v.notes)
    assert not idem.verify(urlparse(r.envelope).path, keys=[other_pub]).matched
    with pytest.raises(idem.InputError, match="not an Ed25519 private key"):
        idem.run(MODULE, table, input=DATA, partition=DAY, sign_key=pub)
    with pytest.raises(idem.InputError, match="keys takes a list"):
        idem.audit(table, keys=pub)


def events_in(folder):
    """The OpenLineage events a folder received, in the order written,
    each checked against the official spec and facet schemas."""
    files = sorted(folder.glob("*.json"))
    if files:
        check = subprocess.run(
            [sys.executable,
             str(pathlib.Path(__file__).resolve().parent.parent / "validate_openlineage.py"),
             *map(str, files)],
            capture_output=True, text=True,
        )
        assert check.returncode == 0, check.stdout + check.stderr
    return [json.loads(f.read_text()) for f in files]


def test_runs_backfills_pipelines_and_spark_jobs_emit_lineage(tmp_path):
    events = tmp_path / "events"
    url = events.as_uri()
    table = str(tmp_path / "t")
    r = idem.run(MODULE, table, input=DATA, partition=DAY, lineage=url, lineage_namespace="team")
    got = events_in(events)
    assert [e["eventType"] for e in got] == ["START", "COMPLETE"]
    start, complete = got
    # The run id is the run key's (a UUID of its first 16 bytes), the job
    # the table in the namespace given.
    key = r.run_key[len("sha256:"):]
    assert complete["run"]["runId"].replace("-", "")[:12] == key[:12]
    assert complete["job"]["namespace"] == "team"
    facet = complete["run"]["facets"]["idem_manifest"]
    assert (facet["outcome"], facet["runKey"], facet["manifestDigest"]) == (
        "committed", r.run_key, r.manifest_digest)
    assert "parent" not in complete["run"]["facets"]
    # A backfill's slices name the backfill as their parent, all the same.
    for f in events.glob("*.json"):
        f.unlink()
    b = idem.backfill(MODULE, DATA, table, "2026-10-02", "2026-10-03", lineage=url)
    assert b.ok
    got = events_in(events)
    assert sorted(e["eventType"] for e in got) == ["COMPLETE", "COMPLETE", "START", "START"]
    parents = {json.dumps(e["run"]["facets"]["parent"], sort_keys=True) for e in got}
    assert len(parents) == 1, parents
    parent = got[0]["run"]["facets"]["parent"]
    assert parent["job"] == {"namespace": "idem", "name": f"backfill {table}"}
    # The Spark driver names its job as the parent with a run id it made.
    for f in events.glob("*.json"):
        f.unlink()
    job = "0b5c7e0a-3f1d-4c2e-9a7b-1d2e3f4a5b6c"
    idem.run(MODULE, table, input=DATA, partition=DAY, force=True, lineage=url,
             _lineage_parent=(job, "spark job t"))
    got = events_in(events)
    assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in got} == {job}
    # A pipeline's stages name the pipeline run; lineage= overrides the file.
    for f in events.glob("*.json"):
        f.unlink()
    p = idem.pipeline_run(os.environ["IDEM_TEST_PIPELINE"], "2026-10-02", lineage=url)
    assert p.ok
    got = events_in(events)
    assert [e["eventType"] for e in got] == ["START", "COMPLETE"] * 3
    parents = {e["run"]["facets"]["parent"]["run"]["runId"] for e in got}
    assert len(parents) == 1, parents
    assert got[0]["run"]["facets"]["parent"]["job"]["name"].startswith("pipeline ")
    # A failure is a FAIL event, and a failed run still raises.
    for f in events.glob("*.json"):
        f.unlink()
    with pytest.raises(idem.PartitionMissing):
        idem.run(MODULE, table, input=DATA, partition="date=2026-09-01", lineage=url)
    assert [e["eventType"] for e in events_in(events)] == ["START", "FAIL"]
    # Bad receivers and keywords are input errors before anything runs.
    with pytest.raises(idem.InputError, match="lineage"):
        idem.run(MODULE, table, input=DATA, partition=DAY, lineage="ftp://x/")
    with pytest.raises(idem.InputError, match="namespace is empty"):
        idem.run(MODULE, table, input=DATA, partition=DAY, lineage=url, lineage_namespace=" ")
    with pytest.raises(idem.InputError, match="lineage_namespace needs lineage"):
        idem.run(MODULE, table, input=DATA, partition=DAY, lineage_namespace="x")
    with pytest.raises(idem.InputError, match="not a UUID"):
        idem.run(MODULE, table, input=DATA, partition=DAY, lineage=url, _lineage_parent=("7", "x"))
    with pytest.raises(idem.InputError, match="lineage must be text"):
        idem.backfill(MODULE, DATA, table, "2026-10-02", "2026-10-02", lineage=events)


def test_a_published_module_runs_by_digest_with_its_origin_logged(tmp_path):
    table = str(tmp_path / "t")
    digest = idem.publish_module(MODULE, table)
    code, out, err = cli("publish", MODULE, "--table", table)
    assert code == 0 and out["module"] == digest, err
    r = idem.run(digest, table, input=DATA, partition=DAY, origin="task 7 attempt 0")
    assert r.outcome == "committed"
    # The same run as by path: a memo hit, whose log line has its own origin.
    again = idem.run(MODULE, table, input=DATA, partition=DAY, origin="task 7 attempt 1")
    assert (again.outcome, again.run_key) == ("memo", r.run_key)
    log = idem.log(table)
    assert [(e.origin, e.outcome) for e in log] == [
        ("task 7 attempt 0", "committed"), ("task 7 attempt 1", "memo")]
    # since_ms skips the older entries (by their names: never read).
    since = log[-1].at_ms
    assert [e.origin for e in idem.log(table, since_ms=since)] == [
        e.origin for e in log if e.at_ms >= since]
    assert idem.log(table, since_ms=log[-1].at_ms + 1) == []
    with pytest.raises(idem.InputError, match="is not stored at"):
        idem.run("sha256:" + "1" * 64, table, input=DATA, partition=DAY)
    with pytest.raises(idem.InputError, match="origin must be text"):
        idem.run(digest, table, input=DATA, partition=DAY, origin=7)
    # A date without input is a PartitionMissing (an InputError, exit 2).
    with pytest.raises(idem.PartitionMissing) as e:
        idem.run(digest, table, input=DATA, partition="date=2026-09-30")
    assert isinstance(e.value, idem.InputError) and e.value.exit_code == 2
    with pytest.raises(idem.GuestError, match="module rejected"):
        idem.publish_module(pathlib.Path("tests/wat/import-wall-clock.wat").resolve(), table)


def test_other_slices_files_a_pinned_delta_version_and_next(tmp_path):
    table = str(tmp_path / "t")
    day = os.path.join(DATA, DAY)
    files = sorted(os.path.join(day, f) for f in os.listdir(day))
    r = idem.run(MODULE, table, files=files, slice_id="by-files", mode="append")
    assert (r.outcome, r.slice, r.rows_in) == ("committed", "by-files", 3000)
    # The table just written, pinned at its version, as the next stage's input.
    dedup = os.path.join(os.path.dirname(os.environ["IDEM_TEST_PIPELINE"]), "wasm", "dedup_events.wasm")
    pinned = idem.run(dedup, str(tmp_path / "t2"), input=table, delta_version=r.version, mode="append")
    assert pinned.outcome == "committed" and pinned.rows_in == r.rows_out
    # table_version is its format-neutral name: the same run.
    again = idem.run(dedup, str(tmp_path / "t2"), input=table, table_version=r.version, mode="append")
    assert again.outcome == "memo" and again.run_key == pinned.run_key
    with pytest.raises(idem.InputError, match="table_version \\(formerly delta_version\\), not both"):
        idem.run(dedup, str(tmp_path / "t2"), input=table, table_version=1, delta_version=1, mode="append")
    with pytest.raises(idem.InputError, match="iceberg_snapshot \\(a snapshot id\\) must be an integer"):
        idem.run(dedup, str(tmp_path / "t2"), input=table, iceberg_snapshot="1", mode="append")
    with pytest.raises(idem.InputError, match="iceberg_snapshot \\(a snapshot id\\) must be from"):
        idem.run(dedup, str(tmp_path / "t2"), input=table, iceberg_snapshot=2**64, mode="append")
    with pytest.raises(idem.InputError, match="table_version must be from 0"):
        idem.run(dedup, str(tmp_path / "t2"), input=table, table_version=-1, mode="append")
    with pytest.raises(idem.IdemError, match="is a Delta table: it has versions, not snapshot ids"):
        idem.run(dedup, str(tmp_path / "t2"), input=table, iceberg_snapshot=1, mode="append")
    # An append-only prefix: the next objects after the last one consumed.
    nxt = dict(input=day, next=True, max_objects=1, mode="append")
    first = idem.run(MODULE, str(tmp_path / "t3"), **nxt)
    second = idem.run(MODULE, str(tmp_path / "t3"), **nxt)
    done = idem.run(MODULE, str(tmp_path / "t3"), **nxt)
    assert (first.outcome, second.outcome, done.outcome) == ("committed", "committed", "up-to-date")
    assert done.source and done.through and first.rows_in + second.rows_in == 3000
    with pytest.raises(idem.InputError, match="next"):
        idem.run(MODULE, table, input=DATA, partition=DAY, max_objects=5)


def test_text_inputs_take_a_schema_and_count_rejects_as_the_cli_does(tmp_path):
    day = tmp_path / "bronze" / DAY
    day.mkdir(parents=True)
    (day / "a.csv").write_text("customer,amount,quantity\na,1.5,2\nb,lots,1\nc,3,1\n")
    schema = [
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "float64"},
        {"name": "quantity", "type": "int64"},
    ]
    root = str(tmp_path / "bronze")
    with pytest.raises(idem.InputError, match="line 3, column `amount`: `lots` is not a float64"):
        idem.run(MODULE, str(tmp_path / "t"), input=root, partition=DAY, schema=schema)
    r = idem.run(MODULE, str(tmp_path / "t"), input=root, partition=DAY, schema=schema, max_rejects=1)
    assert (r.outcome, r.rows_in) == ("committed", 2)
    manifest = json.loads(pathlib.Path(urlparse(r.manifest).path).read_text())["predicate"]
    assert manifest["result"]["rejectedRows"] == 1
    # The CLI with the same flags plans the same run.
    code, out, err = cli(
        "run", "--module", MODULE, "--input", root, "--partition", DAY,
        "--table", str(tmp_path / "t"), "--schema", json.dumps(schema), "--max-rejects", "1",
    )
    assert code == 0 and out["runKey"] == r.run_key, err
    with pytest.raises(idem.InputError, match="schema must be JSON text or a list"):
        idem.run(MODULE, str(tmp_path / "t"), input=root, partition=DAY, schema=5)


def test_on_schema_change_is_the_cli_flag(tmp_path):
    table = str(tmp_path / "t")
    r = idem.run(
        MODULE, table, input=DATA, partition=DAY, batch_rows=1000, on_schema_change="append-new-columns"
    )
    assert r.outcome == "committed"
    assert '"onSchemaChange":"append-new-columns"' in pathlib.Path(urlparse(r.manifest).path).read_text()
    # The CLI with the flag plans the same run (a memo hit); without it, another run key.
    code, out, err = cli_run(table, "--on-schema-change", "append-new-columns")
    assert code == 0 and out["runKey"] == r.run_key and out["outcome"]["kind"] == "memo", (out, err)
    code, out, err = cli_run(table)
    assert code == 0 and out["runKey"] != r.run_key, (out, err)
    with pytest.raises(idem.InputError, match="on_schema_change must be 'fail' or 'append-new-columns'"):
        idem.run(MODULE, table, input=DATA, partition=DAY, on_schema_change="append")


def test_sides_are_the_cli_flag(tmp_path):
    table = str(tmp_path / "t")
    side = str(next((pathlib.Path(DATA) / DAY).glob("*.parquet")))
    r = idem.run(MODULE, table, input=DATA, partition=DAY, batch_rows=1000, sides={"extra": side})
    assert r.outcome == "committed"
    assert '"sides":[{"input"' in pathlib.Path(urlparse(r.manifest).path).read_text()
    # The CLI with --side plans the same run (a memo hit); without it, another run key.
    code, out, err = cli_run(table, "--side", f"extra={side}")
    assert code == 0 and out["runKey"] == r.run_key and out["outcome"]["kind"] == "memo", (out, err)
    code, out, err = cli_run(table)
    assert code == 0 and out["runKey"] != r.run_key, (out, err)
    with pytest.raises(idem.InputError, match="sides must be a mapping"):
        idem.run(MODULE, table, input=DATA, partition=DAY, sides=[side])
    with pytest.raises(idem.InputError, match="must be 1 to 64 letters"):
        idem.run(MODULE, table, input=DATA, partition=DAY, sides={"no good": side})
    with pytest.raises(idem.InputError, match="has no version"):
        idem.run(MODULE, table, input=DATA, partition=DAY, sides={"extra": (side, 3)})


def test_limits_are_the_sandbox_limits(tmp_path):
    with pytest.raises(idem.GuestError) as e:
        idem.run(MODULE, tmp_path / "t", input=DATA, partition=DAY, limits=idem.Limits(max_memory_mb=1))
    assert "memory" in str(e.value)
    assert idem.Limits(deadline_ms=5).deadline_ms == 5 and idem.Limits().fuel is None


def test_a_pipeline_runs_its_stages_for_a_date():
    toml = os.environ["IDEM_TEST_PIPELINE"]
    p = idem.pipeline_run(toml, "2026-10-01")
    assert p.ok and [s.stage for s in p.stages] == ["bronze", "silver", "gold"]
    assert [s.outcome for s in p.stages] == ["committed"] * 3
    assert p.stages[0].reads_table is None and p.stages[1].reads_version == p.stages[0].version
    p.raise_for_failure()
    again = idem.pipeline_run(toml, "2026-10-01", stage="gold")
    assert [(s.stage, s.outcome) for s in again.stages] == [("gold", "memo")]
    with pytest.raises(idem.InputError, match="its stages are bronze, silver, gold"):
        idem.pipeline_run(toml, "2026-10-01", stage="platinum")
    # A date without input: bronze fails (missing), the later stages skip.
    gap = idem.pipeline_run(toml, "2026-10-09")
    assert not gap.ok and [s.outcome for s in gap.stages] == ["missing", "skipped", "skipped"]
    with pytest.raises(idem.InputError, match="stage bronze of date=2026-10-09 failed"):
        gap.raise_for_failure()


def test_an_hourly_pipeline_runs_an_hour_from_airflows_ts(tmp_path):
    import shutil

    hour = tmp_path / "events" / "date=2026-10-01" / "hour=07"
    shutil.copytree(pathlib.Path(DATA) / DAY, hour)
    toml = tmp_path / "idem.toml"
    toml.write_text(
        f"""
[[stage]]
name = "bronze"
module = {json.dumps(MODULE)}
input = "events"
partition = "date/hour"
table = "lake/bronze"
mode = "append"
"""
    )
    p = idem.pipeline_run(toml, "2026-10-01T07:00:00+00:00")
    assert p.ok, p
    assert [(s.slice, s.outcome) for s in p.stages] == [("date=2026-10-01/hour=07", "committed")]
    again = idem.pipeline_run(toml, "2026-10-01T07")
    assert [s.outcome for s in again.stages] == ["memo"]
    # A date is no hour of this pipeline (it would read the whole day as a
    # slice of its own): refused.
    with pytest.raises(idem.InputError, match="is not an hour"):
        idem.pipeline_run(toml, "2026-10-01")


def test_a_backfill_over_hours_is_the_cli_s_runs_of_those_hours(tmp_path):
    import shutil

    for h in ["06", "07"]:
        shutil.copytree(pathlib.Path(DATA) / DAY, tmp_path / "events" / DAY / f"hour={h}")
    table = str(tmp_path / "hourly")
    b = idem.backfill(MODULE, str(tmp_path / "events"), table, "2026-10-01T06", "2026-10-01T07")
    assert b.ok, b
    assert [(s.slice, s.date, s.outcome) for s in b.slices] == [
        ("date=2026-10-01/hour=06", "2026-10-01", "committed"),
        ("date=2026-10-01/hour=07", "2026-10-01", "committed"),
    ]
    # The same slice by the CLI (its logical date implied by the hour) is
    # the same run.
    code, out, err = cli(
        "run", "--module", MODULE, "--input", str(tmp_path / "events"),
        "--partition", "date=2026-10-01/hour=07", "--table", table,
    )
    assert code == 0 and out["outcome"]["kind"] == "memo", (out, err)
    # Listed values: a level below every hour (none there: missing).
    gap = idem.backfill(MODULE, str(tmp_path / "events"), table, "2026-10-01T06", "2026-10-01T06",
                        each={"region": ["eu"]})
    assert [s.slice for s in gap.slices] == ["date=2026-10-01/hour=06/region=eu"]
    assert not gap.ok and gap.slices[0].outcome == "missing"


def test_a_process_forked_after_idem_ran_is_refused_not_hung(tmp_path):
    import multiprocessing

    idem.run(MODULE, str(tmp_path / "t"), input=DATA, partition=DAY)

    def child(q):
        try:
            idem.log(str(tmp_path / "t"))
            q.put("ran")
        except idem.InputError as e:
            q.put(str(e))

    q = multiprocessing.get_context("fork").Queue()
    proc = multiprocessing.get_context("fork").Process(target=child, args=(q,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0, "the forked child hung or died"
    assert "before it forked" in q.get(timeout=5)


def failure(call):
    with pytest.raises(idem.IdemError) as info:
        call()
    return info.value


@pytest.mark.parametrize(
    "case",
    ["missing partition", "guest panics", "expectation fails", "unknown mode", "dead endpoint"],
)
def test_errors_are_the_cli_errors(tmp_path, case):
    table = str(tmp_path / "t")
    dead = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    kw, flags, env, cls = {
        "missing partition": (dict(partition="date=1999-01-01"), [], {}, idem.PartitionMissing),
        "guest panics": (dict(module=HOSTILE, params='{"mode": "panic"}'), ["--params", '{"mode": "panic"}'], {}, idem.GuestError),
        "expectation fails": (dict(expect=["rows(1000000..)"]), ["--expect", "rows(1000000..)"], {}, idem.CheckFailed),
        "unknown mode": (dict(mode="upsert"), ["--mode", "upsert"], {}, idem.InputError),
        "dead endpoint": (dict(table="s3://lake/t"), [], dead, idem.StorageError),
    }[case]
    args = dict(module=MODULE, table=table, input=DATA, partition=DAY, batch_rows=1000)
    args.update(kw)
    cmd = ["run", "--module", args["module"], "--input", DATA, "--partition", args["partition"]]
    cmd += ["--table", args["table"], "--batch-rows", "1000", *flags]
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        e = failure(lambda: idem.run(args.pop("module"), args.pop("table"), **args))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert type(e) is cls and isinstance(e, idem.IdemError)
    p = subprocess.run([BIN, "-q", *cmd], capture_output=True, text=True, env={**os.environ, **env})
    assert (e.exit_code, p.returncode) == (cls.exit_code, cls.exit_code)
    assert e.kind == {1: "check", 2: "input", 3: "guest", 4: "storage"}[e.exit_code]
    # The same message, but for the time a retrying store took.
    timeless = lambda text: re.sub(r"[0-9.]+m?s\b", "T", text)
    assert timeless(f"error: {e}\n") in timeless(p.stderr), (str(e), p.stderr)
    assert not os.path.exists(os.path.join(table, "_delta_log", "00000000000000000000.json"))


def test_bad_arguments_are_input_errors_before_anything_runs(tmp_path):
    table = str(tmp_path / "t")
    with pytest.raises(idem.InputError, match="give one slice"):
        idem.run(MODULE, table)
    with pytest.raises(idem.InputError, match="partition"):
        idem.run(MODULE, table, input=DATA)
    with pytest.raises(idem.InputError, match="list of strings"):
        idem.run(MODULE, table, input=DATA, partition=DAY, expect="rows(1..)")
    with pytest.raises(idem.InputError, match="expect"):
        idem.run(MODULE, table, input=DATA, partition=DAY, expect=["nonsense(x)"])
    with pytest.raises(idem.InputError):
        idem.run(MODULE, table, input=DATA, partition=DAY, limits=idem.Limits(max_memory_mb=1 << 62))
    for bad in [dict(batch_rows=2**32), dict(batch_rows=-1), dict(batch_rows=True), dict(delta_version=-1)]:
        with pytest.raises(idem.InputError):
            idem.run(MODULE, table, input=DATA, partition=DAY, **bad)
    with pytest.raises(idem.InputError, match="batch-rows must be from 1 to 1048576"):
        idem.run(MODULE, table, input=DATA, partition=DAY, batch_rows=2**31)
    with pytest.raises(idem.InputError, match="table must be a path"):
        idem.run(MODULE, None, input=DATA, partition=DAY)
    with pytest.raises(idem.InputError, match="audit_module"):
        idem.run(MODULE, table, input=DATA, partition=DAY, audit_params={"x": 1})
    assert not os.path.exists(table) and not os.path.exists("None")
    # Paths may be os.PathLike.
    r = idem.run(pathlib.Path(MODULE), tmp_path / "p", input=pathlib.Path(DATA), partition=DAY)
    assert r.outcome == "committed"


def test_the_gil_is_released_while_a_run_works(tmp_path):
    table = str(tmp_path / "t")
    done = {}

    def work():
        done["r"] = idem.run(MODULE, table, input=DATA, partition="date=2026-10-04", batch_rows=8192)

    t = threading.Thread(target=work)
    ticks = 0
    t.start()
    start = time.monotonic()
    while t.is_alive():
        ticks += 1
        time.sleep(0.001)
    seconds = time.monotonic() - start
    t.join()
    assert done["r"].outcome == "committed" and done["r"].rows_in == 400_000
    # Held GIL: this thread would not run until the call returned.
    assert seconds > 0.2 and ticks > seconds * 100, (ticks, seconds)


def test_spark_slices_are_checked_on_the_driver_before_any_job():
    # idem.spark imports pyspark only inside its tasks: the checks run
    # without a SparkSession (none is touched before they pass).
    import idem.spark

    with pytest.raises(idem.InputError, match="do not take"):
        idem.spark.run_slices(None, MODULE, "t", [{"input": DATA, "partiton": DAY}])
    with pytest.raises(idem.InputError, match="slices is empty"):
        idem.spark.run_slices(None, MODULE, "t", [])
    with pytest.raises(idem.InputError, match="list of slice specs"):
        idem.spark.run_slices(None, MODULE, "t", "date=2026-10-01")
    with pytest.raises(idem.InputError, match="not a dict"):
        idem.spark.run_slices(None, MODULE, "t", ["date=2026-10-01"])
    with pytest.raises(idem.InputError, match="before start"):
        idem.spark.backfill(None, MODULE, DATA, "t", "2026-10-02", "2026-10-01")
    with pytest.raises(idem.InputError, match="does not take"):
        idem.spark.backfill(None, MODULE, DATA, "t", "2026-10-01", "2026-10-02", jobs=2)
    with pytest.raises(idem.InputError, match="next=True"):
        idem.spark.run_slices(None, MODULE, "t", [{"input": DATA, "next": True}])
    with pytest.raises(idem.InputError, match="job_name"):
        idem.spark.run_slices(None, MODULE, "t", [{"input": DATA, "partition": DAY}], job_name="a:b")
    with pytest.raises(idem.InputError, match="64 lowercase hex"):
        idem.spark.run_slices(None, "sha256:abc", "t", [{"input": DATA, "partition": DAY}])
    with pytest.raises(idem.InputError, match="classic SparkSession"):
        idem.spark.run_slices(object(), MODULE, "t", [{"input": DATA, "partition": DAY}])
    with pytest.raises(idem.InputError, match="batch_rows"):
        idem.spark.run_slices(None, MODULE, "t", [{"input": DATA, "partition": DAY}], batch_rows=-1)
    with pytest.raises(idem.InputError, match="lineage must be"):
        idem.spark.run_slices(None, MODULE, "t", [{"input": DATA, "partition": DAY}], lineage="ftp://x/")

    class Ctx:
        def __init__(self, master):
            self.master = master

        def getConf(self):
            return {"spark.task.maxFailures": "7"}

    assert [idem.spark._max_failures(Ctx(m)) for m in ("local[2]", "local[*,3]", "local", "spark://h:7077")] == [1, 3, 1, 7]
    assert idem.spark._absolute("rel/t") == os.path.abspath("rel/t")
    assert idem.spark._absolute("s3://b/t") == "s3://b/t"
    assert idem.spark._dates("2026-02-27", "2026-03-01") == ["2026-02-27", "2026-02-28", "2026-03-01"]


def test_wap_writes_an_iceberg_branch_and_publishes_only_what_passes(tmp_path):
    table = f"iceberg+sqlite://{tmp_path}/lake/catalog.db#sales.t"
    with pytest.raises(idem.CheckFailed, match="Nothing was published: main is unchanged") as e:
        idem.run(MODULE, table, input=DATA, partition=DAY, wap=True, expect=["rows(..5)"])
    assert f"branch `wap/{DAY}`" in str(e.value)
    r = idem.run(MODULE, table, input=DATA, partition=DAY, wap="audit/x", expect=["rows(1..)"])
    assert r.outcome == "committed"
    # The same run as the CLI's --wap-branch plans, and the same run key as
    # without a branch (how it is published is not what it is).
    code, out, err = cli(
        "run", "--module", MODULE, "--input", DATA, "--partition", DAY, "--table", table,
        "--wap-branch", "audit/x", "--expect", "rows(1..)",
    )
    assert code == 0 and out["runKey"] == r.run_key and out["outcome"]["kind"] == "memo", err
    with pytest.raises(idem.InputError, match="a Delta table has no branches"):
        idem.run(MODULE, str(tmp_path / "d"), input=DATA, partition=DAY, wap=True)
    with pytest.raises(idem.InputError, match="wap must be True or a branch name"):
        idem.run(MODULE, table, input=DATA, partition=DAY, wap=5)
