// Makes the JS environment honest about idem's sandbox. componentize-js
// snapshots the engine at build time (Wizer), so without this Date.now()
// would return the build time and Math.random() a per-build constant:
// - Math.random is a seeded PRNG, reset at every `open`: the same values on
//   every run and every build.
// - Clock reads (Date.now(), new Date() / Date() without arguments,
//   performance.now(), performance.timeOrigin) throw: use ctx.logicalDate.
// - crypto.getRandomValues / randomUUID throw (they cannot be random here).
// - Timers (setTimeout, setInterval) throw instead of trapping.
// - console.* goes to the host's run log.

import { logLine, formatArgs } from './log.js';

export const CLOCK_ERROR = "the clock is not available in idem's sandbox; use ctx.logicalDate";

/** @param {string} call what the transform called, e.g. `Date.now()` */
function clockError(call) {
  return new Error(`${call}: ${CLOCK_ERROR}`);
}

// ---- seeded PRNG (sfc32), 53-bit doubles in [0, 1)
const SEED = [0x9e3779b9, 0x243f6a88, 0xb7e15162, 1];
const state = new Int32Array(4);

/** Reset Math.random to its fixed seed (done at every `open`). */
export function resetRandom() {
  state[0] = SEED[0];
  state[1] = SEED[1];
  state[2] = SEED[2];
  state[3] = SEED[3];
  for (let i = 0; i < 12; i++) next32();
}

function next32() {
  const a = state[0], b = state[1], c = state[2], d = state[3];
  const d1 = (d + 1) | 0;
  const t = (((a + b) | 0) + d1) | 0;
  state[3] = d1;
  state[0] = b ^ (b >>> 9);
  state[1] = (c + (c << 3)) | 0;
  const c2 = (c << 21) | (c >>> 11);
  state[2] = (c2 + t) | 0;
  return t >>> 0;
}

function random() {
  const hi = next32() >>> 5; // 27 bits
  const lo = next32() >>> 6; // 26 bits
  return (hi * 67108864 + lo) / 9007199254740992;
}

let installed = false;

/** Install the deterministic environment (idempotent). */
export function installSandbox() {
  if (installed) return;
  installed = true;
  const g = /** @type {any} */ (globalThis);
  resetRandom();
  Math.random = random;

  const RealDate = Date;
  /** @this {any} */
  function SandboxDate(...args) {
    if (!new.target) throw clockError('Date()');
    if (args.length === 0) throw clockError('new Date()');
    return Reflect.construct(RealDate, args, new.target);
  }
  SandboxDate.prototype = RealDate.prototype;
  Object.defineProperty(RealDate.prototype, 'constructor', { value: SandboxDate, writable: true, configurable: true });
  SandboxDate.UTC = RealDate.UTC;
  SandboxDate.parse = RealDate.parse;
  SandboxDate.now = function now() {
    throw clockError('Date.now()');
  };
  Object.defineProperty(SandboxDate, 'name', { value: 'Date' });
  g.Date = SandboxDate;

  if (g.performance) {
    try {
      Object.defineProperty(g.performance, 'now', { value: () => { throw clockError('performance.now()'); }, configurable: true, writable: true });
      Object.defineProperty(g.performance, 'timeOrigin', { get: () => { throw clockError('performance.timeOrigin'); }, configurable: true });
    } catch {
      g.performance = { now: () => { throw clockError('performance.now()'); } };
    }
  }

  if (g.crypto) {
    const noRandom = () => {
      throw new Error("crypto randomness is not available in idem's sandbox (Math.random is a seeded PRNG)");
    };
    for (const k of ['getRandomValues', 'randomUUID']) {
      try {
        Object.defineProperty(g.crypto, k, { value: noRandom, configurable: true, writable: true });
      } catch {
        // leave it
      }
    }
  }

  for (const k of ['setTimeout', 'setInterval']) {
    g[k] = () => {
      throw new Error(`${k} is not available in idem's sandbox (there is no clock)`);
    };
  }

  const levels = { debug: 'debug', trace: 'debug', log: 'info', info: 'info', warn: 'warn', error: 'error' };
  const con = {};
  for (const [k, level] of Object.entries(levels)) {
    con[k] = (...args) => logLine(/** @type {any} */ (level), formatArgs(args));
  }
  con.assert = (cond, ...args) => {
    if (!cond) logLine('error', `Assertion failed${args.length ? ': ' + formatArgs(args) : ''}`);
  };
  g.console = con;
}
