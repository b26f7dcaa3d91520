// The xDS side of the gRPC wire contract: the largest DiscoveryResponse both sides accept, and the
// ADS service definition shipped in @grpc/grpc-js-xds with the shapes grpc-js hands over. The
// RateLimitConfig resource it carries is rls-conf.ts (no grpc-js there).
import { createRequire } from 'node:module';
import type * as grpc from '@grpc/grpc-js';
import { loadPackageDefinition } from './loader.js';

// grpc-js loads with the first ADS client (CONFIG_TYPE=GRPC_XDS_*, the control plane), not with this module.
const require = createRequire(import.meta.url);

/**
 * The largest xDS DiscoveryResponse: what the control plane may send and what the service's xDS
 * client accepts (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES, the control plane's --max-send-bytes). One
 * number for both sides, gRPC's default receive limit, so a config one side takes the other can too.
 */
export const XDS_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export const ADS_PROTO_FILE = 'envoy/service/discovery/v3/ads.proto';
export const ADS_SERVICE_NAME = 'envoy.service.discovery.v3.AggregatedDiscoveryService';
export const ADS_STREAM_METHOD = 'StreamAggregatedResources';
/** Incremental (delta) xDS on the same service: Envoy's CONFIG_TYPE name for it is GRPC_XDS_DELTA. */
export const ADS_DELTA_METHOD = 'DeltaAggregatedResources';
/** In resource_names_subscribe/unsubscribe of a delta stream: every resource of the type. */
export const DELTA_WILDCARD = '*';

// ---------------------------------------------------------------------------------------------
// ADS (envoy.service.discovery.v3) shapes as grpc-js hands them over with LOADER_OPTIONS.

/** google.protobuf.Any keeps its snake_case field name: proto-loader takes it from protobufjs' bundled common types. */
export interface WireAny {
  type_url?: string;
  value?: Uint8Array;
}
export interface WireNode {
  id?: string;
  cluster?: string;
  metadata?: { fields?: Record<string, { stringValue?: string }> } | null;
  userAgentName?: string;
}
export interface WireStatus {
  code?: number;
  message?: string;
}
export interface WireDiscoveryRequest {
  versionInfo?: string;
  node?: WireNode | null;
  resourceNames?: string[];
  typeUrl?: string;
  responseNonce?: string;
  errorDetail?: WireStatus | null;
}
export interface WireDiscoveryResponse {
  versionInfo?: string;
  resources?: WireAny[];
  canary?: boolean;
  typeUrl?: string;
  nonce?: string;
  controlPlane?: { identifier?: string } | null;
}

export interface WireDeltaDiscoveryRequest {
  node?: WireNode | null;
  typeUrl?: string;
  resourceNamesSubscribe?: string[];
  resourceNamesUnsubscribe?: string[];
  /** map<string, string>: name -> version of what the client has when it (re)connects. */
  initialResourceVersions?: Record<string, string> | null;
  responseNonce?: string;
  errorDetail?: WireStatus | null;
}
/** envoy.service.discovery.v3.Resource (the fields a delta stream of ours uses). */
export interface WireDeltaResource {
  name?: string;
  version?: string;
  resource?: WireAny | null;
}
export interface WireDeltaDiscoveryResponse {
  systemVersionInfo?: string;
  resources?: WireDeltaResource[];
  typeUrl?: string;
  removedResources?: string[];
  nonce?: string;
  controlPlane?: { identifier?: string } | null;
}

let adsDef: grpc.ServiceDefinition | undefined;

/** The AggregatedDiscoveryService definition (from the Envoy API shipped in @grpc/grpc-js-xds). */
export function adsServiceDefinition(): grpc.ServiceDefinition {
  if (!adsDef) {
    const pkg = loadPackageDefinition([ADS_PROTO_FILE]);
    adsDef = pkg[ADS_SERVICE_NAME] as grpc.ServiceDefinition;
  }
  return adsDef;
}

/** A generic client constructor for the ADS service. */
export function adsClientConstructor(): grpc.ServiceClientConstructor {
  const { makeGenericClientConstructor } = require('@grpc/grpc-js') as typeof grpc;
  return makeGenericClientConstructor(adsServiceDefinition(), 'AggregatedDiscoveryService');
}
