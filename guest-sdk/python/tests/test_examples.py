"""The Python examples (examples/clean_orders_py, examples/daily_revenue_py)
run natively through the same byte path as the component, checked against
expectations computed independently (pyarrow.compute / plain Python)."""

import importlib.util
import json
import os
import random
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(SDK)), "examples")
sys.path.insert(0, SDK)

import idem_guest as ig  # noqa: E402
from idem_guest._runtime import Runner  # noqa: E402

try:
    import pyarrow as pa
    import pyarrow.compute as pc
except ImportError:  # pragma: no cover
    pa = None


def load(example):
    path = os.path.join(EXAMPLES, example, "app.py")
    spec = importlib.util.spec_from_file_location("example_" + example, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def orders(seed=3):
    """Three batches like the sample data; the last one is all below 10."""
    rng = random.Random(seed)
    customers = ["alice", "Bob", "émile", "zoë", "Åsa", "bob", "李", "ab", "a"]
    batches = []
    for b, n in enumerate((700, 500, 40)):
        amount = [None if rng.random() < 0.05 else round(rng.uniform(-5, 200), 2) for _ in range(n)]
        if b == 2:
            amount = [None if a is None else a % 9.5 for a in amount]
        batches.append(pa.record_batch([
            pa.array(["e%d-%d" % (b, i) for i in range(n)]),
            pa.array([b * 1000 + i for i in range(n)], pa.int64()),
            pa.array([rng.choice(customers) for _ in range(n)]),
            pa.array(amount, pa.float64()),
            pa.array([rng.randint(1, 9) for _ in range(n)], pa.int64()),
            pa.array([rng.choice(["new", "paid"]) for _ in range(n)]),
        ], schema=pa.schema([
            pa.field("event_id", pa.string(), False), pa.field("order_id", pa.int64(), False),
            pa.field("customer", pa.string(), False), pa.field("amount", pa.float64(), True),
            pa.field("quantity", pa.int64(), False), pa.field("status", pa.string(), False)])))
    return batches


def stream(batch):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def run(cls, batches, params, logical_date="2026-10-01", slice_id="date=2026-10-01"):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema):
        pass
    r = Runner(cls)
    cols = r.open(slice_id, logical_date, json.dumps(params), sink.getvalue().to_pybytes(), 1000)
    outs = []
    for b in batches:
        if cols is not None:
            b = b.select(cols)
        outs.append(r.push(stream(b)))
    outs.append(r.finish())
    return cols, [pa.ipc.open_stream(o).read_all() if o else None for o in outs]


@unittest.skipIf(pa is None, "pyarrow is not installed: example checks skipped")
@unittest.skipUnless(os.path.isdir(EXAMPLES), "examples directory not found")
class Examples(unittest.TestCase):
    def test_clean_orders(self):
        mod = load("clean_orders_py")
        batches = orders()
        cols, outs = run(mod.CleanOrders, batches, {"min_amount": 10})
        self.assertIsNone(cols)
        table = pa.Table.from_batches(batches)
        keep = pc.greater_equal(table["amount"], pa.scalar(10.0))
        kept = table.filter(keep)
        total = pc.multiply(kept["amount"], pc.cast(kept["quantity"], pa.float64()))
        want = kept.append_column(pa.field("total", pa.float64(), True), total)
        got = pa.concat_tables([o for o in outs if o is not None])
        self.assertTrue(got.schema.equals(want.schema), (got.schema, want.schema))
        self.assertTrue(got.equals(want))
        # The all-filtered batch still tells the schema: zero rows, not "nothing".
        self.assertIsNotNone(outs[2])
        self.assertEqual(outs[2].num_rows, 0)
        self.assertTrue(outs[2].schema.equals(want.schema))
        self.assertIsNone(outs[3])  # finish emits nothing

    def test_clean_orders_defaults_and_errors(self):
        mod = load("clean_orders_py")
        _, outs = run(mod.CleanOrders, orders(), {})
        table = pa.Table.from_batches(orders())
        self.assertEqual(sum(o.num_rows for o in outs if o is not None),
                         table.num_rows - table["amount"].null_count
                         - pc.sum(pc.less(table["amount"], 0.0)).as_py())
        with self.assertRaisesRegex(Exception, "min_amount"):
            run(mod.CleanOrders, orders(), {"min_amount": "ten"})
        with self.assertRaisesRegex(ig.IdemError, r"unknown parameter `min_amont` \(did you mean "
                                    r"`min_amount`\?\): this transform takes `min_amount` "
                                    r"\(number, default 0.0\)"):
            run(mod.CleanOrders, orders(), {"min_amont": 10})

    def test_daily_revenue(self):
        mod = load("daily_revenue_py")
        batches = orders()
        cols, outs = run(mod.DailyRevenue, batches, {})
        self.assertEqual(cols, ["customer", "amount", "quantity"])
        self.assertEqual(outs[:3], [None, None, None])
        groups = {}
        for b in batches:
            for c, a, q in zip(*(b.column(n).to_pylist() for n in ("customer", "amount", "quantity"))):
                if a is None:
                    continue
                g = groups.setdefault(c, [0, None])
                g[0] += 1
                g[1] = a * q if g[1] is None else g[1] + a * q  # row order, as Rust adds
        keys = sorted(groups, key=lambda k: k.encode("utf-8"))
        want = pa.table({
            "day": pa.array(["2026-10-01"] * len(keys)),
            "customer": pa.array(keys),
            "orders": pa.array([groups[k][0] for k in keys], pa.int64()),
            "revenue": pa.array([groups[k][1] for k in keys], pa.float64()),
        }, schema=pa.schema([pa.field("day", pa.string(), False),
                             pa.field("customer", pa.string(), False),
                             pa.field("orders", pa.int64(), False),
                             pa.field("revenue", pa.float64(), False)]))
        self.assertTrue(outs[3].equals(want), (outs[3].to_pydict(), want.to_pydict()))
        _, outs = run(mod.DailyRevenue, batches, {}, logical_date=None)
        self.assertEqual(set(outs[3]["day"].to_pylist()), {"date=2026-10-01"})


if __name__ == "__main__":
    unittest.main()
