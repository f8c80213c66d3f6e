// Columnar kernels over typed arrays: no object per row. Fixed-width values
// are copied as 8/16/32-bit words (never read as JS numbers, so NaN payloads
// and int64 bits survive), byte ranges with Uint8Array.set(subarray).

import { DataType, Kind, Schema } from './types.js';
import { BinaryColumn, BoolColumn, Column, PrimitiveColumn } from './column.js';
import { Batch } from './batch.js';
import { IdemError } from './error.js';

const TWO32 = 4294967296;

/**
 * A word view of a primitive column's values: Uint8Array/Uint16Array/Int32Array,
 * and the number of words per value (2 for 64-bit types).
 * @param {ArrayBufferView & {length: number, BYTES_PER_ELEMENT: number}} values
 * @returns {[Uint8Array|Uint16Array|Int32Array, number]}
 */
function words(values) {
  const bpe = values.BYTES_PER_ELEMENT;
  if (bpe === 1) return [new Uint8Array(values.buffer, values.byteOffset, values.length), 1];
  if (bpe === 2) return [new Uint16Array(values.buffer, values.byteOffset, values.length), 1];
  return [new Int32Array(values.buffer, values.byteOffset, values.length * (bpe >> 2)), bpe >> 2];
}

/**
 * Runs of kept rows of a mask: flat [start0, end0, start1, end1, ...] and the
 * number of kept rows. Kept runs are found with the native `indexOf(0)`,
 * so a mostly-kept mask costs little per row.
 * @param {Uint8Array} mask one byte per row, nonzero = keep
 * @param {number} n
 */
export function maskRuns(mask, n) {
  let runs = new Int32Array(64);
  let k = 0, kept = 0;
  let i = 0;
  while (i < n) {
    while (i < n && mask[i] === 0) i++;
    if (i === n) break;
    const s = i;
    let e = mask.indexOf(0, s);
    if (e < 0 || e > n) e = n;
    i = e;
    if (k + 2 > runs.length) {
      const r = new Int32Array(runs.length * 2);
      r.set(runs);
      runs = r;
    }
    runs[k++] = s;
    runs[k++] = e;
    kept += e - s;
  }
  return { runs: runs.subarray(0, k), kept };
}

/** Convert a mask argument (bytes, booleans, or a Bool column) to a Uint8Array. */
function toMask(mask, n) {
  if (mask instanceof BoolColumn) return mask.mask();
  if (mask instanceof Column) throw new TypeError(`filter: a mask column must be Boolean, not ${mask.type}`);
  if (mask.length !== n) throw new IdemError(`filter: mask has ${mask.length} entries for ${n} rows`);
  if (mask instanceof Uint8Array) return mask;
  const m = new Uint8Array(n);
  for (let i = 0; i < n; i++) m[i] = mask[i] ? 1 : 0;
  return m;
}

/**
 * Rows of `batch` where `mask` is set (nonzero byte, or true in a Bool
 * column; null counts as false). Returns the batch itself when every row
 * is kept.
 * @param {Batch} batch
 * @param {ArrayLike<number|boolean>|BoolColumn} mask
 * @returns {Batch}
 */
export function filter(batch, mask) {
  const n = batch.numRows;
  const m = toMask(mask, n);
  const { runs, kept } = maskRuns(m, n);
  if (kept === n) return batch;
  const cols = batch.columns.map((c) => filterRuns(c, runs, kept));
  return new Batch(batch.schema, cols, kept);
}

/**
 * One column, filtered by a mask.
 * @param {Column} column
 * @param {ArrayLike<number|boolean>|BoolColumn} mask
 */
export function filterColumn(column, mask) {
  const m = toMask(mask, column.length);
  const { runs, kept } = maskRuns(m, column.length);
  return kept === column.length ? column : filterRuns(column, runs, kept);
}

/**
 * Compact `arr` in place: move every run to the front, in order (memmove
 * via the native copyWithin; runs already in place are skipped). Elements
 * are scaled by `w` (elements per row).
 * @param {any} arr typed array holding a copy of the source
 * @param {Int32Array} runs
 * @param {number} w
 */
function compactRuns(arr, runs, w) {
  let j = 0;
  for (let r = 0; r < runs.length; r += 2) {
    const s = runs[r], e = runs[r + 1];
    if (j !== s) arr.copyWithin(j * w, s * w, e * w);
    j += e - s;
  }
  return j;
}

