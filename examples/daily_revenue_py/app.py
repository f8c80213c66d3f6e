"""`daily_revenue` in Python: a group-by aggregate emitted in `finish`. For
every customer in the slice: order count and revenue (sum of `amount *
quantity`, null amounts skipped), tagged with the day (the logical date, or
the slice id when the scheduler gave none). Rows come out sorted by customer
in UTF-8 byte order (sorted in `finish`, never dict order), as the Rust
example in examples/daily_revenue does.
"""

import operator
from itertools import compress

import idem_guest as ig
from idem_guest import compute


class DailyRevenue(ig.Transform):
    def open(self, ctx):
        self.day = ctx.logical_date if ctx.logical_date is not None else ctx.slice_id
        for col, ty in (("customer", ig.utf8), ("amount", ig.float64), ("quantity", ig.int64)):
            f = ctx.input_schema.get(col)
            if f is None:
                raise ig.IdemError("input has no `%s` column" % col)
            if f.type != ty:
                raise ig.IdemError("column `%s` must be %s, not %s" % (col, ty, f.type))
        # customer (UTF-8 bytes) -> order count, revenue
        self.orders = {}
        self.revenue = {}

    def columns(self):
        # Three of the input's columns: the host decodes only those.
        return ["customer", "amount", "quantity"]

    def push(self, batch):
        customer = batch.column("customer")
        amount = batch.column("amount")
        quantity = batch.column("quantity")
        keys = customer.bytes_list()  # no decoding: bytes keys sort like Rust strings
        values = map(operator.mul, amount.values, quantity.values)
        valid = ig.mask_and(ig.mask_and(customer.valid01(), amount.valid01()), quantity.valid01())
        if valid is not None:
            keys = list(compress(keys, valid))
            values = compress(values, valid)
        # Row order per customer, as Rust adds (float sums depend on it);
        # both loops run in C.
        compute.count_by_key(self.orders, keys)
        compute.sum_by_key(self.revenue, keys, values)
        return None

    def finish(self):
        schema = ig.Schema([
            ig.Field("day", ig.utf8, False),
            ig.Field("customer", ig.utf8, False),
            ig.Field("orders", ig.int64, False),
            ig.Field("revenue", ig.float64, False),
        ])
        keys = sorted(self.orders)  # bytes order = UTF-8 byte order, as Rust sorts
        return ig.Batch(schema, [
            ig.column([self.day] * len(keys), ig.utf8),
            ig.BinaryColumn.from_parts(ig.utf8, keys),
            ig.column(list(map(self.orders.__getitem__, keys)), ig.int64),
            ig.column(list(map(self.revenue.__getitem__, keys)), ig.float64),
        ])


ig.export(DailyRevenue)
