// The lifecycle the HTTP and debug listeners share: a fastify app started on host:port, logged at
// warning level as the reference logs its listeners, and closed with the app.
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';

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
    this.listener.logger.warn(`listening for ${this.listener.name} on ${address}`);
    return address;
  }

  get port(): number {
    const a = this.app.server.address();
    return typeof a === 'object' && a ? a.port : 0;
  }

  async close(): Promise<void> {
    await this.app.close();
  }
}