/**
 * Number of valid rows of a bitmap in [s, e).
 * @param {Uint8Array} v
 */
function countValid(v, s, e) {
  let c = 0;
  while (s < e && (s & 7) !== 0) {
    c += (v[s >> 3] >> (s & 7)) & 1;
    s++;
  }
  const full = (e - s) >> 3;
  for (let b = s >> 3, end = b + full; b < end; b++) c += POPCOUNT[v[b]];
  s += full << 3;
  while (s < e) {
    c += (v[s >> 3] >> (s & 7)) & 1;
    s++;
  }
  return c;
}

const POPCOUNT = new Uint8Array(256);
for (let i = 1; i < 256; i++) POPCOUNT[i] = (i & 1) + POPCOUNT[i >> 1];

/**
 * The bits of `src` at the runs, packed. Returns null when all kept bits are
 * set (for validity: no nulls among the kept rows).
 * @param {Uint8Array} src
 * @param {Int32Array} runs
 * @param {number} kept
 * @param {boolean} dropIfAllSet
 * @returns {[Uint8Array|null, number]} bitmap and number of unset bits
 */
function filterBits(src, runs, kept, dropIfAllSet) {
  let set = 0;
  for (let r = 0; r < runs.length; r += 2) set += countValid(src, runs[r], runs[r + 1]);
  const unset = kept - set;
  if (unset === 0 && dropIfAllSet) return [null, 0];
  const out = new Uint8Array((kept + 7) >> 3);
  let j = 0;
  for (let r = 0; r < runs.length; r += 2) {
    for (let i = runs[r], e = runs[r + 1]; i < e; i++, j++) {
      if ((src[i >> 3] >> (i & 7)) & 1) out[j >> 3] |= 1 << (j & 7);
    }
  }
  return [out, unset];
}

/**
 * @param {Column} c
 * @param {Int32Array} runs
 * @param {number} kept
 * @returns {Column}
 */
function filterRuns(c, runs, kept) {
  const nr = runs.length;
  let validity = null, nulls = 0;
  if (c.validity !== null) [validity, nulls] = filterBits(c.validity, runs, kept, true);
  if (c instanceof PrimitiveColumn) {
    // Copy everything natively, then compact the kept runs in place
    // (copyWithin moves bits exactly: no NaN canonicalization).
    const out = c.values.slice();
    compactRuns(out, runs, 1);
    return new PrimitiveColumn(c.type, out.subarray(0, kept), validity, nulls);
  }
  if (c instanceof BinaryColumn) {
    const o = c.offsetNumbers();
    const n = c.length;
    const base = o[0];
    const data = c.data.slice(base, o[n]);
    // data: compact byte ranges
    let pos = 0;
    for (let r = 0; r < nr; r += 2) {
      const b0 = o[runs[r]] - base, b1 = o[runs[r + 1]] - base;
      if (pos !== b0) data.copyWithin(pos, b0, b1);
      pos += b1 - b0;
    }
    // offsets: shift each run by the bytes dropped before it
    const large = c.type.isLarge;
    const outOff = large ? new Float64Array(kept + 1) : new Int32Array(kept + 1);
    let j = 0;
    pos = 0;
    for (let r = 0; r < nr; r += 2) {
      const s = runs[r], e = runs[r + 1];
      const delta = pos - o[s];
      let i = s + 1;
      // unrolled by 4: the loop overhead is most of an interpreted iteration
      for (const e4 = e - 3; i <= e4; i += 4, j += 4) {
        outOff[j + 1] = o[i] + delta;
        outOff[j + 2] = o[i + 1] + delta;
        outOff[j + 3] = o[i + 2] + delta;
        outOff[j + 4] = o[i + 3] + delta;
      }
      for (; i <= e; i++) outOff[++j] = o[i] + delta;
      pos += o[e] - o[s];
    }
    return new BinaryColumn(c.type, large ? toInt64Offsets(/** @type {Float64Array} */ (outOff)) : /** @type {Int32Array} */ (outOff), data.subarray(0, pos), validity, nulls);
  }
  if (c instanceof BoolColumn) {
    const [bits] = filterBits(c.values, runs, kept, false);
    return new BoolColumn(/** @type {Uint8Array} */ (bits), kept, validity, nulls);
  }
  throw new IdemError(`filter: unsupported column type ${c.type}`);
}

