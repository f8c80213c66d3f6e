// idem-guest outside the sandbox (Node): the same API, the run log on
// stderr, and `run()` to drive a transform class over batches the way the
// host does (through IPC bytes both ways), for unit tests and benchmarks.
// Node resolves `idem-guest` here with `node --conditions=idem-native`.

import { setLogSink } from './log.js';
import { exportTransform } from './export.js';
import { readStream, writeStream } from './ipc.js';
import { IdemError } from './error.js';
import { Batch } from './batch.js';
import { Schema } from './types.js';

setLogSink((level, message) => {
  process.stderr.write(`[${level}] ${message}\n`);
});

export * from './core.js';
export { resetRandom, installSandbox } from './sandbox.js';

/**
 * Run a transform natively: open, push every batch, finish. Returns the
 * output batches (a null output adds none; a zero-row batch is kept).
 * Throws the error the host would report.
 * @param {(new () => any) | {open: Function, push: Function, finish: Function}} Class
 *   a transform class, or the `transform` export a module built with it
 * @param {{sliceId?: string, logicalDate?: string|null, params?: any, inputSchema?: Schema, batchRows?: number, sideInputs?: Record<string, Batch[]>}} ctx
 *   `sideInputs`: name -> batches, given before `open` as the host gives them
 * @param {Batch[]} batches
 * @returns {Promise<Batch[]>}
 */
export async function run(Class, ctx, batches) {
  const t = typeof Class === 'function' ? exportTransform(Class) : Class;
  const schema = ctx.inputSchema ?? batches[0]?.schema;
  if (!schema) throw new Error('run(): no input schema and no batches');
  const unwrap = async (r, stage) => {
    const v = await r;
    if (v.tag === 'err') throw new IdemError(`transform failed in \`${stage}\`: ${v.val}`);
    return v.val;
  };
  // As the host does: every batch of every side input, in name order.
  const sides = globalThis[Symbol.for('idem.sideInputs')];
  for (const name of Object.keys(ctx.sideInputs ?? {}).sort()) {
    for (const b of ctx.sideInputs[name]) await unwrap(sides.sideInput(name, writeStream(b.schema, [b])), 'side-input');
  }
  const cols = await unwrap(t.open({
    sliceId: ctx.sliceId ?? 'test',
    logicalDate: ctx.logicalDate ?? undefined,
    params: JSON.stringify(ctx.params ?? {}),
    inputSchema: writeStream(schema, []),
    batchRows: ctx.batchRows ?? 8192,
  }), 'open');
  const out = [];
  const collect = (bytes) => {
    const s = readStream(bytes);
    if (s !== null) out.push(...s.batches);
  };
  for (const b of batches) {
    const input = cols ? b.select(cols) : b;
    collect(await unwrap(t.push(writeStream(input.schema, [input])), 'push'));
  }
  collect(await unwrap(t.finish(), 'finish'));
  return out;
}
