// Declared params (static params): the checker, and the export glue calling
// it before `open`, with the messages the Rust and Python SDKs give.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Batch, DataType, Field, Schema, checkParams, column, run } from '../src/native.js';
import { distance } from '../src/params.js';

const declared = [
  { name: 'min_amount', type: 'number', default: 0 },
  { name: 'key', type: 'string', default: 'event_id' },
  { name: 'limit', type: 'integer' },
  { name: 'strict', type: 'boolean', default: false },
];

const refused = (params, re) => assert.throws(() => checkParams(declared, params), re);

test('an unknown param is refused with a suggestion and the list', () => {
  refused(
    { min_amont: 10 },
    /^IdemError: unknown parameter `min_amont` \(did you mean `min_amount`\?\): this transform takes `min_amount` \(number, default 0\), `key` \(string, default "event_id"\), `limit` \(integer\), `strict` \(boolean, default false\)$/,
  );
  // Nothing within two edits: no suggestion; the least unknown key is named.
  refused({ zz: 1, gap_minutes: 30 }, /^IdemError: unknown parameter `gap_minutes`: this transform takes/);
  assert.throws(() => checkParams([], { x: 1 }), /this transform takes no parameters$/);
});

test('an ill-typed param is refused naming it and the type', () => {
  refused({ min_amount: 'ten' }, /^IdemError: parameter `min_amount` must be a number, got "ten" \(a string\)$/);
  refused({ key: 7 }, /`key` must be a string, got 7 \(a number\)/);
  refused({ strict: 'yes' }, /`strict` must be a boolean/);
  refused({ limit: 1.5 }, /^IdemError: parameter `limit` must be an integer, got 1.5 \(a number with a fraction\)$/);
  refused({ limit: true }, /`limit` must be an integer/);
  assert.throws(() => checkParams(declared, 60), /^IdemError: params must be a JSON object, got 60$/);
  assert.throws(() => checkParams(declared, [1]), /params must be a JSON object, got \[1\]/);
});

test('defaults are filled, given values kept, null counts as not given', () => {
  assert.deepEqual(checkParams(declared, { key: 'id', limit: 3 }), { key: 'id', limit: 3, min_amount: 0, strict: false });
  assert.equal(checkParams(declared, { min_amount: null }).min_amount, 0);
  assert.equal(checkParams(declared, null).key, 'event_id');
  const given = { min_amount: 5 };
  checkParams(declared, given);
  assert.deepEqual(given, { min_amount: 5 }, 'the given object is not changed');
});

test('a required param must be given', () => {
  const decl = [{ name: 'max_total', type: 'number', required: true, doc: 'upper bound' }];
  assert.throws(() => checkParams(decl, {}), /^IdemError: missing required parameter `max_total` \(number, required\)$/);
  assert.throws(() => checkParams(decl, { max_total: null }), /missing required parameter/);
  assert.deepEqual(checkParams(decl, { max_total: 5 }), { max_total: 5 });
});

test('a bad declaration is named', () => {
  assert.throws(() => checkParams([{ name: 'a', type: 'number' }, { name: 'a', type: 'string' }], {}), /`a` is declared twice/);
  assert.throws(() => checkParams([{ name: 'n', type: 'float' }], {}), /`n` has type "float"; use one of number, integer, string, boolean/);
  assert.throws(() => checkParams([{ name: 'n', type: 'integer', default: 0.5 }], {}), /the default of parameter `n` must be an integer/);
  assert.throws(() => checkParams({ name: 'n' }, {}), /static params must be an array/);
});

test('edit distance', () => {
  assert.equal(distance('min_amont', 'min_amount'), 1);
  assert.equal(distance('gap_minute', 'gap_minutes'), 1);
  assert.equal(distance('kye', 'key'), 2);
  assert.equal(distance('', 'abc'), 3);
  assert.equal(distance('x'.repeat(10000), 'key'), 3);
});

class Declared {
  static params = [{ name: 'min', type: 'integer', default: 2 }, { name: 'tag', type: 'string', required: true }];
  open(ctx) {
    this.min = ctx.params.min;
  }
  push(batch) {
    const ids = batch.column('id');
    const keep = [];
    for (let i = 0; i < batch.numRows; i++) keep.push(ids.get(i) >= this.min);
    const schema = new Schema([new Field('id', DataType.Float64, false)]);
    return new Batch(schema, [column(DataType.Float64, keep.map((k, i) => (k ? ids.get(i) : -1)))]);
  }
}

test('the export glue checks declared params before open', async () => {
  const schema = new Schema([new Field('id', DataType.Float64, false)]);
  const input = new Batch(schema, [column(DataType.Float64, [1, 2, 3])]);
  const ids = async (params) => (await run(Declared, { params, inputSchema: schema }, [input]))[0].toRows().map((r) => r.id);
  assert.deepEqual(await ids({ tag: 't' }), [-1, 2, 3], 'the default reaches open');
  assert.deepEqual(await ids({ tag: 't', min: 3 }), [-1, -1, 3]);
  await assert.rejects(ids({ tag: 't', mni: 3 }), /transform failed in `open`: unknown parameter `mni` \(did you mean `min`\?\)/);
  await assert.rejects(ids({}), /missing required parameter `tag` \(string, required\)/);
  await assert.rejects(ids({ tag: 't', min: 2.5 }), /`min` must be an integer/);
});

class Joined {
  open(ctx) {
    this.names = ctx.sideInputNames();
    const dim = ctx.sideInput('dim');
    this.label = new Map();
    for (let i = 0; i < dim.numRows; i++) this.label.set(dim.column('id').get(i), dim.column('name').get(i));
  }
  push(batch) {
    const ids = batch.column('id');
    const names = [];
    for (let i = 0; i < batch.numRows; i++) names.push(this.label.get(ids.get(i)) ?? 'unknown');
    const schema = new Schema([new Field('name', DataType.Utf8, false)]);
    return new Batch(schema, [column(DataType.Utf8, names)]);
  }
}

test('side inputs reach open whole, in order, by name; a missing one is named', async () => {
  const schema = new Schema([new Field('id', DataType.Float64, false)]);
  const dimSchema = new Schema([new Field('id', DataType.Float64, false), new Field('name', DataType.Utf8, false)]);
  const dim = (ids, names) => new Batch(dimSchema, [column(DataType.Float64, ids), column(DataType.Utf8, names)]);
  const input = new Batch(schema, [column(DataType.Float64, [1, 2, 3])]);
  const sideInputs = { dim: [dim([1], ['one']), dim([3, 4], ['three', 'four'])], other: [dim([], [])] };
  const out = await run(Joined, { inputSchema: schema, sideInputs }, [input]);
  assert.deepEqual(out[0].toRows().map((r) => r.name), ['one', 'unknown', 'three']);
  await assert.rejects(
    run(Joined, { inputSchema: schema, sideInputs: { other: [dim([], [])] } }, [input]),
    /transform failed in `open`: the run gives no side input `dim` \(it gives: other\): give it with --side dim=TABLE/,
  );
  const otherSchema = new Schema([new Field('id', DataType.Float64, false)]);
  const mixed = { dim: [dim([1], ['one']), new Batch(otherSchema, [column(DataType.Float64, [2])])] };
  await assert.rejects(run(Joined, { inputSchema: schema, sideInputs: mixed }, [input]), /a batch of another schema than its first/);
});
