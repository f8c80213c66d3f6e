"""Test guest (tests/languages.rs). `{"mode": ...}`:

- throw: push raises ValueError with a message naming the batch
- clock: open reads time.time()
- clock-from: open calls `time` imported with `from time import time` before
  idem_guest (the SDK's guards are armed before this module is imported)
- date: open reads datetime.datetime.now()
- random: finish emits 4 random.random() values as column `r`
- log: open prints a line
- side: open reads side input `customers`; finish emits one row: the side
  inputs' names, its rows and its first `customer`
"""

import datetime
import random
import time
from time import time as wall_time

import idem_guest as ig


class Probe(ig.Transform):
    def open(self, ctx):
        self.mode = ctx.param_str("mode", "random")
        if self.mode == "clock":
            self.t = time.time()
        if self.mode == "clock-from":
            self.t = wall_time()
        if self.mode == "date":
            self.t = datetime.datetime.now()
        if self.mode == "log":
            print("hello from a Python guest")
        if self.mode == "side":
            b = ctx.side_input("customers")
            self.side = (",".join(ctx.side_input_names()), b.num_rows, b.column("customer")[0])

    def push(self, batch):
        if self.mode == "throw":
            raise ValueError(f"boom at a batch of {batch.num_rows} rows")
        return None

    def finish(self):
        if self.mode == "side":
            names, rows, first = self.side
            schema = ig.Schema([ig.Field("names", ig.utf8, False), ig.Field("rows", ig.float64, False),
                                ig.Field("first", ig.utf8, False)])
            return ig.Batch(schema, [ig.column([names], ig.utf8), ig.column([float(rows)], ig.float64),
                                     ig.column([first], ig.utf8)], 1)
        if self.mode != "random":
            return None
        values = [random.random() for _ in range(4)]
        schema = ig.Schema([ig.Field("r", ig.float64, False)])
        return ig.Batch(schema, [ig.column(ig.float64, values)], 4)


ig.export(Probe)
