// The debug listener: / lists the paths, /rlconfig prints the loaded config, /stats the statistics.
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { RateLimitService } from '../service/index.js';
import type { StatsStore } from '../stats/index.js';

export interface DebugServerOptions {
  service: RateLimitService;
  stats: StatsStore;
  logger: Logger;
  host: string;
  port: number;
}

export class DebugServer {
  readonly app: FastifyInstance;
  private readonly paths = new Map<string, string>();

  constructor(private readonly opts: DebugServerOptions) {
    this.app = Fastify({ logger: false });
    this.addPath('/rlconfig', 'print out the currently loaded configuration for debugging', async () => {
      return opts.service.getConfig()?.dump() ?? '';
    });
    this.addPath('/stats', 'print out stats', async () => {
      const snap = opts.stats.snapshot();
      return Object.entries(snap)
        .map(([k, v]) => `${k}: ${v}`)
        .join('\n');
    });
    this.app.get('/', async (_req, reply) => {
      const lines = [...this.paths].map(([p, help]) => `${p}: ${help}`);
      return reply.type('text/plain').send(lines.join('\n') + '\n');
    });
  }

  /** Registers a text endpoint listed on `/`. */
  addPath(path: string, help: string, handler: () => Promise<string>): void {
    this.paths.set(path, help);
    this.app.get(path, async (_req, reply) => reply.type('text/plain').send(await handler()));
  }

  async start(): Promise<string> {
    const address = await this.app.listen({ host: this.opts.host, port: this.opts.port });
    this.opts.logger.warn(`listening for debug on ${address}`);
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