/** @param {Float64Array} o */
function toInt64Offsets(o) {
  const out = new BigInt64Array(o.length);
  const w = new Int32Array(out.buffer);
  for (let i = 0, j = 0; i < o.length; i++, j += 2) {
    const hi = Math.floor(o[i] / TWO32);
    w[j] = o[i] - hi * TWO32;
    w[j + 1] = hi;
  }
  return out;
}

/**
 * Rows of `batch` at `indices` (in that order; repeats allowed).
 * @param {Batch} batch
 * @param {ArrayLike<number>} indices
 * @returns {Batch}
 */
export function take(batch, indices) {
  const n = batch.numRows;
  for (let k = 0; k < indices.length; k++) {
    const i = indices[k];
    if (!(i >= 0 && i < n) || i !== Math.floor(i)) throw new IdemError(`take: index ${i} out of range for ${n} rows`);
  }
  return new Batch(batch.schema, batch.columns.map((c) => takeChecked(c, indices)), indices.length);
}

/**
 * One column at `indices`.
 * @param {Column} column
 * @param {ArrayLike<number>} indices
 */
export function takeColumn(column, indices) {
  const n = column.length;
  for (let k = 0; k < indices.length; k++) {
    const i = indices[k];
    if (!(i >= 0 && i < n) || i !== Math.floor(i)) throw new IdemError(`take: index ${i} out of range for ${n} rows`);
  }
  return takeChecked(column, indices);
}

/** @param {Column} c @param {ArrayLike<number>} idx */
function takeChecked(c, idx) {
  const m = idx.length;
  let validity = null, nulls = 0;
  if (c.validity !== null) {
    const src = c.validity;
    const v = new Uint8Array((m + 7) >> 3);
    for (let j = 0; j < m; j++) {
      const i = idx[j];
      if ((src[i >> 3] >> (i & 7)) & 1) v[j >> 3] |= 1 << (j & 7);
      else nulls++;
    }
    validity = nulls > 0 ? v : null;
  }
  if (c instanceof PrimitiveColumn) {
    const T = /** @type {any} */ (c.values).constructor;
    const out = new T(m);
    const [src, w] = words(c.values);
    const [dst] = words(out);
    if (w === 1) for (let j = 0; j < m; j++) dst[j] = src[idx[j]];
    else {
      for (let j = 0, o = 0; j < m; j++, o += 2) {
        const i = idx[j] * 2;
        dst[o] = src[i];
        dst[o + 1] = src[i + 1];
      }
    }
    return new PrimitiveColumn(c.type, out, validity, nulls);
  }
  if (c instanceof BinaryColumn) {
    const o = c.offsetNumbers();
    const data = c.data;
    const large = c.type.isLarge;
    const outOff = large ? new Float64Array(m + 1) : new Int32Array(m + 1);
    let bytes = 0;
    for (let j = 0; j < m; j++) {
      const i = idx[j];
      bytes += o[i + 1] - o[i];
      outOff[j + 1] = bytes;
    }
    const outData = new Uint8Array(bytes);
    for (let j = 0, pos = 0; j < m; j++) {
      const i = idx[j];
      const b0 = o[i], b1 = o[i + 1];
      if (b1 - b0 >= 32) outData.set(data.subarray(b0, b1), pos);
      else for (let p = b0, q = pos; p < b1; p++, q++) outData[q] = data[p];
      pos += b1 - b0;
    }
    return new BinaryColumn(c.type, large ? toInt64Offsets(/** @type {Float64Array} */ (outOff)) : /** @type {Int32Array} */ (outOff), outData, validity, nulls);
  }
  if (c instanceof BoolColumn) {
    const src = c.values;
    const out = new Uint8Array((m + 7) >> 3);
    for (let j = 0; j < m; j++) {
      const i = idx[j];
      if ((src[i >> 3] >> (i & 7)) & 1) out[j >> 3] |= 1 << (j & 7);
    }
    return new BoolColumn(out, m, validity, nulls);
  }
  throw new IdemError(`take: unsupported column type ${c.type}`);
}

/**
 * Batches of one schema as one batch.
 * @param {Batch[]} batches
 * @param {Schema} [schema] needed when `batches` may be empty
 */
export function concat(batches, schema) {
  const s = schema ?? batches[0]?.schema;
  if (s === undefined) throw new IdemError('concat: no batches and no schema');
  if (batches.length === 1 && batches[0].schema === s) return batches[0];
  let rows = 0;
  for (const b of batches) {
    if (b.schema !== s && !b.schema.equals(s)) throw new IdemError('concat: batches have different schemas');
    rows += b.numRows;
  }
  const cols = s.fields.map((_f, ci) => concatColumns(batches.map((b) => b.columns[ci]), s.fields[ci].type, rows));
  return new Batch(s, cols, rows);
}

