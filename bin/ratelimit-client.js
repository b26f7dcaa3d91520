#!/usr/bin/env node
import { requireSupportedNode } from './supported-node.js';

requireSupportedNode('ratelimit-client');
await import('../dist/cli/ratelimit-client/cli.js');
