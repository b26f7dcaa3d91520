// The HTTP listener of the reference: POST /json (proto3 JSON in and out) and /healthcheck.
import { isUtf8 } from 'node:buffer';
import type { Logger } from '../../common/index.js';
import type { RequestBounds } from '../../proto/index.js';
import { FastifyListener } from './listener.js';
import { type RateLimitService, ServiceError, type ServiceErrorKind } from '../service/index.js';
import type { HealthChecker } from './health.js';
import { requestFromJson, responseToJson } from './json.js';

/** The HTTP status of each way a call can end (service/errors.ts): the one table on the HTTP side. */
const HTTP_STATUS: Readonly<Record<ServiceErrorKind, number>> = {
  invalid: 400,
  'no-config': 500,
  unavailable: 500,
};

export interface HttpServerOptions {
  service: RateLimitService;
  health: HealthChecker;
  logger: Logger;
  host: string;
  port: number;
  /** HTTP_MAX_BODY_BYTES: largest accepted body in bytes (413 past it). */
  bodyLimit?: number;
  /** REQUEST_MAX_*: what one request may ask for (400 past a bound). */
  requestBounds?: RequestBounds;
}

const DEFAULT_BODY_LIMIT = 64 * 1024;

export class RateLimitHttpServer extends FastifyListener {
  constructor(private readonly opts: HttpServerOptions) {
    const bodyLimit = opts.bodyLimit ?? DEFAULT_BODY_LIMIT;
    super({ name: 'HTTP', ...opts }, { bodyLimit });
    // Body parse errors (bad JSON, not UTF-8) are the client's: 400 with the reason; a body past the
    // bound is 413, named with its setting. Fastify stops reading such a body when it passes the bound.
    this.app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
      const code = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      if (code === 500) opts.logger.error({ err }, 'http handler error');
      const message =
        err.code === 'FST_ERR_CTP_BODY_TOO_LARGE'
          ? `request body larger than ${bodyLimit} bytes (HTTP_MAX_BODY_BYTES)`
          : err.message;
      reply.code(code).type('text/plain').send(message);
    });

    // Like the reference, /json takes the body as JSON whatever the content type says (curl -d sends
    // application/x-www-form-urlencoded), and through this one parser whatever it says: fastify's own
    // JSON parser (application/json) would read bytes that are not UTF-8 as U+FFFD.
    this.app.removeAllContentTypeParsers();
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
        response = await opts.service.shouldRateLimit(requestFromJson(req.body, opts.requestBounds));
      } catch (err) {
        if (err instanceof ServiceError)
          return reply.code(HTTP_STATUS[err.kind]).type('text/plain').send(err.message);
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
