#!/usr/bin/env node
// Runs the compiled service (npm run build writes dist/). With arguments (--help, --version, or a
// mistake) it answers them without starting the service.
import { requireSupportedNode } from './supported-node.js';

requireSupportedNode('ratelimit');
if (process.argv.length > 2) {
  const { serviceCommand } = await import('../dist/cli/service-help.js');
  serviceCommand(process.argv.slice(2));
} else {
  await import('../dist/ratelimit/main.js');
}
