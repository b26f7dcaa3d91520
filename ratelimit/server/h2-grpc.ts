// A small gRPC server on node:http2 for unary and server-streaming methods: the ratelimit hot path does
// not need grpc-js' generality, and its per-call machinery cost more CPU than the whole decision (see
// docs/benchmark.md). What it implements of the gRPC-over-HTTP/2 protocol:
// - POST only (405 otherwise), content-type application/grpc[+proto|;...] (415 otherwise);
// - length-prefixed messages, identity/gzip/deflate message encoding (grpc-encoding), a bounded size
//   (RESOURCE_EXHAUSTED), exactly one request message for unary and server-streaming calls;
// - status in trailers (grpc-status, percent-encoded grpc-message), trailers-only responses for errors;
// - unknown method: UNIMPLEMENTED; a stream the client cancelled is never written to;
// - TLS and mutual TLS (certificate files re-read every 10 s), unix sockets, max connection age with
//   +/-10% jitter and a grace period (GOAWAY, then close), and graceful shutdown with a deadline.
// It does not do: client deadlines (grpc-timeout is not enforced: Envoy cancels on its own timeout and the
// answer is dropped), keepalive pings from the server, compression of responses, or client streaming.
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { gunzipSync, inflateSync } from 'node:zlib';
import type { Logger } from 'pino';

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
export type CallHeaders = http2.IncomingHttpHeaders;

export interface CallContext {
  headers: CallHeaders;
  /** The TLS session's client certificate SANs (`DNS:a, IP Address:...`), '' without mutual TLS. */
  peerSubjectAltName(): string;
}

export interface UnaryMethod<Req, Res> {
  decode(buf: Buffer): Req;
  encode(msg: Res): Uint8Array;
  handle(req: Req, call: CallContext): Promise<Res>;
}

/** A server-streaming call: `send` writes a message, `end` closes with a status; `onClose` fires once. */
export interface ServerStream<Res> {
  send(msg: Res): void;
  end(code?: number, message?: string): void;
  readonly closed: boolean;
  onClose(fn: () => void): void;
}

export interface ServerStreamingMethod<Req, Res> {
  decode(buf: Buffer): Req;
  encode(msg: Res): Uint8Array;
  handle(req: Req, stream: ServerStream<Res>, call: CallContext): void;
}

export interface H2GrpcServerOptions {
  logger: Logger;
  maxReceiveMessageLength: number;
  /** 0 or absent: connections live forever. */
  maxConnectionAgeMs?: number;
  maxConnectionAgeGraceMs?: number;
  tls?: { certFile: string; keyFile: string; clientCaFile?: string };
  /** How often TLS files are re-read (ms). */
  tlsReloadMs?: number;
  /** Streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS; default 1000). */
  maxConcurrentStreams?: number;
  /** MB one connection may buffer before node:http2 refuses new streams (default 64). */
  maxSessionMemoryMb?: number;
}

type Entry =
  | { kind: 'unary'; m: UnaryMethod<unknown, unknown> }
  | { kind: 'stream'; m: ServerStreamingMethod<unknown, unknown> };

const RESPONSE_HEADERS = { ':status': 200, 'content-type': 'application/grpc' };
const OK_TRAILERS = { 'grpc-status': '0' };
const ACCEPT_ENCODING = 'identity,gzip,deflate';

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

export class H2GrpcServer {
  private readonly methods = new Map<string, Entry>();
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private readonly openStreams = new Set<ServerStream<unknown>>();
  private server: http2.Http2Server | http2.Http2SecureServer | undefined;
  private tlsTimer: NodeJS.Timeout | undefined;
  private closing = false;

  constructor(private readonly opts: H2GrpcServerOptions) {}

  addUnary<Req, Res>(path: string, m: UnaryMethod<Req, Res>): void {
    this.methods.set(path, { kind: 'unary', m: m as UnaryMethod<unknown, unknown> });
  }

  addServerStreaming<Req, Res>(path: string, m: ServerStreamingMethod<Req, Res>): void {
    this.methods.set(path, { kind: 'stream', m: m as ServerStreamingMethod<unknown, unknown> });
  }

