// What the ADS server knows about each open stream (one pod's connection) and the events it emits:
// the state the operator reads to report which pod runs which version, kept apart from the server that
// speaks the protocol so readers depend on the state, not on the server file.
/** The state of one type URL on one stream. */
export interface StreamTypeState {
  readonly typeUrl: string;
  /** Version of the last response sent, undefined before the first. */
  readonly versionSent: string | undefined;
  readonly nonceSent: string | undefined;
  /** Last version the client said it runs: an ACK, or the version_info it resumed with on a new stream. */
  readonly versionAcked: string | undefined;
  readonly ackedAt: Date | undefined;
  readonly lastNack: { readonly version: string; readonly message: string; readonly at: Date } | undefined;
  readonly nackedVersions: ReadonlySet<string>;
  /** A response is out and neither ACKed nor NACKed yet. */
  readonly awaitingAck: boolean;
  /**
   * The snapshot version held back from this pod because it uses features the pod did not announce
   * (it keeps the last version it could enforce), with those features; undefined when none is.
   */
  readonly withheld: { readonly version: string; readonly features: readonly string[] } | undefined;
}

/** One open ADS stream (one pod's connection). */
export interface StreamState {
  readonly id: number;
  /** Node id from the first request. */
  readonly nodeId: string;
  readonly peer: string;
  /** State of the world (StreamAggregatedResources) or incremental (DeltaAggregatedResources). */
  readonly protocol: 'sotw' | 'delta';
  readonly connectedSince: Date;
  readonly types: ReadonlyMap<string, StreamTypeState>;
  /** Features announced in node metadata (NODE_FEATURES_METADATA_KEY); empty for a reference pod. */
  readonly features: ReadonlySet<string>;
}

export interface AckEvent {
  readonly stream: StreamState;
  readonly typeUrl: string;
  readonly version: string;
  /** True when the version came from the first request of a new stream (the pod already ran it). */
  readonly resumed: boolean;
}
export interface NackEvent {
  readonly stream: StreamState;
  readonly typeUrl: string;
  readonly version: string;
  readonly message: string;
}
export interface ResponseEvent {
  readonly stream: StreamState;
  readonly typeUrl: string;
  readonly version: string;
  readonly nonce: string;
  readonly resources: number;
}

export interface AdsServerEvents {
  connect: [StreamState];
  disconnect: [StreamState];
  ack: [AckEvent];
  nack: [NackEvent];
  response: [ResponseEvent];
  stale: [{ stream: StreamState; typeUrl: string; nonce: string }];
  withheld: [{ stream: StreamState; typeUrl: string; version: string; features: readonly string[] }];
  /** A resource set larger than a client accepts: not sent (the client keeps its config). */
  oversize: [OversizeEvent];
}

export interface OversizeEvent {
  readonly stream: StreamState;
  readonly typeUrl: string;
  readonly version: string;
  /** Encoded size of the response that was not sent, and the bound it exceeds. */
  readonly bytes: number;
  readonly maxBytes: number;
  /** Names of the resources in the set (for xDS RateLimitConfig: the domains). */
  readonly resources: readonly string[];
}

/**
 * How a response too large to send is recorded as the stream's last NACK: the message starts with this
 * (so it survives the operator's pod reports, which carry only the message) and names the size and the
 * bound. isOversizeMessage tells such a record from a pod's own NACK.
 */
export const OVERSIZE_MESSAGE_PREFIX = 'not sent by the control plane: the response is ';

export function oversizeMessage(bytes: number, maxBytes: number): string {
  return `${OVERSIZE_MESSAGE_PREFIX}${bytes} bytes, over the ${maxBytes}-byte maximum message size (--max-send-bytes, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES)`;
}

export function isOversizeMessage(message: string): boolean {
  return message.startsWith(OVERSIZE_MESSAGE_PREFIX);
}
