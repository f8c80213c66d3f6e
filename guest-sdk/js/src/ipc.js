// Arrow IPC streams: a schema message, record batch messages, end of stream.
// https://arrow.apache.org/docs/format/Columnar.html#serialization-and-interprocess-communication-ipc
//
// Reading is zero-copy: columns are typed-array views on the stream's own
// ArrayBuffer, copied only when a buffer is misaligned for its type.
// Writing lays buffers out 8-byte aligned and padded, metadata version V5.

import { FbReader, FbBuilder } from './flatbuf.js';
import { DataType, Field, Kind, Schema } from './types.js';
import { BinaryColumn, BoolColumn, PrimitiveColumn } from './column.js';
import { Batch } from './batch.js';
import { IdemError } from './error.js';

const CONTINUATION = 0xffffffff;
const V4 = 3, V5 = 4;
const HEADER_SCHEMA = 1, HEADER_DICTIONARY = 2, HEADER_RECORD_BATCH = 3;

// Type union tags of Schema.fbs.
const T = {
  Null: 1, Int: 2, FloatingPoint: 3, Binary: 4, Utf8: 5, Bool: 6, Decimal: 7, Date: 8, Time: 9,
  Timestamp: 10, Interval: 11, List: 12, Struct: 13, Union: 14, FixedSizeBinary: 15, FixedSizeList: 16,
  Map: 17, Duration: 18, LargeBinary: 19, LargeUtf8: 20, LargeList: 21, RunEndEncoded: 22,
  BinaryView: 23, Utf8View: 24, ListView: 25, LargeListView: 26,
};
const TYPE_NAMES = Object.fromEntries(Object.entries(T).map(([k, v]) => [v, k]));
const UNITS = ['s', 'ms', 'us', 'ns'];
const UNIT_CODE = { s: 0, ms: 1, us: 2, ns: 3 };

/** @param {string} msg */
const ipcError = (msg) => new IdemError(msg);

// ---------------------------------------------------------------- reading

/**
 * Split a stream into messages. Yields {header type, reader, header table,
 * body view}.
 * @param {Uint8Array} bytes
 */
function* messages(bytes) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  while (pos < bytes.length) {
    if (pos + 4 > bytes.length) throw ipcError('stream ends inside a message length');
    let len = dv.getUint32(pos, true);
    pos += 4;
    if (len === CONTINUATION) {
      if (pos + 4 > bytes.length) throw ipcError('stream ends inside a message length');
      len = dv.getUint32(pos, true);
      pos += 4;
    }
    if (len === 0) return; // end of stream
    if (pos + len > bytes.length) throw ipcError('stream ends inside the message metadata');
    const meta = bytes.subarray(pos, pos + len);
    pos += len;
    const r = new FbReader(meta);
    let msg, version, headerType, header, bodyLength;
    try {
      msg = r.root();
      version = r.i16(msg, 0, 0);
      headerType = r.u8(msg, 1, 0);
      header = r.table(msg, 2);
      bodyLength = r.i64(msg, 3, 0);
    } catch (e) {
      throw ipcError(`invalid message metadata (${e instanceof Error ? e.message : e})`);
    }
    if (version < V4 || version > V5) throw ipcError(`unsupported IPC metadata version ${version + 1}`);
    if (bodyLength < 0 || pos + bodyLength > bytes.length) throw ipcError('stream ends inside a message body');
    const bodyStart = bytes.byteOffset + pos;
    pos += bodyLength;
    yield { headerType, r, header, bodyStart, bodyLength };
  }
}

/**
 * Read an IPC stream. Empty bytes read as null ("no rows").
 * @param {Uint8Array} bytes
 * @returns {{schema: Schema, batches: Batch[]} | null}
 */
export function readStream(bytes) {
  if (bytes.length === 0) return null;
  /** @type {Schema|null} */
  let schema = null;
  const batches = [];
  for (const m of messages(bytes)) {
    if (m.headerType === HEADER_SCHEMA) {
      if (schema !== null) throw ipcError('a second schema in one stream');
      schema = schemaFromFb(m.r, m.header);
    } else if (m.headerType === HEADER_RECORD_BATCH) {
      if (schema === null) throw ipcError('record batch before the schema');
      batches.push(batchFromFb(m.r, m.header, schema, bytes.buffer, m.bodyStart, m.bodyLength));
    } else if (m.headerType === HEADER_DICTIONARY) {
      throw ipcError('dictionary batches are not supported by the JS SDK');
    } else if (m.headerType !== 0) {
      throw ipcError(`unexpected message type ${m.headerType} in a stream`);
    }
  }
  if (schema === null) throw ipcError('stream has no schema');
  return { schema, batches };
}

