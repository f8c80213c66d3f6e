// Columns: Arrow arrays over typed arrays. Read-only by convention: kernels
// return new columns and share buffers with their inputs where they can.

import { DataType, Kind } from './types.js';
import { IdemError } from './error.js';

// ignoreBOM: a leading U+FEFF is part of the value (Rust keeps it too).
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
const encoder = new TextEncoder();
const TWO32 = 4294967296;

/**
 * Base of all columns. `validity` is an Arrow validity bitmap (bit i set =
 * row i is valid, least significant bit first), or null when no row is null.
 */
export class Column {
  /**
   * @param {DataType} type
   * @param {number} length
   * @param {Uint8Array|null} validity
   * @param {number} nullCount
   */
  constructor(type, length, validity, nullCount) {
    /** @type {DataType} */
    this.type = type;
    /** Number of rows. */
    this.length = length;
    /** @type {Uint8Array|null} */
    this.validity = nullCount > 0 ? validity : null;
    /** Number of null rows. */
    this.nullCount = nullCount;
  }

  /** @param {number} i */
  isValid(i) {
    const v = this.validity;
    return v === null || ((v[i >> 3] >> (i & 7)) & 1) === 1;
  }

  /** @param {number} i */
  isNull(i) {
    return !this.isValid(i);
  }

  /** The value at row `i` (null for a null row). @param {number} i @returns {any} */
  get(i) {
    throw new Error(`get(${i}) not implemented for ${this.type}`);
  }

  /** All values as a JS array (nulls as null). Allocates one value per row: for tests and small columns. */
  toArray() {
    const out = new Array(this.length);
    for (let i = 0; i < this.length; i++) out[i] = this.get(i);
    return out;
  }

  /** A 0/1 byte per row: 1 where the row is valid. */
  validMask() {
    const n = this.length;
    const m = new Uint8Array(n);
    const v = this.validity;
    if (v === null) return m.fill(1);
    for (let i = 0; i < n; i++) m[i] = (v[i >> 3] >> (i & 7)) & 1;
    return m;
  }
}

/**
 * Fixed-width numbers (Int*, UInt*, Float*, Date*, Time*, Timestamp,
 * Duration). `values` is a typed array of exactly `length` elements (the
 * value of a null row is unspecified). 64-bit integer types are
 * BigInt64Array/BigUint64Array: use {@link PrimitiveColumn#numbers} to read
 * them as Numbers without allocating a BigInt per row.
 */
export class PrimitiveColumn extends Column {
  /**
   * @param {DataType} type
   * @param {ArrayLike<any> & {buffer: ArrayBufferLike, byteOffset: number, length: number}} values
   * @param {Uint8Array|null} [validity]
   * @param {number} [nullCount] counted from `validity` when omitted
   */
  constructor(type, values, validity = null, nullCount) {
    if (!type.isPrimitive) throw new TypeError(`PrimitiveColumn cannot hold ${type}`);
    const T = type.ArrayType;
    if (!(values instanceof T)) {
      throw new TypeError(`a ${type} column needs a ${T.name}, got ${values?.constructor?.name}`);
    }
    const n = values.length;
    super(type, n, validity, nullCount ?? countNulls(validity, n));
    /** The values (one per row). */
    this.values = values;
    /** @type {Float64Array|null} */
    this._numbers = null;
  }

  get(i) {
    return this.isValid(i) ? this.values[i] : null;
  }

  /**
   * The values as Numbers (a Float64Array; the column's own array for
   * Float64). 64-bit integers convert like Rust's `as f64` (round to nearest),
   * read as two 32-bit halves so no BigInt is allocated. Null rows hold an
   * unspecified number. Cached.
   * @returns {Float64Array}
   */
  numbers() {
    if (this._numbers !== null) return this._numbers;
    const v = this.values;
    let out;
    if (v instanceof Float64Array) {
      out = v;
    } else if (v instanceof BigInt64Array || v instanceof BigUint64Array) {
      const n = v.length;
      const w = new Int32Array(v.buffer, v.byteOffset, 2 * n);
      out = new Float64Array(n);
      if (v instanceof BigInt64Array) {
        for (let i = 0, j = 0; i < n; i++, j += 2) out[i] = w[j + 1] * TWO32 + (w[j] >>> 0);
      } else {
        for (let i = 0, j = 0; i < n; i++, j += 2) out[i] = (w[j + 1] >>> 0) * TWO32 + (w[j] >>> 0);
      }
    } else {
      out = new Float64Array(/** @type {any} */ (v)); // native conversion
    }
    this._numbers = out;
    return out;
  }
}

