// One gRPC call on an HTTP/2 stream (ours from h2/, or node:http2's: the GrpcStream below): the request body collected and unframed, the handler run, the
// answer framed and written with its trailers (or a trailers-only error). The server (h2-grpc.ts) routes
// a stream here once its headers are accepted.
//
// Hot path: one IncomingCall object per call holds the call's state and is the handler's CallContext; the
// stream's listeners are module-level functions that find it on the stream (no closures per call), and
// the respond options and header objects are constants (frozen: the HTTP/2 layer encodes each once).
import type { IncomingHttpHeaders } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { createGunzip, createInflate, type Gunzip, type Inflate } from 'node:zlib';

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

/** The request headers of a call (lower-case names, pseudo-headers included), as node:http2 gives them. */
export type CallHeaders = IncomingHttpHeaders;

type Fields = Readonly<Record<string, string | number>>;

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

/** RST_STREAM's NO_ERROR (RFC 9113 7). */
const NO_ERROR = 0;

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

// Frozen: the HTTP/2 layer encodes a frozen header object once and reuses its block.
const RESPONSE_HEADERS = Object.freeze({ ':status': 200, 'content-type': 'application/grpc' });
const WAIT_FOR_TRAILERS = { waitForTrailers: true };
const END_STREAM = { endStream: true };
const OK_TRAILERS = Object.freeze({ 'grpc-status': '0' });

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

/** A gRPC message frame: flag 0, big-endian length, the bytes. */
export function frameMessage(msg: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + msg.length);
  out[0] = 0;
  out.writeUInt32BE(msg.length, 1);
  out.set(msg, 5);
  return out;
}

/** How long a release waits for the response's last frame to leave before resetting anyway (ms). */
const RELEASE_WAIT_MS = 10_000;

/**
 * A streaming call whose response is complete while the client has not half-closed: once the frame that
 * ends the response has been sent (nghttp2 puts a reset ahead of queued frames), RST_STREAM with NO_ERROR
 * (HTTP/2 lets a server stop a request it has answered; grpc-go does the same), so the stream is freed
 * now, not whenever the client ends its side.
 */