/**
 * The schema of a stream (for example the context's input schema).
 * @param {Uint8Array} bytes
 * @returns {Schema}
 */
export function readSchema(bytes) {
  for (const m of messages(bytes)) {
    if (m.headerType === HEADER_SCHEMA) return schemaFromFb(m.r, m.header);
  }
  throw ipcError('stream has no schema');
}

/**
 * @param {FbReader} r
 * @param {number} t Schema table
 */
function schemaFromFb(r, t) {
  if (r.i16(t, 0, 0) !== 0) throw ipcError('big-endian IPC streams are not supported');
  const vec = r.vector(t, 1);
  const fields = [];
  if (vec !== null) for (let i = 0; i < vec.length; i++) fields.push(fieldFromFb(r, r.vectorTable(vec, i)));
  return new Schema(fields, metadataFromFb(r, t, 2));
}

/** @param {FbReader} r @param {number} t @param {number} id */
function metadataFromFb(r, t, id) {
  const vec = r.vector(t, id);
  if (vec === null || vec.length === 0) return null;
  const m = new Map();
  for (let i = 0; i < vec.length; i++) {
    const kv = r.vectorTable(vec, i);
    m.set(r.string(kv, 0) ?? '', r.string(kv, 1) ?? '');
  }
  return m;
}

/** @param {FbReader} r @param {number} t Field table */
function fieldFromFb(r, t) {
  const name = r.string(t, 0) ?? '';
  const nullable = r.bool(t, 1, false);
  const typeTag = r.u8(t, 2, 0);
  const tt = r.table(t, 3);
  let type;
  if (r.table(t, 4) !== 0) {
    type = DataType.unsupported(`Dictionary(${TYPE_NAMES[typeTag] ?? typeTag})`);
  } else {
    type = typeFromFb(r, typeTag, tt);
  }
  return new Field(name, type, nullable, metadataFromFb(r, t, 6));
}

/** @param {FbReader} r @param {number} tag @param {number} tt */
function typeFromFb(r, tag, tt) {
  switch (tag) {
    case T.Bool: return DataType.Bool;
    case T.Utf8: return DataType.Utf8;
    case T.LargeUtf8: return DataType.LargeUtf8;
    case T.Binary: return DataType.Binary;
    case T.LargeBinary: return DataType.LargeBinary;
    case T.Int: {
      const bits = r.i32(tt, 0, 0), signed = r.bool(tt, 1, false);
      if (bits !== 8 && bits !== 16 && bits !== 32 && bits !== 64) return DataType.unsupported(`Int(${bits})`);
      return new DataType(Kind.Int, { bitWidth: bits, signed });
    }
    case T.FloatingPoint: {
      const p = r.i16(tt, 0, 0);
      if (p === 1) return DataType.Float32;
      if (p === 2) return DataType.Float64;
      return DataType.unsupported('Float16');
    }
    case T.Date: return r.i16(tt, 0, 1) === 0 ? DataType.Date32 : DataType.Date64;
    case T.Time: {
      const unit = UNITS[r.i16(tt, 0, 1)], bits = r.i32(tt, 1, 32);
      if (bits === 32 && (unit === 's' || unit === 'ms')) return DataType.time32(unit);
      if (bits === 64 && (unit === 'us' || unit === 'ns')) return DataType.time64(unit);
      return DataType.unsupported(`Time${bits}(${unit})`);
    }
    case T.Timestamp: {
      const unit = UNITS[r.i16(tt, 0, 0)];
      if (unit === undefined) return DataType.unsupported('Timestamp(?)');
      return DataType.timestamp(/** @type {any} */ (unit), r.string(tt, 1));
    }
    case T.Duration: {
      const unit = UNITS[r.i16(tt, 0, 1)];
      if (unit === undefined) return DataType.unsupported('Duration(?)');
      return DataType.duration(/** @type {any} */ (unit));
    }
    default:
      return DataType.unsupported(TYPE_NAMES[tag] ?? `type #${tag}`);
  }
}