  /** Listens on host:port or a unix socket path; resolves with the bound port (0 for a socket). */
  async listen(target: { host: string; port: number } | { path: string }): Promise<number> {
    // Both bounds hold per connection whatever the peer does: a client may open at most
    // maxConcurrentStreams streams at once (more are refused with REFUSED_STREAM), and node:http2
    // refuses new streams (ENHANCE_YOUR_CALM) past maxSessionMemory MB of buffered data. Envoy opens
    // few connections with many streams each; the defaults leave it ample room.
    const settings: http2.Settings = { maxConcurrentStreams: this.opts.maxConcurrentStreams ?? 1000 };
    const common = { settings, maxSessionMemory: this.opts.maxSessionMemoryMb ?? 64 };
    const tls = this.opts.tls;
    const server = tls
      ? http2.createSecureServer({
          ...common,
          ...this.readTls(),
          requestCert: !!tls.clientCaFile,
          rejectUnauthorized: !!tls.clientCaFile,
        })
      : http2.createServer(common);
    this.server = server;
    // Nagle's algorithm with the peer's delayed ACKs holds small answers back up to 40 ms at low rates.
    server.on('connection', (socket: import('node:net').Socket) => socket.setNoDelay?.(true));
    server.on('session', (s) => this.onSession(s));
    server.on('stream', (stream, headers) => this.onStream(stream, headers));
    server.on('sessionError', (err) => this.opts.logger.debug({ err }, 'gRPC session error'));
    if (tls) {
      let last = JSON.stringify(this.readTls());
      this.tlsTimer = setInterval(() => {
        try {
          const next = this.readTls();
          const key = JSON.stringify(next);
          if (key === last) return;
          last = key;
          (server as http2.Http2SecureServer).setSecureContext(next);
          this.opts.logger.warn('gRPC TLS certificate files changed: new connections use them');
        } catch (err) {
          this.opts.logger.error({ err }, 'gRPC TLS files unreadable; keeping the previous ones');
        }
      }, this.opts.tlsReloadMs ?? 10_000);
      this.tlsTimer.unref();
    }
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      const done = () => {
        server.removeListener('error', reject);
        resolve();
      };
      if ('path' in target) server.listen(target.path, done);
      else server.listen(target.port, target.host, done);
    });
    const addr = server.address();
    return typeof addr === 'object' && addr ? addr.port : 0;
  }

  private readTls(): { cert: Buffer; key: Buffer; ca?: Buffer } {
    const t = this.opts.tls!;
    return {
      cert: readFileSync(t.certFile),
      key: readFileSync(t.keyFile),
      ...(t.clientCaFile ? { ca: readFileSync(t.clientCaFile) } : {}),
    };
  }

  private onSession(session: http2.ServerHttp2Session): void {
    this.sessions.add(session);
    session.on('error', (err) => this.opts.logger.debug({ err }, 'gRPC connection error'));
    let ageTimer: NodeJS.Timeout | undefined;
    let graceTimer: NodeJS.Timeout | undefined;
    session.once('close', () => {
      this.sessions.delete(session);
      clearTimeout(ageTimer);
      clearTimeout(graceTimer);
    });
    if (this.closing) {
      session.close();
      return;
    }
    const age = this.opts.maxConnectionAgeMs ?? 0;
    if (age > 0) {
      // +/-10% jitter, as grpc-go does, so that connections opened together do not all cycle together.
      const jittered = age * (0.9 + Math.random() * 0.2);
      ageTimer = setTimeout(() => {
        if (session.closed || session.destroyed) return;
        session.close(); // GOAWAY; running streams finish
        graceTimer = setTimeout(() => session.destroy(), this.opts.maxConnectionAgeGraceMs ?? 0);
        graceTimer.unref();
      }, jittered);
      ageTimer.unref();
    }
  }

  private onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => {}); // a reset by the client; nothing to answer
    if (headers[':method'] !== 'POST') {
      stream.respond({ ':status': 405 }, { endStream: true });
      return;
    }
    const ct = headers['content-type'];
    if (typeof ct !== 'string' || !ct.startsWith('application/grpc')) {
      stream.respond({ ':status': 415 }, { endStream: true });
      return;
    }
    const entry = this.methods.get(headers[':path'] as string);
    if (!entry) {
      trailersOnly(stream, Status.UNIMPLEMENTED, `unknown method ${headers[':path']}`);
      return;
    }
    const encoding = headers['grpc-encoding'];
    if (encoding !== undefined && encoding !== 'identity' && encoding !== 'gzip' && encoding !== 'deflate') {
      trailersOnly(stream, Status.UNIMPLEMENTED, `message encoding ${encoding} is not supported`, {
        'grpc-accept-encoding': ACCEPT_ENCODING,
      });
      return;
    }
    const max = this.opts.maxReceiveMessageLength;
    let first: Buffer | undefined;
    let chunks: Buffer[] | undefined;
    let size = 0;
    let failed = false;
    stream.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > max + 5) {
        failed = true;
        trailersOnly(
          stream,
          Status.RESOURCE_EXHAUSTED,
          `received message larger than max (${size - 5} vs. ${max})`,
        );
        return;
      }
      if (first === undefined) first = chunk;
      else (chunks ??= [first]).push(chunk);
    });
    stream.on('end', () => {
      if (failed) return;
      const body = chunks ? Buffer.concat(chunks) : (first ?? Buffer.alloc(0));
      let message: Buffer;
      try {
        message = unframe(body, encoding as string | undefined, max);
      } catch (err) {
        trailersOnly(stream, (err as GrpcStatusError).code ?? Status.INTERNAL, (err as Error).message);
        return;
      }
      let req: unknown;
      try {
        req = entry.m.decode(message);
      } catch (err) {
        // A caller's bad value in a well-formed message says so (grpcCode); malformed bytes are INTERNAL.
        const code = (err as { grpcCode?: number }).grpcCode ?? Status.INTERNAL;
        trailersOnly(stream, code, `error parsing request: ${(err as Error).message}`);
        return;
      }
      const ctx = new StreamContext(stream, headers);
      if (entry.kind === 'unary') this.runUnary(entry.m, stream, req, ctx);
      else this.runStreaming(entry.m, stream, req, ctx);
    });
  }

  private runUnary(
    m: UnaryMethod<unknown, unknown>,
    stream: http2.ServerHttp2Stream,
    req: unknown,
    ctx: CallContext,
  ): void {
    let pending: Promise<unknown>;
    try {
      pending = m.handle(req, ctx);
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (res) => {
        if (stream.destroyed || stream.closed) return;
        let frame: Buffer;
        try {
          frame = frameMessage(m.encode(res));
        } catch (err) {
          trailersOnly(stream, Status.INTERNAL, `error serializing response: ${(err as Error).message}`);
          return;
        }
        stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
        stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
        stream.end(frame);
      },
      (err: unknown) => {
        const code = err instanceof GrpcStatusError ? err.code : Status.UNKNOWN;
        trailersOnly(stream, code, (err as Error)?.message ?? String(err));
      },
    );
  }

  private runStreaming(
    m: ServerStreamingMethod<unknown, unknown>,
    stream: http2.ServerHttp2Stream,
    req: unknown,
    ctx: CallContext,
  ): void {
    const closeFns: (() => void)[] = [];
    let headersSent = false;
    let ended = false;
    const out: ServerStream<unknown> = {
      get closed() {
        return ended || stream.destroyed || stream.closed;
      },
      send: (msg) => {
        if (out.closed) return;
        if (!headersSent) {
          headersSent = true;
          stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
        }
        stream.write(frameMessage(m.encode(msg)));
      },
      end: (code = Status.OK, msg = '') => {
        if (out.closed) return;
        ended = true;
        if (!headersSent) {
          trailersOnly(stream, code, msg);
          return;
        }
        stream.once('wantTrailers', () =>
          stream.sendTrailers(
            code === Status.OK
              ? OK_TRAILERS
              : { 'grpc-status': String(code), 'grpc-message': percentEncode(msg) },
          ),
        );
        stream.end();
      },
      onClose: (fn) => closeFns.push(fn),
    };
    this.openStreams.add(out);
    stream.once('close', () => {
      this.openStreams.delete(out);
      for (const fn of closeFns) fn();
    });
    try {
      m.handle(req, out, ctx);
    } catch (err) {
      out.end(err instanceof GrpcStatusError ? err.code : Status.UNKNOWN, (err as Error).message);
    }
  }

  /**
   * Stops accepting connections, sends GOAWAY on every connection so that running calls finish, ends
   * server streams (UNAVAILABLE), and after `deadlineMs` closes whatever is left.
   */
  async close(deadlineMs = 10_000): Promise<void> {
    this.closing = true;
    clearInterval(this.tlsTimer);
    const server = this.server;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of [...this.openStreams]) s.end(Status.UNAVAILABLE, 'server shutting down');
    for (const session of this.sessions) session.close();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        for (const session of this.sessions) session.destroy();
        resolve();
      }, deadlineMs);
    });
    await Promise.race([closed, deadline]);
    clearTimeout(timer);
  }
}

