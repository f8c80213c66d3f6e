// The run log. Lines go to the host's `log` import (never hashed); before
// the first `open` (i.e. while the module initializes, at build time, when
// the host cannot be called) they are queued and sent at `open`.

/** @typedef {'debug'|'info'|'warn'|'error'} Level */

/** @type {Array<[Level, string]>} */
const queue = [];
const MAX_QUEUE = 100;

/** @type {(level: Level, message: string) => void} */
let sink = (level, message) => {
  if (queue.length < MAX_QUEUE) queue.push([level, message]);
};

/** @type {((level: Level, message: string) => void) | null} */
let pendingSink = null;

/**
 * Where lines go once the run has started (the host import in a component,
 * stderr natively).
 * @param {(level: Level, message: string) => void} fn
 * @param {{deferUntilOpen?: boolean}} [o] queue lines until {@link startLogging}
 */
export function setLogSink(fn, o = {}) {
  if (o.deferUntilOpen) {
    pendingSink = fn;
    sink = (level, message) => {
      if (queue.length < MAX_QUEUE) queue.push([level, message]);
    };
  } else {
    sink = fn;
  }
}

/** Called by `open`: flush lines queued during initialization, then log directly. */
export function startLogging() {
  if (pendingSink !== null) {
    sink = pendingSink;
    pendingSink = null;
  }
  if (queue.length) {
    const q = queue.splice(0);
    for (const [level, message] of q) sink(level, `(during module initialization) ${message}`);
  }
}

/**
 * Write a line to the run log (not part of any digest).
 * @param {Level} level
 * @param {string} message
 */
export function logLine(level, message) {
  sink(level, String(message));
}

/** `log.info('...')`, `log.warn`, `log.error`, `log.debug`; `log(level, msg)` too. */
export const log = Object.assign((/** @type {Level} */ level, /** @type {string} */ message) => logLine(level, message), {
  /** @param {string} m */ debug: (m) => logLine('debug', m),
  /** @param {string} m */ info: (m) => logLine('info', m),
  /** @param {string} m */ warn: (m) => logLine('warn', m),
  /** @param {string} m */ error: (m) => logLine('error', m),
});

/**
 * Format console arguments like a terse console.log: strings as they are,
 * errors with their stack, other values as JSON (BigInts as numbers).
 * @param {any[]} args
 */
export function formatArgs(args) {
  let out = '';
  for (let i = 0; i < args.length; i++) {
    if (i > 0) out += ' ';
    const a = args[i];
    if (typeof a === 'string') out += a;
    else if (a instanceof Error) out += a.stack ? `${a.name}: ${a.message}\n${a.stack}` : String(a);
    else if (a === undefined || typeof a === 'function' || typeof a === 'symbol') out += String(a);
    else {
      try {
        const s = JSON.stringify(a, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v));
        out += s === undefined ? String(a) : s;
      } catch {
        out += String(a);
      }
    }
  }
  return out;
}
