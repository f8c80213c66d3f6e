"""`clean_orders` in Python: a stateless transform. Keeps orders whose
`amount` is at least the `min_amount` parameter (rows with a null amount are
dropped) and adds a derived column `total = amount * quantity`.

Params: `{"min_amount": 10.0}` (a number, default 0), declared in the
class's `params`: any other key (a typo such as `min_amont`) or a value that
is not a number fails the run, naming it. Same output, byte for byte in
digest terms, as the Rust example in examples/clean_orders.
"""

import operator

import idem_guest as ig
from idem_guest import compute


class CleanOrders(ig.Transform):
    params = [ig.Param("min_amount", float, default=0.0, doc="orders below this amount are dropped")]

    def open(self, ctx):
        # The SDK has checked the param and filled its default in.
        self.min_amount = ctx.param_float("min_amount")
        input = ctx.input_schema
        input.require("amount", ig.float64)
        input.require("quantity", ig.int64)
        # The input's fields, then `total` (nullable, as arrow's `binary`
        # kernel makes it).
        self.schema = ig.Schema(list(input.fields) + [ig.Field("total", ig.float64, True)])

    def push(self, batch):
        # Null amounts compare as null, which the filter drops.
        keep = compute.ge(batch.column("amount"), self.min_amount)
        kept = batch.filter(keep)
        if kept.num_rows == 0:
            # No rows, but the schema: an all-filtered slice still commits
            # (and empties its rows in the table).
            return ig.Batch.empty(self.schema)
        total = compute.derive(ig.float64, operator.mul, kept.column("amount"),
                               kept.column("quantity"))
        return ig.Batch(self.schema, kept.columns + [total], kept.num_rows)


ig.export(CleanOrders)
