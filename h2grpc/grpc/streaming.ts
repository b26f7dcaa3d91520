// Streaming calls: the sending side of a server-streaming or bidirectional call (messages written,
// the end with its status, the stream released once the answer is complete), and a bidirectional
// call's client messages unframed as they arrive and handed to its handler in order.
import type { TLSSocket } from 'node:tls';
import { frameMessage, inflateCapped } from './framing.js';
import type {
  BidiHandler,
  BidiStreamingMethod,
  CallContext,
  CallHeaders,
  GrpcStream,
  ServerStream,
} from './method.js';
import {
  GrpcStatusError,
  OK_TRAILERS,
  percentEncode,
  RESPONSE_HEADERS,
  Status,
  trailersOnly,
  WAIT_FOR_TRAILERS,
} from './status.js';

/** RST_STREAM's NO_ERROR (RFC 9113 7). */
const NO_ERROR = 0;

function ignoreError(): void {
  // a reset by the client; nothing to answer
}

/** How long a release waits for the response's last frame to leave before resetting anyway (ms). */
const RELEASE_WAIT_MS = 10_000;

/**
 * A streaming call whose response is complete while the client has not half-closed: once the frame that
 * ends the response has been sent (nghttp2 puts a reset ahead of queued frames), RST_STREAM with NO_ERROR
 * (HTTP/2 lets a server stop a request it has answered; grpc-go does the same), so the stream is freed
 * now, not whenever the client ends its side.
 */
export function releaseIfClientOpen(stream: GrpcStream, waitedMs = 0): void {
  if (stream.destroyed || stream.closed || stream.readableEnded) return;
  if (stream.state.localClose === 1 || waitedMs >= RELEASE_WAIT_MS) {
    stream.close(NO_ERROR);
    return;
  }
  setTimeout(releaseIfClientOpen, 10, stream, waitedMs + 10).unref();
}

/**
 * The sending side of a streaming call. Past `maxBuffered` bytes written but not yet taken by the
 * client (a peer that stopped reading), the call ends with RESOURCE_EXHAUSTED instead of buffering on.
 */
export function serverStream(
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
export function startBidi(
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
  // Chunks of a message not yet complete, joined once it is (never once per chunk).
  let parts: Buffer[] = [];
  let partsLen = 0;
  let need = 5;
  stream.on('data', (chunk: Buffer) => {
    if (out.closed) return;
    if (pending.length === 0 && parts.length === 0) pending = chunk;
    else {
      parts.push(chunk);
      partsLen += chunk.length;
      if (pending.length + partsLen < need) return;
      pending = Buffer.concat(pending.length === 0 ? parts : [pending, ...parts]);
      parts = [];
      partsLen = 0;
    }
    need = 5;
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
      if (pending.length < 5 + len) {
        need = 5 + len;
        return;
      }
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
      if (pending.length + partsLen > 0) fail(new GrpcStatusError(Status.INTERNAL, 'truncated message'));
      else handler.halfClose();
    };
    if (chain) void chain.then(done);
    else done();
  });
}
