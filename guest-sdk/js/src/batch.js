// A record batch: a schema and one column per field, all of one length.

import { Field, Schema } from './types.js';
import { Column, emptyColumn } from './column.js';
import { IdemError } from './error.js';

export class Batch {
  /**
   * Checks what arrow's `RecordBatch::try_new` checks: one column per field,
   * equal lengths, matching types, no nulls in a non-nullable field.
   * @param {Schema} schema
   * @param {Column[]} columns
   * @param {number} [numRows] required only when there are no columns
   */
  constructor(schema, columns, numRows) {
    if (!(schema instanceof Schema)) throw new TypeError('Batch: schema must be a Schema');
    if (columns.length !== schema.fields.length) {
      throw new IdemError(`batch has ${columns.length} columns for ${schema.fields.length} fields`);
    }
    const n = numRows ?? (columns.length ? columns[0].length : 0);
    for (let i = 0; i < columns.length; i++) {
      const f = schema.fields[i], c = columns[i];
      if (!(c instanceof Column)) throw new TypeError(`column \`${f.name}\` is not a Column`);
      if (c.length !== n) throw new IdemError(`column \`${f.name}\` has ${c.length} rows, the batch ${n}`);
      if (!c.type.equals(f.type)) throw new IdemError(`column \`${f.name}\` is ${c.type}, its field says ${f.type}`);
      if (!f.nullable && c.nullCount > 0) {
        throw new IdemError(`column \`${f.name}\` is declared non-nullable but has ${c.nullCount} null values`);
      }
    }
    /** @type {Schema} */
    this.schema = schema;
    /** @type {readonly Column[]} */
    this.columns = Object.freeze(columns.slice());
    /** Number of rows. */
    this.numRows = n;
  }

  /** A batch with no rows. @param {Schema} schema */
  static empty(schema) {
    return new Batch(schema, schema.fields.map((f) => emptyColumn(f.type)), 0);
  }

  /**
   * Build a batch from (field, column) pairs; a name instead of a Field
   * makes a nullable field of the column's type:
   * `Batch.from([['a', colA], [new Field('b', DataType.Utf8, false), colB]])`.
   * @param {Array<[Field|string, Column]>} pairs
   */
  static from(pairs) {
    const fields = [], cols = [];
    for (const [f, c] of pairs) {
      fields.push(f instanceof Field ? f : new Field(f, c.type, true));
      cols.push(c);
    }
    return new Batch(new Schema(fields), cols);
  }

  get numColumns() {
    return this.columns.length;
  }

  /**
   * A column by name or index; throws naming the column when absent.
   * @param {string|number} key
   * @returns {import('./column.js').Column & any}
   */
  column(key) {
    if (typeof key === 'number') {
      const c = this.columns[key];
      if (c === undefined) throw new IdemError(`batch has no column ${key} (it has ${this.columns.length})`);
      return c;
    }
    const i = this.schema.indexOf(key);
    if (i < 0) throw new IdemError(`batch has no \`${key}\` column (it has: ${this.schema.names.join(', ')})`);
    return this.columns[i];
  }

  /** Same as {@link Batch#column} but undefined when absent. @param {string} name */
  maybeColumn(name) {
    const i = this.schema.indexOf(name);
    return i < 0 ? undefined : this.columns[i];
  }

  /**
   * A batch with `column` added as the last field, or replacing the field of
   * the same name in place.
   * @param {Field|string} field a Field, or a name (nullable field of the column's type)
   * @param {Column} column
   */
  withColumn(field, column) {
    const f = field instanceof Field ? field : new Field(field, column.type, true);
    const i = this.schema.indexOf(f.name);
    const fields = this.schema.fields.slice(), cols = this.columns.slice();
    if (i < 0) {
      fields.push(f);
      cols.push(column);
    } else {
      fields[i] = f;
      cols[i] = column;
    }
    return new Batch(new Schema(fields, this.schema.metadata), cols, this.numRows);
  }

  /** The named columns, in that order. @param {string[]} names */
  select(names) {
    const fields = [], cols = [];
    for (const name of names) {
      const i = this.schema.indexOf(name);
      if (i < 0) throw new IdemError(`batch has no \`${name}\` column (it has: ${this.schema.names.join(', ')})`);
      fields.push(this.schema.fields[i]);
      cols.push(this.columns[i]);
    }
    return new Batch(new Schema(fields, this.schema.metadata), cols, this.numRows);
  }

  /** The same columns under another schema (names/nullability/metadata may differ, types must not). @param {Schema} schema */
  withSchema(schema) {
    return new Batch(schema, /** @type {Column[]} */ (this.columns), this.numRows);
  }

  /** Rows as objects: for tests and debugging only (allocates per row). */
  toRows() {
    const names = this.schema.names;
    const rows = [];
    for (let r = 0; r < this.numRows; r++) {
      /** @type {Record<string, any>} */
      const row = {};
      for (let c = 0; c < names.length; c++) row[names[c]] = this.columns[c].get(r);
      rows.push(row);
    }
    return rows;
  }
}

