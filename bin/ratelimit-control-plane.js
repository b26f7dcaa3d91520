#!/usr/bin/env node
// Runs the compiled xDS control plane (npm run build writes dist/).
import { requireSupportedNode } from './supported-node.js';

requireSupportedNode('ratelimit-control-plane');
await import('../dist/control-plane/main.js');
