// One HTTP/2 stream of a server connection (session.ts), with the part of node:http2's ServerHttp2Stream
// the gRPC layer uses, under the same names: events 'data', 'end', 'wantTrailers', 'close' ('error' is
// never emitted: a reset stream just closes), respond / write / end / sendTrailers / close, and the
// state getters. The session owns the protocol; a stream keeps its own state and its queue of response
// bytes waiting for flow-control window.
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { ErrorCode } from './frames.js';

/** What a stream needs from its session. */
export interface StreamOwner {
  readonly socket: Socket;
  sendHeaders(stream: H2Stream, headers: Readonly<Record<string, string | number>>, endStream: boolean): void;
  /** Sends as much of the stream's queue as the windows allow; ends the stream when its queue is done. */
  flushStream(stream: H2Stream): void;
  resetStream(stream: H2Stream, code: number): void;
}

export interface RespondOptions {
  endStream?: boolean;
  waitForTrailers?: boolean;
}

export class H2Stream extends EventEmitter {
  /** Response bytes not yet sent (the head chunk from `queueOffset`). */
  readonly queue: Buffer[] = [];
  queueOffset = 0;
  queuedBytes = 0;
  /** Flow-control windows: what the peer lets us send, what we still accept. */
  sendWindow: number;
  recvWindow: number;
  /** Received bytes not yet given back to the peer as window. */
  recvUnacked = 0;
  /** Request bytes delivered and counted against the session's memory bound until the stream ends. */
  held = 0;
  /** content-length of the request, -1 without one, and the DATA bytes received so far. */
  contentLength = -1;
  received = 0;
  headersSent = false;
  /** end() called: the queue is the rest of the response. */
  ending = false;
  waitForTrailers = false;
  /** 'wantTrailers' was emitted. */
  trailersWanted = false;
  /** We sent END_STREAM (or RST_STREAM). */
  localEnded = false;
  /** The peer sent END_STREAM (or the stream was reset). */
  remoteEnded = false;
  closed = false;
  rstCode = ErrorCode.NO_ERROR as number;

  constructor(
    private readonly owner: StreamOwner,
    readonly id: number,
    sendWindow: number,
    recvWindow: number,
  ) {
    super();
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
  }

  /** node:http2's stream.session, for the TLS peer certificate. */
  get session(): { socket: Socket } {
    return this.owner;
  }

  get destroyed(): boolean {
    return this.closed;
  }

  get readableEnded(): boolean {
    return this.remoteEnded;
  }

  get writableLength(): number {
    return this.queuedBytes;
  }

  get state(): { localClose: number } {
    return { localClose: this.localEnded ? 1 : 0 };
  }

  respond(headers: Readonly<Record<string, string | number>>, options?: RespondOptions): void {
    if (this.closed || this.headersSent) return;
    this.headersSent = true;
    this.waitForTrailers = options?.waitForTrailers === true;
    this.owner.sendHeaders(this, headers, options?.endStream === true);
  }

  write(chunk: Uint8Array): void {
    if (this.closed || this.ending || this.localEnded) return;
    if (!this.headersSent) this.respond({ ':status': 200 });
    if (chunk.length === 0) return;
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
    this.queue.push(b);
    this.queuedBytes += b.length;
    this.owner.flushStream(this);
  }

  end(chunk?: Uint8Array): void {
    if (this.closed || this.ending || this.localEnded) return;
    if (chunk !== undefined) this.write(chunk);
    else if (!this.headersSent) this.respond({ ':status': 200 });
    if (this.localEnded) return;
    this.ending = true;
    this.owner.flushStream(this);
  }

  sendTrailers(headers: Readonly<Record<string, string | number>>): void {
    if (this.closed || this.localEnded) return;
    this.owner.sendHeaders(this, headers, true);
  }

  /** RST_STREAM with `code` (NO_ERROR by default), as node:http2's stream.close. */
  close(code: number = ErrorCode.NO_ERROR): void {
    if (this.closed) return;
    this.owner.resetStream(this, code);
  }
}
