// idem-guest, as bundled into a component: the core API, with the run log
// going to the host's `log` import and the sandboxed globals installed
// (see sandbox.js) before any transform code runs.

import { log as hostLog } from 'idem:transform/host@0.2.0';
import { setLogSink } from './log.js';
import { installSandbox } from './sandbox.js';

installSandbox();
setLogSink((level, message) => hostLog(level, message), { deferUntilOpen: true });

export * from './core.js';
