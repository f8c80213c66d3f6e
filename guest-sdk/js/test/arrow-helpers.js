// Loads the `apache-arrow` npm package for interop tests. It is a test-only
// dependency, resolved like require() does (so NODE_PATH works), e.g.
//   NODE_PATH=/var/tmp/probe/js/node_modules node --test guest-sdk/js/test/
// When it is not found, the interop tests skip with a message.

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** @type {any} */
let arrow = null;
let why = '';
try {
  arrow = require('apache-arrow');
} catch (e) {
  why = `apache-arrow not found (${/** @type {Error} */ (e).message.split('\n')[0]}); ` +
    'set NODE_PATH to a node_modules that has it, e.g. NODE_PATH=/var/tmp/probe/js/node_modules';
}

export { arrow };
/** A `skip` option for node:test: false when apache-arrow loaded, else the reason. */
export const skipArrow = arrow ? false : why;