/**
 * @param {FbReader} r
 * @param {number} t RecordBatch table
 * @param {Schema} schema
 * @param {ArrayBufferLike} buffer
 * @param {number} bodyStart absolute byte offset of the body in `buffer`
 * @param {number} bodyLength
 */
function batchFromFb(r, t, schema, buffer, bodyStart, bodyLength) {
  if (r.table(t, 3) !== 0) throw ipcError('compressed IPC bodies are not supported by the JS SDK (write the stream uncompressed)');
  const length = r.i64(t, 0, 0);
  const nodes = r.vector(t, 1);
  const bufs = r.vector(t, 2);
  if (nodes === null || bufs === null) throw ipcError('record batch without nodes or buffers');
  const variadic = r.vector(t, 4);
  if (variadic !== null && variadic.length > 0) throw ipcError('variadic buffers (view types) are not supported');
  let ni = 0, bi = 0;
  const nextNode = () => {
    if (ni >= nodes.length) throw ipcError('record batch has fewer field nodes than its schema');
    const p = nodes.start + 16 * ni++;
    return { length: r.i64At(p), nullCount: r.i64At(p + 8) };
  };
  /** @returns {[number, number]} absolute offset and length */
  const nextBuffer = () => {
    if (bi >= bufs.length) throw ipcError('record batch has fewer buffers than its schema');
    const p = bufs.start + 16 * bi++;
    const off = r.i64At(p), len = r.i64At(p + 8);
    if (off < 0 || len < 0 || off + len > bodyLength) throw ipcError('a buffer lies outside the message body');
    return [bodyStart + off, len];
  };
  const u8 = (/** @type {[number, number]} */ [off, len]) => new Uint8Array(buffer, off, len);
  const columns = [];
  for (const f of schema.fields) {
    const type = f.type;
    if (type.kind === Kind.Unsupported) {
      throw ipcError(`column \`${f.name}\` has type ${type}, which the JS SDK does not support (read fewer columns with columns())`);
    }
    const node = nextNode();
    const n = node.length;
    if (n !== length) throw ipcError(`column \`${f.name}\` has ${n} rows, the batch ${length}`);
    const vbuf = nextBuffer();
    let validity = null;
    if (node.nullCount > 0) {
      if (vbuf[1] < (n + 7) >> 3) throw ipcError(`column \`${f.name}\`: validity bitmap too short`);
      validity = u8(vbuf);
    }
    if (type.kind === Kind.Bool) {
      const b = nextBuffer();
      if (b[1] < (n + 7) >> 3) throw ipcError(`column \`${f.name}\`: values too short`);
      columns.push(new BoolColumn(u8(b), n, validity, node.nullCount));
    } else if (type.isVarSize) {
      const ob = nextBuffer(), db = nextBuffer();
      const O = type.isLarge ? BigInt64Array : Int32Array;
      let offsets;
      if (n === 0 && ob[1] === 0) offsets = new O(1);
      else {
        if (ob[1] < (n + 1) * O.BYTES_PER_ELEMENT) throw ipcError(`column \`${f.name}\`: offsets too short`);
        offsets = view(O, buffer, ob[0], n + 1);
      }
      const col = new BinaryColumn(type, /** @type {any} */ (offsets), u8(db), validity, node.nullCount);
      const o = col.offsetNumbers();
      if (o[n] > db[1] || o[0] < 0) throw ipcError(`column \`${f.name}\`: offsets point outside the data`);
      columns.push(col);
    } else {
      const A = type.ArrayType;
      const b = nextBuffer();
      if (b[1] < n * A.BYTES_PER_ELEMENT) throw ipcError(`column \`${f.name}\`: values too short`);
      columns.push(new PrimitiveColumn(type, view(A, buffer, b[0], n), validity, node.nullCount));
    }
  }
  return new Batch(schema, columns, length);
}

/**
 * A typed array over `buffer` at `offset`: a view when aligned, else a copy.
 * @template {{BYTES_PER_ELEMENT: number, new(b: ArrayBufferLike, o?: number, l?: number): any}} A
 * @param {A} A
 * @param {ArrayBufferLike} buffer
 * @param {number} offset
 * @param {number} n elements
 */
