// Loads our own .proto files joined with the Envoy, xDS, validate and Google protos shipped in
// @grpc/grpc-js-xds. Our folder comes first on the include path, so our newer definitions win.
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_INCLUDE_DIRS } from './paths.js';

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
  return protoLoader.loadSync(files, LOADER_OPTIONS);
}
