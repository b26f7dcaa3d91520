// RateLimitRequest frames for the load generator, encoded with protobufjs on our proto/ tree (the same .proto files the service serves).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_INCLUDE_DIRS, RLS_PROTO_FILE } from '../../proto/index.js';

export interface BenchRequest {
  domain: string;
  /** Each descriptor is a list of [key, value] entries. */
  descriptors: [string, string][][];
  hitsAddend?: number;
}

// protobufjs ships google/protobuf/descriptor.proto; the Envoy deps do not.
const protobufjsDir = dirname(createRequire(import.meta.url).resolve('protobufjs/package.json'));

let types: { req: protobuf.Type } | undefined;

function load(): { req: protobuf.Type } {
  if (!types) {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => {
      for (const dir of [...PROTO_INCLUDE_DIRS, protobufjsDir]) {
        const p = join(dir, target);
        if (existsSync(p)) return p;
      }
      return target;
    };
    root.loadSync(RLS_PROTO_FILE, { keepCase: false });
    types = {
      req: root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest'),
    };
  }
  return types;
}

/** The protobuf message bytes of a RateLimitRequest. */
export function encodeRequest(r: BenchRequest): Uint8Array {
  const { req } = load();
  const msg = req.create({
    domain: r.domain,
    descriptors: r.descriptors.map((d) => ({ entries: d.map(([key, value]) => ({ key, value })) })),
    hitsAddend: r.hitsAddend ?? 0,
  });
  return req.encode(msg).finish();
}

/** A gRPC length-prefixed message: the service's own framing. */
export { frameMessage as grpcFrame } from '../../ratelimit/server/index.js';
