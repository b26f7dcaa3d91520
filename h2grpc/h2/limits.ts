// What one HTTP/2 connection and all of a server's connections together may cost: the bounds of the
// layer, their defaults, and the budget the connections of one server share (bytes held for requests
// and bytes of answers the peers have not read). Each bound, the attack class it answers and its test:
// docs/decisions/006-http2-layer.md.

export interface H2Limits {
  /** Streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** Bytes one connection may hold: request headers and bodies of open streams, unread answers. */
  maxSessionMemory: number;
  /** Bytes all connections of the server may hold together, counted the same way. */
  maxTotalSessionMemory: number;
  /** Decoded request header bytes of one call (SETTINGS_MAX_HEADER_LIST_SIZE). */
  maxHeaderListSize: number;
  /** How long a new connection has to send its preface and SETTINGS. */
  prefaceTimeoutMs: number;
  /** A connection with no open stream for this long is closed with GOAWAY (0: never). */
  maxConnectionIdleMs: number;
  /** PINGs closer together than this are strikes; past two strikes, GOAWAY ENHANCE_YOUR_CALM. */
  keepaliveMinTimeMs: number;
  /** Whether PINGs on a connection with no open stream are allowed at keepaliveMinTimeMs. */
  keepalivePermitWithoutStream: boolean;
  /** Connections the server serves at once; more are closed as they are accepted (0: no bound). */
  maxConnections: number;
}

export const DEFAULT_H2_LIMITS: Readonly<H2Limits> = Object.freeze({
  maxConcurrentStreams: 1000,
  maxSessionMemory: 16 * 1024 * 1024,
  maxTotalSessionMemory: 32 * 1024 * 1024,
  maxHeaderListSize: 65_536,
  prefaceTimeoutMs: 10_000,
  maxConnectionIdleMs: 3_600_000,
  keepaliveMinTimeMs: 10_000,
  keepalivePermitWithoutStream: true,
  maxConnections: 10_000,
});

/** The limits given, the defaults for the rest (an undefined value takes the default too). */
export function withDefaults(given: Partial<H2Limits>): Readonly<H2Limits> {
  const out: H2Limits = { ...DEFAULT_H2_LIMITS };
  for (const k of Object.keys(given) as (keyof H2Limits)[]) {
    const v = given[k];
    if (v !== undefined) (out as unknown as Record<string, unknown>)[k] = v;
  }
  return out;
}

/** Fixed bounds of the layer (not settings: no legitimate client comes near them). */
export const FIXED = {
  /** CONTINUATION frames after one HEADERS frame. */
  maxContinuationFrames: 16,
  /**
   * Cost of frames that do no work, per connection per second: empty DATA or header fragments that
   * end nothing, streams refused or malformed, SETTINGS frames (each costs SETTINGS_COST).
   */
  floodBudgetPerSecond: 1000,
  settingsCost: 50,
  /** PING strikes a connection may have (grpc-go's maxPingStrikes). */
  maxPingStrikes: 2,
  /**
   * Bytes waiting in the socket past which the connection stops reading until the peer takes them:
   * a peer that does not read cannot make us queue answers (grpc-go stops its reader the same way).
   */
  readPauseBytes: 256 * 1024,
} as const;

/**
 * The bytes all connections of one server hold, against maxTotalSessionMemory: request headers and
 * bodies of open streams, and answers written to sockets their peers have not read.
 */
export class H2Budget {
  held = 0;
  unsent = 0;
  private readonly unsentBy = new Map<object, number>();

  constructor(readonly limit: number) {}

  /** Whether one more byte of request would take the server past its bound. */
  get full(): boolean {
    return this.held + this.unsent > this.limit;
  }

  /** A connection's unread answers are now `bytes`; returns the connection holding most when over the bound. */
  setUnsent(conn: object, bytes: number): object | undefined {
    const before = this.unsentBy.get(conn) ?? 0;
    if (bytes === before) return undefined;
    this.unsent += bytes - before;
    if (bytes === 0) this.unsentBy.delete(conn);
    else this.unsentBy.set(conn, bytes);
    if (this.held + this.unsent <= this.limit) return undefined;
    let worst: object | undefined;
    let most = -1;
    for (const [c, n] of this.unsentBy) {
      if (n > most) {
        most = n;
        worst = c;
      }
    }
    return worst;
  }
}
