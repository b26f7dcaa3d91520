#!/usr/bin/env node
// Runs the compiled service (npm run build writes dist/); --help and --version answer without starting it.
import { requireSupportedNode } from './supported-node.js';

requireSupportedNode('ratelimit');
const arg = process.argv[2];
if (arg === '--help' || arg === '-h' || arg === '--version') {
  const { serviceHelp } = await import('../dist/cli/service-help.js');
  process.stdout.write(serviceHelp(arg));
} else {
  await import('../dist/ratelimit/main.js');
}
