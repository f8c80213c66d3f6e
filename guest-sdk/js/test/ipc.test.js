// IPC round trips against apache-arrow (the reference JS implementation):
// it writes -> we read, we write -> it reads, for every supported type,
// with nulls, empty batches and multi-batch streams.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { arrow as A, skipArrow } from './arrow-helpers.js';
import {
  Batch, BinaryColumn, BoolColumn, DataType, Field, Kind, PrimitiveColumn, Schema, column,
  readStream, readSchema, writeStream,
} from '../src/core.js';
import { FbBuilder } from '../src/flatbuf.js';

const enc = new TextEncoder();

/** Each supported type, an apache-arrow equivalent and sample values (with nulls). */
const CASES = [
  ['bool', DataType.Bool, () => new A.Bool(), [true, null, false, true, true, false, null, true, false]],
  ['i8', DataType.Int8, () => new A.Int8(), [1, -2, null, 127, -128]],
  ['i16', DataType.Int16, () => new A.Int16(), [1, -2, null, 32767, -32768]],
  ['i32', DataType.Int32, () => new A.Int32(), [1, -2, null, 2147483647, -2147483648]],
  ['i64', DataType.Int64, () => new A.Int64(), [1n, null, -9007199254740993n, 9223372036854775807n, -9223372036854775808n]],
  ['u8', DataType.UInt8, () => new A.Uint8(), [0, 255, null, 7]],
  ['u16', DataType.UInt16, () => new A.Uint16(), [0, 65535, null, 7]],
  ['u32', DataType.UInt32, () => new A.Uint32(), [0, 4294967295, null, 7]],
  ['u64', DataType.UInt64, () => new A.Uint64(), [0n, 18446744073709551615n, null, 7n]],
  ['f32', DataType.Float32, () => new A.Float32(), [1.5, null, -0, NaN, -2.25, Infinity]],
  ['f64', DataType.Float64, () => new A.Float64(), [1.5, null, -0, NaN, 1e300, -Infinity, 0.1]],
  ['utf8', DataType.Utf8, () => new A.Utf8(), ['a', null, '', 'é😀', 'a somewhat longer string value', null]],
  ['large_utf8', DataType.LargeUtf8, () => new A.LargeUtf8(), ['a', null, '', 'é😀', 'zz']],
  ['binary', DataType.Binary, () => new A.Binary(), [enc.encode('ab'), null, new Uint8Array(0), new Uint8Array([0, 255, 1])]],
  ['large_binary', DataType.LargeBinary, () => new A.LargeBinary(), [enc.encode('ab'), null, new Uint8Array([9])]],
  ['date32', DataType.Date32, () => new A.DateDay(), [0, 19000, null, -1]],
  ['date64', DataType.Date64, () => new A.DateMillisecond(), [0n, 1640995200000n, null, -86400000n]],
  ['time32s', DataType.time32('s'), () => new A.TimeSecond(), [0, 3600, null, 86399]],
  ['time32ms', DataType.time32('ms'), () => new A.TimeMillisecond(), [0, 3600000, null]],
  ['time64us', DataType.time64('us'), () => new A.TimeMicrosecond(), [0n, 3600000000n, null]],
  ['time64ns', DataType.time64('ns'), () => new A.TimeNanosecond(), [0n, 3600000000000n, null]],
  ['ts_us_utc', DataType.timestamp('us', 'UTC'), () => new A.TimestampMicrosecond('UTC'), [0n, 1790000000000000n, null, -1n]],
  ['ts_ns', DataType.timestamp('ns'), () => new A.TimestampNanosecond(), [0n, null, 1790000000000000000n]],
  ['ts_s_tz', DataType.timestamp('s', '+01:00'), () => new A.TimestampSecond('+01:00'), [0n, null, 1790000000n]],
  ['ts_ms', DataType.timestamp('ms'), () => new A.TimestampMillisecond(), [5n, null]],
  ['dur_ms', DataType.duration('ms'), () => new A.DurationMillisecond(), [0n, -5n, null, 86400000n]],
  ['dur_ns', DataType.duration('ns'), () => new A.DurationNanosecond(), [1n, null]],
];

/** Logical equality of one value (NaN, -0, bytes, bigints). */
function same(a, b) {
  if (a instanceof Uint8Array || b instanceof Uint8Array) {
    return a instanceof Uint8Array && b instanceof Uint8Array && a.length === b.length && a.every((x, i) => x === b[i]);
  }
  return Object.is(a, b);
}