function releaseIfClientOpen(stream: GrpcStream, waitedMs = 0): void {
  if (stream.destroyed || stream.closed || stream.readableEnded) return;
  if (stream.state.localClose === 1 || waitedMs >= RELEASE_WAIT_MS) {
    stream.close(NO_ERROR);
    return;
  }
  setTimeout(releaseIfClientOpen, 10, stream, waitedMs + 10).unref();
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

// The IncomingCall of a stream, set before its listeners are added.
const CALL = Symbol('grpcCall');
type CallStream = GrpcStream & { [CALL]?: IncomingCall };

function ignoreError(): void {
  // a reset by the client; nothing to answer
}

function onCallData(this: CallStream, chunk: Buffer): void {
  this[CALL]!.data(chunk);
}

function onCallEnd(this: CallStream): void {
  // The stream lets go of its call once the request is read: node:http2's stream objects live until a
  // major GC whatever we do (the scavenger keeps its native wrappers), and a call still hanging off one
  // would be carried into the old generation with it (1.7 → 1.2 KB promoted per call, hot key at 2k/s).
  const call = this[CALL]!;
  this[CALL] = undefined;
  call.end();
}

function sendOkTrailers(this: GrpcStream): void {
  this.sendTrailers(OK_TRAILERS);
}

/**
 * Reads the request of an accepted stream and runs its method. `encoding` is the request's
 * grpc-encoding (already checked to be identity, gzip or deflate, or absent).
 */
export function startCall(
  stream: GrpcStream,
  headers: CallHeaders,
  entry: MethodEntry,
  encoding: string | undefined,
  maxReceiveMessageLength: number,
  maxDecompressedLength: number,
  openStreams: Set<ServerStream<unknown>>,
): void {
  if (entry.kind === 'bidi') {
    startBidi(
      stream,
      headers,
      entry.m,
      encoding,
      maxReceiveMessageLength,
      maxDecompressedLength,
      openStreams,
    );
    return;
  }
  const call = new IncomingCall(
    stream,
    headers,
    entry,
    encoding,
    maxReceiveMessageLength,
    maxDecompressedLength,
    openStreams,
  );
  (stream as CallStream)[CALL] = call;
  stream.on('error', ignoreError);
  stream.on('data', onCallData);
  stream.on('end', onCallEnd);
}

/** The state of one call (unary or server-streaming) while its request is read; its CallContext. */
class IncomingCall implements CallContext {
  private first: Buffer | undefined = undefined;
  private chunks: Buffer[] | undefined = undefined;
  private size = 0;
  private failed = false;
  /** performance.now() before a unary handler with `settled` ran. */
  private startedMs = 0;

  constructor(
    private readonly stream: GrpcStream,
    readonly headers: CallHeaders,
    private readonly entry: MethodEntry,
    private readonly encoding: string | undefined,
    private readonly max: number,
    private readonly maxDecompressed: number,
    private readonly openStreams: Set<ServerStream<unknown>>,
  ) {}

  peerSubjectAltName(): string {
    const socket = this.stream.session?.socket as TLSSocket | undefined;
    return socket?.getPeerCertificate?.()?.subjectaltname ?? '';
  }

  data(chunk: Buffer): void {
    if (this.failed) return;
    this.size += chunk.length;
    if (this.size > this.max + 5) {
      this.failed = true;
      trailersOnly(
        this.stream,
        Status.RESOURCE_EXHAUSTED,
        `received message larger than max (${this.size - 5} vs. ${this.max}: GRPC_MAX_RECV_MSG_SIZE)`,
      );
      return;
    }
    if (this.first === undefined) this.first = chunk;
    else (this.chunks ??= [this.first]).push(chunk);
  }

  end(): void {
    if (this.failed) return;
    const body = this.chunks ? Buffer.concat(this.chunks) : (this.first ?? Buffer.alloc(0));
    this.first = this.chunks = undefined;
    let payload: Buffer;
    try {
      payload = unframe(body, this.encoding, this.max);
    } catch (err) {
      trailersOnly(this.stream, (err as GrpcStatusError).code ?? Status.INTERNAL, (err as Error).message);
      return;
    }
    if (body[0] === 0) {
      this.decodeAndRun(payload);
      return;
    }
    // Compressed (rare: Envoy does not compress its requests): inflated off the event loop, with a
    // running cap on the output.
    inflateCapped(payload, this.encoding as 'gzip' | 'deflate', this.maxDecompressed).then(
      (message) => this.decodeAndRun(message),
      (err: GrpcStatusError) => trailersOnly(this.stream, err.code, err.message),
    );
  }

  private decodeAndRun(message: Buffer): void {
    const entry = this.entry;
    let req: unknown;
    try {
      req = entry.m.decode(message);
    } catch (err) {
      // A caller's bad value in a well-formed message says so (the decoder throws a GrpcStatusError);
      // malformed bytes are INTERNAL.
      const code = err instanceof GrpcStatusError ? err.code : Status.INTERNAL;
      trailersOnly(this.stream, code, `error parsing request: ${(err as Error).message}`);
      return;
    }
    if (entry.kind === 'unary') this.runUnary(entry.m, req);
    else if (entry.kind === 'stream') runStreaming(entry.m, this.stream, req, this, this.openStreams);
  }

  /**
   * Runs the handler and writes its answer. Not an async function: one `then` on the handler's promise
   * costs fewer heap bytes per call than a suspended async frame does.
   */
  private runUnary(m: UnaryMethod<unknown, unknown>, req: unknown): void {
    if (m.settled !== undefined) this.startedMs = performance.now();
    let pending: Promise<unknown>;
    try {
      pending = m.handle(req, this);
    } catch (err) {
      this.handlerFailed(err);
      return;
    }
    pending.then(
      (res) => {
        if (m.settled !== undefined) m.settled(this.startedMs, undefined);
        this.reply(m, res);
      },
      (err: unknown) => this.handlerFailed(err),
    );
  }

  private handlerFailed(err: unknown): void {
    const m = this.entry.m as UnaryMethod<unknown, unknown>;
    if (m.settled !== undefined) err = m.settled(this.startedMs, err);
    const code = err instanceof GrpcStatusError ? err.code : Status.UNKNOWN;
    trailersOnly(this.stream, code, (err as Error)?.message ?? String(err));
  }

  private reply(m: UnaryMethod<unknown, unknown>, res: unknown): void {
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    let frame: Buffer;
    try {
      frame = m.encodeFramed !== undefined ? m.encodeFramed(res) : frameMessage(m.encode(res));
    } catch (err) {
      trailersOnly(stream, Status.INTERNAL, `error serializing response: ${(err as Error).message}`);
      return;
    }
    stream.respond(RESPONSE_HEADERS, WAIT_FOR_TRAILERS);
    stream.on('wantTrailers', sendOkTrailers);
    stream.end(frame);
  }
}

function runStreaming(
  m: ServerStreamingMethod<unknown, unknown>,
  stream: GrpcStream,
  req: unknown,
  ctx: CallContext,
  openStreams: Set<ServerStream<unknown>>,
): void {
  const out = serverStream(m, stream, openStreams, Infinity);
  try {
    m.handle(req, out, ctx);
  } catch (err) {
    out.end(err instanceof GrpcStatusError ? err.code : Status.UNKNOWN, (err as Error).message);
  }
}

/**
 * The sending side of a streaming call. Past `maxBuffered` bytes written but not yet taken by the
 * client (a peer that stopped reading), the call ends with RESOURCE_EXHAUSTED instead of buffering on.
 */
function serverStream(
  m: { encode(msg: unknown): Uint8Array },
  stream: GrpcStream,
  openStreams: Set<ServerStream<unknown>>,
  maxBuffered: number,
): ServerStream<unknown> {
  const closeFns: (() => void)[] = [];
  let headersSent = false;
  let ended = false;
  let finished = false;
  // onClose callbacks run once: when the server ends the call, or when the stream closes (client gone),
  // whichever comes first, so an ended call frees what it holds before the client closes its side.
  const finish = (): void => {
    if (finished) return;
    finished = true;
    openStreams.delete(out);
    for (const fn of closeFns) fn();
  };
  const out: ServerStream<unknown> = {
    get closed() {
      return ended || stream.destroyed || stream.closed;
    },
    get queuedBytes() {
      return stream.writableLength;
    },
    send: (msg) => {
      if (out.closed) return;
      if (stream.writableLength > maxBuffered) {
        out.end(Status.RESOURCE_EXHAUSTED, `client is not reading its stream (${maxBuffered} bytes queued)`);
        return;
      }
      if (!headersSent) {
        headersSent = true;
        stream.respond(RESPONSE_HEADERS, WAIT_FOR_TRAILERS);
      }
      stream.write(frameMessage(m.encode(msg)));
    },
    end: (code = Status.OK, msg = '') => {
      if (out.closed) return;
      ended = true;
      if (!headersSent) {
        trailersOnly(stream, code, msg);
        releaseIfClientOpen(stream);
        finish();
        return;
      }
      stream.once('wantTrailers', () => {
        stream.sendTrailers(
          code === Status.OK
            ? OK_TRAILERS
            : { 'grpc-status': String(code), 'grpc-message': percentEncode(msg) },
        );
        releaseIfClientOpen(stream);
      });
      stream.end();
      finish();
    },
    onClose: (fn) => closeFns.push(fn),
  };
  openStreams.add(out);
  stream.once('close', finish);
  return out;
}

/** Bytes a bidirectional call may have queued towards a client that does not read. */
const BIDI_MAX_BUFFERED = 4 * 1024 * 1024;

/**
 * A bidirectional call: client messages are unframed as they arrive (each bounded by `max`, and by
 * `maxDecompressed` once inflated) and handed to the method in order; compressed ones are inflated off
 * the event loop, and the messages after one wait for it.
 */
function startBidi(
  stream: GrpcStream,
  headers: CallHeaders,
  m: BidiStreamingMethod<unknown, unknown>,
  encoding: string | undefined,
  max: number,
  maxDecompressed: number,
  openStreams: Set<ServerStream<unknown>>,
): void {
  stream.on('error', ignoreError);
  const out = serverStream(m, stream, openStreams, BIDI_MAX_BUFFERED);
  const ctx: CallContext = {
    headers,
    peerSubjectAltName: () =>
      (stream.session?.socket as TLSSocket | undefined)?.getPeerCertificate?.()?.subjectaltname ?? '',
  };
  let handler: BidiHandler<unknown>;
  try {
    handler = m.start(out, ctx);
  } catch (err) {
    out.end(err instanceof GrpcStatusError ? err.code : Status.UNKNOWN, (err as Error).message);
    return;
  }
  let pending: Buffer = Buffer.alloc(0);
  // Set once a compressed message is being inflated: later messages are delivered after it.
  let chain: Promise<void> | undefined;
  const fail = (err: unknown): void => {
    out.end(
      err instanceof GrpcStatusError ? err.code : Status.INTERNAL,
      (err as Error)?.message ?? String(err),
    );
    stream.removeAllListeners('data');
  };
  const deliver = (message: Buffer): void => {
    if (out.closed) return;
    let req: unknown;
    try {
      req = m.decode(message);
    } catch (err) {
      const code = err instanceof GrpcStatusError ? err.code : Status.INTERNAL;
      fail(new GrpcStatusError(code, `error parsing request: ${(err as Error).message}`));
      return;
    }
    try {
      handler.message(req);
    } catch (err) {
      fail(err);
    }
  };
  stream.on('data', (chunk: Buffer) => {
    if (out.closed) return;
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 5) {
      const flag = pending[0]!;
      const len = pending.readUInt32BE(1);
      if (len > max) {
        fail(
          new GrpcStatusError(
            Status.RESOURCE_EXHAUSTED,
            `received message larger than max (${len} vs. ${max}: GRPC_MAX_RECV_MSG_SIZE)`,
          ),
        );
        return;
      }
      if (flag !== 0 && flag !== 1) {
        fail(new GrpcStatusError(Status.INTERNAL, `invalid message flag ${flag}`));
        return;
      }
      if (pending.length < 5 + len) return;
      const payload = pending.subarray(5, 5 + len);
      pending = pending.subarray(5 + len);
      if (flag === 1) {
        if (encoding !== 'gzip' && encoding !== 'deflate') {
          fail(new GrpcStatusError(Status.INTERNAL, 'compressed message without grpc-encoding'));
          return;
        }
        const enc = encoding;
        const copy = Buffer.from(payload);
        chain = (chain ?? Promise.resolve()).then(() =>
          inflateCapped(copy, enc, maxDecompressed).then(deliver, fail),
        );
      } else if (chain) {
        const copy = Buffer.from(payload);
        chain = chain.then(() => deliver(copy));
      } else {
        deliver(payload);
      }
    }
  });
  stream.on('end', () => {
    const done = (): void => {
      if (out.closed) return;
      if (pending.length > 0) fail(new GrpcStatusError(Status.INTERNAL, 'truncated message'));
      else handler.halfClose();
    };
    if (chain) void chain.then(done);
    else done();
  });
}

