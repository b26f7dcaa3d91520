// A small memcached text-protocol client: just what counters need (incr, add with exptime, multi-get,
// version), pipelined over a few persistent connections per node, optional TLS.
//
// Node selection is gomemcache's (the reference's client): CRC-32 (IEEE) of the key modulo the number of
// servers, in the order given. So our pods and reference pods given the same node list pick the same
// node for a key, and every instance must be given an identical list (as the reference requires).
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';

/** memcached's own limit on key length, in bytes. */
export const MAX_KEY_BYTES = 250;
/** exptime above 30 days is read by memcached as an absolute unix time. */
export const MAX_RELATIVE_EXPTIME = 30 * 24 * 3600;

export class MemcacheError extends Error {
  constructor(
    message: string,
    readonly node?: string,
  ) {
    super(message);
    this.name = 'MemcacheError';
  }
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32/IEEE, as Go's crc32.ChecksumIEEE. */
export function crc32(s: string): number {
  const b = Buffer.from(s);
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = CRC_TABLE[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** The index of the server for a key: gomemcache's ServerList.PickServer. */
export function pickServer(key: string, count: number): number {
  return count <= 1 ? 0 : crc32(key) % count;
}

const NON_ASCII_SPACE_OR_CONTROL = /^[\s\p{Cc}\p{Zs}\p{Zl}\p{Zp}]$/u;

/**
 * memcached refuses keys longer than 250 bytes and keys with whitespace or control characters
 * (they would break the text protocol). Returns the reason, or undefined for a legal key.
 */
export function illegalKeyReason(key: string): string | undefined {
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f || (c >= 0x80 && NON_ASCII_SPACE_OR_CONTROL.test(key[i]))) {
      return `contains whitespace or a control character (U+${c.toString(16).padStart(4, '0').toUpperCase()}) at position ${i}`;
    }
  }
  const bytes = Buffer.byteLength(key);
  if (bytes > MAX_KEY_BYTES) return `is ${bytes} bytes long, over memcached's ${MAX_KEY_BYTES}-byte limit`;
  return undefined;
}

type ReplyKind = 'incr' | 'add' | 'get' | 'version';

/** One request waiting for its reply on a connection; replies arrive in request order. */
interface Waiter {
  kind: ReplyKind;
  resolve(v: unknown): void;
  reject(err: Error): void;
  /** get: values collected so far. */
  values?: Map<string, string>;
  /** performance.now() by which the reply must be complete (set by send). */
  deadline?: number;
}

export interface NodeOptions {
  /** host:port */
  address: string;
  /** Persistent connections kept to the node (MEMCACHE_MAX_IDLE_CONNS, at least 1). */
  connections: number;
  timeoutMs: number;
  tls?: ConnectionOptions;
}

/** A pipelined text-protocol connection. */
class Connection {
  private readonly socket: Socket;
  private readonly waiters: Waiter[] = [];
  private head = 0;
  private buf = '';
  private deadlineTimer?: NodeJS.Timeout;
  closed = false;

  constructor(
    private readonly node: MemcacheNode,
    host: string,
    port: number,
    private readonly timeoutMs: number,
    tls: ConnectionOptions | undefined,
  ) {
    this.socket = tls
      ? tlsConnect({ host, port, servername: isIp(host) ? undefined : host, ...tls })
      : netConnect({ host, port });
    this.socket.setNoDelay(true);
    // Read as latin1 so one char is one byte: data block lengths are in bytes.
    this.socket.setEncoding('latin1');
    this.socket.setTimeout(timeoutMs);
    this.socket.on('data', (chunk: string) => this.onData(chunk));
    this.socket.on('timeout', () => {
      // Only pending requests make silence a failure; an idle connection just stays open.
      if (this.pending > 0) this.fail(new MemcacheError(`timed out after ${timeoutMs} ms`, node.address));
    });
    this.socket.on('error', (err) => this.fail(new MemcacheError(err.message, node.address)));
    this.socket.on('close', () => this.fail(new MemcacheError('connection closed', node.address)));
  }

  get pending(): number {
    return this.waiters.length - this.head;
  }

  send(line: string, waiter: Waiter): void {
    if (this.closed) {
      waiter.reject(new MemcacheError('connection closed', this.node.address));
      return;
    }
    waiter.deadline = performance.now() + this.timeoutMs;
    this.waiters.push(waiter);
    this.deadlineTimer ??= setTimeout(() => this.checkDeadline(), this.timeoutMs).unref();
    this.socket.write(line, 'utf8');
  }

  /**
   * The per-request deadline. The socket's idle timeout alone misses a peer that trickles a byte now
   * and then (never idle, never done); one timer per connection, re-armed for the oldest request.
   */
  private checkDeadline(): void {
    this.deadlineTimer = undefined;
    const oldest = this.waiters[this.head];
    if (!oldest || this.closed) return;
    const left = oldest.deadline! - performance.now();
    if (left <= 0) {
      this.fail(
        new MemcacheError(`no reply within ${this.timeoutMs} ms (MEMCACHE_TIMEOUT)`, this.node.address),
      );
      return;
    }
    this.deadlineTimer = setTimeout(() => this.checkDeadline(), left + 1).unref();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.deadlineTimer);
    this.socket.destroy();
  }

