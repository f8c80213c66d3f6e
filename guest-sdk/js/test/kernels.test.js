// Kernels: filter, take, concat, arith, derive, compare, sort, string keys,
// UTF-8 ordering; plus Context parameters and the export glue.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Batch, Context, DataType, Field, IdemError, PrimitiveColumn, Schema, StringKeys, arith, column,
  compare, compareUtf8, concat, derive, exportTransform, filter, markNulls, readStream, sortIndices,
  take, writeStream,
} from '../src/core.js';

function sample() {
  const schema = new Schema([
    new Field('s', DataType.Utf8, true),
    new Field('f', DataType.Float64, true),
    new Field('i', DataType.Int64, false),
    new Field('b', DataType.Bool, true),
    new Field('bin', DataType.LargeBinary, true),
  ]);
  const n = 40;
  const s = [], f = [], i64 = [], b = [], bin = [];
  for (let k = 0; k < n; k++) {
    s.push(k % 7 === 3 ? null : `row-${k}-${'x'.repeat(k % 5)}`);
    f.push(k % 9 === 4 ? null : k * 1.5 - 10);
    i64.push(BigInt(k * 3 - 50));
    b.push(k % 11 === 5 ? null : k % 3 === 0);
    bin.push(k % 6 === 1 ? null : new Uint8Array([k, k + 1]));
  }
  const batch = new Batch(schema, [
    column(DataType.Utf8, s), column(DataType.Float64, f), column(DataType.Int64, i64),
    column(DataType.Bool, b), column(DataType.LargeBinary, bin),
  ]);
  return batch;
}

const rows = (b) => b.toRows();

test('filter keeps exactly the masked rows, every type, nulls included', () => {
  const b = sample();
  for (const pattern of [(k) => k % 2 === 0, (k) => k % 13 !== 0, (k) => k > 30, () => false, (k) => k < 25 || k > 27]) {
    const mask = Uint8Array.from({ length: b.numRows }, (_v, k) => (pattern(k) ? 1 : 0));
    const out = filter(b, mask);
    const want = rows(b).filter((_r, k) => pattern(k));
    assert.deepEqual(rows(out), want);
    // through IPC too
    const back = readStream(writeStream(out.schema, [out]))?.batches[0];
    assert.deepEqual(rows(/** @type {Batch} */ (back)), want);
  }
  assert.equal(filter(b, new Uint8Array(b.numRows).fill(1)), b, 'all kept: same batch');
  // a Bool column as the mask (null = drop); JS booleans too
  const bm = filter(b, /** @type {any} */ (b.column('b')));
  assert.deepEqual(rows(bm), rows(b).filter((r) => r.b === true));
  const jm = filter(b, rows(b).map((r) => r.f !== null && r.f > 0));
  assert.deepEqual(rows(jm), rows(b).filter((r) => r.f !== null && r.f > 0));
});

test('filter drops the validity bitmap when no kept row is null', () => {
  const b = sample();
  const out = filter(b, compare(b.column('f'), '>=', 0));
  assert.equal(out.column('f').nullCount, 0);
  assert.equal(out.column('f').validity, null);
  assert.ok(out.numRows > 0);
});

test('take gathers rows in order, with repeats', () => {
  const b = sample();
  const idx = [5, 0, 39, 3, 3, 17];
  assert.deepEqual(rows(take(b, idx)), idx.map((k) => rows(b)[k]));
  assert.throws(() => take(b, [40]), /out of range/);
  assert.equal(take(b, []).numRows, 0);
});

test('concat joins batches', () => {
  const b = sample();
  const parts = [take(b, [0, 1, 2]), Batch.empty(b.schema), take(b, [3, 7, 9])];
  const c = concat(parts);
  assert.deepEqual(rows(c), [0, 1, 2, 3, 7, 9].map((k) => rows(b)[k]));
  assert.equal(concat([], b.schema).numRows, 0);
});

test('arith: Float64 * Int64 like Rust (a * q as f64), nulls propagate', () => {
  const a = column(DataType.Float64, [1.5, null, -2, 0.1, -0]);
  const q = column(DataType.Int64, [3n, 4n, 9007199254740993n, 3n, 5n]);
  const t = arith(a, '*', q);
  assert.equal(t.type, DataType.Float64);
  assert.deepEqual(t.toArray(), [4.5, null, -18014398509481984, 0.1 * 3, -0]);
  assert.deepEqual(arith(q, '-', a).toArray(), [1.5, null, 9007199254740994, 3 - 0.1, 5]);
  assert.deepEqual(arith(a, '+', 1).toArray(), [2.5, null, -1, 1.1, 1]);
  assert.deepEqual(arith(10, '/', column(DataType.Int32, [2, 4])).toArray(), [5, 2.5]);
});