function view(A, buffer, offset, n) {
  if (offset % A.BYTES_PER_ELEMENT === 0) return new A(buffer, offset, n);
  return new A(buffer.slice(offset, offset + n * A.BYTES_PER_ELEMENT));
}

// ---------------------------------------------------------------- writing

/** @type {WeakMap<Schema, Uint8Array>} */
const schemaMessages = new WeakMap();

/**
 * The framed schema message of a schema (cached per Schema object).
 * @param {Schema} schema
 */
export function schemaMessage(schema) {
  let m = schemaMessages.get(schema);
  if (m === undefined) {
    for (const f of schema.fields) {
      if (f.type.kind === Kind.Unsupported) throw ipcError(`column \`${f.name}\` has type ${f.type}, which the JS SDK cannot write`);
    }
    const fb = new FbBuilder().finish([
      ['i16', V5],
      ['u8', HEADER_SCHEMA],
      ['off', (b) => b.table(schemaSpec(schema))],
      ['i64', 0],
    ]);
    m = frame(fb, 0);
    schemaMessages.set(schema, m);
  }
  return m;
}

/** Framing: continuation marker, metadata length, metadata (padded to 8). */
function frame(meta, extra) {
  const out = new Uint8Array(8 + meta.length + extra);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, CONTINUATION, true);
  dv.setInt32(4, meta.length, true);
  out.set(meta, 8);
  return out;
}

/** @param {Schema} schema */
function schemaSpec(schema) {
  return [
    ['i16', 0],
    ['off', (/** @type {FbBuilder} */ b) => b.tables(schema.fields.map(fieldSpec))],
    schema.metadata ? ['off', (b) => b.tables(kvSpecs(schema.metadata))] : undefined,
  ];
}

/** @param {Map<string,string>} m */
function kvSpecs(m) {
  return [...m].map(([k, v]) => [['off', (b) => b.string(k)], ['off', (b) => b.string(v)]]);
}

/** @param {Field} f */
function fieldSpec(f) {
  const [tag, spec] = typeSpec(f.type);
  return [
    ['off', (b) => b.string(f.name)],
    ['bool', f.nullable],
    ['u8', tag],
    ['off', (b) => b.table(spec)],
    undefined,
    ['off', (b) => b.tables([])],
    f.metadata ? ['off', (b) => b.tables(kvSpecs(f.metadata))] : undefined,
  ];
}

/** @param {DataType} t @returns {[number, any[]]} */
function typeSpec(t) {
  switch (t.kind) {
    case Kind.Bool: return [T.Bool, []];
    case Kind.Utf8: return [T.Utf8, []];
    case Kind.LargeUtf8: return [T.LargeUtf8, []];
    case Kind.Binary: return [T.Binary, []];
    case Kind.LargeBinary: return [T.LargeBinary, []];
    case Kind.Int: return [T.Int, [['i32', t.bitWidth], ['bool', t.signed]]];
    case Kind.Float: return [T.FloatingPoint, [['i16', t.bitWidth === 64 ? 2 : 1]]];
    case Kind.Date: return [T.Date, [['i16', t.bitWidth === 32 ? 0 : 1]]];
    case Kind.Time: return [T.Time, [['i16', UNIT_CODE[t.unit]], ['i32', t.bitWidth]]];
    case Kind.Timestamp: {
      const tz = t.timezone;
      return [T.Timestamp, [['i16', UNIT_CODE[t.unit]], tz === null ? undefined : ['off', (b) => b.string(tz)]]];
    }
    case Kind.Duration: return [T.Duration, [['i16', UNIT_CODE[t.unit]]]];
    default: throw ipcError(`cannot write type ${t}`);
  }
}

/**
 * Encode batches (all of one schema) as one IPC stream: schema, batches,
 * end-of-stream marker. A zero-row batch is still written: it carries the
 * schema to the host.
 * @param {Schema} schema
 * @param {Batch[]} batches
 * @returns {Uint8Array}
 */
export function writeStream(schema, batches) {
  const head = schemaMessage(schema);
  const parts = [head];
  let total = head.length;
  for (const b of batches) {
    if (b.schema !== schema && !b.schema.equals(schema)) {
      throw ipcError(`batches of one stream must share a schema: ${b.schema} vs ${schema}`);
    }
    const m = batchMessage(b);
    parts.push(m);
    total += m.length;
  }
  const out = new Uint8Array(total + 8);
  let pos = 0;
  for (const p of parts) {
    out.set(p, pos);
    pos += p.length;
  }
  out[pos] = 0xff; out[pos + 1] = 0xff; out[pos + 2] = 0xff; out[pos + 3] = 0xff;
  return out;
}

