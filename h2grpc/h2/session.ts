// One server-side HTTP/2 connection (RFC 9113) on a net or TLS socket, its reading half: frames parsed
// and checked in JavaScript, header blocks through our HPACK decoder, streams handed to the 'stream'
// listener as H2Stream objects (the sending half and the stream table: connection.ts). Built so that a
// request leaves nothing behind that outlives a young-generation GC (node:http2's native stream objects
// do, which is what drives its major GCs: docs/decisions/006-http2-layer.md). The surface is the part of node:http2's ServerHttp2Session the gRPC server uses:
// events 'stream' (stream, headers), 'close', 'error'; close() (GOAWAY, then end once streams finish),
// destroy(), closed, destroyed, socket.
//
// Bounds (limits.ts; each with its attack class and test in docs/decisions/006-http2-layer.md): streams
// open at once, decoded header bytes per call, CONTINUATION frames per header block, frames of at most
// 16 KiB, bytes held for requests and unread answers per connection and per server (past them new
// streams are refused and the connection window is not given back; a peer that does not read is
// paused, then closed), the cost of frames that do no work (empty DATA and header fragments, refused
// streams, SETTINGS) per second, reset streams per second, PINGs closer than the keepalive minimum
// (grpc-go's strikes), the time to the preface, and an incomplete frame carried between reads in one
// buffer of its own size (a frame trickled a byte at a time costs one copy per byte, never a concat of
// everything so far).
import type { Socket } from 'node:net';
import { H2Connection, type H2SessionOptions } from './connection.js';
import { FIXED, type H2Budget } from './limits.js';
import {
  DEFAULT_MAX_FRAME,
  DEFAULT_WINDOW,
  ErrorCode,
  Flag,
  frame,
  FrameType,
  frameU32,
  goawayFrame,
  MAX_WINDOW,
  PREFACE,
  Setting,
} from './frames.js';
import { HpackDecoder, HpackError } from './hpack.js';
import { requestHeaders, trailersError, type RequestHeaders } from './request-headers.js';
import { H2Stream } from './stream.js';

export type { H2SessionOptions } from './connection.js';

const RESET_WINDOW_MS = 1000;
/** grpc-go's wait for a PING on a connection with no stream when such PINGs are not permitted. */
const PING_WITHOUT_STREAM_MS = 2 * 3_600_000;
/** How long a connection ended for a protocol error waits for its peer to close before it is destroyed. */
const FAIL_LINGER_MS = 100;

class ConnectionError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export class H2Session extends H2Connection {
  /** An incomplete preface or frame carried to the next read, in a buffer of the size it needs. */
  private carry: Buffer | undefined;
  private carryLen = 0;
  private prefaceSeen = false;
  private settingsSeen = false;
  private readonly decoder = new HpackDecoder();
  /** A header block spread over CONTINUATION frames (its non-empty fragments). */
  private block:
    | { id: number; flags: number; chunks: Buffer[]; size: number; frames: number; priorityError: boolean }
    | undefined;
  private resetCount = 0;
  private resetWindowStart = 0;
  /** The cost of frames that did no work in the current second. */
  private wastedCost = 0;
  private wastedWindowStart = 0;
  private pingStrikes = 0;
  private settingsAnswered = 0;
  private lastPingAt = -Infinity;
  private readonly prefaceTimer: NodeJS.Timeout;

