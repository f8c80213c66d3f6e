// The JavaScript examples, run natively (idem-guest resolved to
// src/native.js by a loader hook), mirroring the Rust examples' unit tests.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { register } from 'node:module';

const native = new URL('../src/native.js', import.meta.url).href;
register(
  'data:text/javascript,' +
    encodeURIComponent(`export async function resolve(spec, ctx, next) {
      if (spec === 'idem-guest') return { url: ${JSON.stringify(native)}, shortCircuit: true };
      return next(spec, ctx);
    }`),
);

const sdk = await import(native);
const { Batch, DataType, Field, Schema, column, run } = sdk;
const examples = new URL('../../../examples/', import.meta.url);
const cleanOrders = (await import(new URL('clean_orders_js/src/index.js', examples).href)).transform;
const dailyRevenue = (await import(new URL('daily_revenue_js/src/index.js', examples).href)).transform;

function orders() {
  const schema = new Schema([
    new Field('customer', DataType.Utf8, false),
    new Field('amount', DataType.Float64, true),
    new Field('quantity', DataType.Int64, false),
  ]);
  return new Batch(schema, [
    column(DataType.Utf8, ['a', 'b', 'c', 'd']),
    column(DataType.Float64, [5, 20, null, 10]),
    column(DataType.Int64, [1n, 3n, 1n, 2n]),
  ]);
}

test('clean_orders_js: filters by min_amount and adds total', async () => {
  const input = orders();
  const out = await run(cleanOrders, { params: { min_amount: 10 }, inputSchema: input.schema }, [input]);
  assert.equal(out.length, 1);
  assert.deepEqual(out[0].toRows(), [
    { customer: 'b', amount: 20, quantity: 3n, total: 60 },
    { customer: 'd', amount: 10, quantity: 2n, total: 20 },
  ]);
  const total = out[0].schema.field('total');
  assert.equal(String(total.type), 'Float64');
  assert.equal(total.nullable, true);
  assert.deepEqual(out[0].schema.fields.map((f) => f.nullable), [false, true, false, true]);
});

test('clean_orders_js: null amounts are dropped even without threshold', async () => {
  const input = orders();
  const out = await run(cleanOrders, { params: {}, inputSchema: input.schema }, [input]);
  assert.equal(out[0].numRows, 3);
});

test('clean_orders_js: nothing passes -> a zero-row batch with the schema', async () => {
  const input = orders();
  const out = await run(cleanOrders, { params: { min_amount: 1e9 }, inputSchema: input.schema }, [input]);
  assert.equal(out.length, 1);
  assert.equal(out[0].numRows, 0);
  assert.deepEqual(out[0].schema.names, ['customer', 'amount', 'quantity', 'total']);
});

test('clean_orders_js: wrong param type is a clear error', async () => {
  const input = orders();
  await assert.rejects(
    run(cleanOrders, { params: { min_amount: 'ten' }, inputSchema: input.schema }, [input]),
    /transform failed in `open`: parameter `min_amount` must be a number, got "ten"/,
  );
});

test('daily_revenue_js: aggregates across batches sorted by customer', async () => {
  const schema = orders().schema;
  const batch = (rows) => new Batch(schema, [
    column(DataType.Utf8, rows.map((r) => r[0])),
    column(DataType.Float64, rows.map((r) => r[1])),
    column(DataType.Int64, rows.map((r) => r[2])),
  ]);
  const b1 = batch([['zed', 2.0, 3n], ['amy', 1.5, 2n]]);
  const b2 = batch([['amy', 10.0, 1n], ['zed', null, 1n], ['only-null', null, 1n], ['😀', -0, 1n], ['\uffff', 1, 1n]]);
  const out = await run(dailyRevenue, { sliceId: 'date=2026-10-01', logicalDate: '2026-10-01', inputSchema: schema }, [b1, b2]);
  assert.equal(out.length, 1);
  assert.deepEqual(out[0].toRows(), [
    { day: '2026-10-01', customer: 'amy', orders: 2n, revenue: 13 },
    { day: '2026-10-01', customer: 'zed', orders: 1n, revenue: 6 },
    { day: '2026-10-01', customer: '\uffff', orders: 1n, revenue: 1 },
    { day: '2026-10-01', customer: '😀', orders: 1n, revenue: -0 },
  ]);
  assert.ok(Object.is(out[0].column('revenue').get(3), -0), 'a single -0 stays -0, like the Rust insert');
  assert.deepEqual(out[0].schema.fields.map((f) => [f.name, String(f.type), f.nullable]), [
    ['day', 'Utf8', false], ['customer', 'Utf8', false], ['orders', 'Int64', false], ['revenue', 'Float64', false],
  ]);
});

test('daily_revenue_js: the day falls back to the slice id', async () => {
  const input = orders();
  const out = await run(dailyRevenue, { sliceId: 'date=2026-10-02', inputSchema: input.schema }, [input]);
  assert.equal(out[0].column('day').get(0), 'date=2026-10-02');
});

test('clean_orders_js: a misspelled param is refused with a suggestion', async () => {
  const input = orders();
  await assert.rejects(
    run(cleanOrders, { params: { min_amont: 10 }, inputSchema: input.schema }, [input]),
    /unknown parameter `min_amont` \(did you mean `min_amount`\?\): this transform takes `min_amount` \(number, default 0\)/,
  );
});
