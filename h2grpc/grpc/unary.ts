// Unary and server-streaming calls: the one request message collected and unframed (its length prefix
// checked as soon as its five bytes arrive), decoded, the handler run, and the answer framed and written
// with its trailers (or a trailers-only error). startCall routes an accepted stream to its kind.
//
// Hot path: one IncomingCall object per call holds the call's state and is the handler's CallContext; the
// stream's listeners are module-level functions that find it on the stream (no closures per call), and
// the respond options and header objects are constants.
import type { TLSSocket } from 'node:tls';
import { inflateCapped, frameMessage, unframe } from './framing.js';
import type {
  CallContext,
  CallHeaders,
  GrpcStream,
  MethodEntry,
  ServerStream,
  ServerStreamingMethod,
  UnaryMethod,
} from './method.js';
import {
  GrpcStatusError,
  OK_TRAILERS,
  RESPONSE_HEADERS,
  Status,
  trailersOnly,
  WAIT_FOR_TRAILERS,
} from './status.js';
import { releaseIfClientOpen, serverStream, startBidi } from './streaming.js';

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
  /** The length in the message's prefix, once its five bytes came (-1 before). */
  private declared = -1;
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
    if (this.first === undefined) this.first = chunk;
    else (this.chunks ??= [this.first]).push(chunk);
    if (this.declared < 0) {
      if (this.size < 5) return;
      // The message's length is known from its first five bytes: one larger than the bound is refused
      // now, not after the client has sent (and we have held) up to the bound.
      const head = this.chunks === undefined ? this.first : Buffer.concat(this.chunks);
      this.declared = head.readUInt32BE(1);
      if (this.declared > this.max)
        return this.fail(
          Status.RESOURCE_EXHAUSTED,
          `received message larger than max (${this.declared} vs. ${this.max}: GRPC_MAX_RECV_MSG_SIZE)`,
        );
    }
    if (this.size > this.declared + 5)
      this.fail(Status.UNIMPLEMENTED, 'more than one request message in a unary call');
  }

  /** Answers a request that cannot be served before it ends; the client's further bytes are not taken. */
  private fail(code: number, message: string): void {
    this.failed = true;
    this.first = this.chunks = undefined;
    trailersOnly(this.stream, code, message);
    releaseIfClientOpen(this.stream);
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
