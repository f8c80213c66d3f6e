// clean_orders (JavaScript): a stateless transform. Keeps orders whose
// `amount` is at least the `min_amount` parameter (rows with a null amount
// are dropped) and adds a derived column `total = amount * quantity`.
// Same output as examples/clean_orders (Rust), digest for digest.
//
// Params: {"min_amount": 10.0} (a number, default 0), declared in `static
// params`: any other key (a typo such as `min_amont`) or a value that is
// not a number fails the run, naming it.

import {
  Batch, DataType, Field, Schema, IdemError, arith, compare, exportTransform, filter,
} from 'idem-guest';

class CleanOrders {
  static params = [
    { name: 'min_amount', type: 'number', default: 0, doc: 'orders below this amount are dropped' },
  ];

  /** @param {import('idem-guest').Context} ctx */
  open(ctx) {
    // The SDK has checked the param and filled its default in.
    this.minAmount = ctx.paramNumber('min_amount');
    const input = ctx.inputSchema;
    for (const [col, type] of [['amount', DataType.Float64], ['quantity', DataType.Int64]]) {
      const f = input.field(col);
      if (f === undefined) throw new IdemError(`input has no \`${col}\` column`);
      if (!f.type.equals(type)) throw new IdemError(`column \`${col}\` must be ${type}, the input has ${f.type}`);
    }
    this.schema = new Schema([...input.fields, new Field('total', DataType.Float64, true)]);
  }

  /** @param {Batch} batch */
  push(batch) {
    // Null amounts compare as null, which the filter drops.
    const keep = compare(batch.column('amount'), '>=', this.minAmount);
    const kept = filter(batch, keep);
    if (kept.numRows === 0) {
      // No rows, but the schema: an all-filtered slice still commits
      // (and empties its rows in the table).
      return Batch.empty(this.schema);
    }
    // total = amount * quantity as f64, null where amount is null (arrow's `binary`).
    const total = arith(kept.column('amount'), '*', kept.column('quantity'));
    return new Batch(this.schema, [...kept.columns, total]);
  }
}

export const transform = exportTransform(CleanOrders);