/** @param {Column[]} cols @param {DataType} type @param {number} rows */
function concatColumns(cols, type, rows) {
  let validity = null;
  let nulls = 0;
  for (const c of cols) nulls += c.nullCount;
  if (nulls > 0) {
    validity = new Uint8Array((rows + 7) >> 3);
    let j = 0;
    for (const c of cols) {
      const v = c.validity;
      for (let i = 0; i < c.length; i++, j++) if (v === null || (v[i >> 3] >> (i & 7)) & 1) validity[j >> 3] |= 1 << (j & 7);
    }
  }
  if (type.isPrimitive) {
    const out = new (type.ArrayType)(rows);
    const [dst, w] = words(out);
    let j = 0;
    for (const c of cols) {
      const [src] = words(/** @type {PrimitiveColumn} */ (c).values);
      dst.set(src, j * w);
      j += c.length;
    }
    return new PrimitiveColumn(type, out, validity, nulls);
  }
  if (type.isVarSize) {
    let bytes = 0;
    for (const c of cols) {
      const o = /** @type {BinaryColumn} */ (c).offsetNumbers();
      bytes += o[c.length] - o[0];
    }
    const data = new Uint8Array(bytes);
    const large = type.isLarge;
    const off = large ? new Float64Array(rows + 1) : new Int32Array(rows + 1);
    let j = 0, pos = 0;
    for (const c of cols) {
      const bc = /** @type {BinaryColumn} */ (c);
      const o = bc.offsetNumbers();
      data.set(bc.data.subarray(o[0], o[c.length]), pos);
      const delta = pos - o[0];
      for (let i = 1; i <= c.length; i++) off[++j] = o[i] + delta;
      pos += o[c.length] - o[0];
    }
    return new BinaryColumn(type, large ? toInt64Offsets(/** @type {Float64Array} */ (off)) : /** @type {Int32Array} */ (off), data, validity, nulls);
  }
  if (type.kind === Kind.Bool) {
    const out = new Uint8Array((rows + 7) >> 3);
    let j = 0;
    for (const c of cols) {
      const b = /** @type {BoolColumn} */ (c).values;
      for (let i = 0; i < c.length; i++, j++) if ((b[i >> 3] >> (i & 7)) & 1) out[j >> 3] |= 1 << (j & 7);
    }
    return new BoolColumn(out, rows, validity, nulls);
  }
  throw new IdemError(`concat: unsupported column type ${type}`);
}

/** AND of validity bitmaps (null = all valid). @param {(Uint8Array|null)[]} vs @param {number} n */
function andValidity(vs, n) {
  const present = vs.filter((v) => v !== null);
  if (present.length === 0) return null;
  const bytes = (n + 7) >> 3;
  const out = new Uint8Array(bytes);
  out.set(/** @type {Uint8Array} */ (present[0]).subarray(0, bytes));
  for (let k = 1; k < present.length; k++) {
    const v = /** @type {Uint8Array} */ (present[k]);
    for (let i = 0; i < bytes; i++) out[i] &= v[i];
  }
  return out;
}

/** The numeric values of a column as Numbers (see PrimitiveColumn#numbers). @param {Column} c */
function numbersOf(c, what) {
  if (!(c instanceof PrimitiveColumn)) throw new IdemError(`${what}: column of type ${c.type} is not numeric`);
  return c.numbers();
}

/**
 * A derived numeric column: row i = fn(a[i], b[i], ...) over the inputs'
 * values as Numbers (64-bit integers converted like Rust's `as f64`), null
 * where any input is null (like arrow's `binary`). `type` is the result's
 * type: Float64/Float32/Int8..Int32/UInt8..UInt32 take the Number as is
 * (typed-array conversion), Int64/UInt64/Timestamp/... need an integral
 * result (converted through BigInt).
 * @param {DataType} type
 * @param {Column[]} inputs
 * @param {(...values: number[]) => number} fn
 * @returns {PrimitiveColumn}
 */
