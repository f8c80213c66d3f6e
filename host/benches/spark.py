"""Figure 13 (`cargo bench -p idem -- --only spark`): the same backfill of
`slices` small daily slices by one `idem backfill --jobs 2` process and by
idem.spark on a 2-worker standalone cluster (tests/spark/cluster.py: one
core per worker, on this machine), each into a fresh table, alternating,
`samples` times; medians. The Spark side is the job alone in a running
application (its start-up is reported apart), so the difference is what
Spark adds per slice: task scheduling, the Python worker, the package's
call. This machine has 2 cores: the figure is about overhead, not
speed-up.

usage: spark.py IDEM_BIN MODULE DATA_ROOT WORK_DIR SLICES SAMPLES
Prints one JSON document on stdout.
"""
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "spark"))

from cluster import Cluster  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import idem.spark  # noqa: E402


def main() -> None:
    binary, module, data, work = sys.argv[1:5]
    slices, samples = int(sys.argv[5]), int(sys.argv[6])
    start = datetime.date(2026, 10, 1)
    end = (start + datetime.timedelta(days=slices - 1)).isoformat()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    cluster = Cluster()
    try:
        t = time.monotonic()
        spark = (
            SparkSession.builder.master(cluster.url).appName("idem-bench")
            .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        # One job first: the executors and their Python workers start.
        idem.spark.run_slices(spark, module, os.path.join(work, "warm"),
                              [{"input": data, "partition": f"date={start}"}])
        startup = time.monotonic() - t
        host, cluster_s = [], []
        for i in range(samples):
            t = time.monotonic()
            subprocess.run([binary, "-q", "backfill", "--module", module, "--input", data,
                            "--table", os.path.join(work, f"host-{i}"), "--from", start.isoformat(),
                            "--to", end, "--jobs", "2"], check=True, capture_output=True)
            host.append(time.monotonic() - t)
            t = time.monotonic()
            df = idem.spark.backfill(spark, module, data, os.path.join(work, f"spark-{i}"),
                                     start.isoformat(), end)
            cluster_s.append(time.monotonic() - t)
            outcomes = {r.outcome for r in df.collect()}
            assert outcomes == {"committed"}, outcomes
        spark.stop()
    finally:
        cluster.stop()
    h, c = statistics.median(host), statistics.median(cluster_s)
    print(json.dumps({
        "slices": slices,
        "samples": samples,
        "host_seconds": h,
        "spark_seconds": c,
        "host_slices_per_s": slices / h,
        "spark_slices_per_s": slices / c,
        "overhead_ms_per_slice": (c - h) / slices * 1000,
        "spark_startup_seconds": startup,
    }))


if __name__ == "__main__":
    main()
