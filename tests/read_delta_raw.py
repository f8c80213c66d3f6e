"""Second independent reader for the end-to-end tests, sharing no code with
the writer (delta-rs) or with the first reader (PyPI deltalake, which is
delta-rs underneath): it replays the `_delta_log/*.json` commits itself
(add/remove), reads the listed Parquet files with pyarrow, restores the
partition columns from the log (and, as null, the columns a file predates:
the table's schema is its latest metaData's), and prints the same JSON shape as
read_delta.py: {"version", "columns", "rows"} with rows as sorted JSON,
and "commits": the commits naming each idem slice.
Local paths and s3:// URLs (pyarrow's own S3 client, settings from the
standard AWS variables).

usage: read_delta_raw.py TABLE [VERSION]   (or a .parquet file: its rows)
"""
import json
import os
import sys
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs
import pyarrow.parquet as pq


def filesystem(location):
    if not location.startswith("s3://"):
        return pafs.LocalFileSystem(), os.path.abspath(location)
    endpoint = urlparse(os.environ["AWS_ENDPOINT_URL"])
    fs = pafs.S3FileSystem(
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region=os.environ.get("AWS_REGION", "us-east-1"),
        endpoint_override=endpoint.netloc,
        scheme=endpoint.scheme,
    )
    return fs, location[len("s3://"):].rstrip("/")


def replay(fs, table, version):
    infos = fs.get_file_info(pafs.FileSelector(table + "/_delta_log"))
    commits = sorted(i.base_name for i in infos
                     if i.base_name.endswith(".json") and i.base_name[:20].isdigit())
    if not commits:
        raise SystemExit(f"{table}: no commits")
    if int(commits[0][:20]) != 0:
        raise SystemExit(f"{table}: log starts at a checkpoint; this reader replays JSON only")
    files, partitions, latest, schema = {}, [], -1, None
    commits_of = {}
    for name in commits:
        v = int(name[:20])
        if version is not None and v > version:
            break
        if v != latest + 1:
            raise SystemExit(f"{table}: commit {latest + 1} is missing")
        latest = v
        with fs.open_input_stream(f"{table}/_delta_log/{name}") as f:
            for line in f.read().decode().splitlines():
                action = json.loads(line)
                if "commitInfo" in action and "idem.slice" in action["commitInfo"]:
                    key = action["commitInfo"]["idem.slice"]
                    commits_of[key] = commits_of.get(key, 0) + 1
                if "metaData" in action:
                    partitions = action["metaData"].get("partitionColumns", [])
                    fields = json.loads(action["metaData"]["schemaString"])["fields"]
                    schema = sorted(f["name"] for f in fields)
                elif "add" in action:
                    a = action["add"]
                    files[unquote(a["path"])] = a.get("partitionValues") or {}
                elif "remove" in action:
                    files.pop(unquote(action["remove"]["path"]), None)
    return latest, files, partitions, commits_of, schema


def main():
    fs, table = filesystem(sys.argv[1])
    version = int(sys.argv[2]) if len(sys.argv) > 2 else None
    if fs.get_file_info(table).type == pafs.FileType.File:
        # One Parquet file (e.g. a transform's native output), same shape.
        latest, files, partitions, commits_of, schema = -1, {os.path.basename(table): {}}, [], {}, None
        table = os.path.dirname(table)
    else:
        latest, files, partitions, commits_of, schema = replay(fs, table, version)
    rows, cols = [], schema
    for path, values in sorted(files.items()):
        data = pq.read_table(f"{table}/{path}", filesystem=fs).to_pylist()
        for r in data:
            for p in partitions:
                r[p] = values.get(p)
            rows.append(r)
            cols = cols or sorted(r)
    rows = [json.dumps({c: r.get(c) for c in cols}, sort_keys=True) for r in rows]
    rows.sort()
    # "commits": how many commits name each idem slice (commitInfo's
    # idem.slice), for the tests that count them.
    print(json.dumps({"version": latest, "columns": cols or [], "rows": rows, "commits": commits_of}))


if __name__ == "__main__":
    main()
