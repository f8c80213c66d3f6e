// Injected ahead of every module of a bundle by `idem build` (esbuild's
// `inject`), so the sandbox's guards (no clock, seeded Math.random, console
// to the run log) are in place before any of the transform's own modules
// run, whatever order they import in.
import { installSandbox } from './sandbox.js';

installSandbox();
