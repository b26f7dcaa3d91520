// A small gRPC server for unary, server-streaming and bidirectional methods, on the HTTP/2 layer of our own
// (h2/; GRPC_HTTP2_SERVER=node: on node:http2): the ratelimit hot path does not need grpc-js'
// generality, and its per-call machinery cost more CPU than the whole decision (docs/performance.md). What it implements of the gRPC-over-HTTP/2 protocol:
// - POST only (405 otherwise), content-type application/grpc[+proto|;...] (415 otherwise);
// - length-prefixed messages, identity/gzip/deflate message encoding (grpc-encoding), a bounded size
//   (RESOURCE_EXHAUSTED), compressed messages inflated off the event loop with a running cap on their
//   inflated size (RESOURCE_EXHAUSTED as soon as it passes), exactly one request message for unary and server-streaming calls;
// - status in trailers (grpc-status, percent-encoded grpc-message), trailers-only responses for errors;
// - unknown method: UNIMPLEMENTED; a stream the client cancelled is never written to;
// - TLS and mutual TLS (certificate files re-read every 10 s), unix sockets, max connection age with
//   +/-10% jitter and a grace period (GOAWAY, then close), and graceful shutdown with a deadline.
// It does not do: client deadlines (grpc-timeout is not enforced: Envoy cancels on its own timeout and the
// answer is dropped), keepalive pings from the server, compression of responses, or client streaming (bidirectional calls take messages one by one).
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import { type Logger, TlsFileWatcher } from '../common/index.js';
import { startCall } from './grpc/unary.js';
import type {
  BidiStreamingMethod,
  GrpcStream,
  MethodEntry,
  ServerStream,
  ServerStreamingMethod,
  UnaryMethod,
} from './grpc/method.js';
import { refuseHttp, Status, trailersOnly } from './grpc/status.js';
import { H2Budget, type H2Limits, withDefaults } from './h2/limits.js';
import { H2Session } from './h2/session.js';

export interface H2GrpcServerOptions {
  logger: Logger;
  maxReceiveMessageLength: number;
  /** Bytes a compressed message may inflate to (default: maxReceiveMessageLength). */
  maxDecompressedMessageLength?: number;
  /** 0 or absent: connections live forever. */
  maxConnectionAgeMs?: number;
  maxConnectionAgeGraceMs?: number;
  tls?: { certFile: string; keyFile: string; clientCaFile?: string };
  /** How often TLS files are re-read (ms). */
  tlsReloadMs?: number;
  /** The HTTP/2 bounds, per connection and for the whole server (h2/limits.ts; defaults for those left out). */
  limits?: Partial<H2Limits>;
  /** The HTTP/2 implementation: ours (h2/, the default) or node:http2. */
  http2?: 'builtin' | 'node';
}

/** What the server needs of a connection, from node:http2 or from ours. */
interface Session {
  readonly closed: boolean;
  readonly destroyed: boolean;
  close(): void;
  destroy(): void;
  on(event: 'error', fn: (err: Error) => void): unknown;
  once(event: 'close', fn: () => void): unknown;
}

const ACCEPT_ENCODING = 'identity,gzip,deflate';

export class H2GrpcServer {
  private readonly methods = new Map<string, MethodEntry>();
  private readonly sessions = new Set<Session>();
  private readonly openStreams = new Set<ServerStream<unknown>>();
  private server: net.Server | tls.Server | undefined;
  private readonly limits: Readonly<H2Limits>;
  private idleSweep: NodeJS.Timeout | undefined;
  private tlsFiles: TlsFileWatcher | undefined;
  private closing = false;

  constructor(private readonly opts: H2GrpcServerOptions) {
    this.limits = withDefaults(opts.limits ?? {});
  }

  addUnary<Req, Res>(path: string, m: UnaryMethod<Req, Res>): void {
    this.methods.set(path, { kind: 'unary', m: m as UnaryMethod<unknown, unknown> });
  }

  addServerStreaming<Req, Res>(path: string, m: ServerStreamingMethod<Req, Res>): void {
    this.methods.set(path, { kind: 'stream', m: m as ServerStreamingMethod<unknown, unknown> });
  }

  addBidiStreaming<Req, Res>(path: string, m: BidiStreamingMethod<Req, Res>): void {
    this.methods.set(path, { kind: 'bidi', m: m as BidiStreamingMethod<unknown, unknown> });
  }

