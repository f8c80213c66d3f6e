// Minimal FlatBuffers reading and writing, enough for Arrow IPC messages
// (Message, Schema, Field, the type tables, RecordBatch). Hand-written so the
// SDK has no runtime dependencies.

/** Reads tables out of one flatbuffer. Out-of-range reads throw RangeError. */
export class FbReader {
  /** @param {Uint8Array} bytes */
  constructor(bytes) {
    this.bytes = bytes;
    this.dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Position of the root table. */
  root() {
    return this.dv.getUint32(0, true);
  }

  /** Position of field `id` of the table at `t`, or 0 when absent. */
  field(t, id) {
    const dv = this.dv;
    const vt = t - dv.getInt32(t, true);
    const vtLen = dv.getUint16(vt, true);
    const o = 4 + 2 * id;
    if (o + 2 > vtLen) return 0;
    const off = dv.getUint16(vt + o, true);
    return off === 0 ? 0 : t + off;
  }

  u8(t, id, dflt = 0) {
    const p = this.field(t, id);
    return p === 0 ? dflt : this.dv.getUint8(p);
  }

  bool(t, id, dflt = false) {
    const p = this.field(t, id);
    return p === 0 ? dflt : this.dv.getUint8(p) !== 0;
  }

  i16(t, id, dflt = 0) {
    const p = this.field(t, id);
    return p === 0 ? dflt : this.dv.getInt16(p, true);
  }

  i32(t, id, dflt = 0) {
    const p = this.field(t, id);
    return p === 0 ? dflt : this.dv.getInt32(p, true);
  }

  /** An int64 field as a Number (exact below 2^53). */
  i64(t, id, dflt = 0) {
    const p = this.field(t, id);
    return p === 0 ? dflt : this.i64At(p);
  }

  i64At(p) {
    return this.dv.getInt32(p + 4, true) * 4294967296 + this.dv.getUint32(p, true);
  }

  /** Follow the uoffset stored at `p`. */
  deref(p) {
    return p + this.dv.getUint32(p, true);
  }

  /** Position of a sub-table, or 0. */
  table(t, id) {
    const p = this.field(t, id);
    return p === 0 ? 0 : this.deref(p);
  }

  /** A string field, or null. */
  string(t, id) {
    const p = this.field(t, id);
    if (p === 0) return null;
    const s = this.deref(p);
    const len = this.dv.getUint32(s, true);
    if (s + 4 + len > this.bytes.length) throw new RangeError('string out of range');
    return utf8Decoder.decode(this.bytes.subarray(s + 4, s + 4 + len));
  }

  /** A vector field: position of its first element and its length, or null. */
  vector(t, id) {
    const p = this.field(t, id);
    if (p === 0) return null;
    const v = this.deref(p);
    return { start: v + 4, length: this.dv.getUint32(v, true) };
  }

  /** Element `i` of a vector of tables. */
  vectorTable(vec, i) {
    return this.deref(vec.start + 4 * i);
  }
}

const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const utf8Encoder = new TextEncoder();

/**
 * A table to write: `fields[id] = [kind, value]`. Kinds: 'u8', 'bool', 'i16',
 * 'i32', 'i64' (value: Number) and 'off' (value: `(b: FbBuilder) => position`
 * that writes the child and returns its position).
 * @typedef {Array<[string, any] | undefined>} TableSpec
 */

const SIZES = { u8: 1, bool: 1, i16: 2, i32: 4, i64: 8, off: 4 };

/**
 * Writes a flatbuffer top-down: the root offset, then every table before its
 * children (uoffsets always point forward), each vtable just before its table.
 */
export class FbBuilder {
  constructor(capacity = 512) {
    this.buf = new Uint8Array(capacity);
    this.dv = new DataView(this.buf.buffer);
    this.pos = 0;
  }

  ensure(n) {
    if (this.pos + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.pos + n) cap *= 2;
    const nb = new Uint8Array(cap);
    nb.set(this.buf.subarray(0, this.pos));
    this.buf = nb;
    this.dv = new DataView(nb.buffer);
  }

  align(a) {
    const pad = (a - (this.pos % a)) % a;
    this.ensure(pad);
    for (let i = 0; i < pad; i++) this.buf[this.pos++] = 0;
  }

