#!/usr/bin/env node
// Runs the compiled service (npm run build writes dist/).
import '../dist/ratelimit/main.js';
