// The direct counting connection: the fixed window's `INCRBY key hits` + `EXPIRE key seconds` pairs
// written as RESP on a connection of our own, replies read by resp-reader.ts.
//
// Why by hand: ioredis builds a Command object, a promise and an argument array per command and
// dispatches every reply through its queue, several times the CPU of the same bytes written and read
// here (docs/decisions/007-hot-path-shapes.md). A request with 8 descriptors sends 16 commands, so that
// was most of the decision's CPU. The commands and their order are the same as the ioredis
// path's, byte for byte what the reference sends.
//
// Scope, kept small on purpose: a `single` or `sentinel` master, or one master of a cluster (one
// connection per master, cluster-direct.ts), TCP or unix socket, TLS except for `sentinel`. ioredis
// still owns everything else: it finds the master (sentinel) and the slot map (cluster), health, PING,
// GET, loading a script the server lacks, redirections. This connection follows one ioredis connection
// (the client's, or on a cluster the master node's): it is used only while that one is connected, to
// the address it is connected to, and it reconnects whenever ioredis has (a failover, a restart). When
// it is not usable the deployment sends through ioredis as before, so an outage behaves exactly as
// without it.
import { createHash } from 'node:crypto';
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Redis } from 'ioredis';
import type { Logger } from '../../common/index.js';
import {
  CacheBusyError,
  CacheError,
  MAX_OP_HITS,
  type CounterOp,
  type LimitCheck,
  type LimitVerdict,
} from '../counting/index.js';
import type { RedisSettings, TlsFiles } from '../settings/index.js';
import { parseAuth, tlsOptions } from './client-options.js';
import { LIMIT_SCRIPT } from './limit-script.js';
import { incrbyErrorResult, isReadOnlyReply, isRedirectReply, replyError } from './reply-errors.js';
import { countOf, RespReplyReader, respArray, respAuth, respCommand3 } from './resp-reader.js';

/**
 * Nothing was counted and ioredis can do what this connection cannot: a master demoted to replica
 * refused the write (ioredis finds the new master), a cluster node redirected it (MOVED, ASK,
 * TRYAGAIN, CLUSTERDOWN: ioredis follows the redirection and refreshes its slot map), or the script is
 * not loaded on the server (ioredis sends it with EVAL). As a whole request's rejection: nothing of it
 * was sent. As one op's result: that op (and only it) was refused, and the deployment resends it,
 * alone, through ioredis.
 */
export class ResendThroughIoredis extends CacheError {}

const LIMIT_SCRIPT_SHA = createHash('sha1').update(LIMIT_SCRIPT).digest('hex');
const EVALSHA_HEAD = `$7\r\nEVALSHA\r\n$40\r\n${LIMIT_SCRIPT_SHA}\r\n`;

/** `EVALSHA sha numkeys keys... args...` for one check, written without an intermediate array. */
function evalshaCommand(c: LimitCheck): string {
  const keys = c.keys;
  const args = c.args;
  const nk = String(keys.length);
  let out = `*${3 + keys.length + args.length}\r\n${EVALSHA_HEAD}$${nk.length}\r\n${nk}\r\n`;
  for (let i = 0; i < keys.length; i++) out += `$${Buffer.byteLength(keys[i]!)}\r\n${keys[i]}\r\n`;
  for (let i = 0; i < args.length; i++) {
    const a = String(args[i]);
    out += `$${a.length}\r\n${a}\r\n`;
  }
  return out;
}

interface Waiting {
  /** The commands, for error messages. */
  what: string;
  /** Replies still expected (2 per op, 1 per script call, 1 for AUTH). */
  left: number;
  seen: number;
  /** Replies per result: 2 (INCRBY + EXPIRE: the INCRBY's count is kept) or 1 (every reply kept). */
  step: 1 | 2;
  /** Per result its value, or the Error of its own error reply (only that op fails). */
  results: unknown[] | undefined;
  /** Without results (AUTH, SCRIPT LOAD): the error reply, handed to reject. */
  error: string | undefined;
  at: number;
  resolve(results: unknown[]): void;
  reject(err: Error): void;
}

/** After a connection fails, ioredis carries the commands for this long before a new one is tried. */
const RETRY_AFTER_MS = 1000;