class StreamContext implements CallContext {
  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    readonly headers: CallHeaders,
  ) {}

  peerSubjectAltName(): string {
    const socket = this.stream.session?.socket as TLSSocket | undefined;
    return socket?.getPeerCertificate?.()?.subjectaltname ?? '';
  }
}

function trailersOnly(
  stream: http2.ServerHttp2Stream,
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
    { endStream: true },
  );
}

/** The one message of a unary request body: its 5-byte prefix checked and, when flagged, decompressed. */
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
      `received message larger than max (${len} vs. ${max})`,
    );
  if (body.length < 5 + len) throw new GrpcStatusError(Status.INTERNAL, 'truncated message');
  if (body.length > 5 + len)
    throw new GrpcStatusError(Status.UNIMPLEMENTED, 'more than one request message in a unary call');
  const payload = body.subarray(5);
  if (flag === 0) return payload;
  if (flag !== 1) throw new GrpcStatusError(Status.INTERNAL, `invalid message flag ${flag}`);
  if (encoding === 'gzip' || encoding === 'deflate') {
    try {
      const out =
        encoding === 'gzip'
          ? gunzipSync(payload, { maxOutputLength: max })
          : inflateSync(payload, { maxOutputLength: max });
      return out;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
        throw new GrpcStatusError(Status.RESOURCE_EXHAUSTED, `decompressed message larger than max (${max})`);
      }
      throw new GrpcStatusError(Status.INTERNAL, `cannot decompress message: ${(err as Error).message}`);
    }
  }
  throw new GrpcStatusError(Status.INTERNAL, 'compressed message without grpc-encoding');
}
