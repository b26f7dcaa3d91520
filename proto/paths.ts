// Where the .proto files are, apart from the loader: the RateLimitConfig codec (ratelimit-config.ts)
// needs the include path too, and must not load @grpc/grpc-js or @grpc/proto-loader to get it.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));

/** Root of our .proto files (works from the source tree and from dist/, which has no .proto files). */
export const OWN_PROTO_DIR = here.includes(`${join('dist', 'proto')}`)
  ? join(here, '..', '..', 'proto')
  : here;

// Resolving the package's path loads none of its code.
const xdsDeps = join(dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');

/** Include path: ours first, then the shipped Envoy API and its dependencies. */
export const PROTO_INCLUDE_DIRS = [
  OWN_PROTO_DIR,
  join(xdsDeps, 'envoy-api'),
  join(xdsDeps, 'xds'),
  join(xdsDeps, 'googleapis'),
  join(xdsDeps, 'protoc-gen-validate'),
];
