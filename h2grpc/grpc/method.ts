// What a gRPC method is to the server: the stream a call runs on (node:http2's ServerHttp2Stream or the
// HTTP/2 layer of our own, h2/stream.ts, under the same names), the context a handler sees, and the
// three kinds of method (unary, server-streaming, bidirectional) with what each implements.
import type { IncomingHttpHeaders } from 'node:http2';

/** The request headers of a call (lower-case names, pseudo-headers included), as node:http2 gives them. */
export type CallHeaders = IncomingHttpHeaders;

export type Fields = Readonly<Record<string, string | number>>;

/**
 * The server stream of one call: the part of node:http2's ServerHttp2Stream the gRPC layer uses, which
 * the HTTP/2 layer of our own (h2/stream.ts) offers under the same names.
 */
export interface GrpcStream {
  respond(headers: Fields, options?: { endStream?: boolean; waitForTrailers?: boolean }): void;
  write(chunk: Uint8Array): unknown;
  end(chunk?: Uint8Array): unknown;
  sendTrailers(headers: Fields): void;
  /** RST_STREAM with the code (NO_ERROR by default). */
  close(code?: number): void;
  readonly destroyed: boolean;
  readonly closed: boolean;
  readonly headersSent: boolean;
  readonly readableEnded: boolean;
  readonly writableLength: number;
  readonly state: { localClose?: number };
  readonly session?: { socket: unknown } | undefined;
  on(event: string, fn: (...args: never[]) => void): unknown;
  once(event: string, fn: (...args: never[]) => void): unknown;
  removeAllListeners(event?: string): unknown;
}

export interface CallContext {
  headers: CallHeaders;
  /** The TLS session's client certificate SANs (`DNS:a, IP Address:...`), '' without mutual TLS. */
  peerSubjectAltName(): string;
}

export interface UnaryMethod<Req, Res> {
  decode(buf: Buffer): Req;
  encode(msg: Res): Uint8Array;
  /** The whole message frame (prefix and message) in one Buffer; used instead of encode when given. */
  encodeFramed?(msg: Res): Buffer;
  /**
   * Told once per call when the handler has returned or thrown and its promise settled, before the
   * answer is written; `startedMs` is performance.now() just before the handler ran, `err` what it
   * threw or rejected with (undefined on success). What it returns is the error the call ends with
   * (a GrpcStatusError gives its code; anything else UNKNOWN). With it, a server times and maps its
   * calls without an async wrapper (a suspended frame per call) around the handler.
   */
  settled?(startedMs: number, err: unknown): unknown;
  handle(req: Req, call: CallContext): Promise<Res>;
}

/** A server-streaming call: `send` writes a message, `end` closes with a status; `onClose` fires once. */
export interface ServerStream<Res> {
  send(msg: Res): void;
  end(code?: number, message?: string): void;
  readonly closed: boolean;
  /** Bytes written and not yet sent (waiting for the client's flow-control window, or the socket). */
  readonly queuedBytes: number;
  onClose(fn: () => void): void;
}

export interface ServerStreamingMethod<Req, Res> {
  decode(buf: Buffer): Req;
  encode(msg: Res): Uint8Array;
  handle(req: Req, stream: ServerStream<Res>, call: CallContext): void;
}

/** What a bidirectional call does with each client message, and when the client half-closes. */
export interface BidiHandler<Req> {
  message(req: Req): void;
  halfClose(): void;
}

/**
 * A bidirectional streaming call (RLQS): `start` runs once when the call's headers are accepted and
 * returns the handler of its messages. Each message is bounded like a unary request (size, inflated
 * size); one that does not decode ends the call with the decoder's status (INVALID_ARGUMENT for a
 * GrpcStatusError it throws, INTERNAL for malformed bytes).
 */
export interface BidiStreamingMethod<Req, Res> {
  decode(buf: Buffer): Req;
  encode(msg: Res): Uint8Array;
  start(stream: ServerStream<Res>, call: CallContext): BidiHandler<Req>;
}

export type MethodEntry =
  | { kind: 'unary'; m: UnaryMethod<unknown, unknown> }
  | { kind: 'stream'; m: ServerStreamingMethod<unknown, unknown> }
  | { kind: 'bidi'; m: BidiStreamingMethod<unknown, unknown> };
