// idem's JavaScript build driver, run by `idem build` with Node.js from the
// toolchain folder it installed (esbuild, componentize-js). Two steps, so
// that idem can key its build reuse on the exact bundle:
//   node build.mjs bundle ENTRY SDK_DIR OUT_JS
//     Bundles the transform and everything it imports into one ES module;
//     `idem-guest` resolves to the SDK idem embeds, whose prelude (the
//     sandbox's guards) is injected ahead of every other module.
//   node build.mjs componentize BUNDLE_JS WIT_FILE OUT_WASM
//     Embeds the bundle in StarlingMonkey as a component of the
//     `transform-world` world. Every WASI feature is disabled, so the
//     component imports only idem's host interface: no clock, no
//     randomness, no stdio, no network.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [step, ...args] = process.argv.slice(2);
if (step === 'bundle') {
  const { build } = await import('esbuild');
  const [entry, sdk, out] = args;
  try {
    await build({
      entryPoints: [entry],
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      target: 'es2022',
      // `neutral` has no main fields; the SDK alias needs "main".
      mainFields: ['module', 'main'],
      outfile: out,
      external: ['idem:transform/*'],
      alias: { 'idem-guest': sdk },
      inject: [join(sdk, 'src', 'prelude.js')],
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
} else if (step === 'componentize') {
  const { componentize } = await import('@bytecodealliance/componentize-js');
  const [bundle, witFile, out] = args;
  const { component } = await componentize(readFileSync(bundle, 'utf8'), readFileSync(witFile, 'utf8'), {
    worldName: 'transform-world',
    disableFeatures: ['random', 'clocks', 'stdio', 'http', 'fetch-event'],
  });
  writeFileSync(out, component);
} else {
  console.error('usage: node build.mjs bundle ENTRY SDK_DIR OUT_JS | componentize BUNDLE_JS WIT_FILE OUT_WASM');
  process.exit(2);
}
