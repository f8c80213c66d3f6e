"""A Spark standalone cluster on loopback, for tests/spark.rs and the
benchmark's Spark figure: one master and two workers of one core each,
started with pyspark's own `bin/spark-class` (pyspark 4.3.0 from PyPI, on
the machine's Java), each in a process group of its own, so that a SIGKILL
of a worker's group is a lost machine (the worker, its executor JVM and
their Python workers).

The workers run on 127.0.0.1 and 127.0.0.2: Spark never starts a
speculative copy of a task on the host that runs the original.

Run as a script, it starts the cluster, prints one JSON line ({"url",
"workers": [process group ids], "dir"}) and keeps it up until its stdin
closes; the environment it is given (AWS_* for the tables on S3,
IDEM_CACHE_DIR) is the executors' environment.

usage: cluster.py
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pyspark


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, env=None):
        self.home = os.path.dirname(pyspark.__file__)
        self.dir = tempfile.mkdtemp(prefix="idem-spark-")
        self.url = f"spark://127.0.0.1:{free_port()}"
        self.env = dict(os.environ, **(env or {}))
        self.master = self._daemon(
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", self.url.rsplit(":", 1)[1], "--webui-port", "0"],
            "127.0.0.1", "master.log")
        self.workers = []
        for i, ip in enumerate(["127.0.0.1", "127.0.0.2"]):
            self.workers.append(self._daemon(
                ["org.apache.spark.deploy.worker.Worker", "--host", ip, "--cores", "1",
                 "--memory", "1g", "--webui-port", "0",
                 "--work-dir", os.path.join(self.dir, f"work{i}"), self.url],
                ip, f"worker{i}.log"))
        self._wait_registered(2)

    def _daemon(self, args, ip, log):
        env = dict(self.env, SPARK_HOME=self.home, SPARK_LOCAL_IP=ip, SPARK_LOG_DIR=self.dir,
                   # A lost worker is noticed in seconds, not a minute: the
                   # master waits this long, and a worker heartbeats every
                   # quarter of it (both must be told, or the master drops
                   # workers that heartbeat every 15 s).
                   SPARK_MASTER_OPTS="-Dspark.worker.timeout=5",
                   SPARK_WORKER_OPTS="-Dspark.worker.timeout=5")
        with open(os.path.join(self.dir, log), "wb") as out:
            return subprocess.Popen([os.path.join(self.home, "bin", "spark-class"), *args],
                                    env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def _wait_registered(self, n):
        log = os.path.join(self.dir, "master.log")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with open(log, errors="replace") as f:
                if f.read().count("Registering worker") >= n:
                    return
            for p in [self.master, *self.workers]:
                if p.poll() is not None:
                    raise SystemExit(f"a Spark daemon exited ({p.returncode}): see {self.dir}")
            time.sleep(0.2)
        raise SystemExit(f"the Spark workers did not register in 120 s: see {log}")

    def stop(self):
        for p in [*self.workers, self.master]:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def main() -> None:
    c = Cluster()
    try:
        print(json.dumps({"url": c.url, "workers": [w.pid for w in c.workers], "dir": c.dir}), flush=True)
        sys.stdin.read()
    finally:
        c.stop()


if __name__ == "__main__":
    main()
