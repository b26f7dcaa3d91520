// What the quota server has for each stream and when it goes: assignments queued during a pass are sent
// together (flush), as responses of at most MAX_RESPONSE_ID_BYTES of bucket ids; while a client has not
// taken its last response, later actions wait, merged to the latest per bucket, so a stream never holds
// more than one response and one action per bucket it reports; a stream whose queue has not shrunk for
// RLQS_SEND_TIMEOUT is ended (a client that stopped reading).
import type { WireBucketAction } from '../../proto/index.js';
import { bucketKey } from './bucket-match.js';
import type { QuotaStream } from './state.js';
import { StreamError } from './stream.js';

/** Bucket id characters in one response message at most (a larger answer goes as several). */
const MAX_RESPONSE_ID_BYTES = 1024 * 1024;
/** How often streams holding actions back are looked at (their client's queue may have emptied). */
const DRAIN_POLL_MS = 20;

export interface OutboxOptions {
  now: () => number;
  /** RLQS_SEND_TIMEOUT. */
  sendTimeoutMs: number;
  /** Counts responses written. */
  responses: { inc(): void };
  /** Ends a stream for its own error (the server's, which also drops its subscriptions). */
  fail: (s: QuotaStream, err: StreamError) => void;
}

export class Outbox {
  /** Actions queued per stream during a pass, sent together by flush(). */
  private readonly queued = new Map<QuotaStream, WireBucketAction[]>();
  /** Streams holding actions back until their client takes its queue. */
  private readonly blocked = new Set<QuotaStream>();
  private drainTimer: NodeJS.Timeout | undefined;

  constructor(private readonly o: OutboxOptions) {}

  /** Queues one action for the next flush. */
  queue(s: QuotaStream, action: WireBucketAction): void {
    let list = this.queued.get(s);
    if (list === undefined) this.queued.set(s, (list = []));
    list.push(action);
  }

  /** The last word to a stream (shutdown): replaces anything held back and goes now. */
  replace(s: QuotaStream, actions: WireBucketAction[]): void {
    s.pending = undefined;
    this.write(s, actions);
  }

  /** A stream that went away: nothing is held for it any more. */
  forget(s: QuotaStream): void {
    this.blocked.delete(s);
    this.queued.delete(s);
    s.pending = undefined;
  }

  stop(): void {
    clearInterval(this.drainTimer);
    this.drainTimer = undefined;
  }

  /** Sends what was queued, per stream. */
  flush(): void {
    for (const [s, actions] of this.queued) this.send(s, actions);
    this.queued.clear();
  }

  /**
   * Sends actions to a stream, or holds them back while its client has not taken the last response
   * (flow control: those bytes wait for the client's window). Held actions are merged, the latest per
   * bucket, so a stream never has more queued than one response and one action per bucket it reports.
   */
  send(s: QuotaStream, actions: WireBucketAction[]): void {
    if (s.out.closed || actions.length === 0) return;
    const queued = s.out.queuedBytes;
    if (queued <= 0 && s.pending === undefined) this.write(s, actions);
    else this.hold(s, actions, queued);
  }

  /** Keeps actions until the client has taken its queue (drain), the latest per bucket. */
  private hold(s: QuotaStream, actions: readonly WireBucketAction[], queued: number): void {
    if (s.pending === undefined) {
      s.pending = new Map();
      s.stalledSinceMs = this.o.now();
      s.stalledBytes = queued;
    }
    for (const a of actions) s.pending.set(bucketKey(s.domain ?? '', a.bucketId?.bucket ?? {}), a);
    this.blocked.add(s);
    this.drainTimer ??= setInterval(() => this.drain(), DRAIN_POLL_MS);
    this.drainTimer.unref();
  }

  /**
   * Writes actions as one response of at most MAX_RESPONSE_ID_BYTES of bucket ids (no message larger
   * than a gRPC client's default receive limit, 4 MiB, however many long ids a report named); what does
   * not fit waits, like any action, until the client has taken that response.
   */
  private write(s: QuotaStream, actions: WireBucketAction[]): void {
    let bytes = 0;
    let i = 0;
    for (; i < actions.length; i++) {
      const id = actions[i]!.bucketId?.bucket ?? {};
      let b = 0;
      for (const k in id) b += k.length + id[k]!.length;
      if (i > 0 && bytes + b > MAX_RESPONSE_ID_BYTES) break;
      bytes += b;
    }
    if (i === actions.length) {
      this.writeOne(s, actions);
      return;
    }
    this.writeOne(s, actions.slice(0, i));
    const rest = actions.slice(i);
    const queued = s.out.queuedBytes;
    if (queued > 0) this.hold(s, rest, queued);
    else this.write(s, rest);
  }

  private writeOne(s: QuotaStream, actions: WireBucketAction[]): void {
    if (s.out.closed || actions.length === 0) return;
    s.responses++;
    this.o.responses.inc();
    s.out.send({ bucketAction: actions });
  }

  /**
   * Streams holding actions back: sends them once the client has taken its queue; ends a stream whose
   * queue has not shrunk for RLQS_SEND_TIMEOUT (a client that stopped reading).
   */
  private drain(): void {
    const now = this.o.now();
    for (const s of this.blocked) {
      if (s.out.closed) {
        this.blocked.delete(s);
        s.pending = undefined;
        continue;
      }
      const queued = s.out.queuedBytes;
      if (queued <= 0) {
        const actions = [...(s.pending?.values() ?? [])];
        s.pending = undefined;
        this.blocked.delete(s);
        this.write(s, actions);
      } else if (queued < s.stalledBytes) {
        s.stalledBytes = queued;
        s.stalledSinceMs = now;
      } else if (now - s.stalledSinceMs >= this.o.sendTimeoutMs) {
        this.o.fail(
          s,
          new StreamError(
            `client is not reading its stream (${queued} bytes not taken for ${this.o.sendTimeoutMs}ms: RLQS_SEND_TIMEOUT)`,
            'exhausted',
          ),
        );
      }
    }
    if (this.blocked.size === 0) {
      clearInterval(this.drainTimer);
      this.drainTimer = undefined;
    }
  }
}
