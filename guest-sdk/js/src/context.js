// What a transform knows about its run: everything is a function of the run
// key. There is no wall clock, only the scheduler's logical date.

import { Schema } from './types.js';
import { IdemError } from './error.js';
import { readSchema } from './ipc.js';
import { concat } from './kernels.js';

export class Context {
  /**
   * @param {{sliceId: string, logicalDate?: string|null, params?: any, inputSchema: Schema, batchRows?: number, sideInputs?: Map<string, any[]>}} o
   */
  constructor(o) {
    /** Name of the input slice, e.g. `date=2026-10-01`. */
    this.sliceId = o.sliceId;
    /** The scheduler's logical date (ISO 8601), or null when it gave none. @type {string|null} */
    this.logicalDate = o.logicalDate ?? null;
    /** Transform parameters, parsed from JSON (`{}` when none). */
    this.params = o.params ?? {};
    /** Schema of the whole input (batches hold only the columns asked for by `columns()`). @type {Schema} */
    this.inputSchema = o.inputSchema;
    /** Rows per input batch (the last one may be shorter). */
    this.batchRows = o.batchRows ?? 0;
    /** The run's side inputs (`--side NAME=TABLE`): name -> batches. @type {Map<string, any[]>} */
    this._sides = o.sideInputs ?? new Map();
    Object.freeze(this);
  }

  /** The names of the side inputs the run gives, sorted. @returns {string[]} */
  sideInputNames() {
    return [...this._sides.keys()].sort();
  }

  /**
   * Side input `name`, whole, as one Batch (rows in read order): a
   * dimension to join the slice with. Throws, naming the side inputs the
   * run gives, when it does not give this one.
   * @param {string} name
   */
  sideInput(name) {
    const batches = this._sides.get(name);
    if (batches === undefined) {
      const given = this.sideInputNames();
      const which = given.length === 0 ? 'it gives none' : `it gives: ${given.join(', ')}`;
      throw new IdemError(`the run gives no side input \`${name}\` (${which}): give it with --side ${name}=TABLE (or \`from\` in a pipeline stage)`);
    }
    return concat(batches, batches[0].schema);
  }

  /**
   * The context the host passed (WIT record, camelCase fields).
   * @param {{sliceId: string, logicalDate?: string, params: string, inputSchema: Uint8Array, batchRows: number}} w
   * @param {Map<string, any[]>} [sideInputs] the side inputs given before `open`
   */
  static fromWit(w, sideInputs) {
    let params;
    const text = typeof w.params === 'string' ? w.params : '';
    if (text.trim() === '') params = {};
    else {
      try {
        params = JSON.parse(text);
      } catch (e) {
        throw new IdemError(`params are not JSON: ${e instanceof Error ? e.message : e}`);
      }
    }
    let inputSchema;
    try {
      inputSchema = readSchema(w.inputSchema);
    } catch (e) {
      throw new IdemError(`input schema: ${e instanceof Error ? e.message : e}`);
    }
    return new Context({
      sliceId: w.sliceId,
      logicalDate: w.logicalDate ?? null,
      params,
      inputSchema,
      batchRows: w.batchRows,
      sideInputs,
    });
  }

  /** @param {string} name */
  _param(name) {
    const p = this.params;
    if (p === null || typeof p !== 'object' || Array.isArray(p)) return undefined;
    return Object.prototype.hasOwnProperty.call(p, name) ? p[name] : undefined;
  }

  /**
   * A numeric parameter, or undefined when absent (or null). Throws, naming
   * the parameter, when it has another type.
   * @param {string} name
   * @returns {number|undefined}
   */
  paramNumber(name) {
    const v = this._param(name);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number') throw new IdemError(`parameter \`${name}\` must be a number, got ${JSON.stringify(v)}`);
    return v;
  }

  /**
   * A string parameter, or undefined when absent (or null).
   * @param {string} name
   * @returns {string|undefined}
   */
  paramString(name) {
    const v = this._param(name);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') throw new IdemError(`parameter \`${name}\` must be a string, got ${JSON.stringify(v)}`);
    return v;
  }

  /**
   * A boolean parameter, or undefined when absent (or null).
   * @param {string} name
   * @returns {boolean|undefined}
   */
  paramBoolean(name) {
    const v = this._param(name);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'boolean') throw new IdemError(`parameter \`${name}\` must be a boolean, got ${JSON.stringify(v)}`);
    return v;
  }
}
