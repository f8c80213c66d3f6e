// Arrow data types the SDK reads and writes, and the schema classes.

/** Type kinds (internal tags; compare with `type.kind`). */
export const Kind = Object.freeze({
  Bool: 1,
  Int: 2,
  Float: 3,
  Utf8: 4,
  LargeUtf8: 5,
  Binary: 6,
  LargeBinary: 7,
  Date: 8,
  Time: 9,
  Timestamp: 10,
  Duration: 11,
  /** A type found in a schema that the SDK cannot decode (e.g. Decimal, List). */
  Unsupported: 99,
});

/** @typedef {'s'|'ms'|'us'|'ns'} TimeUnit */

const UNIT_NAMES = { s: 'Second', ms: 'Millisecond', us: 'Microsecond', ns: 'Nanosecond' };

/**
 * An Arrow data type. Use the constants on {@link DataType} (`DataType.Int64`,
 * `DataType.Utf8`, ...) or the factories (`DataType.timestamp('us', 'UTC')`).
 */
export class DataType {
  /**
   * @param {number} kind one of {@link Kind}
   * @param {{bitWidth?: number, signed?: boolean, unit?: TimeUnit, timezone?: string|null, name?: string}} [o]
   */
  constructor(kind, o = {}) {
    /** @type {number} */
    this.kind = kind;
    /** Bits per value for fixed-width types (1 for Bool), 0 for variable-size. */
    this.bitWidth = o.bitWidth ?? 0;
    /** Integers: signed or not. */
    this.signed = o.signed ?? false;
    /** Date/Time/Timestamp/Duration unit. @type {TimeUnit|undefined} */
    this.unit = o.unit;
    /** Timestamp time zone, or null. @type {string|null} */
    this.timezone = o.timezone ?? null;
    /** Unsupported types: the Arrow type name. */
    this.unsupportedName = o.name ?? null;
    Object.freeze(this);
  }

  /** Bytes per value for fixed-width (non-Bool) types, else 0. */
  get byteWidth() {
    return this.kind === Kind.Bool ? 0 : this.bitWidth >> 3;
  }

  /** True for Utf8/LargeUtf8/Binary/LargeBinary. */
  get isVarSize() {
    const k = this.kind;
    return k === Kind.Utf8 || k === Kind.LargeUtf8 || k === Kind.Binary || k === Kind.LargeBinary;
  }

  /** True for Utf8/LargeUtf8. */
  get isString() {
    return this.kind === Kind.Utf8 || this.kind === Kind.LargeUtf8;
  }

  /** True when the offsets are 64-bit (LargeUtf8/LargeBinary). */
  get isLarge() {
    return this.kind === Kind.LargeUtf8 || this.kind === Kind.LargeBinary;
  }

  /** True for fixed-width types stored in a typed array (not Bool, not var-size). */
  get isPrimitive() {
    const k = this.kind;
    return k === Kind.Int || k === Kind.Float || k === Kind.Date || k === Kind.Time ||
      k === Kind.Timestamp || k === Kind.Duration;
  }

  /** The typed array class holding values of a primitive type. */
  get ArrayType() {
    switch (this.kind) {
      case Kind.Float:
        return this.bitWidth === 64 ? Float64Array : Float32Array;
      case Kind.Int:
        switch (this.bitWidth) {
          case 8: return this.signed ? Int8Array : Uint8Array;
          case 16: return this.signed ? Int16Array : Uint16Array;
          case 32: return this.signed ? Int32Array : Uint32Array;
          default: return this.signed ? BigInt64Array : BigUint64Array;
        }
      case Kind.Date:
      case Kind.Time:
        return this.bitWidth === 32 ? Int32Array : BigInt64Array;
      case Kind.Timestamp:
      case Kind.Duration:
        return BigInt64Array;
      default:
        return undefined;
    }
  }

  /** @param {DataType} other */
  equals(other) {
    return other instanceof DataType && this.kind === other.kind && this.bitWidth === other.bitWidth &&
      this.signed === other.signed && this.unit === other.unit && this.timezone === other.timezone &&
      this.unsupportedName === other.unsupportedName;
  }

  /** Arrow-style name: `Int64`, `Utf8`, `Timestamp(Microsecond, "UTC")`. */
  toString() {
    switch (this.kind) {
      case Kind.Bool: return 'Boolean';
      case Kind.Int: return (this.signed ? 'Int' : 'UInt') + this.bitWidth;
      case Kind.Float: return 'Float' + this.bitWidth;
      case Kind.Utf8: return 'Utf8';
      case Kind.LargeUtf8: return 'LargeUtf8';
      case Kind.Binary: return 'Binary';
      case Kind.LargeBinary: return 'LargeBinary';
      case Kind.Date: return this.bitWidth === 32 ? 'Date32' : 'Date64';
      case Kind.Time: return `Time${this.bitWidth}(${UNIT_NAMES[this.unit]})`;
      case Kind.Timestamp:
        return `Timestamp(${UNIT_NAMES[this.unit]}${this.timezone === null ? '' : `, ${JSON.stringify(this.timezone)}`})`;
      case Kind.Duration: return `Duration(${UNIT_NAMES[this.unit]})`;
      default: return this.unsupportedName ?? 'Unsupported';
    }
  }

  /** @param {TimeUnit} unit @param {string|null} [timezone] */
  static timestamp(unit, timezone = null) {
    checkUnit(unit);
    return new DataType(Kind.Timestamp, { bitWidth: 64, signed: true, unit, timezone });
  }

