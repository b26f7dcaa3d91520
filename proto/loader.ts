// Loads our own .proto files joined with the Envoy, xDS, validate and Google protos shipped in
// @grpc/grpc-js-xds. Our folder comes first on the include path, so our newer definitions win.
// @grpc/proto-loader (and protobufjs under it) loads on the first definition asked for: the service's
// hot path has hand-written codecs (rls-codec.ts), and a pod with default settings never needs it.
import { createRequire } from 'node:module';
import type * as protoLoader from '@grpc/proto-loader';
import { PROTO_INCLUDE_DIRS } from './paths.js';

const require = createRequire(import.meta.url);

export { OWN_PROTO_DIR, PROTO_INCLUDE_DIRS } from './paths.js';

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: true,
  includeDirs: PROTO_INCLUDE_DIRS,
};

export function loadPackageDefinition(files: string[]): protoLoader.PackageDefinition {
  const loader = require('@grpc/proto-loader') as typeof protoLoader;
  return loader.loadSync(files, LOADER_OPTIONS);
}