function assertValues(actual, expected, what) {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i] === undefined ? null : expected[i];
    assert.ok(same(actual[i], e), `${what}: row ${i}: got ${String(actual[i])}, want ${String(e)}`);
  }
}

/** Float32 round-trips lose nothing for these samples but NaN/-0 need Object.is. */
function expectedFor(type, values) {
  if (type.kind === Kind.Float && type.bitWidth === 32) return values.map((v) => (v === null ? null : Math.fround(v)));
  return values;
}

/** Build an apache-arrow Data from one of our columns (same buffers). */
function toArrowData(col, atype) {
  const props = { type: atype, length: col.length, nullCount: col.nullCount, nullBitmap: col.validity ?? undefined };
  if (col instanceof BoolColumn) return A.makeData({ ...props, data: col.values });
  if (col instanceof BinaryColumn) return A.makeData({ ...props, valueOffsets: col.offsets, data: col.data });
  return A.makeData({ ...props, data: col.values });
}

/** An apache-arrow RecordBatch from our batch. */
function toArrowBatch(batch, atypes) {
  const fields = batch.schema.fields.map((f, i) => new A.Field(f.name, atypes[i], f.nullable));
  const children = batch.columns.map((c, i) => toArrowData(c, atypes[i]));
  const schema = new A.Schema(fields);
  const data = A.makeData({ type: new A.Struct(fields), length: batch.numRows, nullCount: 0, children });
  return new A.RecordBatch(schema, data);
}

/** Logical values of an apache-arrow vector, read from its raw buffers. */
function arrowValues(vec, type) {
  const out = [];
  for (let i = 0; i < vec.length; i++) {
    if (!vec.isValid(i)) {
      out.push(null);
      continue;
    }
    if (type.kind === Kind.Bool || type.isVarSize) {
      const v = vec.get(i);
      out.push(type.kind === Kind.Binary || type.kind === Kind.LargeBinary ? new Uint8Array(v) : v);
    } else {
      // raw storage (arrow-js converts dates/timestamps to numbers in get())
      let k = i;
      for (const d of vec.data) {
        if (k < d.length) {
          out.push(d.values[d.offset + k]);
          break;
        }
        k -= d.length;
      }
    }
  }
  return out;
}

for (const [name, type, atype, values] of CASES) {
  test(`${name}: apache-arrow writes, idem-guest reads`, { skip: skipArrow }, () => {
    const ours = column(type, values);
    const field = new Field(name, type, true);
    const rb = toArrowBatch(new Batch(new Schema([field]), [ours]), [atype()]);
    const bytes = A.tableToIPC(new A.Table([rb]), 'stream');
    const s = readStream(bytes);
    assert.ok(s);
    assert.equal(s.schema.fields.length, 1);
    assert.equal(s.schema.fields[0].name, name);
    assert.ok(s.schema.fields[0].type.equals(type), `type ${s.schema.fields[0].type} vs ${type}`);
    assert.equal(s.schema.fields[0].nullable, true);
    assert.equal(s.batches.length, 1);
    const col = s.batches[0].column(name);
    assert.equal(col.nullCount, values.filter((v) => v === null).length);
    assertValues(col.toArray(), expectedFor(type, values), name);
  });

  test(`${name}: idem-guest writes, apache-arrow reads`, { skip: skipArrow }, () => {
    const ours = column(type, values);
    const schema = new Schema([new Field(name, type, true), new Field('k', DataType.Int32, false)]);
    const b = new Batch(schema, [ours, column(DataType.Int32, values.map((_v, i) => i))]);
    const bytes = writeStream(schema, [b]);
    const t = A.tableFromIPC(bytes);
    assert.equal(t.numRows, values.length);
    const f = t.schema.fields[0];
    assert.equal(f.name, name);
    assert.equal(f.nullable, true);
    assert.equal(String(f.type), String(atype()));
    assert.equal(t.schema.fields[1].nullable, false);
    assertValues(arrowValues(t.getChildAt(0), type), expectedFor(type, values), name);
    assert.deepEqual(Array.from(t.getChildAt(1).toArray()), values.map((_v, i) => i));
    // and we read our own bytes back
    assertValues(readStream(bytes).batches[0].column(name).toArray(), expectedFor(type, values), `${name} (self)`);
  });
}