export function derive(type, inputs, fn) {
  if (!type.isPrimitive) throw new IdemError(`derive: result type ${type} is not numeric`);
  if (inputs.length === 0) throw new IdemError('derive: no input columns');
  const n = inputs[0].length;
  for (const c of inputs) if (c.length !== n) throw new IdemError('derive: input columns differ in length');
  const vals = inputs.map((c) => numbersOf(c, 'derive'));
  const T = type.ArrayType;
  const big = T === BigInt64Array || T === BigUint64Array;
  const out = big ? new Float64Array(n) : new T(n);
  if (vals.length === 1) {
    const a = vals[0];
    for (let i = 0; i < n; i++) out[i] = fn(a[i]);
  } else if (vals.length === 2) {
    const a = vals[0], b = vals[1];
    for (let i = 0; i < n; i++) out[i] = fn(a[i], b[i]);
  } else if (vals.length === 3) {
    const a = vals[0], b = vals[1], c = vals[2];
    for (let i = 0; i < n; i++) out[i] = fn(a[i], b[i], c[i]);
  } else {
    const args = new Array(vals.length);
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < vals.length; k++) args[k] = vals[k][i];
      out[i] = fn(...args);
    }
  }
  const validity = andValidity(inputs.map((c) => c.validity), n);
  let values = out;
  if (big) {
    const b = new T(n);
    for (let i = 0; i < n; i++) b[i] = Number.isFinite(out[i]) ? BigInt(Math.trunc(out[i])) : 0n;
    values = b;
  }
  return new PrimitiveColumn(type, /** @type {any} */ (values), validity);
}

/**
 * Compare a column with a scalar: a mask with 1 where the row is valid and
 * the comparison holds (null rows are 0, like SQL). Numbers compare as
 * Numbers (64-bit integers converted), strings by UTF-8 bytes.
 * @param {Column} column
 * @param {'=='|'!='|'<'|'<='|'>'|'>='} op
 * @param {number|string|boolean} scalar
 * @returns {Uint8Array}
 */
export function compare(column, op, scalar) {
  const n = column.length;
  const m = new Uint8Array(n);
  if (column instanceof PrimitiveColumn) {
    const vals = column.values;
    const v = vals instanceof BigInt64Array || vals instanceof BigUint64Array ? column.numbers() : vals;
    const x = Number(scalar);
    // Booleans store as 1/0 in a Uint8Array.
    switch (op) {
      case '==': for (let i = 0; i < n; i++) m[i] = /** @type {any} */ (v[i] === x); break;
      case '!=': for (let i = 0; i < n; i++) m[i] = /** @type {any} */ (v[i] !== x); break;
      case '<': for (let i = 0; i < n; i++) m[i] = /** @type {any} */ (v[i] < x); break;
      case '<=': for (let i = 0; i < n; i++) m[i] = /** @type {any} */ (v[i] <= x); break;
      case '>': for (let i = 0; i < n; i++) m[i] = /** @type {any} */ (v[i] > x); break;
      case '>=': for (let i = 0; i < n; i++) m[i] = /** @type {any} */ (v[i] >= x); break;
      default: throw new IdemError(`compare: unknown operator ${op}`);
    }
  } else if (column instanceof BinaryColumn) {
    const key = typeof scalar === 'string' ? new TextEncoder().encode(scalar) : /** @type {any} */ (scalar);
    const o = column.offsetNumbers(), d = column.data;
    const test = opTest(op);
    for (let i = 0; i < n; i++) m[i] = test(compareBytes(d, o[i], o[i + 1], key, 0, key.length)) ? 1 : 0;
  } else if (column instanceof BoolColumn) {
    const x = scalar ? 1 : 0;
    const test = opTest(op);
    const b = column.values;
    for (let i = 0; i < n; i++) m[i] = test(((b[i >> 3] >> (i & 7)) & 1) - x) ? 1 : 0;
  } else {
    throw new IdemError(`compare: unsupported column type ${column.type}`);
  }
  markNulls(m, column.validity, 0);
  return m;
}

/**
 * Set `out[i] = value` for every row i that `validity` marks null; whole
 * valid bytes (8 rows) are skipped at once. Handy to drop null rows from a
 * mask or from group ids.
 * @param {{[i: number]: number, length: number}} out
 * @param {Uint8Array|null} validity
 * @param {number} value
 */
export function markNulls(out, validity, value) {
  if (validity === null) return out;
  const n = out.length;
  const bytes = (n + 7) >> 3;
  for (let b = 0; b < bytes; b++) {
    const x = validity[b];
    if (x === 255) continue;
    for (let k = 0, i = b << 3; k < 8 && i < n; k++, i++) if (((x >> k) & 1) === 0) out[i] = value;
  }
  return out;
}