/**
 * The one message of a unary request body: its 5-byte prefix checked; the message bytes, still
 * compressed when the flag (body[0]) is 1.
 */
function unframe(body: Buffer, encoding: string | undefined, max: number): Buffer {
  if (body.length < 5) {
    throw new GrpcStatusError(
      Status.INTERNAL,
      body.length === 0 ? 'request has no message' : 'truncated message prefix',
    );
  }
  const flag = body[0];
  const len = body.readUInt32BE(1);
  if (len > max)
    throw new GrpcStatusError(
      Status.RESOURCE_EXHAUSTED,
      `received message larger than max (${len} vs. ${max}: GRPC_MAX_RECV_MSG_SIZE)`,
    );
  if (body.length < 5 + len) throw new GrpcStatusError(Status.INTERNAL, 'truncated message');
  if (body.length > 5 + len)
    throw new GrpcStatusError(Status.UNIMPLEMENTED, 'more than one request message in a unary call');
  if (flag !== 0 && flag !== 1) throw new GrpcStatusError(Status.INTERNAL, `invalid message flag ${flag}`);
  if (flag === 1 && encoding !== 'gzip' && encoding !== 'deflate')
    throw new GrpcStatusError(Status.INTERNAL, 'compressed message without grpc-encoding');
  return body.subarray(5);
}

/**
 * Inflates a gzip or deflate message in zlib's thread pool, counting the output as it comes: past
 * `cap` bytes the inflater is destroyed at once (RESOURCE_EXHAUSTED naming the bound), so a small
 * compressed bomb costs at most `cap` bytes and never a full inflate.
 */
export function inflateCapped(payload: Buffer, encoding: 'gzip' | 'deflate', cap: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const z: Gunzip | Inflate = encoding === 'gzip' ? createGunzip() : createInflate();
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    z.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > cap) {
        done = true;
        chunks.length = 0;
        z.destroy();
        reject(
          new GrpcStatusError(
            Status.RESOURCE_EXHAUSTED,
            `decompressed message larger than max (more than ${cap} bytes: GRPC_MAX_DECOMPRESSED_MSG_SIZE)`,
          ),
        );
        return;
      }
      chunks.push(chunk);
    });
    z.on('error', (err) => {
      if (done) return;
      done = true;
      reject(new GrpcStatusError(Status.INTERNAL, `cannot decompress message: ${err.message}`));
    });
    z.on('end', () => {
      if (done) return;
      done = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    z.end(payload);
  });
}
