"""The glue without WIT bindings: Runner (open/push/finish over IPC bytes),
the host's columns() checks, error messages, Context parameters, export,
native.run, and the sandbox guards (in a subprocess: they patch the
interpreter)."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
sys.path.insert(0, SDK)

import idem_guest as ig  # noqa: E402
from idem_guest import ipc, native  # noqa: E402
from idem_guest._runtime import Runner, describe_exception, format_stack  # noqa: E402
from idem_guest.transform import exported_class  # noqa: E402

SCHEMA = ig.Schema([ig.Field("k", ig.utf8, False), ig.Field("x", ig.float64)])


def batch(keys, xs):
    return ig.Batch.from_pydict({"k": keys, "x": xs}, SCHEMA)


class Doubler(ig.Transform):
    def open(self, ctx):
        self.factor = ctx.param_float("factor", 2.0)
        self.seen = 0

    def push(self, b):
        self.seen += b.num_rows
        x = ig.compute.derive(ig.float64, lambda v: v * self.factor, b["x"])
        return b.with_column(ig.Field("x", ig.float64), x)

    def finish(self):
        return ig.Batch.from_pydict({"k": ["total"], "x": [float(self.seen)]}, SCHEMA)


class Narrow(ig.Transform):
    def columns(self):
        return ["x"]

    def push(self, b):
        return b


def run_bytes(cls, batches, params="{}"):
    r = Runner(cls)
    cols = r.open("date=2026-10-01", "2026-10-01", params, ipc.write_schema(SCHEMA), 8192)
    outs = []
    for b in batches:
        if cols is not None:
            b = b.select(cols)
        outs.append(r.push(ipc.write_stream(b)))
    outs.append(r.finish())
    return cols, outs


class RunnerTests(unittest.TestCase):
    def test_bytes_in_bytes_out(self):
        cols, outs = run_bytes(Doubler, [batch(["a", "b"], [1.0, None]), batch(["c"], [3.5])],
                               '{"factor": 10}')
        self.assertIsNone(cols)
        got = [ipc.read_batch(o).to_pydict() for o in outs]
        self.assertEqual(got, [{"k": ["a", "b"], "x": [10.0, None]}, {"k": ["c"], "x": [35.0]},
                               {"k": ["total"], "x": [3.0]}])

    def test_columns_declared(self):
        cols, outs = run_bytes(Narrow, [batch(["a"], [1.0])])
        self.assertEqual(cols, ["x"])
        self.assertEqual(ipc.read_batch(outs[0]).column_names, ["x"])
        self.assertEqual(outs[-1], b"")

    def test_empty_push_and_none_output(self):
        r = Runner(Narrow)
        r.open("s", None, "", ipc.write_schema(SCHEMA), 10)
        self.assertEqual(r.push(b""), b"")
        self.assertEqual(r.finish(), b"")

    def test_columns_checks(self):
        for answer, msg in (([], "empty list"), (["x", "x"], "`x` is declared twice"),
                            ("x", "list of column names"), ([1], "column names")):
            class T(ig.Transform):
                def columns(self, answer=answer):
                    return answer

                def push(self, b):
                    return None
            with self.subTest(answer=answer):
                with self.assertRaisesRegex(ig.IdemError, msg):
                    Runner(T).open("s", None, "{}", ipc.write_schema(SCHEMA), 1)

    def test_order_and_bad_input(self):
        r = Runner(Doubler)
        with self.assertRaisesRegex(ig.IdemError, "push before open"):
            r.push(b"")
        with self.assertRaisesRegex(ig.IdemError, "finish before open"):
            r.finish()
        with self.assertRaisesRegex(ig.IdemError, "params are not JSON"):
            r.open("s", None, "{nope", ipc.write_schema(SCHEMA), 1)
        with self.assertRaisesRegex(ig.IdemError, "input schema"):
            r.open("s", None, "{}", b"\x00" * 3, 1)

    def test_bad_return(self):
        class T(ig.Transform):
            def push(self, b):
                return {"k": []}
        r = Runner(T)
        r.open("s", None, "{}", ipc.write_schema(SCHEMA), 1)
        with self.assertRaisesRegex(ig.IdemError, "must return an idem_guest.Batch or None, not dict"):
            r.push(ipc.write_stream(batch(["a"], [1.0])))


class Joined(ig.Transform):
    """Reads side input `dim` whole in open."""

    def open(self, ctx):
        self.names = ctx.side_input_names()
        self.dim = ctx.side_input("dim")

    def push(self, b):
        return None


class SideInputTests(unittest.TestCase):
    def runner_with(self, *streams):
        r = Runner(Joined)
        for name, data in streams:
            r.side_input(name, data)
        return r

    def open(self, r):
        return r.open("date=2026-10-01", None, "{}", ipc.write_schema(SCHEMA), 8192)

    def test_batches_are_joined_in_order_and_handed_to_open(self):
        r = self.runner_with(
            ("dim", ipc.write_stream(batch(["a"], [1.0]))),
            ("other", ipc.write_stream(batch([], []))),
            ("dim", ipc.write_stream(batch(["b", "c"], [2.0, None]))),
        )
        self.open(r)
        t = r.transform
        self.assertEqual(t.names, ["dim", "other"])
        self.assertEqual(t.dim.num_rows, 3)
        self.assertEqual([t.dim["k"][i] for i in range(3)], ["a", "b", "c"])
        # The next run's side inputs start empty.
        self.assertEqual(r.sides, {})

    def test_a_missing_side_input_is_named_with_those_given(self):
        r = self.runner_with(("other", ipc.write_stream(batch([], []))))
        with self.assertRaises(ig.IdemError) as e:
            self.open(r)
        self.assertIn("no side input `dim` (it gives: other)", str(e.exception))
        self.assertIn("--side dim=TABLE", str(e.exception))

    def test_a_batch_of_another_schema_and_too_many_are_refused(self):
        other = ig.Schema([ig.Field("k", ig.utf8, False)])
        r = self.runner_with(("dim", ipc.write_stream(batch(["a"], [1.0]))))
        with self.assertRaises(ig.IdemError) as e:
            r.side_input("dim", ipc.write_stream(ig.Batch.from_pydict({"k": ["x"]}, other)))
        self.assertIn("another schema", str(e.exception))
        r = Runner(Joined)
        for i in range(16):
            r.side_input("s%02d" % i, ipc.write_stream(batch([], [])))
        with self.assertRaises(ig.IdemError) as e:
            r.side_input("one-more", ipc.write_stream(batch([], [])))
        self.assertIn("more than 16 side inputs", str(e.exception))


class Errors(unittest.TestCase):
    def test_location_of_user_code(self):
        class T(ig.Transform):
            def push(self, b):
                return int("x")  # the line reported
        line = T.push.__code__.co_firstlineno + 1
        r = Runner(T)
        r.open("s", None, "{}", ipc.write_schema(SCHEMA), 1)
        try:
            r.push(ipc.write_stream(batch(["a"], [1.0])))
        except ValueError as e:
            msg = describe_exception(e)
            stack = format_stack(e)
        self.assertRegex(msg, r"^ValueError: invalid literal for int\(\) with base 10: 'x' "
                              r"\(at .*test_runtime.py:%d in push\)$" % line)
        self.assertNotIn("idem_guest/_runtime.py", stack.splitlines()[1])

    def test_sdk_error_points_at_caller(self):
        try:
            batch(["a"], [1.0]).column("nope")
        except ig.IdemError as e:
            msg = describe_exception(e)
        self.assertTrue(msg.startswith("no column `nope` (columns: k, x) (at "), msg)
        self.assertIn("test_runtime.py", msg)

    def test_key_error_and_recursion(self):
        try:
            {}["missing"]
        except KeyError as e:
            self.assertTrue(describe_exception(e).startswith("KeyError: 'missing' (at "))

        def f(n):
            return f(n + 1)
        try:
            f(0)
        except RecursionError as e:
            stack = format_stack(e)
        self.assertIn("repeated", stack)
        self.assertLess(len(stack), 2000)


class ContextTests(unittest.TestCase):
    def test_params(self):
        ctx = ig.Context("s", None, {"n": 3, "f": 2.5, "s": "x", "b": True, "z": None, "i": 4.0})
        self.assertEqual(ctx.param_float("n"), 3.0)
        self.assertEqual(ctx.param_float("f"), 2.5)
        self.assertEqual(ctx.param_float("missing", 1.5), 1.5)
        self.assertEqual(ctx.param_float("z", 0.0), 0.0)
        self.assertEqual(ctx.param_int("i"), 4)
        self.assertEqual(ctx.param_str("s"), "x")
        self.assertIs(ctx.param_bool("b"), True)
        for call, msg in ((lambda: ctx.param_float("s"), 'parameter `s` must be a number, got "x"'),
                          (lambda: ctx.param_float("b"), "parameter `b` must be a number, got true"),
                          (lambda: ctx.param_str("n"), "parameter `n` must be a string, got 3"),
                          (lambda: ctx.param_int("f"), "parameter `f` must be an integer, got 2.5"),
                          (lambda: ctx.param_bool("n"), "parameter `n` must be true or false")):
            with self.assertRaises(ig.IdemError) as cm:
                call()
            self.assertIn(msg, str(cm.exception))


class ExportAndNative(unittest.TestCase):
    def test_export(self):
        class Mine(ig.Transform):
            def push(self, b):
                return b
        self.assertIs(ig.export(Mine), Mine)
        self.assertIs(exported_class(), Mine)
        with self.assertRaises(TypeError):
            ig.export(Mine())

    def test_native_run_projects(self):
        ctx = ig.Context("s", None, {}, None, 2)
        out = native.run(Narrow, ctx, [batch(["a", "b"], [1.0, 2.0])])
        self.assertEqual([o.column_names for o in out], [["x"]])

        class Wants(ig.Transform):
            def columns(self):
                return ["nope"]

            def push(self, b):
                return b
        with self.assertRaisesRegex(ig.IdemError, "the input has no column `nope`"):
            native.run(Wants, ig.Context(), [batch(["a"], [1.0])])

    def test_native_run_ipc(self):
        outs = native.run_ipc(Doubler, [ipc.write_stream(batch(["a"], [2.0]))],
                              ig.Context("s", None, {"factor": 3}))
        self.assertEqual(ipc.read_batch(outs[0]).column("x").to_pylist(), [6.0])


SANDBOX_SCRIPT = r"""
import sys, json
sys.path.insert(0, %(sdk)r)
from datetime import datetime as early
from idem_guest import _sandbox, log
import time, random, datetime, os, logging, warnings
lines = []
log._sink = lambda level, msg: lines.append((level, msg))
_sandbox.install()
from datetime import datetime as late
_sandbox.activate()
res = {}
def attempt(name, f):
    try:
        res[name] = repr(f())
    except BaseException as e:
        res[name] = "%%s: %%s" %% (type(e).__name__, e)
