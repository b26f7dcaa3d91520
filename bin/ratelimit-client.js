#!/usr/bin/env node
import '../dist/ratelimit/client/cli.js';