/** Booleans: `values` is a bitmap like `validity`. */
export class BoolColumn extends Column {
  /**
   * @param {Uint8Array} values bitmap of at least ceil(length/8) bytes
   * @param {number} length
   * @param {Uint8Array|null} [validity]
   * @param {number} [nullCount]
   */
  constructor(values, length, validity = null, nullCount) {
    super(DataType.Bool, length, validity, nullCount ?? countNulls(validity, length));
    this.values = values;
  }

  get(i) {
    return this.isValid(i) ? ((this.values[i >> 3] >> (i & 7)) & 1) === 1 : null;
  }

  /** A 0/1 byte per row: 1 where the row is valid and true (null counts as false). */
  mask() {
    const n = this.length;
    const m = new Uint8Array(n);
    const b = this.values, v = this.validity;
    if (v === null) for (let i = 0; i < n; i++) m[i] = (b[i >> 3] >> (i & 7)) & 1;
    else for (let i = 0; i < n; i++) m[i] = (b[i >> 3] & v[i >> 3]) >> (i & 7) & 1;
    return m;
  }
}

/**
 * Utf8, LargeUtf8, Binary, LargeBinary: row i is `data[offsets[i] ..
 * offsets[i+1]]`. `offsets` is an Int32Array (Utf8/Binary) or a
 * BigInt64Array (Large*). `get(i)` decodes lazily (a string for Utf8, a
 * Uint8Array view for Binary).
 */
export class BinaryColumn extends Column {
  /**
   * @param {DataType} type
   * @param {Int32Array|BigInt64Array} offsets length+1 entries
   * @param {Uint8Array} data
   * @param {Uint8Array|null} [validity]
   * @param {number} [nullCount]
   */
  constructor(type, offsets, data, validity = null, nullCount) {
    if (!type.isVarSize) throw new TypeError(`BinaryColumn cannot hold ${type}`);
    const want = type.isLarge ? BigInt64Array : Int32Array;
    if (!(offsets instanceof want)) throw new TypeError(`${type} offsets must be a ${want.name}`);
    const n = Math.max(0, offsets.length - 1);
    super(type, n, validity, nullCount ?? countNulls(validity, n));
    this.offsets = offsets;
    this.data = data;
    /** @type {Int32Array|Float64Array|null} */
    this._starts = null;
  }

  /** Offsets as Numbers: the Int32Array itself, or a Float64Array for Large types. Cached. */
  offsetNumbers() {
    if (this._starts !== null) return this._starts;
    const o = this.offsets;
    if (o instanceof Int32Array) return (this._starts = o);
    const n = o.length;
    const w = new Int32Array(o.buffer, o.byteOffset, 2 * n);
    const out = new Float64Array(n);
    for (let i = 0, j = 0; i < n; i++, j += 2) out[i] = w[j + 1] * TWO32 + (w[j] >>> 0);
    return (this._starts = out);
  }

  /** The bytes of row i (a view, not a copy). @param {number} i */
  bytes(i) {
    const o = this.offsetNumbers();
    return this.data.subarray(o[i], o[i + 1]);
  }

  get(i) {
    if (!this.isValid(i)) return null;
    const b = this.bytes(i);
    return this.type.isString ? decoder.decode(b) : b;
  }
}

/** @param {Uint8Array|null} validity @param {number} n */
export function countNulls(validity, n) {
  if (validity === null) return 0;
  if (validity.length * 8 < n) throw new IdemError(`validity bitmap of ${validity.length} bytes is too short for ${n} rows`);
  let valid = 0;
  const full = n >> 3;
  for (let i = 0; i < full; i++) valid += POPCOUNT[validity[i]];
  for (let i = full * 8; i < n; i++) valid += (validity[i >> 3] >> (i & 7)) & 1;
  return n - valid;
}

const POPCOUNT = new Uint8Array(256);
for (let i = 1; i < 256; i++) POPCOUNT[i] = (i & 1) + POPCOUNT[i >> 1];

/**
 * Build a column from JS values. `values` may be:
 * - a typed array of the type's array class (used as is, no copy), optionally with a `validity` bitmap;
 * - an array of values with `null`/`undefined` for nulls: numbers (or
 *   BigInts) for numeric types, booleans for Bool, strings for Utf8, and
 *   Uint8Arrays (or strings) for Binary.
 * @param {DataType} type
 * @param {ArrayLike<any>} values
 * @param {Uint8Array|null} [validity] only with a typed array
 * @returns {Column}
 */
