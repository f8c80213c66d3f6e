// Wires a transform class to the `idem:transform/transform` export: one
// instance per run (a module-level singleton), created at `open`.

import { Batch } from './batch.js';
import { Context } from './context.js';
import { IdemError, describeError } from './error.js';
import { readStream, encodeOutput } from './ipc.js';
import { concat } from './kernels.js';
import { checkParams } from './params.js';
import { logLine, startLogging } from './log.js';
import { resetRandom } from './sandbox.js';

/**
 * What a transform class implements (all but `push` optional):
 * - `static params`: the params it takes, e.g. `[{name: 'min_amount', type:
 *   'number', default: 0}]` (see params.js). When declared, `ctx.params` is
 *   checked before `open` (an unknown key, a value of another type or a
 *   missing required one fails the run, naming it) and the defaults are
 *   filled in. Without it any params object is passed as given.
 * - `open(ctx)`: once, before any batch; read parameters, check the input schema.
 * - `columns()`: asked right after `open`; the input columns to read, by
 *   name (the host then decodes only those, in that order), or undefined for all.
 * - `push(batch)`: one input batch in; return a Batch (or an array of
 *   Batches of one schema) to emit, or null/undefined for nothing. A
 *   zero-row batch still tells the host the output schema.
 * - `finish()`: no more input; emit what is left.
 * Anything thrown becomes the run's error, with its message.
 * @typedef {{open?(ctx: Context): void, columns?(): string[]|undefined|null, push(batch: Batch): any, finish?(): any}} Transform
 */

const EMPTY = new Uint8Array(0);

/** Most side inputs one run gives (as the host and the other SDKs). */
const MAX_SIDE_INPUTS = 16;

/**
 * Side inputs as they arrive (every batch before `open`), by name: the
 * batches of each, in read order. `open` hands them to the Context.
 * @type {Map<string, Batch[]>}
 */
let sides = new Map();

/**
 * The `side-inputs` export. `idem build` exports it from every bundle
 * (appending `export const sideInputs = ...` to it, so a project's entry
 * exports only `transform`).
 */
const sideInputsExport = {
  /** @param {string} name @param {Uint8Array} bytes */
  sideInput(name, bytes) {
    const r = guard('side-input', () => {
      if (!sides.has(name) && sides.size >= MAX_SIDE_INPUTS) {
        throw new IdemError(`more than ${MAX_SIDE_INPUTS} side inputs (\`${name}\` is one too many)`);
      }
      let s;
      try {
        s = readStream(bytes);
      } catch (e) {
        throw new IdemError(`side input \`${name}\`: ${describeError(e)}`);
      }
      if (s === null) throw new IdemError(`side input \`${name}\`: an empty stream`);
      const batch = s.batches.length === 0 ? Batch.empty(s.schema) : concat(s.batches, s.schema);
      const list = sides.get(name) ?? [];
      if (list.length > 0 && !list[0].schema.equals(batch.schema)) {
        throw new IdemError(`side input \`${name}\`: a batch of another schema than its first`);
      }
      list.push(batch);
      sides.set(name, list);
      return undefined;
    });
    // A failed run leaves nothing for the next one (a native run's).
    if (r.tag === 'err') sides = new Map();
    return r;
  },
};
globalThis[Symbol.for('idem.sideInputs')] = sideInputsExport;

/**
 * The `transform` export for a transform class:
 * `export const transform = exportTransform(MyTransform);`
 * @param {new () => Transform} Class
 */
export function exportTransform(Class) {
  if (typeof Class !== 'function') throw new TypeError('exportTransform takes a class (or a constructor function)');
  /** @type {Transform|null} */
  let instance = null;

  return {
    /** @param {any} wctx */
    open(wctx) {
      return guard('open', () => {
        startLogging();
        resetRandom();
        instance = null;
        const given = sides;
        sides = new Map();
        let ctx = Context.fromWit(wctx, given);
        // Before `open`, so a misspelled or ill-typed param fails the run
        // by name instead of being ignored.
        const declared = /** @type {any} */ (Class).params;
        if (declared !== undefined && declared !== null) {
          ctx = new Context({ ...ctx, params: checkParams(declared, ctx.params), sideInputs: given });
        }
        const t = new Class();
        if (typeof t.push !== 'function') throw new IdemError(`${Class.name || 'the transform'} has no push(batch) method`);
        if (typeof t.open === 'function') t.open(ctx);
        let cols = typeof t.columns === 'function' ? t.columns() : undefined;
        if (cols !== undefined && cols !== null) {
          if (!Array.isArray(cols) || cols.some((c) => typeof c !== 'string')) {
            throw new IdemError('columns() must return an array of column names (or undefined for all)');
          }
          cols = cols.slice();
        } else cols = undefined;
        instance = t;
        return cols;
      });
    },

    /** @param {Uint8Array} bytes */
    push(bytes) {
      return guard('push', () => {
        const t = instance;
        if (t === null) throw new IdemError('push before open');
        const batch = decodeInput(bytes);
        if (batch === null) return EMPTY;
        return then(t.push(batch), encode);
      });
    },

    finish() {
      return guard('finish', () => {
        const t = instance;
        if (t === null) throw new IdemError('finish before open');
        return then(typeof t.finish === 'function' ? t.finish() : null, encode);
      });
    },
  };
}

/** Decode a pushed stream into one batch (null for no rows). @param {Uint8Array} bytes */
export function decodeInput(bytes) {
  let s;
  try {
    s = readStream(bytes);
  } catch (e) {
    throw new IdemError(`input batch: ${describeError(e)}`);
  }
  if (s === null || s.batches.length === 0) return null;
  return s.batches.length === 1 ? s.batches[0] : concat(s.batches, s.schema);
}

/** @param {any} out */
function encode(out) {
  try {
    return encodeOutput(out);
  } catch (e) {
    throw new IdemError(`output batch: ${describeError(e)}`);
  }
}

/** Apply `f` now, or when `v` resolves if it is a promise (async transforms). */
function then(v, f) {
  return v !== null && typeof v === 'object' && typeof v.then === 'function' ? v.then(f) : f(v);
}

/**
 * Run `f`, returning componentize-js's explicit result form: `{tag: 'ok',
 * val}` or `{tag: 'err', val: message}`. (A thrown Error that is not caught
 * here would trap the instance with no message.)
 * @param {string} stage
 * @param {() => any} f
 */
function guard(stage, f) {
  const fail = (e) => {
    if (!(e instanceof IdemError) && e instanceof Error && e.stack) {
      try {
        const stack = e.stack.split('\n');
        const shown = stack.slice(0, 12).join('\n') + (stack.length > 13 ? `\n... ${stack.length - 12} more frames` : '');
        logLine('error', `${stage} threw ${e.name}: ${e.message}\n${shown}`);
      } catch {
        // never let logging hide the error
      }
    }
    return { tag: 'err', val: describeError(e) };
  };
  try {
    const v = f();
    if (v !== null && typeof v === 'object' && typeof v.then === 'function') {
      return v.then((val) => ({ tag: 'ok', val }), fail);
    }
    return { tag: 'ok', val: v };
  } catch (e) {
    return fail(e);
  }
}
