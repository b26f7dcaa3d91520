// The lifecycle the HTTP and debug listeners share: a node:http server started on host:port, logged with
// the address the socket is bound to, and a fastify app that serves its routes. Fastify loads with the
// first request it has to answer (a listener may answer some itself: the readiness probe's
// /healthcheck), so a pod whose HTTP and debug ports see no other request never loads it.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../../common/index.js';
import { formatBoundAddress } from '../../common/index.js';

/**
 * The line each listener logs once it is bound, in the reference's words and at its level (warning, so a
 * start at the default LOG_LEVEL=WARN says where it listens): `Listening for gRPC on '0.0.0.0:8081'`.
 */
export function listeningLine(name: 'gRPC' | 'HTTP' | 'debug' | string, address: string): string {
  return `Listening for ${name} on '${address}'`;
}

/** Keep-alive of an idle connection: fastify's own default, set on the server before fastify loads. */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export abstract class FastifyListener {
  readonly server: Server;
  private built?: Promise<FastifyInstance>;
  private handler?: Handler;

  protected constructor(
    private readonly listener: { name: string; host: string; port: number; logger: Logger },
    private readonly options: { bodyLimit?: number } = {},
  ) {
    this.server = createServer((req, res) => this.route(req, res));
    // What fastify sets on a server it creates (a server handed to it is left as it is).
    this.server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    this.server.requestTimeout = 0;
    this.server.setTimeout(0);
  }

  /** The routes, on the fastify app built with the first request that needs it. */
  protected abstract configure(app: FastifyInstance): void;

  /** Answers a request without fastify and says so; the rest go to fastify. */
  protected direct(_req: IncomingMessage, _res: ServerResponse): boolean {
    return false;
  }

  /** The fastify app serving this listener's routes, built (and fastify loaded) on the first call. */
  fastify(): Promise<FastifyInstance> {
    return (this.built ??= this.build());
  }

  private async build(): Promise<FastifyInstance> {
    const { default: Fastify } = await import('fastify');
    let handler: Handler | undefined;
    const app = Fastify({
      logger: false,
      ...this.options,
      serverFactory: (h) => {
        handler = h;
        return this.server;
      },
    });
    this.configure(app);
    await app.ready();
    this.handler = handler;
    return app;
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    if (this.direct(req, res)) return;
    if (this.handler) return this.handler(req, res);
    this.fastify().then(
      () => this.handler!(req, res),
      (err: Error) => {
        this.listener.logger.error({ err }, `${this.listener.name} listener: cannot serve the request`);
        res.statusCode = 500;
        res.end();
      },
    );
  }

  async start(): Promise<string> {
    const server = this.server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.listener.host, port: this.listener.port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = formatBoundAddress(server.address());
    this.listener.logger.warn(listeningLine(this.listener.name, address));
    return `http://${address}`;
  }

  get port(): number {
    const a = this.server.address();
    return typeof a === 'object' && a ? a.port : 0;
  }

  /**
   * Stops accepting connections and lets the requests in progress finish for up to `drainMs`; keep-alive
   * connections are closed as soon as they have no request in progress, and whatever is still open at
   * the deadline (a client trickling its body or its headers) is cut.
   */
  async close(drainMs = 10_000): Promise<void> {
    const server = this.server;
    // Node closes the idle ones once, when the server closes; a connection that finishes its request
    // later would stay open until its keep-alive timeout, so look again while draining.
    const idle = setInterval(() => server.closeIdleConnections(), 100);
    const deadline = setTimeout(() => server.closeAllConnections(), drainMs);
    try {
      // Fastify (when loaded) answers 503 to requests arriving while it closes.
      const app = this.built?.catch(() => undefined);
      await Promise.all([
        app?.then((a) => a?.close()),
        new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve())),
      ]);
    } finally {
      clearInterval(idle);
      clearTimeout(deadline);
    }
  }
}
