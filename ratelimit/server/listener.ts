// The lifecycle the HTTP and debug listeners share: a fastify app started on host:port, logged with the
// address the socket is bound to, and closed with the app.
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from '../../common/index.js';
import { formatBoundAddress } from '../../common/index.js';

/**
 * The line each listener logs once it is bound, in the reference's words and at its level (warning, so a
 * start at the default LOG_LEVEL=WARN says where it listens): `Listening for gRPC on '0.0.0.0:8081'`.
 */
export function listeningLine(name: 'gRPC' | 'HTTP' | 'debug' | string, address: string): string {
  return `Listening for ${name} on '${address}'`;
}

export abstract class FastifyListener {
  readonly app: FastifyInstance;

  protected constructor(
    private readonly listener: { name: string; host: string; port: number; logger: Logger },
    options: { bodyLimit?: number } = {},
  ) {
    this.app = Fastify({ logger: false, ...options });
  }

  async start(): Promise<string> {
    const address = await this.app.listen({ host: this.listener.host, port: this.listener.port });
    this.listener.logger.warn(
      listeningLine(this.listener.name, formatBoundAddress(this.app.server.address())),
    );
    return address;
  }

  get port(): number {
    const a = this.app.server.address();
    return typeof a === 'object' && a ? a.port : 0;
  }

  /**
   * Stops accepting connections and lets the requests in progress finish for up to `drainMs`; keep-alive
   * connections are closed as soon as they have no request in progress, and whatever is still open at
   * the deadline (a client trickling its body or its headers) is cut.
   */
  async close(drainMs = 10_000): Promise<void> {
    const server = this.app.server;
    // Node closes the idle ones once, when the server closes; a connection that finishes its request
    // later would stay open until its keep-alive timeout, so look again while draining.
    const idle = setInterval(() => server.closeIdleConnections(), 100);
    const deadline = setTimeout(() => server.closeAllConnections(), drainMs);
    try {
      await this.app.close();
    } finally {
      clearInterval(idle);
      clearTimeout(deadline);
    }
  }
}
