#!/usr/bin/env node
// Runs the compiled operator (npm run build writes dist/).
import { requireSupportedNode } from './supported-node.js';

requireSupportedNode('ratelimit-operator');
await import('../dist/operator/main.js');
