#!/usr/bin/env node
// The paper similarity service (papers/README.md). Build first: npm run build (in papers/).
import '../dist/main.js';