/** One socket and the requests waiting on it, answered in order. */
class Conn {
  readonly waiting: Waiting[] = [];
  head = 0;
  /** Commands written (or queued for this tick's write) and not answered yet. */
  outstanding = 0;
  private outbox = '';
  private flushQueued = false;
  private closedWith: Error | undefined;
  private retiring = false;
  /** SCRIPT LOAD sent on this connection (before its first script call). */
  scriptLoaded = false;
  private readonly reader: RespReplyReader;
  /** The tick's write, bound once (not a new closure per write). */
  private readonly flushBound = (): void => this.flush();

  constructor(
    readonly sock: Socket,
    /** The ioredis stream this connection follows; a new one means ioredis reconnected. */
    readonly follows: unknown,
    private readonly onClose: (conn: Conn, err: Error) => void,
    /** A READONLY reply: the server is a replica now. */
    private readonly onReadOnly: () => void,
  ) {
    this.reader = new RespReplyReader((v, isError) => this.reply(v, isError));
    sock.setNoDelay(true);
    sock.on('data', (chunk: Buffer) => {
      try {
        this.reader.feed(chunk);
      } catch (err) {
        this.close(new CacheError(`redis protocol error: ${(err as Error).message}`, err));
      }
    });
    sock.on('error', (err) => this.close(new CacheError(`redis connection error: ${err.message}`, err)));
    sock.on('close', () => this.close(new CacheError('redis connection closed')));
  }

  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  /** Queues a request's bytes for this tick's single write and the request for its replies. */
  send(bytes: string, w: Waiting): void {
    if (this.closedWith) {
      w.reject(new ResendThroughIoredis(this.closedWith.message));
      return;
    }
    this.waiting.push(w);
    this.outstanding += w.left;
    this.outbox += bytes;
    if (!this.flushQueued) {
      this.flushQueued = true;
      process.nextTick(this.flushBound);
    }
  }

  /** A command with one reply whose value nobody needs (AUTH, SCRIPT LOAD); an error reply goes to onError. */
  sendUnanswered(bytes: string, what: string, onError: (err: Error) => void = () => undefined): void {
    this.send(bytes, {
      what,
      left: 1,
      seen: 0,
      step: 1,
      results: undefined,
      error: undefined,
      at: performance.now(),
      resolve: () => undefined,
      reject: onError,
    });
  }

  /**
   * No new requests: ioredis moved on (reconnected). The ones waiting are still answered here, then the
   * socket is closed.
   */
  retire(): void {
    this.retiring = true;
    if (this.head >= this.waiting.length) this.close(new CacheError('redis direct connection retired'));
  }

  /** The oldest request still waiting (for the stale check), if any. */
  oldest(): Waiting | undefined {
    return this.waiting[this.head];
  }

  private flush(): void {
    this.flushQueued = false;
    const out = this.outbox;
    this.outbox = '';
    if (!this.closed && out) this.sock.write(out);
  }

  private reply(value: number | string | number[], isError: boolean): void {
    const w = this.waiting[this.head];
    if (!w) throw new Error('a reply nobody asked for');
    this.outstanding--;
    const i = w.seen++;
    if (isError) this.errorReply(w, i, String(value));
    else if (w.results) {
      if (w.step === 1) w.results[i] = value;
      // The INCRBY's reply: its count, or the op's CacheError when it is not one (countOf, resp-reader.ts).
      else if ((i & 1) === 0) w.results[i >> 1] = countOf(value);
    }
    if (--w.left > 0) return;
    this.waiting[this.head++] = undefined as unknown as Waiting;
    if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    if (w.results) w.resolve(w.results);
    else if (w.error === undefined) w.resolve([]);
    else w.reject(new CacheError(`redis ${w.what} failed: ${w.error}`));
    if (this.retiring && this.head >= this.waiting.length) {
      this.close(new CacheError('redis direct connection retired'));
    }
  }

  /**
   * An error reply settles its own op only. A refused write (READONLY: the server is a replica now), a
   * cluster's redirection or a missing script (NOSCRIPT) is marked for a resend through ioredis: it did
   * not run, while the ops before it in the same request did, and must not be sent again.
   */
  private errorReply(w: Waiting, i: number, message: string): void {
    const results = w.results;
    if (!results) {
      w.error ??= message;
      return;
    }
    const readOnly = isReadOnlyReply(message);
    if (readOnly && !this.retiring) {
      // Every later write here is refused too: take no new requests (ioredis carries them, and finds
      // the new master), answer the ones already written, then close.
      this.retiring = true;
      this.onReadOnly();
    }
    if (w.step === 2) {
      // The INCRBY's reply decides the op. An EXPIRE refused after its INCRBY ran keeps the count: a
      // resend would count the op twice.
      if ((i & 1) !== 0) return;
      results[i >> 1] =
        readOnly || isRedirectReply(message)
          ? new ResendThroughIoredis(`redis INCRBY refused: ${message}`)
          : incrbyErrorResult(message);
      return;
    }
    results[i] =
      readOnly || isRedirectReply(message) || message.startsWith('NOSCRIPT')
        ? new ResendThroughIoredis(`redis ${w.what} refused: ${message}`)
        : replyError(`redis ${w.what} failed: ${message}`, message);
  }