  /** Write the whole buffer for a root table; returns the bytes, padded to 8. */
  finish(root) {
    this.pos = 0;
    this.ensure(4);
    this.pos = 4;
    const t = this.table(root);
    this.dv.setUint32(0, t, true);
    this.align(8);
    return this.buf.slice(0, this.pos);
  }

  /** @param {TableSpec} fields @returns {number} the table's position */
  table(fields) {
    const n = fields.length;
    // Inline layout: soffset at 0, then fields by decreasing size.
    const offsets = new Array(n).fill(0);
    let size = 4;
    for (const w of [8, 4, 2, 1]) {
      for (let id = 0; id < n; id++) {
        const f = fields[id];
        if (f === undefined || SIZES[f[0]] !== w) continue;
        size = Math.ceil(size / w) * w;
        offsets[id] = size;
        size += w;
      }
    }
    size = Math.ceil(size / 4) * 4;
    // vtable
    this.align(2);
    const vt = this.pos;
    const vtSize = 4 + 2 * n;
    this.ensure(vtSize);
    this.dv.setUint16(vt, vtSize, true);
    this.dv.setUint16(vt + 2, size, true);
    for (let id = 0; id < n; id++) this.dv.setUint16(vt + 4 + 2 * id, offsets[id], true);
    this.pos += vtSize;
    // table, 8-aligned so its int64 fields are
    this.align(8);
    const t = this.pos;
    this.ensure(size);
    this.buf.fill(0, t, t + size);
    this.dv.setInt32(t, t - vt, true);
    this.pos += size;
    const dv = this.dv;
    for (let id = 0; id < n; id++) {
      const f = fields[id];
      if (f === undefined) continue;
      const p = t + offsets[id];
      const v = f[1];
      switch (f[0]) {
        case 'u8': dv.setUint8(p, v); break;
        case 'bool': dv.setUint8(p, v ? 1 : 0); break;
        case 'i16': dv.setInt16(p, v, true); break;
        case 'i32': dv.setInt32(p, v, true); break;
        case 'i64': setI64(dv, p, v); break;
        case 'off': break;
        default: throw new Error(`unknown flatbuffer field kind ${f[0]}`);
      }
    }
    for (let id = 0; id < n; id++) {
      const f = fields[id];
      if (f === undefined || f[0] !== 'off') continue;
      const child = f[1](this);
      const p = t + offsets[id];
      this.dv.setUint32(p, child - p, true);
    }
    return t;
  }

  /** @param {string} s @returns {number} */
  string(s) {
    const bytes = utf8Encoder.encode(s);
    this.align(4);
    const p = this.pos;
    this.ensure(4 + bytes.length + 1);
    this.dv.setUint32(p, bytes.length, true);
    this.buf.set(bytes, p + 4);
    this.buf[p + 4 + bytes.length] = 0;
    this.pos = p + 4 + bytes.length + 1;
    return p;
  }

  /** @param {TableSpec[]} tables @returns {number} */
  tables(tables) {
    this.align(4);
    const v = this.pos;
    this.ensure(4 + 4 * tables.length);
    this.dv.setUint32(v, tables.length, true);
    this.pos += 4 + 4 * tables.length;
    for (let i = 0; i < tables.length; i++) {
      const t = this.table(tables[i]);
      const slot = v + 4 + 4 * i;
      this.dv.setUint32(slot, t - slot, true);
    }
    return v;
  }

  /** A vector of 16-byte structs of two int64s (FieldNode, Buffer). @param {number[]} pairs flat */
  structs16(pairs) {
    // elements 8-aligned: the length prefix sits at 4 mod 8
    this.align(4);
    if (this.pos % 8 === 0) {
      this.ensure(4);
      this.dv.setUint32(this.pos, 0, true);
      this.pos += 4;
    }
    const v = this.pos;
    const count = pairs.length >> 1;
    this.ensure(4 + 16 * count);
    this.dv.setUint32(v, count, true);
    let p = v + 4;
    for (let i = 0; i < pairs.length; i++, p += 8) setI64(this.dv, p, pairs[i]);
    this.pos = p;
    return v;
  }
}

/** @param {DataView} dv @param {number} p @param {number} v a safe integer */
function setI64(dv, p, v) {
  const hi = Math.floor(v / 4294967296);
  dv.setUint32(p, v - hi * 4294967296, true);
  dv.setInt32(p + 4, hi, true);
}
