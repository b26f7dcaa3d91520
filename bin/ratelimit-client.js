#!/usr/bin/env node
import '../dist/cli/ratelimit-client/cli.js';
