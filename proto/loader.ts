// Loads our own .proto files joined with the Envoy, xDS, validate and Google protos shipped in
// @grpc/grpc-js-xds. Our folder comes first on the include path, so our newer definitions win.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';
import * as grpc from '@grpc/grpc-js';

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));

/** Root of our .proto files (works from the source tree and from dist/, which has no .proto files). */
export const OWN_PROTO_DIR = here.includes(`${join('dist', 'proto')}`)
  ? join(here, '..', '..', 'proto')
  : here;

const xdsDeps = join(dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');

/** Include path: ours first, then the shipped Envoy API and its dependencies. */
export const PROTO_INCLUDE_DIRS = [
  OWN_PROTO_DIR,
  join(xdsDeps, 'envoy-api'),
  join(xdsDeps, 'xds'),
  join(xdsDeps, 'googleapis'),
  join(xdsDeps, 'protoc-gen-validate'),
];

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: true,
  includeDirs: PROTO_INCLUDE_DIRS,
};

export function loadProtoPackage(files: string[]): grpc.GrpcObject {
  const def = protoLoader.loadSync(files, LOADER_OPTIONS);
  return grpc.loadPackageDefinition(def);
}

export function loadPackageDefinition(files: string[]): protoLoader.PackageDefinition {
  return protoLoader.loadSync(files, LOADER_OPTIONS);
}