const pad8 = (n) => (n + 7) & ~7;

/**
 * One framed record batch message, body included.
 * @param {Batch} batch
 */
function batchMessage(batch) {
  const n = batch.numRows;
  /** @type {number[]} */
  const nodes = [];
  /** @type {number[]} */
  const bufs = [];
  /** @type {Uint8Array[]} */
  const chunks = [];
  let bodyLen = 0;
  const add = (/** @type {Uint8Array|null} */ u8) => {
    const len = u8 === null ? 0 : u8.length;
    bufs.push(bodyLen, len);
    if (len > 0) chunks.push(/** @type {Uint8Array} */ (u8), /** @type {any} */ (bodyLen));
    bodyLen += pad8(len);
  };
  const bitmapBytes = (n + 7) >> 3;
  for (const c of batch.columns) {
    nodes.push(n, c.nullCount);
    add(c.nullCount > 0 && c.validity !== null ? bytesOf(c.validity, bitmapBytes) : null);
    if (c instanceof BoolColumn) {
      add(bytesOf(c.values, bitmapBytes));
    } else if (c instanceof BinaryColumn) {
      const o = c.offsetNumbers();
      const start = o[0], end = o[n];
      if (start === 0) {
        add(bytesOf(c.offsets, (n + 1) * c.offsets.BYTES_PER_ELEMENT));
      } else {
        add(rebase(c, o, start, n));
      }
      add(c.data.subarray(start, end));
    } else if (c instanceof PrimitiveColumn) {
      add(bytesOf(c.values, n * c.values.BYTES_PER_ELEMENT));
    } else {
      throw ipcError(`cannot write a column of type ${c.type}`);
    }
  }
  const meta = new FbBuilder().finish([
    ['i16', V5],
    ['u8', HEADER_RECORD_BATCH],
    ['off', (/** @type {FbBuilder} */ b) => b.table([
      ['i64', n],
      ['off', (b) => b.structs16(nodes)],
      ['off', (b) => b.structs16(bufs)],
    ])],
    ['i64', bodyLen],
  ]);
  const out = frame(meta, bodyLen);
  const body = 8 + meta.length;
  for (let i = 0; i < chunks.length; i += 2) out.set(chunks[i], body + /** @type {any} */ (chunks[i + 1]));
  return out;
}

/** The first `len` bytes of a typed array, as a Uint8Array view. */
function bytesOf(ta, len) {
  if (ta.byteLength < len) throw ipcError(`a buffer of ${ta.byteLength} bytes is shorter than the ${len} its rows need`);
  return new Uint8Array(ta.buffer, ta.byteOffset, len);
}

/** Offsets shifted to start at 0. */
function rebase(c, o, start, n) {
  if (c.offsets instanceof Int32Array) {
    const out = new Int32Array(n + 1);
    for (let i = 0; i <= n; i++) out[i] = o[i] - start;
    return new Uint8Array(out.buffer);
  }
  const out = new BigInt64Array(n + 1);
  for (let i = 0; i <= n; i++) out[i] = BigInt(o[i] - start);
  return new Uint8Array(out.buffer);
}

/**
 * Encode what a transform returned: null/undefined → empty bytes ("no
 * rows"), a Batch or an array of Batches (one schema) → a stream.
 * @param {Batch|Batch[]|null|undefined} out
 * @returns {Uint8Array}
 */
export function encodeOutput(out) {
  if (out === null || out === undefined) return new Uint8Array(0);
  if (out instanceof Batch) return writeStream(out.schema, [out]);
  if (Array.isArray(out)) {
    if (out.length === 0) return new Uint8Array(0);
    for (const b of out) if (!(b instanceof Batch)) throw new TypeError('a transform returns a Batch, an array of Batches, or null');
    return writeStream(out[0].schema, out);
  }
  throw new TypeError(`a transform returns a Batch, an array of Batches, or null, not ${describeValue(out)}`);
}

function describeValue(v) {
  return v?.constructor?.name ?? typeof v;
}