  private fail(err: Error): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    if (!this.closed) {
      this.closed = true;
      this.socket.destroy();
    }
    this.node.dropConnection(this);
    while (this.head < this.waiters.length) this.waiters[this.head++].reject(err);
    this.waiters.length = 0;
    this.head = 0;
  }

  private onData(chunk: string): void {
    this.buf = this.buf.length ? this.buf + chunk : chunk;
    let off = 0;
    for (;;) {
      const w = this.waiters[this.head];
      if (!w) break;
      const nl = this.buf.indexOf('\r\n', off);
      if (nl < 0) break;
      const line = this.buf.slice(off, nl);
      if (w.kind === 'get' && line.startsWith('VALUE ')) {
        // VALUE <key> <flags> <bytes>\r\n<data>\r\n
        const parts = line.split(' ');
        const len = Number(parts[3]);
        const start = nl + 2;
        if (this.buf.length < start + len + 2) break; // wait for the data block
        w.values!.set(Buffer.from(parts[1], 'latin1').toString('utf8'), this.buf.slice(start, start + len));
        off = start + len + 2;
        continue;
      }
      off = nl + 2;
      this.head++;
      this.complete(w, line);
    }
    this.buf = off >= this.buf.length ? '' : this.buf.slice(off);
    if (this.head === this.waiters.length) {
      this.waiters.length = 0;
      this.head = 0;
    }
  }

  private complete(w: Waiter, line: string): void {
    if (line.startsWith('SERVER_ERROR') || line.startsWith('CLIENT_ERROR') || line === 'ERROR') {
      w.reject(new MemcacheError(line, this.node.address));
      return;
    }
    switch (w.kind) {
      case 'incr':
        if (line === 'NOT_FOUND') w.resolve(null);
        else if (/^\d+$/.test(line)) w.resolve(Number(line));
        else w.reject(new MemcacheError(`unexpected reply to incr: ${line}`, this.node.address));
        return;
      case 'add':
        if (line === 'STORED') w.resolve(true);
        else if (line === 'NOT_STORED') w.resolve(false);
        else w.reject(new MemcacheError(`unexpected reply to add: ${line}`, this.node.address));
        return;
      case 'get':
        if (line === 'END') w.resolve(w.values);
        else w.reject(new MemcacheError(`unexpected reply to get: ${line}`, this.node.address));
        return;
      case 'version':
        if (line.startsWith('VERSION ')) w.resolve(line.slice(8));
        else w.reject(new MemcacheError(`unexpected reply to version: ${line}`, this.node.address));
        return;
    }
  }
}

function isIp(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}

/** One memcached server: a few persistent connections, requests spread round-robin. */
export class MemcacheNode {
  readonly address: string;
  private readonly host: string;
  private readonly port: number;
  private readonly conns: (Connection | undefined)[];
  private next = 0;

  constructor(private readonly opts: NodeOptions) {
    this.address = opts.address;
    const i = opts.address.lastIndexOf(':');
    // A trailing dot (Go's fully-qualified SRV target) is dropped for the lookup.
    this.host = opts.address
      .slice(0, i)
      .replace(/^\[(.*)\]$/, '$1')
      .replace(/\.$/, '');
    this.port = Number(opts.address.slice(i + 1));
    if (!this.host || !Number.isInteger(this.port) || this.port <= 0 || this.port > 65535) {
      throw new MemcacheError(`invalid memcache address '${opts.address}' (expected host:port)`);
    }
    this.conns = new Array(Math.max(1, opts.connections));
  }

  private connection(): Connection {
    const i = this.next;
    this.next = (i + 1) % this.conns.length;
    let c = this.conns[i];
    if (!c || c.closed) {
      c = new Connection(this, this.host, this.port, this.opts.timeoutMs, this.opts.tls);
      this.conns[i] = c;
    }
    return c;
  }

  dropConnection(c: Connection): void {
    const i = this.conns.indexOf(c);
    if (i >= 0) this.conns[i] = undefined;
  }

  private request<T>(kind: ReplyKind, line: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const w: Waiter = { kind, resolve: resolve as (v: unknown) => void, reject };
      if (kind === 'get') w.values = new Map();
      this.connection().send(line, w);
    });
  }

  /** incr: the new value, or null when the key does not exist. */
  incr(key: string, delta: number): Promise<number | null> {
    return this.request('incr', `incr ${key} ${delta}\r\n`);
  }

  /** decr: the new value (memcached stops at 0), or null when the key does not exist. */
  decr(key: string, delta: number): Promise<number | null> {
    return this.request('incr', `decr ${key} ${delta}\r\n`);
  }

  /** add: true when stored, false when the key already exists. */
  add(key: string, value: string, exptime: number): Promise<boolean> {
    return this.request('add', `add ${key} 0 ${exptime} ${Buffer.byteLength(value)}\r\n${value}\r\n`);
  }

  getMulti(keys: readonly string[]): Promise<Map<string, string>> {
    return this.request('get', `get ${keys.join(' ')}\r\n`);
  }

  version(): Promise<string> {
    return this.request('version', 'version\r\n');
  }

  close(): void {
    for (const c of this.conns) c?.close();
    this.conns.fill(undefined);
  }
}