test('all types in one batch, several batches, both directions', { skip: skipArrow }, () => {
  const fields = CASES.map(([name, type], i) => new Field(name, type, i % 2 === 0));
  const schema = new Schema(fields);
  // batch lengths must agree: cut every column to the shortest sample;
  // odd fields are non-nullable, so their nulls are replaced
  const n = Math.min(...CASES.map((c) => c[3].length));
  const batchOf = (shift) => new Batch(schema, CASES.map(([_n, type, _a, values], i) => {
    let vals = values.slice(shift, shift + n - 1);
    while (vals.length < n - 1) vals.push(values[1]);
    if (i % 2 === 1) vals = vals.map((x) => (x === null ? values.find((y) => y !== null) : x));
    return column(type, vals);
  }));
  const batches = [batchOf(0), batchOf(1), Batch.empty(schema), batchOf(0)];
  const bytes = writeStream(schema, batches);
  // apache-arrow reads all of them
  const t = A.tableFromIPC(bytes);
  assert.equal(t.batches.length, 4);
  assert.equal(t.numRows, 3 * (n - 1));
  t.schema.fields.forEach((f, i) => {
    assert.equal(f.name, fields[i].name);
    assert.equal(f.nullable, fields[i].nullable);
  });
  // apache-arrow writes them back (its own layout and padding), we read them
  const back = A.tableToIPC(t, 'stream');
  const s = readStream(back);
  assert.ok(s && s.schema.equals(schema), 'schema survives both ways');
  assert.equal(s.batches.length, 4);
  s.batches.forEach((b, bi) => {
    assert.equal(b.numRows, batches[bi].numRows);
    b.columns.forEach((c, ci) => assertValues(c.toArray(), batches[bi].columns[ci].toArray(), `batch ${bi} ${fields[ci].name}`));
  });
});

test('apache-arrow multi-batch stream with nulls, an empty and a sliced batch', { skip: skipArrow }, () => {
  const t = A.tableFromArrays({ id: Int32Array.from([1, 2, 3]), s: A.vectorFromArray(['x', null, 'zzz'], new A.Utf8()) });
  const rb = t.batches[0];
  const writer = new A.RecordBatchStreamWriter();
  writer.reset(undefined, t.schema);
  writer.write(rb);
  writer.write(rb.slice(0, 0));
  writer.write(rb.slice(1, 3));
  writer.finish();
  const s = readStream(writer.toUint8Array(true));
  assert.ok(s);
  assert.equal(s.batches.length, 3);
  assert.deepEqual(s.batches.map((b) => b.numRows), [3, 0, 2]);
  assert.deepEqual(s.batches[0].column('s').toArray(), ['x', null, 'zzz']);
  assert.equal(s.batches[0].column('s').nullCount, 1);
  assert.deepEqual(s.batches[2].column('s').toArray(), [null, 'zzz']);
  assert.deepEqual(s.batches[2].column('id').toArray(), [2, 3]);
});

test('empty bytes read as no rows; a schema-only stream has no batches', () => {
  assert.equal(readStream(new Uint8Array(0)), null);
  const schema = new Schema([new Field('a', DataType.Utf8, false)]);
  const bytes = writeStream(schema, []);
  const s = readStream(bytes);
  assert.ok(s);
  assert.equal(s.batches.length, 0);
  assert.ok(readSchema(bytes).equals(schema));
});

test('a zero-row batch round-trips with its schema', { skip: skipArrow }, () => {
  const schema = new Schema([new Field('a', DataType.Utf8, false), new Field('b', DataType.Float64, true)]);
  const bytes = writeStream(schema, [Batch.empty(schema)]);
  const t = A.tableFromIPC(bytes);
  assert.equal(t.numRows, 0);
  assert.equal(t.schema.fields.length, 2);
  const s = readStream(bytes);
  assert.equal(s?.batches[0].numRows, 0);
  assert.ok(s?.schema.equals(schema));
});

test('field and schema metadata survive', { skip: skipArrow }, () => {
  const f = new Field('a', DataType.Int32, false, new Map([['k', 'v']]));
  const schema = new Schema([f], new Map([['origin', 'test']]));
  const bytes = writeStream(schema, [new Batch(schema, [column(DataType.Int32, [1])])]);
  const t = A.tableFromIPC(bytes);
  assert.equal(t.schema.fields[0].metadata.get('k'), 'v');
  assert.equal(t.schema.metadata.get('origin'), 'test');
  const s = readStream(bytes);
  assert.equal(s?.schema.fields[0].metadata?.get('k'), 'v');
  assert.equal(s?.schema.metadata?.get('origin'), 'test');
});