/**
 * Element-wise arithmetic on numeric columns (or a column and a number):
 * a Float64 column, null where an input is null (like arrow's arithmetic
 * kernels). 64-bit integers are read as two 32-bit halves and converted
 * like Rust's `as f64`, without a BigInt per row.
 * @param {Column|number} a
 * @param {'+'|'-'|'*'|'/'} op
 * @param {Column|number} b
 * @returns {PrimitiveColumn}
 */
export function arith(a, op, b) {
  const ca = a instanceof Column ? a : null, cb = b instanceof Column ? b : null;
  if (ca === null && cb === null) throw new IdemError('arith: at least one operand must be a column');
  const n = (ca ?? /** @type {Column} */ (cb)).length;
  if (ca !== null && cb !== null && ca.length !== cb.length) throw new IdemError('arith: columns differ in length');
  const out = new Float64Array(n);
  const [ka, va] = operand(a, 'arith');
  const [kb, vb] = operand(b, 'arith');
  const code = OPS[op];
  if (code === undefined) throw new IdemError(`arith: unknown operator ${op}`);
  if (ka === 'f' && kb === 'i64') arithFI(out, /** @type {any} */ (va), /** @type {Int32Array} */ (vb), code, false);
  else if (ka === 'i64' && kb === 'f') arithFI(out, /** @type {any} */ (vb), /** @type {Int32Array} */ (va), code, true);
  else {
    const x = ka === 'i64' ? /** @type {PrimitiveColumn} */ (ca).numbers() : va;
    const y = kb === 'i64' ? /** @type {PrimitiveColumn} */ (cb).numbers() : vb;
    arithFF(out, x, y, code);
  }
  const validity = andValidity([ca?.validity ?? null, cb?.validity ?? null], n);
  return new PrimitiveColumn(DataType.Float64, out, validity);
}

const OPS = { '+': 0, '-': 1, '*': 2, '/': 3 };

/** @returns {['f'|'i64'|'s', any]} */
function operand(x, what) {
  if (typeof x === 'number') return ['s', x];
  if (!(x instanceof PrimitiveColumn)) throw new IdemError(`${what}: column of type ${x?.type} is not numeric`);
  const v = x.values;
  if (v instanceof BigInt64Array) return ['i64', new Int32Array(v.buffer, v.byteOffset, 2 * v.length)];
  if (v instanceof BigUint64Array) return ['f', x.numbers()];
  return ['f', v];
}

/** out = f op i (or i op f when `swap`), i an int64 column as 32-bit words. */
function arithFI(out, f, w, code, swap) {
  const n = out.length;
  const T = 4294967296;
  if (code === 2) {
    for (let i = 0, j = 0; i < n; i++, j += 2) out[i] = f[i] * (w[j + 1] * T + (w[j] >>> 0));
    return;
  }
  for (let i = 0, j = 0; i < n; i++, j += 2) {
    const x = f[i], y = w[j + 1] * T + (w[j] >>> 0);
    const l = swap ? y : x, r = swap ? x : y;
    out[i] = code === 0 ? l + r : code === 1 ? l - r : code === 3 ? l / r : l * r;
  }
}

/** out = x op y; each a Float64Array-like or a number. */
function arithFF(out, x, y, code) {
  const n = out.length;
  const xs = typeof x === 'number', ys = typeof y === 'number';
  if (!xs && !ys) {
    switch (code) {
      case 0: for (let i = 0; i < n; i++) out[i] = x[i] + y[i]; break;
      case 1: for (let i = 0; i < n; i++) out[i] = x[i] - y[i]; break;
      case 2: for (let i = 0; i < n; i++) out[i] = x[i] * y[i]; break;
      default: for (let i = 0; i < n; i++) out[i] = x[i] / y[i]; break;
    }
    return;
  }
  for (let i = 0; i < n; i++) {
    const l = xs ? x : x[i], r = ys ? y : y[i];
    out[i] = code === 0 ? l + r : code === 1 ? l - r : code === 3 ? l / r : l * r;
  }
}

/** @param {string} op */
function opTest(op) {
  switch (op) {
    case '==': return (c) => c === 0;
    case '!=': return (c) => c !== 0;
    case '<': return (c) => c < 0;
    case '<=': return (c) => c <= 0;
    case '>': return (c) => c > 0;
    case '>=': return (c) => c >= 0;
    default: throw new IdemError(`compare: unknown operator ${op}`);
  }
}

