#!/usr/bin/env node
// Runs the compiled operator (npm run build writes dist/).
import '../dist/operator/main.js';
