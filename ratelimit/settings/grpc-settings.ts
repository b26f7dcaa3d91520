// The gRPC listener's settings (GRPC_*): address, message sizes, the HTTP/2 bounds and TLS. Part of the
// one Settings object (settings.ts), which calls grpcSettings.
import { DEFAULT_H2_LIMITS, type H2Limits } from '../../h2grpc/index.js';
import { EnvReader, SettingsError } from './env.js';

/** The gRPC listener (GRPC_*). */
export interface GrpcSettings {
  host: string;
  port: number;
  /** GRPC_UDS: a Unix socket path to listen on as well ('' for none). */
  uds: string;
  maxConnectionAgeMs: number;
  maxConnectionAgeGraceMs: number;
  /** Max gRPC request size the server accepts (ours; the reference uses gRPC's 4 MiB default). */
  maxRecvMsgSize: number;
  /**
   * The HTTP/2 bounds: GRPC_MAX_CONCURRENT_STREAMS, GRPC_MAX_SESSION_MEMORY_MB,
   * GRPC_MAX_TOTAL_SESSION_MEMORY_MB, GRPC_MAX_HEADER_LIST_SIZE, GRPC_MAX_CONNECTIONS,
   * GRPC_MAX_CONNECTION_IDLE, GRPC_KEEPALIVE_MIN_TIME, GRPC_KEEPALIVE_PERMIT_WITHOUT_STREAM.
   */
  limits: H2Limits;
  /** GRPC_MAX_DECOMPRESSED_MSG_SIZE: bytes a compressed gRPC request may inflate to (checked while inflating). */
  maxDecompressedMsgSize: number;
  /** GRPC_HTTP2_SERVER: the HTTP/2 layer under the listener, ours ('builtin') or node:http2 ('node'). */
  http2: 'builtin' | 'node';
  /** GRPC_SERVER_USE_TLS and its files; cert and key are both set when enabled (checked at parse). */
  tls: { enabled: boolean; cert: string; key: string; clientCaCert: string; clientSan: string };
}

const MB = 1024 * 1024;

function h2Limits(r: EnvReader): H2Limits {
  const d = DEFAULT_H2_LIMITS;
  const limits: H2Limits = {
    maxConcurrentStreams: r.int('GRPC_MAX_CONCURRENT_STREAMS', d.maxConcurrentStreams, {
      min: 1,
      max: 2 ** 31 - 1,
    }),
    maxSessionMemory: MB * r.int('GRPC_MAX_SESSION_MEMORY_MB', d.maxSessionMemory / MB, { min: 1 }),
    maxTotalSessionMemory:
      MB * r.int('GRPC_MAX_TOTAL_SESSION_MEMORY_MB', d.maxTotalSessionMemory / MB, { min: 1 }),
    maxHeaderListSize: r.int('GRPC_MAX_HEADER_LIST_SIZE', d.maxHeaderListSize, {
      min: 1024,
      max: 512 * 1024,
    }),
    prefaceTimeoutMs: d.prefaceTimeoutMs,
    maxConnectionIdleMs: r.durationMs('GRPC_MAX_CONNECTION_IDLE', d.maxConnectionIdleMs),
    keepaliveMinTimeMs: r.durationMs('GRPC_KEEPALIVE_MIN_TIME', d.keepaliveMinTimeMs),
    keepalivePermitWithoutStream: r.bool(
      'GRPC_KEEPALIVE_PERMIT_WITHOUT_STREAM',
      d.keepalivePermitWithoutStream,
    ),
    maxConnections: r.int('GRPC_MAX_CONNECTIONS', d.maxConnections, { min: 0 }),
  };
  return limits;
}

export function grpcSettings(r: EnvReader): GrpcSettings {
  const g: GrpcSettings = {
    host: r.string('GRPC_HOST', '0.0.0.0'),
    port: r.int('GRPC_PORT', 8081, { min: 0, max: 65535 }),
    uds: r.string('GRPC_UDS', ''),
    maxConnectionAgeMs: r.durationMs('GRPC_MAX_CONNECTION_AGE', 24 * 3_600_000),
    maxConnectionAgeGraceMs: r.durationMs('GRPC_MAX_CONNECTION_AGE_GRACE', 3_600_000),
    maxRecvMsgSize: r.int('GRPC_MAX_RECV_MSG_SIZE', 4 * 1024 * 1024, { min: 1024 }),
    maxDecompressedMsgSize: r.int('GRPC_MAX_DECOMPRESSED_MSG_SIZE', 64 * 1024, { min: 1024 }),
    limits: h2Limits(r),
    http2: r.oneOf('GRPC_HTTP2_SERVER', 'builtin', ['builtin', 'node'] as const),
    tls: {
      enabled: r.bool('GRPC_SERVER_USE_TLS', false),
      cert: r.string('GRPC_SERVER_TLS_CERT', ''),
      key: r.string('GRPC_SERVER_TLS_KEY', ''),
      clientCaCert: r.string('GRPC_CLIENT_TLS_CACERT', ''),
      clientSan: r.string('GRPC_CLIENT_TLS_SAN', ''),
    },
  };
  if (g.tls.enabled && (!g.tls.cert || !g.tls.key)) {
    throw new SettingsError(
      'GRPC_SERVER_TLS_CERT',
      'GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY',
    );
  }
  return g;
}