  /** Listens on host:port or a unix socket path; resolves with the bound port (0 for a socket). */
  async listen(target: { host: string; port: number } | { path: string }): Promise<number> {
    const tlsOpts = this.opts.tls;
    const tlsFiles = tlsOpts ? this.watchTls(tlsOpts) : undefined;
    const server = this.opts.http2 === 'node' ? this.nodeServer(tlsFiles) : this.builtinServer(tlsFiles);
    this.server = server;
    if (this.limits.maxConnections > 0) server.maxConnections = this.limits.maxConnections;
    tlsFiles?.start();
    this.startIdleSweep();
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

  /**
   * Our HTTP/2 layer on a net or TLS server. Both bounds of the node:http2 server below hold here too,
   * with the same settings, and a header list bound (SETTINGS_MAX_HEADER_LIST_SIZE, 431 past it).
   */
  private builtinServer(tlsFiles: TlsFileWatcher | undefined): net.Server | tls.Server {
    const limits = this.limits;
    const budget = new H2Budget(limits.maxTotalSessionMemory);
    const start = (socket: net.Socket): void => {
      // Nagle's algorithm with the peer's delayed ACKs holds small answers back up to 40 ms at low rates.
      socket.setNoDelay(true);
      const session = new H2Session(socket, limits, budget);
      session.on('stream', (stream: GrpcStream, headers: http2.IncomingHttpHeaders) =>
        this.onStream(stream, headers),
      );
      this.onSession(session);
    };
    if (!tlsFiles) return net.createServer(start);
    const tlsOpts = this.opts.tls!;
    const server = tls.createServer({
      ...tlsFiles.current,
      ALPNProtocols: ['h2'],
      requestCert: !!tlsOpts.clientCaFile,
      rejectUnauthorized: !!tlsOpts.clientCaFile,
    });
    server.on('secureConnection', (socket: tls.TLSSocket) => {
      if (socket.alpnProtocol !== 'h2')
        socket.destroy(); // gRPC is HTTP/2 only
      else start(socket);
    });
    server.on('tlsClientError', (err) => this.opts.logger.debug({ err }, 'gRPC TLS handshake failed'));
    return server;
  }

  private nodeServer(tlsFiles: TlsFileWatcher | undefined): http2.Http2Server | http2.Http2SecureServer {
    // Both bounds hold per connection whatever the peer does: a client may open at most
    // maxConcurrentStreams streams at once (more are refused with REFUSED_STREAM), and node:http2
    // refuses new streams (ENHANCE_YOUR_CALM) past maxSessionMemory MB of buffered data. Envoy opens
    // few connections with many streams each; the defaults leave it ample room.
    const settings: http2.Settings = {
      maxConcurrentStreams: this.limits.maxConcurrentStreams,
      maxHeaderListSize: this.limits.maxHeaderListSize,
    };
    const common = { settings, maxSessionMemory: Math.ceil(this.limits.maxSessionMemory / 1048576) };
    const tlsOpts = this.opts.tls;
    const server = tlsFiles
      ? http2.createSecureServer({
          ...common,
          ...tlsFiles.current,
          requestCert: !!tlsOpts!.clientCaFile,
          rejectUnauthorized: !!tlsOpts!.clientCaFile,
        })
      : http2.createServer(common);
    // Nagle's algorithm with the peer's delayed ACKs holds small answers back up to 40 ms at low rates.
    server.on('connection', (socket: net.Socket) => socket.setNoDelay?.(true));
    server.on('session', (s) => this.onSession(s));
    server.on('stream', (stream, headers) => this.onStream(stream, headers));
    server.on('sessionError', (err) => this.opts.logger.debug({ err }, 'gRPC session error'));
    return server;
  }

  /** The certificate files, re-read every tlsReloadMs; a new good set goes to new connections. */
  private watchTls(tls: NonNullable<H2GrpcServerOptions['tls']>): TlsFileWatcher {
    if (!tls.certFile || !tls.keyFile) throw new Error('gRPC TLS needs a certificate file and a key file');
    this.tlsFiles = new TlsFileWatcher(
      { certFile: tls.certFile, keyFile: tls.keyFile, caFile: tls.clientCaFile },
      {
        intervalMs: this.opts.tlsReloadMs,
        onChange: (pem) => {
          (this.server as tls.Server).setSecureContext(pem);
          this.opts.logger.info({}, 'gRPC TLS certificate files changed: new connections use them');
        },
        onError: (err) =>
          this.opts.logger.error({ err }, 'gRPC TLS files unreadable or invalid; keeping the previous ones'),
      },
    );
    return this.tlsFiles;
  }

  /**
   * Closes (GOAWAY, NO_ERROR) connections of our HTTP/2 layer that had no open stream for
   * maxConnectionIdleMs: one timer for the server, none per connection.
   */
  private startIdleSweep(): void {
    const idle = this.limits.maxConnectionIdleMs;
    if (idle <= 0 || this.opts.http2 === 'node') return;
    this.idleSweep = setInterval(
      () => {
        const now = performance.now();
        for (const s of this.sessions) {
          if (s instanceof H2Session && s.idleFor(now) > idle) s.close();
        }
      },
      Math.max(10, Math.min(idle / 2, 10_000)),
    );
    this.idleSweep.unref();
  }

  private onSession(session: Session): void {
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

  private onStream(stream: GrpcStream, headers: http2.IncomingHttpHeaders): void {
    if (headers[':method'] !== 'POST') {
      stream.on('error', ignoreStreamError);
      refuseHttp(stream, 405);
      return;
    }
    const ct = headers['content-type'];
    if (typeof ct !== 'string' || !ct.startsWith('application/grpc')) {
      stream.on('error', ignoreStreamError);
      refuseHttp(stream, 415);
      return;
    }
    const entry = this.methods.get(headers[':path'] as string);
    if (!entry) {
      stream.on('error', ignoreStreamError);
      trailersOnly(stream, Status.UNIMPLEMENTED, `unknown method ${headers[':path']}`);
      return;
    }
    const encoding = headers['grpc-encoding'];
    if (encoding !== undefined && encoding !== 'identity' && encoding !== 'gzip' && encoding !== 'deflate') {
      stream.on('error', ignoreStreamError);
      trailersOnly(stream, Status.UNIMPLEMENTED, `message encoding ${encoding} is not supported`, {
        'grpc-accept-encoding': ACCEPT_ENCODING,
      });
      return;
    }
    startCall(
      stream,
      headers,
      entry,
      encoding,
      this.opts.maxReceiveMessageLength,
      this.opts.maxDecompressedMessageLength ?? this.opts.maxReceiveMessageLength,
      this.openStreams,
    );
  }

  /**
   * Stops accepting connections, sends GOAWAY on every connection so that running calls finish, ends
   * server streams (UNAVAILABLE), and after `deadlineMs` closes whatever is left.
   */
  async close(deadlineMs = 10_000): Promise<void> {
    this.closing = true;
    clearInterval(this.idleSweep);
    this.tlsFiles?.close();
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

function ignoreStreamError(): void {
  // a reset by the client; nothing to answer
}
