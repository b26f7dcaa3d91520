// One server-side HTTP/2 connection (RFC 9113) on a net or TLS socket, its reading half: frames parsed
// and checked in JavaScript, header blocks through our HPACK decoder, streams handed to the 'stream'
// listener as H2Stream objects (the sending half and the stream table: connection.ts). Built so that a
// request leaves nothing behind that outlives a young-generation GC (node:http2's native stream objects
// do, which is what drives its major GCs: docs/decisions/006-http2-layer.md). The surface is the part of node:http2's ServerHttp2Session the gRPC server uses:
// events 'stream' (stream, headers), 'close', 'error'; close() (GOAWAY, then end once streams finish),
// destroy(), closed, destroyed, socket.
//
// Bounds, each per connection: SETTINGS_MAX_CONCURRENT_STREAMS (more are refused with REFUSED_STREAM),
// SETTINGS_MAX_HEADER_LIST_SIZE (a larger request is answered 431), a header block of at most twice that
// in encoded bytes across its CONTINUATION frames (else ENHANCE_YOUR_CALM), frames of at most 16 KiB
// (our SETTINGS_MAX_FRAME_SIZE), request bytes held by open streams (past maxSessionMemory the
// connection window is no longer given back until streams finish), response bytes queued on the socket
// (past maxSessionMemory the peer is not reading: the connection is destroyed), and streams the client
// resets (more than twice the stream limit plus 100 in a second: ENHANCE_YOUR_CALM), and the time a new
// connection has to send its preface and SETTINGS (10 s).
import type { Socket } from 'node:net';
import { H2Connection, type H2SessionOptions } from './connection.js';
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
const PREFACE_TIMEOUT_MS = 10_000;
const EMPTY = Buffer.alloc(0);

class ConnectionError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export class H2Session extends H2Connection {
  private input: Buffer = EMPTY;
  private prefaceSeen = false;
  private settingsSeen = false;
  private readonly decoder = new HpackDecoder();
  /** A header block spread over CONTINUATION frames. */
  private block:
    { id: number; flags: number; chunks: Buffer[]; size: number; priorityError: boolean } | undefined;
  private resetCount = 0;
  private resetWindowStart = 0;
  private readonly prefaceTimer: NodeJS.Timeout;

  constructor(socket: Socket, opts: H2SessionOptions) {
    super(socket, opts);
    // A connection that never starts HTTP/2 does not hold its socket.
    this.prefaceTimer = setTimeout(
      () => this.fail(ErrorCode.PROTOCOL_ERROR, 'no preface'),
      opts.prefaceTimeoutMs ?? PREFACE_TIMEOUT_MS,
    );
    this.prefaceTimer.unref();
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.emitError(err));
    socket.on('close', () => {
      clearTimeout(this.prefaceTimer);
      this.onSocketClose();
    });
  }

  private onData(chunk: Buffer): void {
    if (this.destroyed) return;
    try {
      this.parse(chunk);
    } catch (err) {
      if (err instanceof ConnectionError) this.fail(err.code, err.message);
      else {
        this.emitError(err as Error);
        this.fail(ErrorCode.INTERNAL_ERROR, 'internal error');
      }
    }
  }

  private parse(chunk: Buffer): void {
    const buf = this.input.length === 0 ? chunk : Buffer.concat([this.input, chunk]);
    let off = 0;
    if (!this.prefaceSeen) {
      const n = Math.min(buf.length, PREFACE.length);
      if (buf.compare(PREFACE, 0, n, 0, n) !== 0)
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad preface');
      if (buf.length < PREFACE.length) {
        this.input = buf;
        return;
      }
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
    this.input = off === buf.length ? EMPTY : buf.subarray(off);
    if (this.input.length > 0 && off > 0 && this.input.length < 1024) this.input = Buffer.from(this.input);
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
        if (!(flags & Flag.ACK)) this.write(frame(FrameType.PING, Flag.ACK, 0, p));
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
    this.recvWindow -= p.length;
    this.recvUnacked += p.length;
    const s = this.streams.get(id);
    if (s === undefined) {
      this.creditConnection();
      if (id > this.lastStreamId)
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on an idle stream');
      if (!this.recentResets.includes(id))
        throw new ConnectionError(ErrorCode.STREAM_CLOSED, 'DATA on a closed stream');
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
      s.held += data.length;
      this.held += data.length;
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
    this.block = { id, flags, chunks: [Buffer.from(fragment)], size: fragment.length, priorityError };
    this.checkBlockSize(fragment.length);
  }

  private onContinuation(flags: number, id: number, p: Buffer): void {
    const b = this.block;
    if (b === undefined || b.id !== id)
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'CONTINUATION without its HEADERS');
    b.size += p.length;
    this.checkBlockSize(b.size);
    b.chunks.push(Buffer.from(p));
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
    if (this.goawayStreamId >= 0) return this.refuse(id, ErrorCode.REFUSED_STREAM);
    if (priorityError) return this.refuse(id, ErrorCode.PROTOCOL_ERROR);
    if (this.streams.size >= this.opts.maxConcurrentStreams) return this.refuse(id, ErrorCode.REFUSED_STREAM);
    const s = new H2Stream(this, id, this.peerInitialWindow, DEFAULT_WINDOW);
    if (fields === null) {
      this.streams.add(s);
      if (endStream) s.remoteEnded = true;
      s.respond({ ':status': 431 }, { endStream: true });
      return;
    }
    const headers = requestHeaders(fields);
    if (typeof headers === 'string') return this.refuse(id, ErrorCode.PROTOCOL_ERROR);
    const cl = headers['content-length'];
    if (cl !== undefined) {
      s.contentLength = Number(cl);
      if (endStream && s.contentLength !== 0) return this.refuse(id, ErrorCode.PROTOCOL_ERROR);
    }
    this.streams.add(s);
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
    for (let i = 0; i < p.length; i += 6) {
      const key = p.readUInt16BE(i);
      const value = p.readUInt32BE(i + 2);
      if (key === Setting.ENABLE_PUSH && value > 1)
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'ENABLE_PUSH not 0 or 1');
      if (key === Setting.INITIAL_WINDOW_SIZE) {
        if (value > MAX_WINDOW)
          throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'INITIAL_WINDOW_SIZE');
        const delta = value - this.peerInitialWindow;
        this.peerInitialWindow = value;
        for (const s of this.streams.list()) {
          s.sendWindow += delta;
          if (s.sendWindow > MAX_WINDOW)
            throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'stream window');
        }
      }
      if (key === Setting.MAX_FRAME_SIZE) {
        if (value < DEFAULT_MAX_FRAME || value > 0xffffff)
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'MAX_FRAME_SIZE out of range');
        this.peerMaxFrame = value;
      }
    }
    this.write(frame(FrameType.SETTINGS, Flag.ACK, 0));
    this.flushBlocked();
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
    this.endSocket();
  }
}
