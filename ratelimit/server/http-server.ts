// The HTTP listener of the reference: POST /json (proto3 JSON in and out) and /healthcheck.
import { isUtf8 } from 'node:buffer';
import type { Logger } from 'pino';
import { FastifyListener } from './listener.js';
import { CacheError } from '../limiter/index.js';
import { type RateLimitService, ServiceError } from '../service/index.js';
import type { HealthChecker } from './health.js';
import { requestFromJson, responseToJson } from './json.js';

export interface HttpServerOptions {
  service: RateLimitService;
  health: HealthChecker;
  logger: Logger;
  host: string;
  port: number;
  /** Largest accepted body in bytes. */
  bodyLimit?: number;
}

export class RateLimitHttpServer extends FastifyListener {
  constructor(private readonly opts: HttpServerOptions) {
    super({ name: 'HTTP', ...opts }, { bodyLimit: opts.bodyLimit ?? 1024 * 1024 });
    // Body parse errors (bad JSON, wrong content type) are the client's: 400 with the reason.
    this.app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
      const code = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      if (code === 500) opts.logger.error({ err }, 'http handler error');
      reply.code(code).type('text/plain').send(err.message);
    });

    // Like the reference, /json takes the body as JSON whatever the content type says
    // (curl -d sends application/x-www-form-urlencoded).
    this.app.removeContentTypeParser('text/plain');
    this.app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => {
      try {
        // Bytes that are not UTF-8 would be read as U+FFFD (two values, one counter): the caller's error.
        if (!isUtf8(body as Buffer)) throw new Error('request body is not valid UTF-8');
        done(null, JSON.parse((body as Buffer).toString('utf8')));
      } catch (err) {
        (err as Error & { statusCode?: number }).statusCode = 400;
        done(err as Error, undefined);
      }
    });

    this.app.post('/json', async (req, reply) => {
      let response;
      try {
        response = await opts.service.shouldRateLimit(requestFromJson(req.body));
      } catch (err) {
        if (err instanceof ServiceError)
          return reply.code(err.httpStatus).type('text/plain').send(err.message);
        if (err instanceof CacheError) return reply.code(500).type('text/plain').send(err.message);
        throw err;
      }
      return reply
        .code(response.overallCode === 'OVER_LIMIT' ? 429 : 200)
        .type('application/json')
        .send(JSON.stringify(responseToJson(response)));
    });

    this.app.get('/healthcheck', async (_req, reply) => {
      const failing = opts.health.failing();
      if (failing.length === 0) return reply.code(200).type('text/plain').send('OK');
      return reply
        .code(500)
        .type('text/plain')
        .send(`unhealthy: ${failing.join(', ')}`);
    });
  }
}
