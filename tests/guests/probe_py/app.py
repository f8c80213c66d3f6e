"""Test guest (tests/languages.rs). `{"mode": ...}`:

- throw: push raises ValueError with a message naming the batch
- clock: open reads time.time()
- clock-from: open calls `time` imported with `from time import time` before
  idem_guest (the SDK's guards are armed before this module is imported)
- date: open reads datetime.datetime.now()
- random: finish emits 4 random.random() values as column `r`
- log: open prints a line
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

    def push(self, batch):
        if self.mode == "throw":
            raise ValueError(f"boom at a batch of {batch.num_rows} rows")
        return None

    def finish(self):
        if self.mode != "random":
            return None
        values = [random.random() for _ in range(4)]
        schema = ig.Schema([ig.Field("r", ig.float64, False)])
        return ig.Batch(schema, [ig.column(ig.float64, values)], 4)


ig.export(Probe)
