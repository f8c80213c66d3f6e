// The error type the SDK throws; any thrown value becomes the guest's error.

/** An error whose message is sent to the host as the transform's error. */
export class IdemError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'IdemError';
  }
}

/**
 * The message the host gets for a thrown value: `message` for an Error (prefixed
 * with its name for built-in errors such as TypeError), the string itself for a
 * thrown string, a JSON rendering otherwise.
 * @param {unknown} e
 * @returns {string}
 */
export function describeError(e) {
  if (e !== null && typeof e === 'object' && typeof (/** @type {any} */ (e).message) === 'string') {
    const err = /** @type {Error} */ (e);
    const name = typeof err.name === 'string' && err.name !== 'Error' && err.name !== 'IdemError' ? err.name : '';
    const msg = err.message || '(no message)';
    return name ? `${name}: ${msg}` : msg;
  }
  if (typeof e === 'string') return e;
  try {
    const s = JSON.stringify(e, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    if (s !== undefined) return `thrown value: ${s}`;
  } catch {
    // fall through
  }
  return `thrown value: ${String(e)}`;
}