  constructor(socket: Socket, opts: H2SessionOptions = {}, budget?: H2Budget) {
    super(socket, opts, budget);
    // A connection that never starts HTTP/2 does not hold its socket.
    this.prefaceTimer = setTimeout(
      () => this.fail(ErrorCode.PROTOCOL_ERROR, 'no preface'),
      this.opts.prefaceTimeoutMs,
    );
    this.prefaceTimer.unref();
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.emitError(err));
    socket.on('close', () => {
      clearTimeout(this.prefaceTimer);
      this.onSocketClose();
    });
  }

  /**
   * The bytes this connection holds now: request bytes of its open streams, an incomplete frame, an
   * unfinished header block, and answers waiting for the peer to read them.
   */
  get bufferedBytes(): number {
    return this.held + (this.carry?.length ?? 0) + (this.block?.size ?? 0) + this.socket.writableLength;
  }

  private onData(chunk: Buffer): void {
    if (this.destroyed) return;
    try {
      this.read(chunk);
    } catch (err) {
      if (err instanceof ConnectionError) this.fail(err.code, err.message);
      else {
        this.emitError(err as Error);
        this.fail(ErrorCode.INTERNAL_ERROR, 'internal error');
      }
    }
  }

  /** Completes a carried frame from the chunk's first bytes, then parses the rest of the chunk. */
  private read(chunk: Buffer): void {
    let buf = chunk;
    while (this.carry !== undefined) {
      const carry = this.carry;
      const n = Math.min(carry.length - this.carryLen, buf.length);
      buf.copy(carry, this.carryLen, 0, n);
      this.carryLen += n;
      buf = buf.subarray(n);
      if (this.carryLen < carry.length) return;
      this.carry = undefined;
      this.carryLen = 0;
      // A complete preface, frame header (the frame's length is now known) or frame.
      this.keep(this.parse(carry));
      if (this.destroyed) return;
    }
    if (buf.length > 0) this.keep(this.parse(buf));
  }

  /** Carries an incomplete preface or frame in a buffer sized to what it needs next. */
  private keep(rest: Buffer): void {
    if (rest.length === 0 || this.destroyed) return;
    const need = !this.prefaceSeen
      ? PREFACE.length
      : rest.length < 9
        ? 9
        : 9 + ((rest[0]! << 16) | (rest[1]! << 8) | rest[2]!);
    const carry = Buffer.allocUnsafe(need);
    rest.copy(carry);
    this.carry = carry;
    this.carryLen = rest.length;
  }

  /** Parses the complete frames of `buf` (and the preface first); returns the incomplete rest. */
  private parse(buf: Buffer): Buffer {
    let off = 0;
    if (!this.prefaceSeen) {
      const n = Math.min(buf.length, PREFACE.length);
      if (buf.compare(PREFACE, 0, n, 0, n) !== 0)
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad preface');
      if (buf.length < PREFACE.length) return buf;
      this.prefaceSeen = true;
      off = PREFACE.length;
    }
    while (buf.length - off >= 9 && !this.destroyed) {
      const len = (buf[off]! << 16) | (buf[off + 1]! << 8) | buf[off + 2]!;
      if (len > DEFAULT_MAX_FRAME) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'frame too large');
      if (buf.length - off < 9 + len) break;
      const type = buf[off + 3]!;
      const flags = buf[off + 4]!;
      const id = buf.readUInt32BE(off + 5) & 0x7fffffff;
      const payload = buf.subarray(off + 9, off + 9 + len);
      off += 9 + len;
      this.onFrame(type, flags, id, payload);
    }
    return buf.subarray(off);
  }

  /** Frames that do no work cost the connection; past the budget of a second it is closed. */
  private wasted(cost: number, what: string): void {
    const now = performance.now();
    if (now - this.wastedWindowStart > 1000) {
      this.wastedWindowStart = now;
      this.wastedCost = 0;
    }
    this.wastedCost += cost;
    if (this.wastedCost > FIXED.floodBudgetPerSecond)
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `too many ${what}`);
  }

  /** A stream refused before the server saw it also costs the connection. */
  private refuseNew(id: number, code: number): void {
    this.refuse(id, code);
    this.wasted(10, 'refused streams');
  }

  private onFrame(type: number, flags: number, id: number, p: Buffer): void {
    if (!this.settingsSeen) {
      if (type !== FrameType.SETTINGS || flags & Flag.ACK)
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'the first frame is not SETTINGS');
      this.settingsSeen = true;
      clearTimeout(this.prefaceTimer);
    }
    if (this.block !== undefined && type !== FrameType.CONTINUATION)
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'header block interrupted');
    switch (type) {
      case FrameType.DATA:
        return this.onDataFrame(flags, id, p);
      case FrameType.HEADERS:
        return this.onHeaders(flags, id, p);
      case FrameType.PRIORITY:
        if (id === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        if (p.length !== 5) return this.streamError(id, ErrorCode.FRAME_SIZE_ERROR);
        if ((p.readUInt32BE(0) & 0x7fffffff) === id) return this.streamError(id, ErrorCode.PROTOCOL_ERROR);
        return;
      case FrameType.RST_STREAM:
        return this.onReset(id, p);
      case FrameType.SETTINGS:
        return this.onSettings(flags, id, p);
      case FrameType.PUSH_PROMISE:
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      case FrameType.PING:
        if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PING on a stream');
        if (p.length !== 8) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'PING of a wrong size');
        if (!(flags & Flag.ACK)) this.onPing(p);
        return;
      case FrameType.GOAWAY:
        if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'GOAWAY on a stream');
        this.close();
        return;
      case FrameType.WINDOW_UPDATE:
        return this.onWindowUpdate(id, p);
      case FrameType.CONTINUATION:
        return this.onContinuation(flags, id, p);
      default:
        return; // unknown frame types are ignored
    }
  }

  private onDataFrame(flags: number, id: number, p: Buffer): void {
    if (id === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on stream 0');
    let data = p;
    if (flags & Flag.PADDED) {
      if (p.length < 1 || p[0]! >= p.length)
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad padding');
      data = p.subarray(1, p.length - p[0]!);
    }
    if (p.length > this.recvWindow)
      throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'connection window');
    if (data.length === 0 && !(flags & Flag.END_STREAM)) this.wasted(1, 'empty DATA frames');
    this.recvWindow -= p.length;
    this.recvUnacked += p.length;
    const s = this.streams.get(id);
    if (s === undefined) {
      this.creditConnection();
      if (id > this.lastStreamId)
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on an idle stream');
      if (!this.recentResets.includes(id))
        throw new ConnectionError(ErrorCode.STREAM_CLOSED, 'DATA on a closed stream');
      // Bytes the client had in flight when the stream was reset are allowed; a client that keeps
      // sending to streams we have answered only costs us reads (1 a frame and 1 a KiB).
      this.wasted(1 + (p.length >>> 10), 'DATA on reset streams');
      return;
    }
    if (s.remoteEnded) {
      this.creditConnection();
      return this.streamError(id, ErrorCode.STREAM_CLOSED);
    }
    if (p.length > s.recvWindow) {
      this.creditConnection();
      return this.streamError(id, ErrorCode.FLOW_CONTROL_ERROR);
    }
    s.recvWindow -= p.length;
    s.received += data.length;
    const end = (flags & Flag.END_STREAM) !== 0;
    if (s.contentLength >= 0 && (s.received > s.contentLength || (end && s.received !== s.contentLength))) {
      this.creditConnection();
      return this.streamError(id, ErrorCode.PROTOCOL_ERROR);
    }
    if (data.length > 0) {
      this.hold(s, data.length);
      try {
        s.emit('data', data);
      } catch (err) {
        this.listenerFailed(s, err);
      }
    }
    if (end) this.remoteEnd(s);
    else if (!s.closed) {
      s.recvUnacked += p.length;
      if (s.recvUnacked >= DEFAULT_WINDOW >>> 1) {
        this.write(frameU32(FrameType.WINDOW_UPDATE, id, s.recvUnacked));
        s.recvWindow += s.recvUnacked;
        s.recvUnacked = 0;
      }
    }
    this.creditConnection();
  }

  private onHeaders(flags: number, id: number, p: Buffer): void {
    if (id === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS on stream 0');
    let start = 0;
    let pad = 0;
    if (flags & Flag.PADDED) {
      if (p.length < 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad padding');
      pad = p[0]!;
      start = 1;
    }
    let priorityError = false;
    if (flags & Flag.PRIORITY) {
      if (p.length < start + 5) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'short HEADERS');
      priorityError = (p.readUInt32BE(start) & 0x7fffffff) === id;
      start += 5;
    }
    if (start + pad > p.length) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad padding');
    if (id % 2 === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'even stream id from a client');
    const fragment = p.subarray(start, p.length - pad);
    if (flags & Flag.END_HEADERS) {
      this.onHeaderBlock(id, flags, fragment, priorityError);
      return;
    }
    if (fragment.length === 0) this.wasted(1, 'empty header fragments');
    const chunks = fragment.length === 0 ? [] : [Buffer.from(fragment)];
    this.block = { id, flags, chunks, size: fragment.length, frames: 0, priorityError };
    this.checkBlockSize(fragment.length);
  }

  private onContinuation(flags: number, id: number, p: Buffer): void {
    const b = this.block;
    if (b === undefined || b.id !== id)
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'CONTINUATION without its HEADERS');
    if (++b.frames > FIXED.maxContinuationFrames)
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'too many CONTINUATION frames');
    b.size += p.length;
    this.checkBlockSize(b.size);
    if (p.length > 0) b.chunks.push(Buffer.from(p));
    else if (!(flags & Flag.END_HEADERS)) this.wasted(1, 'empty header fragments');
    if (!(flags & Flag.END_HEADERS)) return;
    this.block = undefined;
    this.onHeaderBlock(id, b.flags, Buffer.concat(b.chunks, b.size), b.priorityError);
  }

  private checkBlockSize(size: number): void {
    if (size > 2 * this.opts.maxHeaderListSize)
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'header block too large');
  }

  private onHeaderBlock(id: number, flags: number, block: Buffer, priorityError: boolean): void {
    let fields: string[] | null;
    try {
      fields = this.decoder.decode(block, this.opts.maxHeaderListSize);
    } catch (err) {
      if (err instanceof HpackError) throw new ConnectionError(ErrorCode.COMPRESSION_ERROR, err.message);
      throw err;
    }
    const endStream = (flags & Flag.END_STREAM) !== 0;
    const existing = this.streams.get(id);
    if (existing !== undefined) {
      // trailers
      if (existing.remoteEnded) return this.streamError(id, ErrorCode.STREAM_CLOSED);
      if (!endStream || fields === null || trailersError(fields) !== undefined)
        return this.streamError(id, ErrorCode.PROTOCOL_ERROR);
      this.remoteEnd(existing);
      return;
    }
    if (id <= this.lastStreamId) {
      if (this.recentResets.includes(id)) return;
      throw new ConnectionError(ErrorCode.STREAM_CLOSED, 'HEADERS on a closed stream');
    }
    this.lastStreamId = id;
    if (this.goawayStreamId >= 0) return this.refuseNew(id, ErrorCode.REFUSED_STREAM);
    if (priorityError) return this.refuseNew(id, ErrorCode.PROTOCOL_ERROR);
    // Past the stream limit, or holding more request bytes than the connection may: the client may
    // retry a refused stream, here or elsewhere.
    if (this.streams.size >= this.opts.maxConcurrentStreams || this.overBudget())
      return this.refuseNew(id, ErrorCode.REFUSED_STREAM);
    const s = new H2Stream(this, id, this.peerInitialWindow, DEFAULT_WINDOW);
    if (fields === null) {
      this.streams.add(s);
      if (endStream) s.remoteEnded = true;
      s.respond({ ':status': 431 }, { endStream: true });
      return;
    }
    const headers = requestHeaders(fields);
    if (typeof headers === 'string') return this.refuseNew(id, ErrorCode.PROTOCOL_ERROR);
    const cl = headers['content-length'];
    if (cl !== undefined) {
      s.contentLength = Number(cl);
      if (endStream && s.contentLength !== 0) return this.refuseNew(id, ErrorCode.PROTOCOL_ERROR);
    }
    this.streams.add(s);
    // The decoded headers live as long as the call: they count against the bounds until it ends.
    this.hold(s, this.decoder.listSize);
    // Half-closed (remote) already while the listener runs: an answer it gives at once closes the stream.
    s.remoteEnded = endStream;
    try {
      this.emit('stream', s, headers as RequestHeaders);
    } catch (err) {
      this.listenerFailed(s, err);
      return;
    }
    if (endStream) this.remoteEnd(s);
  }

  private onReset(id: number, p: Buffer): void {
    if (id === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
    if (p.length !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'RST_STREAM of a wrong size');
    if (id > this.lastStreamId)
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
    const s = this.streams.get(id);
    if (s === undefined) return;
    const now = performance.now();
    if (now - this.resetWindowStart > RESET_WINDOW_MS) {
      this.resetWindowStart = now;
      this.resetCount = 0;
    }
    // A client resetting streams as fast as it opens them makes us start work it never waits for.
    if (++this.resetCount > 2 * this.opts.maxConcurrentStreams + 100)
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'too many streams reset');
    s.rstCode = p.readUInt32BE(0);
    s.remoteEnded = s.localEnded = true;
    this.closeStream(s);
  }

  private onSettings(flags: number, id: number, p: Buffer): void {
    if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & Flag.ACK) {
      if (p.length !== 0)
        throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      return;
    }
    if (p.length % 6 !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS of a wrong size');
    // A client sends SETTINGS once or twice; a stream of them only costs us answers.
    if (this.settingsAnswered++ > 0) this.wasted(FIXED.settingsCost, 'SETTINGS frames');
    let initialWindow = -1;
    for (let i = 0; i < p.length; i += 6) {
      const key = p.readUInt16BE(i);
      const value = p.readUInt32BE(i + 2);
      if (key === Setting.ENABLE_PUSH && value > 1)
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'ENABLE_PUSH not 0 or 1');
      if (key === Setting.INITIAL_WINDOW_SIZE) {
        if (value > MAX_WINDOW)
          throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'INITIAL_WINDOW_SIZE');
        initialWindow = value;
      }
      if (key === Setting.MAX_FRAME_SIZE) {
        if (value < DEFAULT_MAX_FRAME || value > 0xffffff)
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'MAX_FRAME_SIZE out of range');
        this.peerMaxFrame = value;
      }
    }
    // The open streams' windows move once per frame, by the last value the frame gives (the sum of the
    // steps of repeated entries), not once per entry.
    if (initialWindow >= 0 && initialWindow !== this.peerInitialWindow) {
      const delta = initialWindow - this.peerInitialWindow;
      this.peerInitialWindow = initialWindow;
      for (const s of this.streams.list()) {
        s.sendWindow += delta;
        if (s.sendWindow > MAX_WINDOW)
          throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'stream window');
      }
    }
    this.write(frame(FrameType.SETTINGS, Flag.ACK, 0));
    this.flushBlocked();
  }

  /**
   * Answers a PING, and counts it as grpc-go's keepalive enforcement does: a PING sooner than
   * keepaliveMinTimeMs after the previous one (or, on a connection with no open stream where such
   * PINGs are not permitted, sooner than two hours) is a strike, unless we sent HEADERS or DATA since;
   * past two strikes the connection ends with ENHANCE_YOUR_CALM and grpc's "too_many_pings".
   */
  private onPing(p: Buffer): void {
    this.write(frame(FrameType.PING, Flag.ACK, 0, p));
    if (this.sentSincePing) {
      this.sentSincePing = false;
      this.pingStrikes = 0;
      return;
    }
    const now = performance.now();
    const min =
      this.streams.size === 0 && !this.opts.keepalivePermitWithoutStream
        ? PING_WITHOUT_STREAM_MS
        : this.opts.keepaliveMinTimeMs;
    if (now - this.lastPingAt < min) this.pingStrikes++;
    this.lastPingAt = now;
    if (this.pingStrikes > FIXED.maxPingStrikes)
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'too_many_pings');
  }

  private onWindowUpdate(id: number, p: Buffer): void {
    if (p.length !== 4)
      throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'WINDOW_UPDATE of a wrong size');
    const inc = p.readUInt32BE(0) & 0x7fffffff;
    if (id === 0) {
      if (inc === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
      this.sendWindow += inc;
      if (this.sendWindow > MAX_WINDOW)
        throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'window overflow');
      this.flushBlocked();
      return;
    }
    if (id > this.lastStreamId)
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE on an idle stream');
    const s = this.streams.get(id);
    if (s === undefined) return;
    if (inc === 0) return this.streamError(id, ErrorCode.PROTOCOL_ERROR);
    s.sendWindow += inc;
    if (s.sendWindow > MAX_WINDOW) return this.streamError(id, ErrorCode.FLOW_CONTROL_ERROR);
    this.flushStream(s);
  }

  /** A connection error: GOAWAY with the code, then the socket ends. */
  private fail(code: number, message: string): void {
    if (this.destroyed) return;
    this.write(goawayFrame(this.lastStreamId, code, message));
    this.flushOut();
    this.endSocket(FAIL_LINGER_MS);
  }
}
