// The sandboxed globals (installed in components by src/index.js), checked
// in a child process so this test runner keeps its own clock.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const script = `
import { installSandbox, resetRandom, CLOCK_ERROR } from ${JSON.stringify(new URL('../src/sandbox.js', import.meta.url).href)};
import { setLogSink, startLogging } from ${JSON.stringify(new URL('../src/log.js', import.meta.url).href)};
const lines = [];
const write = (s) => process.stdout.write(s);
const RealDate = Date;
installSandbox();
setLogSink((level, message) => lines.push([level, message]), { deferUntilOpen: true });
console.log('before open', { a: 1n });
startLogging();
const out = {};
const err = (f) => { try { f(); return null; } catch (e) { return e.message; } };
out.now = err(() => Date.now());
out.newDate = err(() => new Date());
out.callDate = err(() => Date());
out.perf = err(() => performance.now());
out.timeout = err(() => setTimeout(() => {}, 1));
out.crypto = err(() => crypto.getRandomValues(new Uint8Array(4)));
out.fixed = new Date(0).toISOString();
out.utc = Date.UTC(2026, 9, 1);
out.isDate = new Date(5) instanceof Date && new Date(5) instanceof RealDate;
resetRandom();
const r1 = [Math.random(), Math.random(), Math.random()];
resetRandom();
const r2 = [Math.random(), Math.random(), Math.random()];
out.random = { r1, same: JSON.stringify(r1) === JSON.stringify(r2), inRange: r1.every((x) => x >= 0 && x < 1) };
console.warn('warned', 42);
console.error(new TypeError('bad'));
console.debug('dbg');
out.lines = lines;
out.clockError = CLOCK_ERROR;
write(JSON.stringify(out));
`;

test('clock reads throw, Math.random is seeded, console goes to the run log', () => {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  const clock = "the clock is not available in idem's sandbox; use ctx.logicalDate";
  assert.equal(out.clockError, clock);
  const calls = { now: 'Date.now()', newDate: 'new Date()', callDate: 'Date()', perf: 'performance.now()' };
  for (const [k, call] of Object.entries(calls)) assert.equal(out[k], `${call}: ${clock}`, k);
  assert.match(out.timeout, /setTimeout is not available/);
  assert.match(out.crypto, /crypto randomness is not available/);
  assert.equal(out.fixed, '1970-01-01T00:00:00.000Z');
  assert.equal(out.utc, 1790812800000);
  assert.equal(out.isDate, true);
  assert.ok(out.random.same && out.random.inRange);
  // a fixed seed: the same numbers in every run and every build
  assert.deepEqual(out.random.r1, JSON.parse(spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }).stdout).random.r1);
  assert.deepEqual(out.lines[0], ['info', '(during module initialization) before open {"a":"1n"}']);
  assert.deepEqual(out.lines[1], ['warn', 'warned 42']);
  assert.equal(out.lines[2][0], 'error');
  assert.match(out.lines[2][1], /^TypeError: bad/);
  assert.deepEqual(out.lines[3], ['debug', 'dbg']);
});