export function column(type, values, validity = null) {
  if (!(type instanceof DataType)) throw new TypeError('column(type, values): type must be a DataType');
  if (type.kind === Kind.Unsupported) throw new IdemError(`cannot build a column of unsupported type ${type}`);
  if (type.isPrimitive && values instanceof type.ArrayType) return new PrimitiveColumn(type, values, validity);
  if (validity !== null) throw new TypeError('column(): a validity bitmap goes with a typed array of the type');
  const n = values.length;
  let bits = null;
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    if (values[i] === null || values[i] === undefined) {
      if (bits === null) bits = new Uint8Array((n + 7) >> 3).fill(255);
      bits[i >> 3] &= ~(1 << (i & 7));
      nulls++;
    }
  }
  if (type.kind === Kind.Bool) {
    const b = new Uint8Array((n + 7) >> 3);
    for (let i = 0; i < n; i++) if (values[i]) b[i >> 3] |= 1 << (i & 7);
    return new BoolColumn(b, n, bits, nulls);
  }
  if (type.isVarSize) {
    const parts = new Array(n);
    let total = 0;
    for (let i = 0; i < n; i++) {
      const v = values[i];
      let b;
      if (v === null || v === undefined) b = EMPTY;
      else if (typeof v === 'string') b = encoder.encode(v);
      else if (ArrayBuffer.isView(v)) b = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
      else throw new TypeError(`${type} column: row ${i} is a ${typeof v}, not a string or bytes`);
      parts[i] = b;
      total += b.length;
    }
    const data = new Uint8Array(total);
    const offsets = type.isLarge ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
    if (!type.isLarge && total > 0x7fffffff) throw new IdemError(`${type} column over 2 GiB: use the Large type`);
    let pos = 0;
    for (let i = 0; i < n; i++) {
      data.set(parts[i], pos);
      pos += parts[i].length;
      offsets[i + 1] = type.isLarge ? BigInt(pos) : pos;
    }
    return new BinaryColumn(type, offsets, data, bits, nulls);
  }
  if (type.isPrimitive) {
    const T = type.ArrayType;
    const out = new T(n);
    if (T === BigInt64Array || T === BigUint64Array) {
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (v === null || v === undefined) continue;
        out[i] = typeof v === 'bigint' ? v : BigInt(checkInteger(v, type, i));
      }
    } else {
      const isInt = type.kind !== Kind.Float;
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (v === null || v === undefined) continue;
        out[i] = isInt ? checkInteger(Number(v), type, i) : Number(v);
      }
    }
    return new PrimitiveColumn(type, out, bits, nulls);
  }
  throw new IdemError(`cannot build a column of type ${type}`);
}

const EMPTY = new Uint8Array(0);

function checkInteger(v, type, i) {
  if (!Number.isInteger(v)) throw new TypeError(`${type} column: row ${i} is ${v}, not an integer`);
  return v;
}

/**
 * A Utf8 column holding the same string `n` times (encoded once).
 * @param {string} value
 * @param {number} n
 */
export function repeatString(value, n) {
  const b = encoder.encode(value);
  const data = new Uint8Array(b.length * n);
  const offsets = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) {
    data.set(b, i * b.length);
    offsets[i + 1] = (i + 1) * b.length;
  }
  return new BinaryColumn(DataType.Utf8, offsets, data);
}

/** A column of `n` nulls. @param {DataType} type @param {number} n */
export function nulls(type, n) {
  const bits = new Uint8Array((n + 7) >> 3);
  if (type.kind === Kind.Bool) return new BoolColumn(new Uint8Array((n + 7) >> 3), n, bits, n);
  if (type.isVarSize) {
    return new BinaryColumn(type, type.isLarge ? new BigInt64Array(n + 1) : new Int32Array(n + 1), EMPTY, bits, n);
  }
  if (type.isPrimitive) return new PrimitiveColumn(type, new type.ArrayType(n), bits, n);
  throw new IdemError(`cannot build a column of type ${type}`);
}

/** An empty column of a type. @param {DataType} type */
export function emptyColumn(type) {
  if (type.kind === Kind.Bool) return new BoolColumn(EMPTY, 0, null, 0);
  if (type.isVarSize) return new BinaryColumn(type, type.isLarge ? new BigInt64Array(1) : new Int32Array(1), EMPTY);
  if (type.isPrimitive) return new PrimitiveColumn(type, new type.ArrayType(0));
  throw new IdemError(`cannot build a column of type ${type}`);
}
