// Loaded with `node --import` into a service under test: records every module the process loads (ESM
// and CommonJS, through module.registerHooks) and, on SIGUSR2, writes the names of the npm packages
// among them, one a line, to the file named by LOADED_PACKAGES_FILE. Tests only (what a default start
// loads: ratelimit/startup-modules.test.ts).
import { registerHooks } from 'node:module';
import { writeFileSync } from 'node:fs';

const packages = new Set();
registerHooks({
  load(url, context, nextLoad) {
    const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (m) packages.add(m[1]);
    return nextLoad(url, context);
  },
});

process.on('SIGUSR2', () => {
  writeFileSync(process.env.LOADED_PACKAGES_FILE, [...packages].sort().join('\n') + '\n');
});