  get isRetiring(): boolean {
    return this.retiring;
  }

  close(err: Error): void {
    if (this.closedWith) return;
    this.closedWith = err;
    this.sock.destroy();
    const waiting = this.waiting.slice(this.head);
    this.waiting.length = 0;
    this.head = 0;
    this.outstanding = 0;
    for (const w of waiting) w.reject(err);
    this.onClose(this, err);
  }
}

export class DirectCounter {
  private conn: Conn | undefined;
  private retryAt = 0;
  private readonly auth: { username?: string; password?: string };
  private readonly staleMs: number;
  private readonly connectTimeoutMs: number;
  private readonly maxOutstanding: number;
  /** One error for every call refused by the bound: no stack captured per refusal. */
  private readonly busy: CacheBusyError;
  private closing = false;

  /** Whether a deployment with these settings can count directly (see the scope above). */
  static supports(s: RedisSettings): boolean {
    return s.directCounting && (s.type !== 'sentinel' || !s.tls);
  }

  constructor(
    /** The ioredis connection this one follows: the client's, or on a cluster its master node's. */
    readonly client: Redis,
    private readonly settings: RedisSettings,
    private readonly tlsFiles: TlsFiles,
    private readonly variablePrefix: string,
    private readonly logger?: Logger,
    /** Told of every READONLY reply (a demoted single Redis is reported by the deployment). */
    private readonly onReadOnly: () => void = () => undefined,
  ) {
    this.auth = parseAuth(settings.auth);
    // A request older than twice REDIS_TIMEOUT (its caller gave up long ago) means a hung server: drop
    // the connection, so waiting requests cannot pile up behind it (staleRequestMs, from settings).
    this.staleMs = settings.staleRequestMs;
    this.connectTimeoutMs = settings.connectTimeoutMs;
    this.maxOutstanding = settings.maxOutstandingCommands;
    this.busy = new CacheBusyError(
      `${variablePrefix}_MAX_OUTSTANDING_COMMANDS (${this.maxOutstanding}) commands wait on the direct counting connection: not sent`,
    );
  }

  /**
   * Whether `commands` more would pass the bound of commands waiting on the connection. A call larger
   * than the bound on its own is sent only when nothing waits.
   */
  private full(conn: Conn, commands: number): boolean {
    const waiting = conn.outstanding;
    return waiting > 0 && waiting + commands > this.maxOutstanding;
  }

  /** True when a request can be sent here now; false: send it through ioredis. */
  usable(): boolean {
    return !this.closing && this.client.status === 'ready' && performance.now() >= this.retryAt;
  }

