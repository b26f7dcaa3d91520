#!/usr/bin/env node
// Validate, explain and diff rate limit configs, read and reset counters (npm run build writes dist/).
import '../dist/cli/ratelimit-config/cli.js';
