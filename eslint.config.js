import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import layers from './scripts/eslint-layers.js';

// The layers, lowest first: each product folder may import its own files and the folders listed for it
// (a prefix such as ratelimit/config allows only that part). Dependencies point one way:
// cli, operator -> control-plane -> ratelimit -> proto, h2grpc -> common. Tests (*.test.ts and their helpers) may
// import any layer; tools may import anything; test infrastructure is imported only by tests and tools.
// Every folder with an index.ts is entered from outside only through it, or through a second entry
// listed in ENTRIES. README.md, "Architecture".
const LAYERS = {
  common: [],
  proto: ['common'],
  h2grpc: ['common'],
  ratelimit: ['proto', 'h2grpc', 'common'],
  // Inside ratelimit/, lowest first. Each folder also takes proto/, h2grpc/ and common/ (ratelimit/'s);
  // the files at ratelimit/'s root (app.ts, counter-stack.ts, main.ts) wire the folders and take any.
  'ratelimit/config': [],
  'ratelimit/settings': ['ratelimit/config'],
  'ratelimit/stats': ['ratelimit/settings'],
  'ratelimit/counting': ['ratelimit/config', 'ratelimit/stats'],
  'ratelimit/redis': ['ratelimit/counting', 'ratelimit/settings'],
  'ratelimit/memcache': ['ratelimit/counting', 'ratelimit/settings'],
  'ratelimit/memory': ['ratelimit/counting', 'ratelimit/settings'],
  'ratelimit/tracing': ['ratelimit/counting', 'ratelimit/settings'],
  'ratelimit/sources': ['ratelimit/config', 'ratelimit/settings'],
  'ratelimit/limiter': ['ratelimit/config', 'ratelimit/counting', 'ratelimit/settings', 'ratelimit/stats'],
  'ratelimit/service': ['ratelimit/config', 'ratelimit/counting', 'ratelimit/limiter', 'ratelimit/stats'],
  'ratelimit/quota': ['ratelimit/config', 'ratelimit/counting', 'ratelimit/settings', 'ratelimit/stats'],
  'ratelimit/server': ['ratelimit/quota', 'ratelimit/service', 'ratelimit/stats', 'ratelimit/tracing'],
  'control-plane': ['ratelimit/config', 'proto', 'common'],
  operator: ['control-plane', 'ratelimit/config', 'proto', 'common'],
  cli: ['control-plane', 'ratelimit', 'proto', 'common'],
};

// Second entries: proto/ratelimit-config.ts gives the config model and its parse worker the
// RateLimitConfig codec, the unit table and the Struct helpers without loading @grpc/grpc-js;
// h2grpc/h2/frames.ts and h2grpc/h2/hpack.ts give raw-frame clients (the attack harness, the
// benchmark's load generator) HTTP/2's wire facts and the HPACK coder; control-plane/config-set/index.ts
// gives ratelimit-config the config set (read, checked, its problems printed) without the ADS server.
// ratelimit/config/model.ts gives the service's main thread the config model without the YAML reader
// and the validator (they load on the parse worker), and ratelimit/config/readers.ts gives the parse worker
// the YAML reader and the validator without the compiled model; common/suggest.ts gives the validator its
// "did you mean" without common/'s logger (pino); ratelimit/sources/file.ts and xds.ts give the main thread each
// config source alone, so the xDS client (grpc-js) loads only with CONFIG_TYPE=GRPC_XDS_*. The
// Prometheus mapping (ratelimit/stats/prometheus/) is outside stats/index.ts: it loads with USE_PROMETHEUS.
const ENTRIES = [
  'ratelimit/stats/prometheus/mapper.ts',
  'ratelimit/stats/prometheus/default-mapping.ts',
  'ratelimit/config/model.ts',
  'ratelimit/config/readers.ts',
  'common/suggest.ts',
  'ratelimit/sources/file.ts',
  'ratelimit/sources/xds.ts',
  'control-plane/config-set/index.ts',
  'proto/ratelimit-config.ts',
  'h2grpc/h2/frames.ts',
  'h2grpc/h2/hpack.ts',
];

export default tseslint.config(
  // Generated code (scripts/generate-config-validator.ts) is checked by its test, not linted.
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**',
      '**/.tap/**',
      'papers/public/**',
      'ratelimit/config/schema-validator.generated.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        URL: 'readonly',
        fetch: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['**/*.ts'],
    plugins: { layers },
    rules: {
      'layers/imports': [
        'error',
        {
          layers: LAYERS,
          testInfrastructure: ['harness', 'bench', 'e2e'],
          tools: ['harness', 'bench', 'e2e', 'scripts', 'crds', 'charts', 'docs', 'tools'],
          isolated: ['papers'],
          entries: ENTRIES,
          testFiles: '(\\.test\\.ts|/testing\\.ts|/test-support\\.ts)$',
        },
      ],
    },
  },
);
