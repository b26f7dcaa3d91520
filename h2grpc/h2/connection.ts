// The sending half of a server HTTP/2 connection and its table of streams: the streams' states and
// flow-control windows, header and DATA frames written within the peer's windows and frame size, what
// one event-loop turn writes batched into one socket write, and the connection's end. The reading half,
// frames parsed and checked, is the session that extends it (session.ts).
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import {
  DEFAULT_MAX_FRAME,
  DEFAULT_WINDOW,
  ErrorCode,
  Flag,
  frame,
  FrameType,
  frameU32,
  goawayFrame,
  Setting,
  settingsFrame,
} from './frames.js';
import { encodeHeaders } from './hpack.js';
import { FIXED, H2Budget, type H2Limits, withDefaults } from './limits.js';
import { H2Stream, type StreamOwner } from './stream.js';
import { StreamTable } from './stream-table.js';

/** The bounds of one connection: any left out take their defaults (limits.ts). */
export type H2SessionOptions = Partial<H2Limits>;

/** The connection window we open at the start (the stream window stays at the default 65,535). */
const CONNECTION_WINDOW = 1 << 20;
/** Streams of recently reset ids remembered, so that frames the peer had in flight are ignored. */
const RECENT_RESETS = 256;
/** Bytes a connection may hold however full the server's budget is. */
const FAIR_FLOOR = 256 * 1024;

export class H2Connection extends EventEmitter implements StreamOwner {
  closed = false;
  destroyed = false;
  protected readonly streams = new StreamTable();
  protected lastStreamId = 0;
  /** Highest stream id accepted before our GOAWAY; later ones are refused. */
  protected goawayStreamId = -1;
  protected readonly recentResets: number[] = [];
  /** Flow control: what the peer lets us send on the connection, its settings, what we still accept. */
  protected sendWindow = DEFAULT_WINDOW;
  protected peerInitialWindow = DEFAULT_WINDOW;
  protected peerMaxFrame = DEFAULT_MAX_FRAME;
  protected recvWindow = CONNECTION_WINDOW;
  protected recvUnacked = 0;
  /** Request bytes (headers and bodies) held by streams that have not ended. */
  protected held = 0;
  protected readonly blocked = new Set<H2Stream>();
  protected readonly opts: Readonly<H2Limits>;
  /** Shared by the connections of one server (a connection made alone has its own). */
  protected readonly budget: H2Budget;
  /** performance.now() when the last stream closed (or the connection opened) while none is open. */
  idleSince = performance.now();
  /** Reading is paused until the peer takes what waits in the socket. */
  private readPaused = false;
  private drainWatched = false;
  /** Set when we send HEADERS or DATA: the next PING is not a strike (as grpc-go does). */
  protected sentSincePing = false;
  private out: Buffer[] = [];
  private flushScheduled = false;

  constructor(
    readonly socket: Socket,
    opts: H2SessionOptions = {},
    budget?: H2Budget,
  ) {
    super();
    this.opts = withDefaults(opts);
    this.budget = budget ?? new H2Budget(this.opts.maxTotalSessionMemory);
    this.write(
      settingsFrame([
        [Setting.MAX_CONCURRENT_STREAMS, this.opts.maxConcurrentStreams],
        [Setting.MAX_HEADER_LIST_SIZE, this.opts.maxHeaderListSize],
        [Setting.ENABLE_PUSH, 0],
      ]),
    );
    this.write(frameU32(FrameType.WINDOW_UPDATE, 0, CONNECTION_WINDOW - DEFAULT_WINDOW));
  }

  /** How long the connection has had no open stream at `now` (0 while one is open). */
  idleFor(now: number): number {
    return this.streams.size === 0 ? now - this.idleSince : 0;
  }

  /** GOAWAY: streams already open finish, new ones are refused; the connection ends after the last. */
  close(): void {
    if (this.closed || this.destroyed) return;
    this.closed = true;
    this.goawayStreamId = this.lastStreamId;
    this.write(goawayFrame(this.lastStreamId, ErrorCode.NO_ERROR, ''));
    if (this.streams.size === 0) this.endSocket();
  }

  destroy(): void {
    if (this.destroyed) return;
    this.closed = this.destroyed = true;
    this.budget.setUnsent(this, 0);
    this.socket.destroy();
  }

  // ---- streams ----

  /** The request is complete: 'end' for the listener; the stream closes if the answer is sent too. */
  protected remoteEnd(s: H2Stream): void {
    if (s.closed) return;
    s.remoteEnded = true;
    this.release(s);
    try {
      s.emit('end');
    } catch (err) {
      this.listenerFailed(s, err);
      return;
    }
    if (s.localEnded) this.closeStream(s);
  }

  /** A listener threw: that stream is reset (INTERNAL_ERROR), the connection and its other streams go on. */
  protected listenerFailed(s: H2Stream, err: unknown): void {
    this.emitError(err as Error);
    this.resetStream(s, ErrorCode.INTERNAL_ERROR);
  }

  /** The request bytes a stream held no longer count against the connection's bound. */
  protected release(s: H2Stream): void {
    this.held -= s.held;
    this.budget.held -= s.held;
    s.held = 0;
    this.creditConnection();
  }

  /** Counts request bytes (a header list, a DATA payload) against the connection's and the server's bounds. */
  protected hold(s: H2Stream, bytes: number): void {
    s.held += bytes;
    this.held += bytes;
    this.budget.held += bytes;
  }

  /**
   * Whether this connection holds more than it may: past its own bound, or past a fair part of the
   * server's when all connections together are over theirs. A connection holding little (a caller with a
   * few small calls in flight) is never the one held back.
   */
  protected overBudget(): boolean {
    if (this.held > this.opts.maxSessionMemory) return true;
    return this.budget.full && this.held > FAIR_FLOOR;
  }

  /** A stream refused before the server saw it. */
  protected refuse(id: number, code: number): void {
    this.write(frameU32(FrameType.RST_STREAM, id, code));
    this.rememberReset(id);
  }

  protected streamError(id: number, code: number): void {
    const s = this.streams.get(id);
    if (s !== undefined) this.resetStream(s, code);
    else this.refuse(id, code);
  }

  resetStream(s: H2Stream, code: number): void {
    if (s.closed) return;
    this.write(frameU32(FrameType.RST_STREAM, s.id, code));
    this.rememberReset(s.id);
    s.rstCode = code;
    s.localEnded = s.remoteEnded = true;
    this.closeStream(s);
  }

  protected rememberReset(id: number): void {
    if (this.recentResets.length >= RECENT_RESETS) this.recentResets.shift();
    this.recentResets.push(id);
  }

  protected closeStream(s: H2Stream): void {
    if (s.closed) return;
    s.closed = true;
    this.streams.delete(s);
    if (this.streams.size === 0) this.idleSince = performance.now();
    this.blocked.delete(s);
    s.queue.length = 0;
    s.queuedBytes = 0;
    this.release(s);
    if (s.listenerCount('close') > 0) process.nextTick(emitClose, s);
    if (this.closed && this.streams.size === 0) this.endSocket();
  }

  sendHeaders(s: H2Stream, headers: Readonly<Record<string, string | number>>, endStream: boolean): void {
    this.sentSincePing = true;
    const block = headerBlock(headers);
    const max = this.peerMaxFrame;
    let flags = endStream ? Flag.END_STREAM : 0;
    if (block.length <= max) this.write(frame(FrameType.HEADERS, flags | Flag.END_HEADERS, s.id, block));
    else {
      this.write(frame(FrameType.HEADERS, flags, s.id, block, 0, max));
      for (let off = max; off < block.length; off += max) {
        const n = Math.min(max, block.length - off);
        flags = off + n === block.length ? Flag.END_HEADERS : 0;
        this.write(frame(FrameType.CONTINUATION, flags, s.id, block, off, n));
      }
    }
    if (endStream) this.localEnd(s);
  }

  flushStream(s: H2Stream): void {
    if (s.closed || s.localEnded) return;
    const q = s.queue;
    while (q.length > 0) {
      const head = q[0]!;
      const n = Math.min(head.length - s.queueOffset, s.sendWindow, this.sendWindow, this.peerMaxFrame);
      if (n <= 0) {
        this.blocked.add(s);
        return;
      }
      const last = n === head.length - s.queueOffset && q.length === 1 && s.ending && !s.waitForTrailers;
      this.write(frame(FrameType.DATA, last ? Flag.END_STREAM : 0, s.id, head, s.queueOffset, n));
      this.sentSincePing = true;
      s.sendWindow -= n;
      this.sendWindow -= n;
      s.queuedBytes -= n;
      s.queueOffset += n;
      if (s.queueOffset === head.length) {
        q.shift();
        s.queueOffset = 0;
      }
      if (last) {
        this.localEnd(s);
        return;
      }
    }
    this.blocked.delete(s);
    if (!s.ending) return;
    if (s.waitForTrailers) {
      if (s.trailersWanted) return;
      s.trailersWanted = true;
      s.emit('wantTrailers');
    } else {
      this.write(frame(FrameType.DATA, Flag.END_STREAM, s.id));
      this.localEnd(s);
    }
  }

  protected flushBlocked(): void {
    for (const s of [...this.blocked]) {
      if (this.sendWindow <= 0) return;
      this.flushStream(s);
    }
  }

  /**
   * We sent END_STREAM. A request still open keeps the stream half-closed (local), counted against the
   * stream limit, until the client ends it (the gRPC layer resets streaming calls it is done with).
   */
  protected localEnd(s: H2Stream): void {
    s.localEnded = true;
    if (s.remoteEnded) this.closeStream(s);
  }

  /** Gives received bytes back to the peer as connection window, unless open streams hold too much. */
  protected creditConnection(): void {
    if (this.recvUnacked < CONNECTION_WINDOW >>> 2 || this.overBudget()) return;
    this.write(frameU32(FrameType.WINDOW_UPDATE, 0, this.recvUnacked));
    this.recvWindow += this.recvUnacked;
    this.recvUnacked = 0;
  }

  // ---- output and teardown ----

  protected write(b: Buffer): void {
    if (this.destroyed) return;
    this.out.push(b);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      process.nextTick(flushOut, this);
    }
  }

  /** Writes what the tick produced in one socket write. */
  flushOut(): void {
    this.flushScheduled = false;
    const out = this.out;
    if (out.length === 0 || this.destroyed) return;
    this.out = [];
    const socket = this.socket;
    socket.write(out.length === 1 ? out[0]! : Buffer.concat(out));
    const waiting = socket.writableLength;
    if (waiting === 0) return;
    if (waiting > this.opts.maxSessionMemory) {
      this.emitError(new Error('HTTP/2 peer is not reading its connection'));
      this.destroy();
      return;
    }
    // What waits in sockets counts against the server's budget until the peer takes it; past the
    // budget, the connection with most waiting goes.
    const worst = this.budget.setUnsent(this, waiting);
    if (worst !== undefined) {
      const conn = worst as H2Connection;
      conn.emitError(new Error('HTTP/2 answers not read: the server-wide bound is reached'));
      conn.destroy();
      if (conn === this) return;
    }
    if (waiting > FIXED.readPauseBytes && !this.readPaused) {
      this.readPaused = true;
      socket.pause();
    }
    if (!this.drainWatched) {
      this.drainWatched = true;
      socket.once('drain', () => this.onDrain());
    }
  }

  /** The peer took what waited in the socket: it no longer counts, and reading goes on. */
  private onDrain(): void {
    this.drainWatched = false;
    this.budget.setUnsent(this, 0);
    if (this.readPaused && !this.destroyed) {
      this.readPaused = false;
      this.socket.resume();
    }
  }

  /**
   * Ends the connection after what is queued (a GOAWAY last): nothing more is read, and the socket is
   * destroyed after `lingerMs` if the peer has not closed its side (a peer that never reads, or keeps
   * writing, costs us no reads and no socket past it).
   */
  protected endSocket(lingerMs = 1000): void {
    if (this.destroyed) return;
    this.flushOut();
    this.destroyed = this.closed = true;
    this.socket.pause();
    this.socket.end();
    setTimeout(() => this.socket.destroy(), lingerMs).unref();
  }

  protected onSocketClose(): void {
    this.closed = this.destroyed = true;
    this.budget.setUnsent(this, 0);
    for (const s of this.streams.list()) {
      s.rstCode = ErrorCode.CANCEL;
      s.localEnded = s.remoteEnded = true;
      this.closeStream(s);
    }
    this.emit('close');
  }

  protected emitError(err: Error): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }
}

/** Header blocks of the frozen header objects callers pass on every call (a handful of constants). */
const FROZEN_BLOCKS = new Map<object, Buffer>();

function headerBlock(headers: Readonly<Record<string, string | number>>): Buffer {
  if (!Object.isFrozen(headers)) return encodeHeaders(headers);
  let b = FROZEN_BLOCKS.get(headers);
  if (b === undefined) {
    b = encodeHeaders(headers);
    if (FROZEN_BLOCKS.size < 64) FROZEN_BLOCKS.set(headers, b);
  }
  return b;
}

function flushOut(session: H2Connection): void {
  session.flushOut();
}

function emitClose(s: H2Stream): void {
  s.emit('close');
}
