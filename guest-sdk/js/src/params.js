// Declared parameters: a transform class may say which params it takes, and
// the glue checks `ctx.params` against that before `open` sees it. Without a
// declaration a misspelled param (`min_amont`) would be silently ignored and
// the default used; with one it fails the run, naming it. The same checks
// and messages as the Rust SDK (guest-sdk/src/params.rs) and the Python one.

import { IdemError } from './error.js';
import { compareUtf8 } from './kernels.js';

/**
 * One declared parameter, as a transform class lists it in `static params`:
 * `{name: 'min_amount', type: 'number', default: 0, doc: '...'}` or
 * `{name: 'key', type: 'string', required: true}`. `type` is `number`,
 * `integer` (a number with no fraction), `string` or `boolean`.
 * @typedef {{name: string, type: 'number'|'integer'|'string'|'boolean', default?: any, required?: boolean, doc?: string}} Param
 */

const TYPES = ['number', 'integer', 'string', 'boolean'];

/**
 * Check `params` against `declared` and return them with the declared
 * defaults filled in: a JSON object (null counts as `{}`), every key
 * declared (else an error naming it, with a did-you-mean), every value of
 * its declared type, every required one given (a null value counts as not
 * given). The first problem found is thrown as an IdemError.
 * @param {Param[]} declared
 * @param {any} params
 * @returns {Record<string, any>}
 */
export function checkParams(declared, params) {
  checkDeclaration(declared);
  if (params === null || params === undefined) params = {};
  if (typeof params !== 'object' || Array.isArray(params)) {
    throw new IdemError(`params must be a JSON object, got ${showValue(params)}`);
  }
  const names = new Set(declared.map((p) => p.name));
  // The least unknown key in UTF-8 order: the same one in every SDK.
  const unknown = Object.keys(params).filter((k) => !names.has(k)).sort(compareUtf8);
  if (unknown.length > 0) throw new IdemError(unknownMessage(unknown[0], declared));
  const out = { ...params };
  for (const p of declared) {
    const v = Object.prototype.hasOwnProperty.call(out, p.name) ? out[p.name] : null;
    if (v !== null && v !== undefined) {
      typed(p, v);
    } else if (p.required) {
      throw new IdemError(`missing required parameter ${describe(p)}`);
    } else if (p.default !== undefined) {
      out[p.name] = p.default;
    }
  }
  return out;
}

/** The declaration itself: an array of {name, type}, names unique, defaults typed. @param {any} declared */
function checkDeclaration(declared) {
  if (!Array.isArray(declared)) throw new IdemError('static params must be an array of {name, type, ...}');
  const seen = new Set();
  for (const p of declared) {
    if (p === null || typeof p !== 'object' || typeof p.name !== 'string') {
      throw new IdemError(`static params: each entry needs a string \`name\`, got ${showValue(p)}`);
    }
    if (!TYPES.includes(p.type)) {
      throw new IdemError(`static params: \`${p.name}\` has type ${showValue(p.type)}; use one of ${TYPES.join(', ')}`);
    }
    if (seen.has(p.name)) throw new IdemError(`static params: \`${showName(p.name)}\` is declared twice`);
    seen.add(p.name);
    if (p.default !== undefined && p.default !== null) {
      try {
        typed(p, p.default);
      } catch (e) {
        throw new IdemError(`static params: the default of ${e instanceof Error ? e.message : e}`);
      }
    }
  }
}

/** Throw unless `v` has `p`'s type. @param {Param} p @param {any} v */
function typed(p, v) {
  const ok = p.type === 'integer' ? Number.isInteger(v) : typeof v === p.type;
  if (ok) return;
  const article = p.type === 'integer' ? 'an' : 'a';
  throw new IdemError(`parameter \`${showName(p.name)}\` must be ${article} ${p.type}, got ${showValue(v)} (${kind(v)})`);
}

/** The error for a key no param declares. @param {string} key @param {Param[]} declared */
function unknownMessage(key, declared) {
  let best = null;
  let bestD = 3;
  for (const p of declared) {
    const d = distance(key, p.name);
    if (d < bestD) [best, bestD] = [p, d];
  }
  const hint = best ? ` (did you mean \`${best.name}\`?)` : '';
  const takes = declared.length === 0 ? 'no parameters' : declared.map(describe).join(', ');
  return `unknown parameter \`${showName(key)}\`${hint}: this transform takes ${takes}`;
}

/** `` `min_amount` (number, default 0) ``: how errors list a param. @param {Param} p */
function describe(p) {
  let s = `\`${p.name}\` (${p.type}`;
  if (p.required) s += ', required';
  else if (p.default !== undefined && p.default !== null) s += `, default ${showValue(p.default)}`;
  return s + ')';
}

/** What kind of JSON value `v` is, for errors. @param {any} v */
function kind(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  switch (typeof v) {
    case 'boolean': return 'a boolean';
    case 'number': return Number.isInteger(v) ? 'a number' : 'a number with a fraction';
    case 'string': return 'a string';
    case 'object': return 'an object';
    default: return typeof v;
  }
}

/** `v` as JSON, cut at 100 characters (params come from the user). @param {any} v */
function showValue(v) {
  let s;
  try {
    s = JSON.stringify(v) ?? String(v);
  } catch {
    s = String(v);
  }
  return cut(s);
}

/** A key as errors show it: escaped, cut at 100 characters. @param {string} n */
function showName(n) {
  return cut(JSON.stringify(n).slice(1, -1).replaceAll('\\"', '"'));
}

/** @param {string} s */
function cut(s) {
  const chars = Array.from(s);
  return chars.length <= 100 ? s : chars.slice(0, 100).join('') + '…';
}

/**
 * Levenshtein distance of `a` and `b` by code points, or 3 (too far to
 * suggest) when their lengths differ by more than 2: keys come from the
 * user and may be long, names are short.
 * @param {string} a
 * @param {string} b
 */
export function distance(a, b) {
  const x = Array.from(a), y = Array.from(b);
  if (Math.abs(x.length - y.length) > 2) return 3;
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 0; i < x.length; i++) {
    const cur = [i + 1];
    for (let j = 0; j < y.length; j++) {
      cur.push(Math.min(prev[j] + (x[i] === y[j] ? 0 : 1), prev[j + 1] + 1, cur[j] + 1));
    }
    prev = cur;
  }
  return prev[y.length];
}