test('reading is zero-copy when aligned, copies when not', () => {
  const schema = new Schema([new Field('x', DataType.Float64, false), new Field('s', DataType.Utf8, false)]);
  const bytes = writeStream(schema, [new Batch(schema, [column(DataType.Float64, [1, 2, 3]), column(DataType.Utf8, ['a', 'b', 'c'])])]);
  const b = /** @type {Batch} */ (readStream(bytes)?.batches[0]);
  const x = /** @type {PrimitiveColumn} */ (b.column('x'));
  assert.equal(x.values.buffer, bytes.buffer, 'Float64 values are a view on the input');
  assert.equal(/** @type {BinaryColumn} */ (b.column('s')).offsets.buffer, bytes.buffer);
  // shift the stream by 4 bytes: 8-byte values are now misaligned and get copied
  const shifted = new Uint8Array(bytes.length + 4);
  shifted.set(bytes, 4);
  const b2 = /** @type {Batch} */ (readStream(shifted.subarray(4))?.batches[0]);
  const x2 = /** @type {PrimitiveColumn} */ (b2.column('x'));
  assert.notEqual(x2.values.buffer, shifted.buffer);
  assert.deepEqual(Array.from(x2.values), [1, 2, 3]);
  assert.deepEqual(b2.column('s').toArray(), ['a', 'b', 'c']);
});

test('unsupported types are named when a batch holds them', { skip: skipArrow }, () => {
  const t = A.tableFromArrays({ ok: Int32Array.from([1]) });
  const dec = A.makeData({ type: new A.Decimal(2, 10, 128), length: 1, nullCount: 0, data: new Uint32Array(4) });
  const fields = [t.schema.fields[0], new A.Field('price', new A.Decimal(2, 10, 128), true)];
  const rb = new A.RecordBatch(new A.Schema(fields), A.makeData({
    type: new A.Struct(fields), length: 1, nullCount: 0, children: [t.batches[0].data.children[0], dec],
  }));
  const bytes = A.tableToIPC(new A.Table([rb]), 'stream');
  // the schema alone reads (a transform may not read that column)
  const schema = readSchema(bytes);
  assert.equal(schema.fields[1].type.kind, Kind.Unsupported);
  assert.match(String(schema.fields[1].type), /Decimal/);
  assert.throws(() => readStream(bytes), /column `price` has type Decimal/);
});

test('compressed input is refused clearly', () => {
  assert.throws(() => readStream(compressedFixture), /compressed IPC bodies are not supported/);
});

/** A stream whose record batch declares LZ4 body compression (hand-built). */
const compressedFixture = (() => {
  const schema = new Schema([new Field('a', DataType.Int32, false)]);
  const head = writeStream(schema, []).subarray(0, -8); // drop end-of-stream
  const meta = new FbBuilder().finish([
    ['i16', 4],
    ['u8', 3],
    ['off', (b) => b.table([
      ['i64', 1],
      ['off', (b) => b.structs16([1, 0])],
      ['off', (b) => b.structs16([0, 0, 0, 8])],
      ['off', (b) => b.table([['u8', 0], ['u8', 0]])],
    ])],
    ['i64', 8],
  ]);
  const out = new Uint8Array(head.length + 8 + meta.length + 8 + 8);
  out.set(head, 0);
  const dv = new DataView(out.buffer);
  dv.setUint32(head.length, 0xffffffff, true);
  dv.setInt32(head.length + 4, meta.length, true);
  out.set(meta, head.length + 8);
  return out;
})();

test('big values: int64 extremes survive as bits, numbers() converts like Rust `as f64`', () => {
  const c = /** @type {PrimitiveColumn} */ (column(DataType.Int64, [9007199254740993n, -1n, -9223372036854775808n, 3n]));
  assert.deepEqual(Array.from(c.numbers()), [9007199254740992, -1, -9223372036854775808, 3]);
  const u = /** @type {PrimitiveColumn} */ (column(DataType.UInt64, [18446744073709551615n]));
  assert.deepEqual(Array.from(u.numbers()), [18446744073709551616]);
});
