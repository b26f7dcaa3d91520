// Turns the reference's REDIS_* settings into ioredis options.
import { readFileSync } from 'node:fs';
import type { RedisOptions } from 'ioredis';
import type { RedisSettings, TlsFiles } from '../settings/index.js';
import { SettingsError } from '../settings/index.js';

export interface Address {
  host?: string;
  port?: number;
  path?: string;
}

/** Splits REDIS_AUTH: `password` or `username:password`. */
export function parseAuth(auth: string): { username?: string; password?: string } {
  if (!auth) return {};
  const i = auth.indexOf(':');
  if (i < 0) return { password: auth };
  return { username: auth.slice(0, i), password: auth.slice(i + 1) };
}

export function parseHostPort(text: string, variable: string): { host: string; port: number } {
  const t = text.trim();
  const i = t.lastIndexOf(':');
  const host = i > 0 ? t.slice(0, i).replace(/^\[(.*)\]$/, '$1') : '';
  const port = i > 0 ? Number(t.slice(i + 1)) : NaN;
  if (!host || !Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new SettingsError(variable, `invalid address '${text}' (expected host:port)`);
  }
  return { host, port };
}

export function tlsOptions(files: TlsFiles): NonNullable<RedisOptions['tls']> {
  const tls: NonNullable<RedisOptions['tls']> = {};
  if (files.caCert) tls.ca = readFileSync(files.caCert);
  if (files.clientCert) tls.cert = readFileSync(files.clientCert);
  if (files.clientKey) tls.key = readFileSync(files.clientKey);
  if (files.skipHostnameVerification) tls.checkServerIdentity = () => undefined;
  return tls;
}

/** Options shared by every ioredis connection we make for one deployment. */
export function baseOptions(s: RedisSettings, tlsFiles: TlsFiles, variablePrefix: string): RedisOptions {
  const opts: RedisOptions = {
    ...parseAuth(s.auth),
    lazyConnect: true,
    // Fail a command fast while disconnected instead of queueing it for long: the decision is answered
    // as an error (the caller's failure_mode_deny decides) and the process keeps running.
    maxRetriesPerRequest: 1,
    commandTimeout: s.timeoutMs > 0 ? s.timeoutMs : undefined,
    connectTimeout: s.timeoutMs > 0 ? s.timeoutMs : 10_000,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
    enableAutoPipelining: s.pipelineWindowMs > 0,
  };
  if (s.tls) opts.tls = tlsOptions(tlsFiles);
  if (s.type === 'single') {
    if (s.socketType === 'unix') opts.path = s.url;
    else Object.assign(opts, parseHostPort(s.url, `${variablePrefix}_URL`));
  }
  return opts;
}