/**
 * Lexicographic byte comparison of a[as..ae] and b[bs..be]: <0, 0, >0.
 * @param {Uint8Array} a @param {number} as @param {number} ae
 * @param {Uint8Array} b @param {number} bs @param {number} be
 */
export function compareBytes(a, as, ae, b, bs, be) {
  const la = ae - as, lb = be - bs;
  const l = la < lb ? la : lb;
  for (let k = 0; k < l; k++) {
    const d = a[as + k] - b[bs + k];
    if (d !== 0) return d;
  }
  return la - lb;
}

/**
 * Compare two JS strings in UTF-8 byte order (= Unicode code point order),
 * which is how Rust's `str`/`String` sort. JS's `<` compares UTF-16 code
 * units instead: it puts astral characters (emoji, U+10000 and up) before
 * U+E000..U+FFFF; this does not.
 * @param {string} a
 * @param {string} b
 * @returns {number} <0, 0 or >0
 */
export function compareUtf8(a, b) {
  const n = a.length < b.length ? a.length : b.length;
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i), y = b.charCodeAt(i);
    if (x !== y) {
      // Surrogates (astral code points) sort above the rest of the BMP.
      const fx = x >= 0xd800 ? (x <= 0xdfff ? x + 0x2000 : x - 0x800) : x;
      const fy = y >= 0xd800 ? (y <= 0xdfff ? y + 0x2000 : y - 0x800) : y;
      return fx - fy;
    }
  }
  return a.length - b.length;
}

/**
 * Row indices that sort a column ascending (stable; nulls last; NaN after
 * numbers; strings and binary by bytes, i.e. like Rust).
 * @param {Column} column
 * @param {{descending?: boolean}} [opts] descending keeps nulls last
 * @returns {Int32Array}
 */
export function sortIndices(column, opts = {}) {
  const n = column.length;
  const idx = new Array(n);
  for (let i = 0; i < n; i++) idx[i] = i;
  const sign = opts.descending ? -1 : 1;
  const v = column.validity;
  const valid = (i) => v === null || ((v[i >> 3] >> (i & 7)) & 1) === 1;
  let cmp;
  if (column instanceof PrimitiveColumn) {
    const vals = column.values;
    cmp = (i, j) => {
      const x = vals[i], y = vals[j];
      const xn = x !== x, yn = y !== y; // NaN
      if (xn || yn) return xn === yn ? 0 : xn ? 1 : -1;
      return x < y ? -1 : x > y ? 1 : 0;
    };
  } else if (column instanceof BinaryColumn) {
    const o = column.offsetNumbers(), d = column.data;
    cmp = (i, j) => compareBytes(d, o[i], o[i + 1], d, o[j], o[j + 1]);
  } else if (column instanceof BoolColumn) {
    const b = column.values;
    cmp = (i, j) => ((b[i >> 3] >> (i & 7)) & 1) - ((b[j >> 3] >> (j & 7)) & 1);
  } else {
    throw new IdemError(`sortIndices: unsupported column type ${column.type}`);
  }
  idx.sort((i, j) => {
    const a = valid(i), b = valid(j);
    if (!a || !b) return a === b ? 0 : a ? -1 : 1;
    return sign * cmp(i, j);
  });
  return Int32Array.from(idx);
}

/**
 * Interns the strings of Utf8 columns as small integer ids, for group-by:
 * `ids(column)` gives one id per row (-1 for null), `keys[id]` the string.
 * Ids are stable across batches and are numbered in order of first
 * appearance.
 *
 * No string is created per row (in the sandbox's interpreter a substring
 * costs ~3 µs): a row's bytes are packed 6 at a time into exact numeric
 * keys of a trie of Maps, and a string is decoded once per distinct key.
 */
export class StringKeys {
  constructor() {
    /** @type {string[]} */
    this.keys = [];
    /** Trie root: Map<chunk key, id | Map>. @type {Map<number, any>} */
    this.root = new Map();
  }

  /** Number of distinct keys seen. */
  get size() {
    return this.keys.length;
  }

  /**
   * The id of a string, added if new.
   * @param {string} s
   */
  id(s) {
    const b = utf8enc.encode(s);
    return this._lookup(b, 0, b.length, s);
  }

