#!/usr/bin/env node
// Runs the compiled xDS control plane (npm run build writes dist/).
import '../dist/control-plane/main.js';
