"""Read a table idem wrote with real engines that share no code with
idem's writer: ClickHouse (chdb: deltaLakeLocal / deltaLake, icebergLocal /
icebergS3)
and DuckDB (its delta extension's delta_scan; its iceberg extension's
iceberg_scan), each from a wheel, nothing downloaded at run time. Prints,
per engine, the rows in the JSON shape tests/read_delta_raw.py prints
(sorted JSON objects) or the error it gave:
{"clickhouse": {"rows": [...]} | {"error": "..."}, "duckdb": ...}.

usage: read_engines.py TABLE [--iceberg [--metadata URL]] [--engines clickhouse,duckdb]

TABLE is a Delta table (a folder, or `s3://bucket/key`, read through the
loopback server named by AWS_ENDPOINT_URL with AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY), or with --iceberg an Iceberg table's folder, local
or on S3 (ClickHouse finds its latest metadata file; DuckDB reads the
one --metadata names, else the local folder's latest). DuckDB's Iceberg extension is built for
DuckDB 1.4.4, so it runs from an environment of its own: --engines picks
the engines this interpreter has."""

import json
import os
import pathlib
import sys

import importlib


def rows_of(table):
    """Rows as read_delta_raw.py prints them: sorted JSON objects."""
    data = table.to_pylist()
    cols = sorted(table.column_names)
    return sorted(json.dumps({c: r.get(c) for c in cols}, sort_keys=True) for r in data)


def http_url(location):
    """`s3://bucket/key` as the loopback server's path-style URL."""
    endpoint = os.environ["AWS_ENDPOINT_URL"].rstrip("/")
    return f"{endpoint}/{location[len('s3://'):].rstrip('/')}/"


def clickhouse(location, iceberg, metadata):
    chdb = importlib.import_module("chdb")
    if iceberg and location.startswith("s3://"):
        source = "icebergS3('{}', '{}', '{}')".format(
            http_url(location), os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
        return chdb.query(f"SELECT * FROM {source}", "ArrowTable")
    if iceberg:
        path = pathlib.Path(location)
        os.chdir(path.parent)
        return chdb.query(f"SELECT * FROM icebergLocal('{path}')", "ArrowTable")
    if location.startswith("s3://"):
        url = http_url(location)
        # ClickHouse's own Delta reader: its delta-kernel reader sends the
        # loopback server a session token it refuses (InvalidToken), with
        # or without AWS_* in the environment (chdb 4.4).
        source = "deltaLake('{}', '{}', '{}') SETTINGS allow_experimental_delta_kernel_rs = 0".format(
            url, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    else:
        # chdb reads local paths under its working directory, absolute.
        path = pathlib.Path(location).resolve()
        os.chdir(path.parent)
        source = f"deltaLakeLocal('{path}')"
    return chdb.query(f"SELECT * FROM {source}", "ArrowTable")


def extension(package, name):
    """A .duckdb_extension file a wheel ships, by package and name."""
    # duckdb_ext is a namespace package (no __file__): its first folder.
    folder = pathlib.Path(list(importlib.import_module(package).__path__)[0])
    return next(folder.glob(f"extensions/**/{name}.duckdb_extension"))


def s3_secret(con):
    """The loopback server's credentials, as DuckDB's S3 secret."""
    host = os.environ["AWS_ENDPOINT_URL"].split("://", 1)[1].rstrip("/")
    con.execute(
        "CREATE SECRET (TYPE s3, KEY_ID ?, SECRET ?, ENDPOINT ?, URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')",
        [os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"], host])


def duck(location, iceberg, metadata):
    duckdb = importlib.import_module("duckdb")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false"})
    if iceberg:
        names = ("avro", "iceberg", "httpfs") if location.startswith("s3://") else ("avro", "iceberg")
        for name in names:
            con.execute(f"LOAD '{extension('duckdb_ext', name)}'")
        if location.startswith("s3://"):
            s3_secret(con)
        if metadata is None:
            metadata = str(max(pathlib.Path(location, "metadata").glob("*.metadata.json"),
                               key=lambda p: int(p.name.split("-", 1)[0])))
        return con.execute("SELECT * FROM iceberg_scan(?)", [metadata]).arrow().read_all()
    con.execute(f"LOAD '{extension('duckdb_extension_delta', 'delta')}'")
    if location.startswith("s3://"):
        con.execute(f"LOAD '{extension('duckdb_extension_httpfs', 'httpfs')}'")
        s3_secret(con)
    return con.execute("SELECT * FROM delta_scan(?)", [location]).arrow().read_all()


def main():
    args = sys.argv[1:]
    location, iceberg = args[0], "--iceberg" in args
    engines = args[args.index("--engines") + 1].split(",") if "--engines" in args else ["clickhouse", "duckdb"]
    metadata = args[args.index("--metadata") + 1] if "--metadata" in args else None
    if not location.startswith("s3://"):
        location = str(pathlib.Path(location).resolve())
    out = {}
    for name, read in (("clickhouse", clickhouse), ("duckdb", duck)):
        if name not in engines:
            continue
        try:
            out[name] = {"rows": rows_of(read(location, iceberg, metadata))}
        except Exception as e:  # the test names what an engine could not read
            out[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