  /**
   * Walk (and extend) the trie for bytes d[a..e).
   * @param {Uint8Array} d
   * @param {number} a
   * @param {number} e
   * @param {string|null} str the decoded string, when known
   */
  _lookup(d, a, e, str) {
    let node = this.root;
    let p = a;
    for (;;) {
      const len = e - p;
      if (len <= 6) {
        // Terminal chunk: len * 256^len + bytes (little-endian), exact below 2^53.
        let key = 0, mul = 1;
        for (let q = p; q < e; q++, mul *= 256) key += d[q] * mul;
        key += len * mul;
        let id = node.get(key);
        if (id === undefined) {
          id = this.keys.length;
          this.keys.push(str ?? utf8.decode(d.subarray(a, e)));
          node.set(key, id);
        }
        return id;
      }
      // Inner chunk of 6 bytes, tagged with 7 * 2^48 so it never equals a terminal key.
      const key = d[p] + d[p + 1] * 256 + d[p + 2] * 65536 + d[p + 3] * 16777216 +
        d[p + 4] * 4294967296 + d[p + 5] * 1099511627776 + 7 * 281474976710656;
      let next = node.get(key);
      if (next === undefined) {
        next = new Map();
        node.set(key, next);
      }
      node = next;
      p += 6;
    }
  }

  /**
   * @param {BinaryColumn} column a Utf8 or LargeUtf8 column
   * @returns {Int32Array} one id per row, -1 for nulls
   */
  ids(column) {
    if (!(column instanceof BinaryColumn) || !column.type.isString) {
      throw new IdemError(`StringKeys.ids: column must be Utf8, not ${column?.type}`);
    }
    const n = column.length;
    const out = new Int32Array(n);
    const o = column.offsetNumbers();
    const d = column.data;
    const root = this.root;
    const v = column.validity;
    // Little-endian, so u16[h] = d[2h] + 256 * d[2h + 1], the same key as byte by byte.
    const u16 = (d.byteOffset & 1) === 0 && d.length < 0x7fffffff ? new Uint16Array(d.buffer, d.byteOffset, d.length >> 1) : null;
    for (let i = 0; i < n; i++) {
      if (v !== null && ((v[i >> 3] >> (i & 7)) & 1) === 0) {
        out[i] = -1;
        continue;
      }
      const a = o[i], e = o[i + 1];
      const len = e - a;
      // Fast path (inlined terminal chunk at the root): keys of up to 6 bytes,
      // read two bytes at a time when the row starts at an even offset.
      if (len <= 6) {
        let key;
        if ((a & 1) === 0 && u16 !== null) {
          const h = a >> 1;
          switch (len) {
            case 0: key = 0; break;
            case 1: key = d[a] + 256; break;
            case 2: key = u16[h] + 131072; break;
            case 3: key = u16[h] + d[a + 2] * 65536 + 50331648; break;
            case 4: key = u16[h] + u16[h + 1] * 65536 + 17179869184; break;
            case 5: key = u16[h] + u16[h + 1] * 65536 + d[a + 4] * 4294967296 + 5497558138880; break;
            default: key = u16[h] + u16[h + 1] * 65536 + u16[h + 2] * 4294967296 + 1688849860263936; break;
          }
        } else {
          switch (len) {
            case 0: key = 0; break;
            case 1: key = d[a] + 256; break;
            case 2: key = d[a] + d[a + 1] * 256 + 131072; break;
            case 3: key = d[a] + d[a + 1] * 256 + d[a + 2] * 65536 + 50331648; break;
            case 4: key = d[a] + d[a + 1] * 256 + d[a + 2] * 65536 + d[a + 3] * 16777216 + 17179869184; break;
            case 5: key = d[a] + d[a + 1] * 256 + d[a + 2] * 65536 + d[a + 3] * 16777216 + d[a + 4] * 4294967296 + 5497558138880; break;
            default: key = d[a] + d[a + 1] * 256 + d[a + 2] * 65536 + d[a + 3] * 16777216 + d[a + 4] * 4294967296 + d[a + 5] * 1099511627776 + 1688849860263936; break;
          }
        }
        const id = root.get(key);
        out[i] = id === undefined ? this._lookup(d, a, e, null) : id;
      } else {
        out[i] = this._lookup(d, a, e, null);
      }
    }
    return out;
  }

  /** Ids in UTF-8 byte order of their keys (Rust's string order). */
  sortedIds() {
    const keys = this.keys;
    const ids = Array.from(keys.keys());
    ids.sort((a, b) => compareUtf8(keys[a], keys[b]));
    return Int32Array.from(ids);
  }
}

const utf8enc = new TextEncoder();
const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });

