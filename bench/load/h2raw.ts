// A minimal HTTP/2 client for gRPC unary calls over cleartext TCP, for the load generator only: the
// request header block is encoded once (HPACK literals, no dynamic table) and every call is one write
// of HEADERS + DATA; response header blocks are never decoded — a call succeeded when it got a DATA
// frame before the END_STREAM of its trailers (a gRPC error is a trailers-only response). The first
// bytes of the DATA frame give RateLimitResponse.overall_code. Connection-level flow control is honoured
// (the server's window is tracked, ours is opened wide). node:http2 costs several times more CPU per call.
import { connect, type Socket } from 'node:net';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const T_DATA = 0,
  T_HEADERS = 1,
  T_RST = 3,
  T_SETTINGS = 4,
  T_PING = 6,
  T_GOAWAY = 7,
  T_WINDOW = 8;
const F_END_STREAM = 1,
  F_ACK = 1,
  F_END_HEADERS = 4,
  F_PADDED = 8;
const OUR_WINDOW = 1 << 30;

/** Outcome of one call: ok (response message received), the overall code byte (0 when absent). */
export type CallDone = (ok: boolean, overallCode: number) => void;

function frameHeader(
  buf: Buffer,
  off: number,
  len: number,
  type: number,
  flags: number,
  stream: number,
): void {
  buf[off] = (len >>> 16) & 0xff;
  buf[off + 1] = (len >>> 8) & 0xff;
  buf[off + 2] = len & 0xff;
  buf[off + 3] = type;
  buf[off + 4] = flags;
  buf.writeUInt32BE(stream & 0x7fffffff, off + 5);
}

function hpackString(s: string): Buffer {
  const b = Buffer.from(s, 'latin1');
  if (b.length > 126) throw new Error('header too long for this encoder');
  return Buffer.concat([Buffer.from([b.length]), b]);
}

/**
 * The request header block: :method POST, :scheme http, :path, :authority, content-type, te, then
 * `extra` more headers (x-bench-<i>: a 32-byte value; Envoy's calls carry about a dozen headers).
 */
function headerBlock(authority: string, path: string, extra = 0): Buffer {
  const more: Buffer[] = [];
  for (let i = 0; i < extra; i++) {
    more.push(Buffer.from([0x00]), hpackString(`x-bench-${i}`), hpackString(`${i}`.padStart(32, 'v')));
  }
  return Buffer.concat([
    Buffer.from([0x83, 0x86]), // indexed :method POST, :scheme http
    Buffer.from([0x04]), // literal without indexing, name :path (4)
    hpackString(path),
    Buffer.from([0x01]), // name :authority (1)
    hpackString(authority),
    Buffer.from([0x0f, 0x10]), // name content-type (31)
    hpackString('application/grpc'),
    Buffer.from([0x00]), // new name
    hpackString('te'),
    hpackString('trailers'),
    ...more,
  ]);
}

interface Pending {
  body: Buffer;
  done: CallDone;
}

export class RawH2Connection {
  private sock!: Socket;
  private readonly block: Buffer;
  private nextStream = 1;
  private readonly calls = new Map<number, { done: CallDone; code: number; gotData: boolean }>();
  private sendWindow = 65535;
  private received = 0;
  private buf: Buffer = Buffer.alloc(0);
  private readonly queue: Pending[] = [];
  private corked = false;
  closedError: Error | undefined;

  constructor(
    private readonly host: string,
    private readonly port: number,
    path: string,
    extraHeaders = 0,
  ) {
    this.block = headerBlock(`${host}:${port}`, path, extraHeaders);
  }

  connect(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.sock = connect({ host: this.host, port: this.port, noDelay: true });
      this.sock.once('error', reject);
      this.sock.once('connect', () => {
        this.sock.removeListener('error', reject);
        this.sock.on('error', (e) => this.fail(e));
        this.sock.on('close', () => this.fail(new Error('connection closed')));
        this.sock.on('data', (d: Buffer) => this.onData(d));
        // SETTINGS: ENABLE_PUSH=0, INITIAL_WINDOW_SIZE=2^30; then open the connection window as wide.
        const settings = Buffer.alloc(9 + 12);
        frameHeader(settings, 0, 12, T_SETTINGS, 0, 0);
        settings.writeUInt16BE(2, 9);
        settings.writeUInt32BE(0, 11);
        settings.writeUInt16BE(4, 15);
        settings.writeUInt32BE(OUR_WINDOW, 17);
        const wu = Buffer.alloc(13);
        frameHeader(wu, 0, 4, T_WINDOW, 0, 0);
        wu.writeUInt32BE(OUR_WINDOW - 65535, 9);
        this.sock.write(Buffer.concat([PREFACE, settings, wu]));
        resolve();
      });
    });
  }

  get inFlight(): number {
    return this.calls.size + this.queue.length;
  }

  /** Sends one unary call whose gRPC-framed message is `body`. */
  call(body: Buffer, done: CallDone): void {
    if (this.closedError) {
      done(false, 0);
      return;
    }
    if (this.sendWindow < body.length) {
      this.queue.push({ body, done });
      return;
    }
    this.write(body, done);
  }

  private write(body: Buffer, done: CallDone): void {
    const id = this.nextStream;
    this.nextStream += 2;
    this.sendWindow -= body.length;
    const hb = this.block.length;
    const out = Buffer.allocUnsafe(9 + hb + 9 + body.length);
    frameHeader(out, 0, hb, T_HEADERS, F_END_HEADERS, id);
    this.block.copy(out, 9);
    frameHeader(out, 9 + hb, body.length, T_DATA, F_END_STREAM, id);
    body.copy(out, 18 + hb);
    this.calls.set(id, { done, code: 0, gotData: false });
    if (!this.corked) {
      this.corked = true;
      this.sock.cork();
      process.nextTick(() => {
        this.corked = false;
        this.sock.uncork();
      });
    }
    this.sock.write(out);
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    let off = 0;
    const b = this.buf;
    while (b.length - off >= 9) {
      const len = (b[off] << 16) | (b[off + 1] << 8) | b[off + 2];
      if (b.length - off < 9 + len) break;
      const type = b[off + 3];
      const flags = b[off + 4];
      const stream = b.readUInt32BE(off + 5) & 0x7fffffff;
      const p = off + 9;
      off = p + len;
      switch (type) {
        case T_DATA: {
          this.received += len;
          const c = this.calls.get(stream);
          if (c && !c.gotData) {
            const start = flags & F_PADDED ? p + 1 : p;
            c.gotData = true;
            c.code = b[start + 5] === 0x08 ? b[start + 6] : 0;
          }
          if (flags & F_END_STREAM) this.complete(stream, c !== undefined && c.gotData);
          break;
        }
        case T_HEADERS:
          if (flags & F_END_STREAM) this.complete(stream, this.calls.get(stream)?.gotData ?? false);
          break;
        case T_RST:
          this.complete(stream, false);
          break;
        case T_SETTINGS:
          if (!(flags & F_ACK)) {
            const ack = Buffer.alloc(9);
            frameHeader(ack, 0, 0, T_SETTINGS, F_ACK, 0);
            this.sock.write(ack);
          }
          break;
        case T_PING:
          if (!(flags & F_ACK)) {
            const pong = Buffer.alloc(17);
            frameHeader(pong, 0, 8, T_PING, F_ACK, 0);
            b.copy(pong, 9, p, p + 8);
            this.sock.write(pong);
          }
          break;
        case T_WINDOW:
          if (stream === 0) {
            this.sendWindow += b.readUInt32BE(p) & 0x7fffffff;
            while (this.queue.length > 0 && this.sendWindow >= this.queue[0].body.length) {
              const q = this.queue.shift()!;
              this.write(q.body, q.done);
            }
          }
          break;
        case T_GOAWAY:
          this.fail(new Error(`GOAWAY error code ${b.readUInt32BE(p + 4)}`));
          return;
        default:
          break; // CONTINUATION, PRIORITY, PUSH_PROMISE (disabled): nothing to do
      }
    }
    this.buf = off === b.length ? Buffer.alloc(0) : b.subarray(off);
    if (this.received > OUR_WINDOW / 2) {
      const wu = Buffer.alloc(13);
      frameHeader(wu, 0, 4, T_WINDOW, 0, 0);
      wu.writeUInt32BE(this.received, 9);
      this.sock.write(wu);
      this.received = 0;
    }
  }

  private complete(stream: number, ok: boolean): void {
    const c = this.calls.get(stream);
    if (!c) return;
    this.calls.delete(stream);
    c.done(ok, c.code);
  }

  private fail(err: Error): void {
    if (this.closedError) return;
    this.closedError = err;
    const calls = [...this.calls.values()];
    this.calls.clear();
    for (const c of calls) c.done(false, 0);
    for (const q of this.queue.splice(0)) q.done(false, 0);
  }

  close(): void {
    this.closedError ??= new Error('closed');
    this.sock.destroy();
  }
}