test('derive: a closure per row, nulls propagate, integer results', () => {
  const a = column(DataType.Float64, [1, null, 3]);
  const b = column(DataType.Int32, [10, 20, 30]);
  assert.deepEqual(derive(DataType.Float64, [a, b], (x, y) => x + y).toArray(), [11, null, 33]);
  assert.deepEqual(derive(DataType.Int64, [b], (y) => y * 2).toArray(), [20n, 40n, 60n]);
});

test('compare: numbers, strings by bytes, nulls are 0', () => {
  const f = column(DataType.Float64, [1, null, 10, NaN, 10.5]);
  assert.deepEqual(Array.from(compare(f, '>=', 10)), [0, 0, 1, 0, 1]);
  assert.deepEqual(Array.from(compare(f, '!=', 10)), [1, 0, 0, 1, 1]);
  const i = column(DataType.Int64, [-1n, 5n, null]);
  assert.deepEqual(Array.from(compare(i, '<', 0)), [1, 0, 0]);
  const s = column(DataType.Utf8, ['b', 'a', null, '😀', '\uffff']);
  assert.deepEqual(Array.from(compare(s, '>', '\uffff')), [0, 0, 0, 1, 0], 'astral > U+FFFF in UTF-8 order');
  assert.deepEqual(Array.from(compare(s, '==', 'a')), [0, 1, 0, 0, 0]);
});

test('markNulls overwrites null rows only', () => {
  const c = column(DataType.Int32, [1, null, 3, null, 5, 6, 7, 8, null]);
  const out = markNulls(new Int32Array(9).fill(7), c.validity, -1);
  assert.deepEqual(Array.from(out), [7, -1, 7, -1, 7, 7, 7, 7, -1]);
});

test('compareUtf8 sorts like Rust (code points), unlike JS <', () => {
  const words = ['\uffff', '😀', 'a', '', 'ab', '\ue000', 'é', 'Z', '𝄞'];
  const byBytes = words.slice().sort((x, y) => {
    const a = Buffer.from(x, 'utf8'), b = Buffer.from(y, 'utf8');
    return Buffer.compare(a, b);
  });
  assert.deepEqual(words.slice().sort(compareUtf8), byBytes);
  assert.notDeepEqual(words.slice().sort(), byBytes, 'JS default order differs for astral characters');
  assert.equal(compareUtf8('abc', 'abc'), 0);
  assert.ok(compareUtf8('ab', 'abc') < 0);
});

test('sortIndices: stable, nulls last, strings by bytes', () => {
  const s = column(DataType.Utf8, ['b', null, '😀', '\uffff', 'a', 'b']);
  assert.deepEqual(Array.from(sortIndices(s)), [4, 0, 5, 3, 2, 1]);
  assert.deepEqual(Array.from(sortIndices(s, { descending: true })), [2, 3, 0, 5, 4, 1]);
  const f = column(DataType.Float64, [3, NaN, -1, null, 2]);
  assert.deepEqual(Array.from(sortIndices(f)), [2, 4, 0, 1, 3]);
});

test('StringKeys: stable ids across batches, short/long/non-ASCII keys, nulls', () => {
  const keys = new StringKeys();
  const vals = ['c-0001', 'c-0002', '', 'a', 'abcdefg', 'abcdefgh', 'abcdef', 'abcdefabcdef', 'é😀', null, 'c-0001', 'x'.repeat(100)];
  const ids = Array.from(keys.ids(/** @type {any} */ (column(DataType.Utf8, vals))));
  const want = [];
  const seen = new Map();
  for (const v of vals) {
    if (v === null) want.push(-1);
    else {
      if (!seen.has(v)) seen.set(v, seen.size);
      want.push(seen.get(v));
    }
  }
  assert.deepEqual(ids, want);
  assert.deepEqual(keys.keys, [...seen.keys()]);
  // unaligned data (odd byte offsets) and a second batch: same ids
  const again = Array.from(keys.ids(/** @type {any} */ (column(DataType.Utf8, ['z', ...vals]))));
  assert.deepEqual(again, [keys.size - 1, ...want]);
  assert.equal(keys.id('abcdefg'), seen.get('abcdefg'));
  const order = Array.from(keys.sortedIds()).map((id) => keys.keys[id]);
  assert.deepEqual(order, keys.keys.slice().sort(compareUtf8));
});

test('Batch checks like arrow RecordBatch::try_new', () => {
  const schema = new Schema([new Field('a', DataType.Int32, false)]);
  assert.throws(() => new Batch(schema, [column(DataType.Int32, [1, null])]), /non-nullable/);
  assert.throws(() => new Batch(schema, [column(DataType.Float64, [1])]), /is Float64, its field says Int32/);
  assert.throws(() => new Batch(schema, []), /0 columns for 1 fields/);
  const b = new Batch(schema, [column(DataType.Int32, [1, 2])]);
  assert.throws(() => b.column('nope'), /batch has no `nope` column \(it has: a\)/);
  const w = b.withColumn(new Field('t', DataType.Utf8, true), column(DataType.Utf8, ['x', null]));
  assert.deepEqual(w.schema.names, ['a', 't']);
  assert.deepEqual(w.select(['t']).toRows(), [{ t: 'x' }, { t: null }]);
});

