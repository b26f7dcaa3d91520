// The HTTP listener of the reference: POST /json (proto3 JSON in and out) and /healthcheck.
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
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

/** What is read and discarded of a body refused before its end (see boundRefusedBody). */
export const REFUSED_BODY_DRAIN_BYTES = 8 * 1024 * 1024;
export const REFUSED_BODY_DRAIN_MS = 10_000;

/**
 * A body refused before it was read to its end (413, or a parse error): a client still writing it reads
 * the answer only if the server keeps reading, since closing a socket with unread data resets it under
 * the client. Node's HTTP server reads and discards the rest of a kept-alive request once the response is
 * sent, without a bound; this bounds it: past REFUSED_BODY_DRAIN_BYTES more bytes or REFUSED_BODY_DRAIN_MS,
 * the connection is closed (the answer was sent first). A body drained to its end leaves the connection
 * usable for the next request.
 */
function boundRefusedBody(req: IncomingMessage): void {
  const socket = req.socket;
  let drained = 0;
  const stop = () => {
    clearTimeout(timer);
    req.removeListener('data', count);
  };
  // The answer is flushed before the socket closes (destroySoon ends the writing side first). A request
  // injected in-process (fastify's inject) has a socket-like object with no connection to close.
  const cut = () => {
    stop();
    if (!req.complete && typeof socket.destroySoon === 'function') socket.destroySoon();
  };
  const count = (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > REFUSED_BODY_DRAIN_BYTES) cut();
  };
  const timer = setTimeout(cut, REFUSED_BODY_DRAIN_MS);
  timer.unref();
  // Reading it here (rather than leaving it to the server, which discards a request's rest without
  // emitting it) is what lets it be counted.
  req.on('data', count);
  req.once('end', stop);
  socket.once('close', stop);
}

export class RateLimitHttpServer extends FastifyListener {
  private readonly bodyLimit: number;

  constructor(private readonly opts: HttpServerOptions) {
    const bodyLimit = opts.bodyLimit ?? DEFAULT_BODY_LIMIT;
    super({ name: 'HTTP', ...opts }, { bodyLimit });
    this.bodyLimit = bodyLimit;
  }

  /** GET (or HEAD) /healthcheck, the readiness probe, without fastify: 200 `OK`, or 500 and what fails. */
  protected override direct(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const url = req.url ?? '';
    if (url !== '/healthcheck' && !url.startsWith('/healthcheck?')) return false;
    const failing = this.opts.health.failing();
    const body = failing.length === 0 ? 'OK' : `unhealthy: ${failing.join(', ')}`;
    res.writeHead(failing.length === 0 ? 200 : 500, {
      'content-type': 'text/plain',
      'content-length': Buffer.byteLength(body),
    });
    res.end(req.method === 'HEAD' ? undefined : body);
    return true;
  }

  protected configure(app: FastifyInstance): void {
    const { opts, bodyLimit } = this;
    // Body parse errors (bad JSON, not UTF-8) are the client's: 400 with the reason; a body past the
    // bound is 413, named with its setting. Fastify stops reading such a body when it passes the bound.
    app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
      const code = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      if (code === 500) opts.logger.error({ err }, 'http handler error');
      const tooLarge = err.code === 'FST_ERR_CTP_BODY_TOO_LARGE';
      const message = tooLarge
        ? `request body larger than ${bodyLimit} bytes (HTTP_MAX_BODY_BYTES)`
        : err.message;
      if (!req.raw.complete) {
        // Fastify asks for `Connection: close` here, and Node then closes the socket right after the
        // answer with the body's rest unread, which resets the connection under a client still writing:
        // it never reads the answer. Kept open instead, the rest is read and discarded, within bounds.
        reply.removeHeader('connection');
        boundRefusedBody(req.raw);
      }
      reply.code(code).type('text/plain').send(message);
    });

    // Like the reference, /json takes the body as JSON whatever the content type says (curl -d sends
    // application/x-www-form-urlencoded), and through this one parser whatever it says: fastify's own
    // JSON parser (application/json) would read bytes that are not UTF-8 as U+FFFD.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => {
      try {
        // Bytes that are not UTF-8 would be read as U+FFFD (two values, one counter): the caller's error.
        if (!isUtf8(body as Buffer)) throw new Error('request body is not valid UTF-8');
        done(null, JSON.parse((body as Buffer).toString('utf8')));
      } catch (err) {
        (err as Error & { statusCode?: number }).statusCode = 400;
        done(err as Error, undefined);
      }
    });

    app.post('/json', async (req, reply) => {
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

    app.get('/healthcheck', async (_req, reply) => {
      const failing = opts.health.failing();
      if (failing.length === 0) return reply.code(200).type('text/plain').send('OK');
      return reply
        .code(500)
        .type('text/plain')
        .send(`unhealthy: ${failing.join(', ')}`);
    });
  }
}
