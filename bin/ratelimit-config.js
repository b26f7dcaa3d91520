#!/usr/bin/env node
// Validate, explain and diff rate limit configs, read and reset counters (npm run build writes dist/).
import { requireSupportedNode } from './supported-node.js';

requireSupportedNode('ratelimit-config');
await import('../dist/cli/ratelimit-config/cli.js');