test('Context parameters are typed and errors name them', () => {
  const ctx = Context.fromWit({
    sliceId: 'date=2026-10-01', logicalDate: undefined, params: '{"min_amount": 10, "name": "x", "flag": true}',
    inputSchema: writeStream(new Schema([new Field('a', DataType.Int32)]), []), batchRows: 8192,
  });
  assert.equal(ctx.logicalDate, null);
  assert.equal(ctx.paramNumber('min_amount'), 10);
  assert.equal(ctx.paramNumber('missing'), undefined);
  assert.equal(ctx.paramString('name'), 'x');
  assert.equal(ctx.paramBoolean('flag'), true);
  assert.throws(() => ctx.paramNumber('name'), /parameter `name` must be a number, got "x"/);
  assert.throws(() => ctx.paramString('min_amount'), /parameter `min_amount` must be a string, got 10/);
  assert.equal(ctx.inputSchema.fields[0].name, 'a');
  assert.throws(() => Context.fromWit({ sliceId: 's', params: '{nope', inputSchema: new Uint8Array(0), batchRows: 1 }), /params are not JSON/);
  const empty = Context.fromWit({ sliceId: 's', params: '  ', inputSchema: writeStream(new Schema([]), []), batchRows: 1 });
  assert.deepEqual(empty.params, {});
});

test('exportTransform: results are tagged; any thrown value becomes an error message', async () => {
  const schema = new Schema([new Field('a', DataType.Int32, false)]);
  const input = writeStream(schema, [new Batch(schema, [column(DataType.Int32, [1, 2, 3])])]);
  const wctx = (params) => ({ sliceId: 's', params: JSON.stringify(params), inputSchema: writeStream(schema, []), batchRows: 3 });
  class T {
    open(ctx) {
      this.mode = ctx.params.mode;
      if (this.mode === 'open') throw new IdemError('bad open');
    }
    columns() {
      return this.mode === 'cols' ? ['a'] : undefined;
    }
    push(b) {
      switch (this.mode) {
        case 'type': return /** @type {any} */ (null).x;
        case 'string': throw 'plain string';
        case 'object': throw { code: 7 };
        case 'badret': return 42;
        case 'async': return Promise.resolve(b);
        case 'asyncfail': return Promise.reject(new RangeError('later'));
        default: return b;
      }
    }
    finish() {
      return this.mode === 'finish' ? Batch.empty(schema) : null;
    }
  }
  const t = exportTransform(T);
  assert.deepEqual(t.open(wctx({})), { tag: 'ok', val: undefined });
  const ok = t.push(input);
  assert.equal(ok.tag, 'ok');
  assert.deepEqual(readStream(ok.val)?.batches[0].toRows(), [{ a: 1 }, { a: 2 }, { a: 3 }]);
  assert.deepEqual(t.finish(), { tag: 'ok', val: new Uint8Array(0) });
  assert.deepEqual(t.open(wctx({ mode: 'cols' })), { tag: 'ok', val: ['a'] });
  assert.deepEqual(t.open(wctx({ mode: 'open' })), { tag: 'err', val: 'bad open' });
  assert.deepEqual(t.push(input), { tag: 'err', val: 'push before open' });
  const err = (mode) => {
    t.open(wctx({ mode }));
    return t.push(input);
  };
  const te = err('type');
  assert.equal(te.tag, 'err');
  assert.match(te.val, /^TypeError: /);
  assert.deepEqual(err('string'), { tag: 'err', val: 'plain string' });
  assert.deepEqual(err('object'), { tag: 'err', val: 'thrown value: {"code":7}' });
  assert.match(err('badret').val, /output batch: .*returns a Batch/);
  assert.equal((await err('async')).tag, 'ok');
  assert.deepEqual(await err('asyncfail'), { tag: 'err', val: 'RangeError: later' });
  t.open(wctx({ mode: 'finish' }));
  const fin = t.finish();
  assert.equal(readStream(fin.val)?.batches[0].numRows, 0, 'a zero-row batch still carries the schema');
  assert.deepEqual(t.push(new Uint8Array(0)), { tag: 'ok', val: new Uint8Array(0) });
  assert.match(t.push(new Uint8Array([1, 2, 3])).val, /^input batch: /);
});

test('PrimitiveColumn wants the typed array of its type', () => {
  assert.throws(() => new PrimitiveColumn(DataType.Int64, /** @type {any} */ (new Float64Array(1))), /needs a BigInt64Array/);
});
