// idem's JavaScript build driver, run by `idem build` with Node.js from the
// toolchain folder it installed (esbuild, componentize-js):
//   node build.mjs ENTRY SDK_DIR WIT_FILE OUT_FILE
// Bundles the transform and everything it imports into one ES module
// (`idem-guest` resolves to the SDK idem embeds), then embeds it in
// StarlingMonkey as a component of the `transform-world` world. Every WASI
// feature is disabled, so the component imports only idem's host
// interface: no clock, no randomness, no stdio, no network.
import { build } from 'esbuild';
import { componentize } from '@bytecodealliance/componentize-js';
import { readFileSync, writeFileSync } from 'node:fs';

const [entry, sdk, witFile, out] = process.argv.slice(2);
let bundle;
try {
  bundle = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    mainFields: ['module', 'main'],
    write: false,
    external: ['idem:transform/*'],
    alias: { 'idem-guest': sdk },
    logLevel: 'silent',
    legalComments: 'none',
  });
} catch (e) {
  const errors = (e.errors ?? []).map(
    (m) => `${m.location ? `${m.location.file}:${m.location.line}:${m.location.column}: ` : ''}${m.text}`,
  );
  console.error(`bundling ${entry} failed:\n${errors.join('\n') || e.message}`);
  process.exit(1);
}
const source = bundle.outputFiles[0].text;
const { component } = await componentize(source, readFileSync(witFile, 'utf8'), {
  worldName: 'transform-world',
  disableFeatures: ['random', 'clocks', 'stdio', 'http', 'fetch-event'],
});
writeFileSync(out, component);
