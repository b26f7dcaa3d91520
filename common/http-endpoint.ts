// Listen addresses and the small plain-HTTP endpoint every binary serves beside its main protocol:
// /metrics (a prom-client registry), and for the operator /healthz and /readyz. One parser, so every
// `host:port` flag and setting accepts the same forms and rejects the same mistakes, and one server,
// so every endpoint answers unknown paths, other methods and a failing handler the same way. node:http
// rather than fastify: three fixed GET paths need no router, and the binaries that serve only these
// (the control plane, the operator) need not load a framework for them.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The address a socket is bound to, as `host:port` (`[v6]:port`, `unix:<path>`): what a listening log
 * line names, so `0.0.0.0:8080` is said when every interface listens, not a loopback address.
 */
export function formatBoundAddress(addr: AddressInfo | string | null): string {
  if (addr === null) return 'unbound';
  if (typeof addr === 'string') return `unix:${addr}`;
  return addr.family === 'IPv6' || addr.address.includes(':')
    ? `[${addr.address}]:${addr.port}`
    : `${addr.address}:${addr.port}`;
}

export interface ListenAddress {
  /** Undefined for `:port`: every interface (IPv6 and IPv4 where the host has both). */
  readonly host: string | undefined;
  readonly port: number;
}

/**
 * Parses `host:port`, `:port` (every interface) or `[v6]:port`; port 0 (or none, as in Go) picks a free one. `what` names
 * the flag or setting in the error (`PROMETHEUS_ADDR`, `--metrics-listen`).
 */
export function parseListenAddress(text: string, what = 'listen address'): ListenAddress {
  const i = text.lastIndexOf(':');
  if (i < 0) throw new Error(`${what} '${text}' has no port`);
  const portText = text.slice(i + 1);
  const port = Number(portText);
  if (!/^[0-9]{0,5}$/.test(portText) || port > 65535) throw new Error(`${what} '${text}': bad port`);
  let host = text.slice(0, i);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  else if (host.includes(':')) throw new Error(`${what} '${text}': an IPv6 address goes in brackets`);
  return { host: host === '' ? undefined : host, port };
}

/** What an endpoint answers. */
export interface EndpointAnswer {
  /** Default 200. */
  readonly status?: number;
  /** Default text/plain. */
  readonly contentType?: string;
  readonly body: string;
}

/** Answers one path; a throw or a rejection is a 500 with the error's message. */
export type EndpointHandler = () => EndpointAnswer | Promise<EndpointAnswer>;

/** What metricsEndpoint needs of a prom-client Registry. */
export interface MetricsRegistry {
  metrics(): Promise<string>;
  readonly contentType: string;
}

/** A /metrics handler: the registry's text exposition, after `beforeScrape` (which may not fail the scrape). */
export function metricsEndpoint(
  registry: MetricsRegistry,
  beforeScrape?: () => void,
  onBeforeScrapeError?: (err: Error) => void,
): EndpointHandler {
  return async () => {
    if (beforeScrape) {
      try {
        beforeScrape();
      } catch (err) {
        onBeforeScrapeError?.(err instanceof Error ? err : new Error(String(err)));
      }
    }
    return { contentType: registry.contentType, body: await registry.metrics() };
  };
}

/** A health handler: 200 `ok` while `check` returns true (always, without one), else 503 with `notReady`. */
export function healthEndpoint(check?: () => boolean, notReady = 'not ready'): EndpointHandler {
  return () => (!check || check() ? { body: 'ok\n' } : { status: 503, body: `${notReady}\n` });
}

/**
 * A plain-HTTP server for a few fixed paths (query strings ignored). GET and HEAD only (405 otherwise);
 * an unknown path is 404. start() resolves with the bound port; close() stops it.
 */
export class EndpointServer {
  private readonly server: Server;
  private readonly address: ListenAddress;
  private readonly routes: ReadonlyMap<string, EndpointHandler>;

  /** Throws on a bad address, before anything listens. */
  constructor(listen: string, routes: Readonly<Record<string, EndpointHandler>>, what?: string) {
    this.address = parseListenAddress(listen, what);
    this.routes = new Map(Object.entries(routes));
    this.server = createServer((req, res) => this.answer(req, res));
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const handler = this.routes.get(q < 0 ? url : url.slice(0, q));
    if (!handler) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { 'content-type': 'text/plain', allow: 'GET, HEAD' }).end('method not allowed\n');
      return;
    }
    const fail = (err: unknown) => {
      if (res.headersSent) return void res.destroy();
      res
        .writeHead(500, { 'content-type': 'text/plain' })
        .end(err instanceof Error ? err.message : String(err));
    };
    const send = (a: EndpointAnswer) =>
      res.writeHead(a.status ?? 200, { 'content-type': a.contentType ?? 'text/plain' }).end(a.body);
    try {
      const answer = handler();
      if (answer instanceof Promise) answer.then(send, fail);
      else send(answer);
    } catch (err) {
      fail(err);
    }
  }

  /** Listens; resolves with the bound port (the chosen one for port 0). */
  async start(): Promise<number> {
    const { host, port } = this.address;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return this.port;
  }

  /** The bound port; 0 before start(). */
  get port(): number {
    return (this.server.address() as AddressInfo | null)?.port ?? 0;
  }

  /** The bound address as `host:port` (see formatBoundAddress). */
  get boundAddress(): string {
    return formatBoundAddress(this.server.address());
  }

  /** Stops listening and closes every connection (an answer is one short write; a scrape is retried). */
  close(): Promise<void> {
    if (!this.server.listening) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