  /** @param {'s'|'ms'} unit */
  static time32(unit) {
    if (unit !== 's' && unit !== 'ms') throw new TypeError(`Time32 takes unit 's' or 'ms', not ${unit}`);
    return new DataType(Kind.Time, { bitWidth: 32, signed: true, unit });
  }

  /** @param {'us'|'ns'} unit */
  static time64(unit) {
    if (unit !== 'us' && unit !== 'ns') throw new TypeError(`Time64 takes unit 'us' or 'ns', not ${unit}`);
    return new DataType(Kind.Time, { bitWidth: 64, signed: true, unit });
  }

  /** @param {TimeUnit} unit */
  static duration(unit) {
    checkUnit(unit);
    return new DataType(Kind.Duration, { bitWidth: 64, signed: true, unit });
  }

  /** A placeholder for a type the SDK cannot decode. @param {string} name */
  static unsupported(name) {
    return new DataType(Kind.Unsupported, { name });
  }
}

/** @param {string} unit */
function checkUnit(unit) {
  if (!(unit in UNIT_NAMES)) throw new TypeError(`time unit must be 's', 'ms', 'us' or 'ns', not ${unit}`);
}

const int = (bitWidth, signed) => new DataType(Kind.Int, { bitWidth, signed });
/** @type {DataType} */ DataType.Bool = new DataType(Kind.Bool, { bitWidth: 1 });
/** @type {DataType} */ DataType.Int8 = int(8, true);
/** @type {DataType} */ DataType.Int16 = int(16, true);
/** @type {DataType} */ DataType.Int32 = int(32, true);
/** @type {DataType} */ DataType.Int64 = int(64, true);
/** @type {DataType} */ DataType.UInt8 = int(8, false);
/** @type {DataType} */ DataType.UInt16 = int(16, false);
/** @type {DataType} */ DataType.UInt32 = int(32, false);
/** @type {DataType} */ DataType.UInt64 = int(64, false);
/** @type {DataType} */ DataType.Float32 = new DataType(Kind.Float, { bitWidth: 32, signed: true });
/** @type {DataType} */ DataType.Float64 = new DataType(Kind.Float, { bitWidth: 64, signed: true });
/** @type {DataType} */ DataType.Utf8 = new DataType(Kind.Utf8);
/** @type {DataType} */ DataType.LargeUtf8 = new DataType(Kind.LargeUtf8);
/** @type {DataType} */ DataType.Binary = new DataType(Kind.Binary);
/** @type {DataType} */ DataType.LargeBinary = new DataType(Kind.LargeBinary);
/** @type {DataType} */ DataType.Date32 = new DataType(Kind.Date, { bitWidth: 32, signed: true, unit: undefined });
/** @type {DataType} */ DataType.Date64 = new DataType(Kind.Date, { bitWidth: 64, signed: true, unit: undefined });

/** One column of a schema: name, type, nullability (and optional metadata). */
export class Field {
  /**
   * @param {string} name
   * @param {DataType} type
   * @param {boolean} [nullable] default true, like Arrow
   * @param {Map<string,string>|null} [metadata]
   */
  constructor(name, type, nullable = true, metadata = null) {
    if (typeof name !== 'string') throw new TypeError('a field name must be a string');
    if (!(type instanceof DataType)) throw new TypeError(`field \`${name}\`: type must be a DataType`);
    this.name = name;
    this.type = type;
    this.nullable = !!nullable;
    /** @type {Map<string,string>|null} */
    this.metadata = metadata && metadata.size ? metadata : null;
    Object.freeze(this);
  }

  /** A copy with another name / type / nullability. @param {{name?: string, type?: DataType, nullable?: boolean}} o */
  with(o) {
    return new Field(o.name ?? this.name, o.type ?? this.type, o.nullable ?? this.nullable, this.metadata);
  }

  toString() {
    return `${this.name}: ${this.type}${this.nullable ? '' : ' not null'}`;
  }
}

/** An ordered list of fields. */
export class Schema {
  /** @param {Field[]} fields @param {Map<string,string>|null} [metadata] */
  constructor(fields, metadata = null) {
    /** @type {readonly Field[]} */
    this.fields = Object.freeze(fields.slice());
    /** @type {Map<string,string>|null} */
    this.metadata = metadata && metadata.size ? metadata : null;
    /** @type {Map<string, number>} */
    this._index = new Map();
    for (let i = 0; i < fields.length; i++) {
      if (!(fields[i] instanceof Field)) throw new TypeError(`schema field ${i} is not a Field`);
      if (!this._index.has(fields[i].name)) this._index.set(fields[i].name, i);
    }
    Object.freeze(this);
  }

  /** Field names, in order. */
  get names() {
    return this.fields.map((f) => f.name);
  }

  /** Index of the first field named `name`, or -1. @param {string} name */
  indexOf(name) {
    const i = this._index.get(name);
    return i === undefined ? -1 : i;
  }

  /** The field named `name`, or undefined. @param {string} name */
  field(name) {
    const i = this._index.get(name);
    return i === undefined ? undefined : this.fields[i];
  }

  /** Same fields (names, types, nullability) in the same order. @param {Schema} other */
  equals(other) {
    if (this === other) return true;
    if (!(other instanceof Schema) || other.fields.length !== this.fields.length) return false;
    for (let i = 0; i < this.fields.length; i++) {
      const a = this.fields[i], b = other.fields[i];
      if (a.name !== b.name || a.nullable !== b.nullable || !a.type.equals(b.type)) return false;
    }
    return true;
  }

  toString() {
    return `Schema { ${this.fields.join(', ')} }`;
  }
}