for name, f in [("time", time.time), ("time_ns", time.time_ns), ("monotonic", time.monotonic),
                ("perf_counter", time.perf_counter), ("sleep", lambda: time.sleep(0)),
                ("localtime", time.localtime), ("localtime0", lambda: time.localtime(0).tm_year),
                ("strftime", lambda: time.strftime("%%Y")),
                ("now", late.now), ("utcnow", late.utcnow), ("today", datetime.date.today),
                ("dt_today", late.today), ("urandom", lambda: os.urandom(2)),
                ("seed_none", lambda: random.seed()), ("Random", lambda: random.Random()),
                ("Random42", lambda: random.Random(42).random()),
                ("sysrandom", lambda: random.SystemRandom().random()),
                ("open", lambda: open("/etc/hostname")), ("listdir", lambda: os.listdir(".")),
                ("import", lambda: __import__("this_module_does_not_exist_xyz")),
                ("isinstance", lambda: (isinstance(early(2020, 1, 1), datetime.datetime),
                                        isinstance(late(2020, 1, 1), datetime.date),
                                        issubclass(late, datetime.date))),
                ("strptime", lambda: str(late.strptime("2026-10-01", "%%Y-%%m-%%d")))]:
    attempt(name, f)
res["random"] = [random.random(), random.random()]
_sandbox.activate()
res["random_again"] = [random.random(), random.random()]
print("to stdout", 1)
print("partial", end="")
sys.stderr.write("to stderr\n")
_sandbox.flush_streams()
logging.getLogger("app").warning("logged %%d", 5)
warnings.warn("careful")
res["lines"] = lines
out = open.__wrapped__(%(fd)d, "w")  # open() itself is guarded now
out.write(json.dumps(res))
out.close()
"""


class Sandbox(unittest.TestCase):
    def test_guards(self):
        r, w = os.pipe()
        script = SANDBOX_SCRIPT % {"sdk": SDK, "fd": w}
        p = subprocess.Popen([sys.executable, "-c", script], pass_fds=(w,),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(w)
        with os.fdopen(r) as f:
            out = f.read()
        p.wait()
        self.assertEqual(p.returncode, 0, p.stderr.read().decode())
        res = json.loads(out)
        for name in ("time", "time_ns", "monotonic", "perf_counter", "localtime", "strftime",
                     "now", "utcnow", "today", "dt_today"):
            self.assertTrue(res[name].startswith("SandboxError: the clock is not available"),
                            (name, res[name]))
        self.assertIn("time.sleep() is not available", res["sleep"])
        self.assertEqual(res["localtime0"], "1970")
        for name in ("urandom", "sysrandom"):
            self.assertIn("OS randomness is not available", res[name])
        for name in ("seed_none", "Random"):
            self.assertIn("pass a seed", res[name])
        self.assertEqual(res["Random42"], repr(__import__("random").Random(42).random()))
        self.assertIn("filesystem is not available", res["open"])
        self.assertIn("filesystem is not available", res["listdir"])
        self.assertIn("ModuleNotFoundError: module `this_module_does_not_exist_xyz` was not imported",
                      res["import"])
        self.assertEqual(res["isinstance"], "(True, True, True)")
        self.assertEqual(res["strptime"], "'2026-10-01 00:00:00'")
        self.assertEqual(res["random"], [0.8444218515250481, 0.7579544029403025])
        self.assertEqual(res["random_again"], res["random"])
        lines = [tuple(x) for x in res["lines"]]
        self.assertIn((1, "to stdout 1"), lines)
        self.assertIn((1, "partial"), lines)
        self.assertIn((2, "to stderr"), lines)
        self.assertIn((2, "app: logged 5"), lines)
        self.assertTrue(any(lv == 2 and "UserWarning: careful" in m for lv, m in lines), lines)


if __name__ == "__main__":
    unittest.main()
