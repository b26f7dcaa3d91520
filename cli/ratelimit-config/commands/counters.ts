// ratelimit-config counters get|reset: the counters of the descriptors' current windows, read from (or
// deleted in) the Redis the service's settings name; every step bounded by --timeout.
import { parseArgs } from 'node:util';
import type { RedisSettings, Settings } from '../../../ratelimit/settings/index.js';
import { CounterClient, formatReadings } from '../counters.js';
import { CliError, REQUEST, settingsFrom, UsageError, type Io, type RequestValues } from './common.js';
import { explainWithBuckets } from './explain.js';

export const options = REQUEST;

function explainRequest(values: RequestValues, io: Io, settings: Settings) {
  if (!values.descriptor?.length) throw new UsageError('at least one --descriptor k=v[,k=v] is required');
  return explainWithBuckets(values, io, settings)?.list;
}

export async function run(args: string[], io: Io): Promise<number> {
  // counters get|reset, then the config's files and folders (or --config), as validate takes them.
  const { values: flags, positionals } = parseArgs({ args, options, allowPositionals: true });
  const [action, ...paths] = positionals;
  if (action !== 'get' && action !== 'reset') throw new UsageError('counters get|reset');
  const values = { ...flags, config: [...(flags.config ?? []), ...paths] };
  const format = values.format ?? 'text';
  if (!['text', 'json'].includes(format)) throw new UsageError(`unknown --format ${format}`);
  if (!values.config?.length)
    throw new UsageError(
      'a config is required: its paths or --config (the rule gives the key, limit and window)',
    );
  const settings = settingsFrom(values, io);
  const list = explainRequest(values, io, settings);
  if (!list) return 2;
  const reset = action === 'reset';
  if (reset && values.yes !== true) {
    io.err('counters reset deletes the counters of the current window; add --yes to do it\n');
    return 2;
  }
  const timeoutMs = values.timeout === undefined ? 10_000 : Number(values.timeout) * 1000;
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs))
    throw new UsageError('--timeout must be a positive number of seconds');
  const deadline = Date.now() + timeoutMs;
  const within = `within ${timeoutMs / 1000} s`;
  // Every attempt of the store is bounded by --timeout too (REDIS_TIMEOUT may be longer).
  const bound = (r: RedisSettings): RedisSettings => {
    const t = r.timeoutMs > 0 ? Math.min(r.timeoutMs, timeoutMs) : timeoutMs;
    return { ...r, timeoutMs: t, staleRequestMs: t * 2 };
  };
  const client = new CounterClient({
    ...settings,
    redis: {
      ...settings.redis,
      main: bound(settings.redis.main),
      perSecond: settings.redis.perSecond && bound(settings.redis.perSecond),
    },
  });
  const where = (err: unknown) =>
    errorText(err).includes('REDIS_PERSECOND_URL=') && settings.redis.perSecond
      ? settings.redis.perSecond.url
      : settings.redis.main.url;
  try {
    try {
      await withDeadline(client.start(timeoutMs), timeoutMs);
    } catch (err) {
      // The socket type it tried, when it is the one a host:port address does not fit.
      const main = settings.redis.main;
      const socket =
        main.socketType === 'unix'
          ? ` (REDIS_SOCKET_TYPE=unix, the service's default: ${main.url} was opened as a unix socket path${/:\d+$/.test(main.url) ? '; for host:port set REDIS_SOCKET_TYPE=tcp' : ''})`
          : '';
      throw new CliError(
        `ratelimit-config counters: cannot reach Redis at ${where(err)} ${within}${redisCause(err)}${socket}`,
      );
    }
    let readings;
    try {
      // A Redis that accepts the connection and then stops answering must not hang the command.
      readings = await withDeadline(client.read(list, reset), Math.max(1, deadline - Date.now()));
    } catch (err) {
      throw new CliError(
        err instanceof DeadlineError
          ? `ratelimit-config counters: no answer from Redis at ${where(err)} ${within}`
          : `ratelimit-config counters: reading from Redis at ${where(err)} failed${redisCause(err) || `: ${firstLine(err)}`}`,
      );
    }
    if (format === 'json')
      io.out(JSON.stringify({ domain: values.domain, counters: readings }, null, 2) + '\n');
    else io.out(formatReadings(list, readings));
    if (reset && !readings.some((r) => r.deleted === true)) {
      // A reset that changed nothing (wrong descriptor, prefix or deployment, or already empty)
      // must not look like one that worked.
      io.err(
        readings.length === 0
          ? 'counters reset: nothing deleted: none of these descriptors is counted\n'
          : 'counters reset: nothing deleted: no counter of these descriptors exists right now\n',
      );
      return 1;
    }
    return 0;
  } finally {
    // Closing never holds the exit either.
    await withDeadline(client.close(), 1000).catch(() => undefined);
  }
}

class DeadlineError extends Error {}

function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, expired]).finally(() => clearTimeout(timer));
}

/** An error's message and the messages of its causes. */
function errorText(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, i = 0; e !== undefined && e !== null && i < 5; i++) {
    parts.push(e instanceof Error ? e.message : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join(' ');
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 200);
}

/** Why Redis could not be reached, in words, when the error says (empty when it does not). */
function redisCause(err: unknown): string {
  const text = errorText(err);
  const causes: [RegExp, string][] = [
    [/ECONNREFUSED/, 'connection refused'],
    [/ENOTFOUND|EAI_AGAIN/, 'host not found'],
    [/WRONGPASS|NOAUTH|invalid password|invalid username-password/i, 'authentication failed'],
    [/ENOENT/, 'no such socket'],
    [/EHOSTUNREACH|ENETUNREACH/, 'host unreachable'],
    [/certificate|SSL|TLS/, 'TLS handshake failed'],
  ];
  for (const [re, why] of causes) if (re.test(text)) return ` (${why})`;
  return '';
}
