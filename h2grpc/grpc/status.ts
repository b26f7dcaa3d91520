// gRPC status on the wire: the codes, the error a handler throws to answer with one, grpc-message's
// percent-encoding, trailers-only answers, HTTP-level refusals, and the constant header objects of an
// answer (frozen: the HTTP/2 layer encodes a frozen header object once and reuses its block).
import type { GrpcStream } from './method.js';

/** gRPC status codes (grpc/doc/statuscodes.md). */
export const Status = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/** Thrown (or rejected) by a handler to answer with a gRPC status other than OK. */
export class GrpcStatusError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export const RESPONSE_HEADERS = Object.freeze({ ':status': 200, 'content-type': 'application/grpc' });
export const WAIT_FOR_TRAILERS = { waitForTrailers: true };
const END_STREAM = { endStream: true };
export const OK_TRAILERS = Object.freeze({ 'grpc-status': '0' });

/** grpc-message: percent-encode bytes outside 0x20-0x7e and '%' (the gRPC HTTP/2 spec). */
export function percentEncode(s: string): string {
  if (/^[\x20-\x24\x26-\x7e]*$/.test(s)) return s;
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    out +=
      b >= 0x20 && b <= 0x7e && b !== 0x25
        ? String.fromCharCode(b)
        : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** A response with only headers: the status (and message) in them, no body, the stream ended. */
export function trailersOnly(
  stream: GrpcStream,
  code: number,
  message: string,
  extra: Record<string, string> = {},
): void {
  if (stream.destroyed || stream.closed || stream.headersSent) return;
  stream.respond(
    {
      ':status': 200,
      'content-type': 'application/grpc',
      'grpc-status': String(code),
      'grpc-message': percentEncode(message),
      ...extra,
    },
    END_STREAM,
  );
}

const REFUSAL_HEADERS = Object.freeze({ 'content-type': 'text/plain; charset=utf-8' });
const REFUSAL_BODY = Buffer.from('this is a gRPC endpoint: POST with content-type application/grpc\n');

/**
 * Answers a stream the server refuses before reading it (HTTP-level errors, no gRPC status), with a
 * line of text saying what the endpoint takes.
 */
export function refuseHttp(stream: GrpcStream, status: number): void {
  stream.respond({ ':status': status, ...REFUSAL_HEADERS });
  stream.end(REFUSAL_BODY);
}