  /**
   * INCRBY + EXPIRE per op, in op order; resolves with the counts after the increment, or per op the
   * error of its own error reply (ResendThroughIoredis: refused, not counted).
   */
  increment(ops: readonly CounterOp[]): Promise<(number | Error)[]> {
    const conn = this.connection();
    if (!conn) return Promise.reject(new ResendThroughIoredis('redis direct connection unavailable'));
    const now = performance.now();
    const oldest = conn.oldest();
    if (oldest && now - oldest.at > this.staleMs) {
      conn.close(new CacheError(`redis did not answer for ${Math.round(now - oldest.at)} ms`));
      return Promise.reject(new CacheError('redis did not answer: connection dropped'));
    }
    if (this.full(conn, ops.length * 2)) return Promise.reject(this.busy);
    let bytes = '';
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i];
      const hits = op.hits < MAX_OP_HITS ? op.hits : MAX_OP_HITS;
      bytes += respCommand3('INCRBY', op.key, hits) + respCommand3('EXPIRE', op.key, op.expireSeconds);
    }
    return new Promise<(number | Error)[]>((resolve, reject) => {
      conn.send(bytes, {
        what: 'INCRBY/EXPIRE',
        left: ops.length * 2,
        seen: 0,
        step: 2,
        results: new Array<number>(ops.length),
        error: undefined,
        at: now,
        resolve: resolve as (r: unknown[]) => void,
        reject,
      });
    });
  }

  /**
   * The limit script per check (EVALSHA; the server's script cache is shared by its connections, so a
   * NOSCRIPT answer is resent through ioredis, which loads it with EVAL). The checks of one turn arrive
   * together from the coalescing store's batcher; the connection writes once per tick. Per check its
   * verdict, or the error of its own error reply.
   */
  evaluate(checks: readonly LimitCheck[]): Promise<(LimitVerdict | Error)[]> {
    const conn = this.connection();
    if (!conn) return Promise.reject(new ResendThroughIoredis('redis direct connection unavailable'));
    if (this.full(conn, checks.length)) return Promise.reject(this.busy);
    if (!conn.scriptLoaded) {
      conn.scriptLoaded = true;
      // Loaded once per connection, before its first EVALSHA (the server's script cache is shared, so
      // the reply is not needed; a failed load shows as NOSCRIPT later, which ioredis then handles).
      conn.sendUnanswered(respArray(['SCRIPT', 'LOAD', LIMIT_SCRIPT]), 'SCRIPT LOAD');
    }
    let bytes = '';
    for (let i = 0; i < checks.length; i++) bytes += evalshaCommand(checks[i]!);
    return new Promise<(LimitVerdict | Error)[]>((resolve, reject) => {
      conn.send(bytes, {
        what: 'limit script',
        left: checks.length,
        seen: 0,
        step: 1,
        results: new Array<LimitVerdict>(checks.length),
        error: undefined,
        at: performance.now(),
        resolve: resolve as (r: unknown[]) => void,
        reject,
      });
    });
  }

  close(): void {
    this.closing = true;
    this.conn?.close(new CacheError('redis client closed'));
    this.conn = undefined;
  }

  /** The connection following ioredis' current one, opened (and authenticated) when needed. */
  private connection(): Conn | undefined {
    const follows = this.client.stream;
    const c = this.conn;
    if (c && !c.closed && !c.isRetiring && c.follows === follows) return c;
    if (c?.isRetiring && c.follows === follows) {
      // Refused writes (READONLY): ioredis carries the requests until it has reconnected.
      this.retryAt = performance.now() + RETRY_AFTER_MS;
      return undefined;
    }
    // ioredis reconnected (failover, restart): so does this connection, to the same place.
    c?.retire();
    const sock = this.open(follows as Socket | undefined);
    if (!sock) {
      this.retryAt = performance.now() + RETRY_AFTER_MS;
      return undefined;
    }
    const conn = new Conn(
      sock,
      follows,
      (closed, err) => {
        if (this.conn !== closed) return;
        this.conn = undefined;
        if (this.closing) return;
        // ioredis carries the commands for a while (and, after READONLY, finds the new master).
        this.retryAt = performance.now() + RETRY_AFTER_MS;
        this.logger?.debug({ err: err.message }, `${this.variablePrefix}: direct counting connection closed`);
      },
      this.onReadOnly,
    );
    this.conn = conn;
    if (this.auth.password !== undefined) {
      conn.sendUnanswered(respAuth(this.auth.username, this.auth.password), 'AUTH', (err) => conn.close(err));
    }
    return conn;
  }

  /** A socket to where ioredis is connected, or undefined when that cannot be told. */
  private open(stream: Socket | undefined): Socket | undefined {
    if (!stream) return undefined;
    const s = this.settings;
    let sock: Socket;
    if (s.socketType === 'unix' && s.type === 'single') {
      sock = netConnect({ path: s.url.trim() });
    } else {
      const host = stream.remoteAddress;
      const port = stream.remotePort;
      if (!host || !port) return undefined;
      if (s.tls) {
        // Not `sentinel` (supports()): verify the name ioredis dialed (REDIS_URL's, or the cluster
        // node's as the slot map names it), as ioredis does.
        const name = this.client.options.host;
        sock = tlsConnect({
          ...tlsOptions(this.tlsFiles),
          host,
          port,
          servername: name && !isIP(name) ? name : undefined,
        });
      } else sock = netConnect({ host, port });
    }
    sock.setTimeout(this.connectTimeoutMs, () => {
      sock.destroy(new Error(`connect timed out after ${this.connectTimeoutMs} ms`));
    });
    sock.once(s.tls ? 'secureConnect' : 'connect', () => sock.setTimeout(0));
    return sock;
  }
}
