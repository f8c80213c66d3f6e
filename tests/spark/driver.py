"""A Spark driver for tests/spark.rs: one application on the standalone
cluster at argv[1], running the jobs of the JSON plan in argv[2] through
idem.spark one after the other, and printing each job's outcome
DataFrame as one JSON line ({"job": name, "rows": [...]}) on stdout.

The plan: {"app": name, "conf": {spark conf}, "jobs": [{"name": ...,
"call": "backfill" | "run_slices", "args": {...keywords...}}]}.
"""
import json
import os
import sys
import time

from pyspark.sql import SparkSession

import idem
import idem.spark


def main() -> None:
    master, plan = sys.argv[1], json.loads(sys.argv[2])
    # The executors' Python is this one (it has the idem package): a driver
    # started without spark-submit names it in PYSPARK_PYTHON.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(master)
        .appName(plan["app"])
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.memory", "512m")
    )
    for k, v in plan.get("conf", {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for job in plan["jobs"]:
            args = dict(job["args"])
            if "limits" in args:
                args["limits"] = idem.Limits(**args["limits"])
            call = getattr(idem.spark, job["call"])
            started = time.monotonic()
            df = call(spark, **args)
            rows = [r.asDict(recursive=True) for r in df.orderBy("slice").collect()]
            print(json.dumps({"job": job["name"], "seconds": time.monotonic() - started, "rows": rows}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
