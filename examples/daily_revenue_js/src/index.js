// daily_revenue (JavaScript): a group-by aggregate emitted in `finish`. For
// every customer in the slice: order count and revenue (sum of `amount *
// quantity`, null amounts skipped), tagged with the day (the logical date,
// or the slice id when the scheduler gave none). Rows come out sorted by
// customer in UTF-8 byte order (Rust's string order, not JS's `<`), so the
// output equals examples/daily_revenue (Rust), digest for digest.

import {
  Batch, DataType, Field, Schema, IdemError, StringKeys, arith, column, exportTransform, markNulls,
  repeatString,
} from 'idem-guest';

const OUTPUT = new Schema([
  new Field('day', DataType.Utf8, false),
  new Field('customer', DataType.Utf8, false),
  new Field('orders', DataType.Int64, false),
  new Field('revenue', DataType.Float64, false),
]);

class DailyRevenue {
  constructor() {
    this.day = '';
    /** Customer -> group id; per-group running totals in growable typed arrays. */
    this.keys = new StringKeys();
    this.orders = new Float64Array(1024);
    // Sums start at -0, the identity of IEEE addition (-0 + x is x for every
    // x, -0 included), so the first value is stored exactly as the Rust map
    // insert stores it.
    this.revenue = new Float64Array(1024).fill(-0);
  }

  /** @param {import('idem-guest').Context} ctx */
  open(ctx) {
    this.day = ctx.logicalDate ?? ctx.sliceId;
    for (const [col, type] of [['customer', DataType.Utf8], ['amount', DataType.Float64], ['quantity', DataType.Int64]]) {
      const f = ctx.inputSchema.field(col);
      if (f === undefined) throw new IdemError(`input has no \`${col}\` column`);
      if (!f.type.equals(type)) throw new IdemError(`column \`${col}\` must be ${type}, not ${f.type}`);
    }
  }

  /** Three of the input's columns: the host decodes only those. */
  columns() {
    return ['customer', 'amount', 'quantity'];
  }

  /** @param {Batch} batch */
  push(batch) {
    const ids = this.keys.ids(batch.column('customer')); // -1 for a null customer
    // amount * quantity as f64, null where either is null; those rows are skipped.
    const value = arith(batch.column('amount'), '*', batch.column('quantity'));
    markNulls(ids, value.validity, -1);
    this.grow(this.keys.size);
    const orders = this.orders, revenue = this.revenue, v = value.values;
    for (let i = 0, n = ids.length; i < n; i++) {
      const g = ids[i];
      if (g < 0) continue;
      revenue[g] += v[i];
      orders[g] += 1;
    }
    return null;
  }

  finish() {
    // Only customers with at least one counted row (a row with a null amount
    // still interned its customer).
    const sorted = this.keys.sortedIds();
    const ids = [];
    for (const g of sorted) if (this.orders[g] > 0) ids.push(g);
    const n = ids.length;
    return new Batch(OUTPUT, [
      repeatString(this.day, n),
      column(DataType.Utf8, ids.map((g) => this.keys.keys[g])),
      column(DataType.Int64, ids.map((g) => this.orders[g])),
      column(DataType.Float64, Float64Array.from(ids, (g) => this.revenue[g])),
    ]);
  }

  /** @param {number} size */
  grow(size) {
    if (size <= this.orders.length) return;
    let cap = this.orders.length;
    while (cap < size) cap *= 2;
    const o = new Float64Array(cap), r = new Float64Array(cap).fill(-0);
    o.set(this.orders);
    r.set(this.revenue);
    this.orders = o;
    this.revenue = r;
  }
}

export const transform = exportTransform(DailyRevenue);
