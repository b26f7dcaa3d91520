// The service's xDS client (CONFIG_TYPE=GRPC_XDS_SOTW or GRPC_XDS_DELTA): one ADS stream subscribed
// to RateLimitConfig. Good configs are ACKed, invalid ones NACKed with the validator's message while
// the previous config keeps serving; the stream is re-established forever with backoff, and the
// last good config keeps serving while disconnected. With delta (incremental xDS) the client keeps the
// resources by name, applies each response's added, changed and removed resources to a copy, and
// validates the config built from that whole set: only an accepted set replaces the one it has. A
// reconnect tells the server what it has (initial_resource_versions), so only what differs is sent.
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import {
  ADS_DELTA_METHOD,
  ADS_STREAM_METHOD,
  adsClientConstructor,
  decodeRateLimitConfig,
  RATELIMIT_CONFIG_TYPE_URL,
  type WireDeltaDiscoveryRequest,
  type WireDeltaDiscoveryResponse,
  type WireDiscoveryRequest,
  type WireDiscoveryResponse,
  type WireNode,
} from '../../proto/index.js';
import { readTlsFiles, silentLogger, type Logger } from '../../common/index.js';
import { rateLimitConfigToDocument, type ParsedConfigSource } from '../config/index.js';
import { DEFAULT_BACKOFF, ExponentialBackoff, type BackoffOptions } from './backoff.js';

export interface XdsConfigClientOptions {
  /** State of the world (GRPC_XDS_SOTW, the default) or incremental (GRPC_XDS_DELTA). */
  readonly protocol?: 'sotw' | 'delta';
  /** CONFIG_GRPC_XDS_NODE_ID. */
  readonly nodeId: string;
  /** CONFIG_GRPC_XDS_NODE_METADATA (`k=v,k2=v2`), sent as node.metadata string values. */
  readonly nodeMetadata?: Readonly<Record<string, string>>;
  /** CONFIG_GRPC_XDS_SERVER_URL, host:port. */
  readonly serverUrl: string;
  /** CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL in ms: the channel's connect retry interval (default 3 s). */
  readonly connectRetryInterval?: number;
  /** CONFIG_GRPC_XDS_SERVER_USE_TLS. */
  readonly useTls?: boolean;
  /** CONFIG_GRPC_XDS_CLIENT_TLS_CERT / _KEY: file paths of the client certificate (mutual TLS). */
  readonly clientCert?: string;
  readonly clientKey?: string;
  /** CONFIG_GRPC_XDS_SERVER_TLS_CACERT: file path of the CA that signed the server certificate. */
  readonly serverCaCert?: string;
  /** CONFIG_GRPC_XDS_SERVER_TLS_SAN: name to verify in the server certificate instead of the URL's host. */
  readonly serverSan?: string;
  /** CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: metadata sent on the stream. */
  readonly additionalHeaders?: Readonly<Record<string, string>>;
  /** XDS_CLIENT_BACKOFF_*: wait before re-establishing a broken stream. */
  readonly backoff?: Partial<BackoffOptions>;
  /** XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: largest response accepted (grpc default 4 MiB). */
  readonly maxMessageSize?: number;
  /**
   * Validates and applies a config; returns (or resolves to) an error message to NACK, undefined to ACK.
   * Gets the decoded documents; not called when onEncodedConfig is given.
   */
  readonly onConfig?: (
    documents: ParsedConfigSource[],
    version: string,
  ) => string | undefined | Promise<string | undefined>;
  /**
   * As onConfig, but gets each resource's encoded RateLimitConfig message, so that decoding (hundreds of
   * ms for 10k descriptors) can run off this thread. Responses are applied one at a time, in order.
   */
  readonly onEncodedConfig?: (messages: Uint8Array[], version: string) => Promise<string | undefined>;
  readonly logger?: Logger;
}

export interface XdsConfigClientEvents {
  /** The channel is connected to the server. */
  connected: [];
  /** The stream ended; a reconnect follows after `delayMs`. */
  disconnected: [{ error?: Error; delayMs: number }];
  /** A config arrived; it is validated and applied next (then `config`/`ack` or `nack`). */
  response: [{ version: string; nonce: string; resources: number }];
  /** A config was accepted (and ACKed): its version and number of resources. */
  config: [{ version: string; resources: number }];
  ack: [{ version: string; nonce: string }];
  nack: [{ version: string; nonce: string; message: string }];
}

type AdsCall = grpc.ClientDuplexStream<WireDiscoveryRequest, WireDiscoveryResponse>;
type DeltaCall = grpc.ClientDuplexStream<WireDeltaDiscoveryRequest, WireDeltaDiscoveryResponse>;
type AnyCall = AdsCall | DeltaCall;

/** A resource a delta client has: its version (for initial_resource_versions) and encoded message. */
interface HeldResource {
  readonly version: string;
  readonly value: Uint8Array;
}

/** INVALID_ARGUMENT, the status code carried in error_detail of a NACK. */
const NACK_CODE = 3;

export class XdsConfigClient extends EventEmitter<XdsConfigClientEvents> {
  private readonly log: Logger;
  private readonly backoff: ExponentialBackoff;
  private client: grpc.Client | undefined;
  private call: AnyCall | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private started = false;
  private closed = false;
  private acked: string | undefined;
  private readonly node: WireNode;
  /** The response being applied: the next one waits for it (ACKs and NACKs go out in order). */
  private applying: Promise<void> = Promise.resolve();
  private readonly delta: boolean;
  /** Delta: the resources of the config in use, by name. */
  private held: ReadonlyMap<string, HeldResource> = new Map();

  constructor(private readonly opts: XdsConfigClientOptions) {
    super();
    if (!opts.onConfig && !opts.onEncodedConfig)
      throw new Error('XdsConfigClient needs onConfig or onEncodedConfig');
    this.log = opts.logger ?? silentLogger;
    this.delta = opts.protocol === 'delta';
    this.backoff = new ExponentialBackoff({ ...DEFAULT_BACKOFF, ...opts.backoff });
    const fields: Record<string, { stringValue: string }> = {};
    for (const [k, v] of Object.entries(opts.nodeMetadata ?? {})) fields[k] = { stringValue: v };
    this.node = { id: opts.nodeId, metadata: { fields }, userAgentName: 'envoy-ratelimit-ts' };
  }

  /** True once a config has been accepted; stays true across reconnects. */
  get hasReceivedConfig(): boolean {
    return this.acked !== undefined;
  }

  /** Version of the config in use (last ACKed), undefined before the first. */
  get version(): string | undefined {
    return this.acked;
  }

  /** Delta: name -> version of the resources of the config in use (empty with SotW). */
  resourceVersions(): Map<string, string> {
    return new Map([...this.held].map(([n, r]) => [n, r.version]));
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.log.info(
      { server: this.opts.serverUrl, node: this.opts.nodeId, protocol: this.delta ? 'delta' : 'sotw' },
      'starting xDS client for rate limit configurations',
    );
    this.connect();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const call = this.call;
    this.call = undefined;
    call?.cancel();
    this.client?.close();
    this.client = undefined;
  }

  private credentials(): grpc.ChannelCredentials {
    const o = this.opts;
    if (!o.useTls) return grpc.credentials.createInsecure();
    // Files are read on each connect, so rotated certificates are picked up on the next reconnect.
    const pem = readTlsFiles({ caFile: o.serverCaCert, keyFile: o.clientKey, certFile: o.clientCert });
    return grpc.credentials.createSsl(pem.ca ?? null, pem.key ?? null, pem.cert ?? null);
  }

  private connect(): void {
    if (this.closed) return;
    const o = this.opts;
    const retry = o.connectRetryInterval ?? 3000;
    const options: grpc.ChannelOptions = {
      'grpc.initial_reconnect_backoff_ms': retry,
      'grpc.max_reconnect_backoff_ms': retry,
    };
    if (o.maxMessageSize) options['grpc.max_receive_message_length'] = o.maxMessageSize;
    if (o.useTls && o.serverSan) {
      options['grpc.ssl_target_name_override'] = o.serverSan;
      options['grpc.default_authority'] = o.serverSan;
    }
    let client: grpc.Client;
    try {
      const Ctor = adsClientConstructor();
      client = new Ctor(o.serverUrl, this.credentials(), options);
    } catch (err) {
      this.scheduleReconnect(err as Error);
      return;
    }
    this.client = client;
    client.waitForReady(Infinity, (err) => {
      if (!err && this.client === client && !this.closed) {
        this.log.info({ server: o.serverUrl }, 'connected to xDS management server');
        this.emit('connected');
      }
    });
    // waitForReady: while the server is unreachable the stream waits for the channel, which retries
    // the connection every connectRetryInterval (the reference dials with WithBlock).
    const md = new grpc.Metadata({ waitForReady: true });
    for (const [k, v] of Object.entries(o.additionalHeaders ?? {})) md.set(k, v);
    const methods = client as unknown as Record<string, (md: grpc.Metadata) => AnyCall>;
    if (this.delta) {
      const call = methods[ADS_DELTA_METHOD].call(client, md) as DeltaCall;
      this.call = call;
      call.on('data', (resp: WireDeltaDiscoveryResponse) => this.onDeltaResponse(call, resp));
      call.on('error', (err: Error) => this.onStreamEnd(call, err));
      call.on('end', () => this.onStreamEnd(call));
      // Wildcard (an empty first subscription), with what the pod has: a server with the same
      // content sends nothing, another sends only what differs.
      const initialResourceVersions: Record<string, string> = {};
      for (const [name, r] of this.held) initialResourceVersions[name] = r.version;
      this.sendDelta(call, { node: this.node, resourceNamesSubscribe: [], initialResourceVersions });
      return;
    }
    const call = methods[ADS_STREAM_METHOD].call(client, md) as AdsCall;
    this.call = call;
    call.on('data', (resp: WireDiscoveryResponse) => this.onResponse(call, resp));
    call.on('error', (err: Error) => this.onStreamEnd(call, err));
    call.on('end', () => this.onStreamEnd(call));
    // A pod that reconnects announces what it runs; a server with the same content stays silent.
    this.send(call, { versionInfo: this.acked ?? '', responseNonce: '' });
  }

  private send(call: AdsCall, req: WireDiscoveryRequest): void {
    try {
      call.write({ node: this.node, typeUrl: RATELIMIT_CONFIG_TYPE_URL, resourceNames: [], ...req });
    } catch (err) {
      this.log.warn({ err }, 'xDS request not sent');
    }
  }

  private sendDelta(call: DeltaCall, req: WireDeltaDiscoveryRequest): void {
    try {
      call.write({ typeUrl: RATELIMIT_CONFIG_TYPE_URL, ...req });
    } catch (err) {
      this.log.warn({ err }, 'xDS request not sent');
    }
  }

  private onStreamEnd(call: AnyCall, error?: Error): void {
    if (call !== this.call) return;
    this.call = undefined;
    this.client?.close();
    this.client = undefined;
    if (this.closed) return;
    this.scheduleReconnect(error);
  }

  private scheduleReconnect(error?: Error): void {
    if (this.closed) return;
    const delayMs = this.backoff.next();
    this.log.error(
      { err: error?.message, delayMs, keepServing: this.acked },
      'xDS stream to the management server ended; reconnecting',
    );
    this.emit('disconnected', { error, delayMs });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.connect();
    }, delayMs);
  }

  private onResponse(call: AdsCall, resp: WireDiscoveryResponse): void {
    const version = resp.versionInfo ?? '';
    const nonce = resp.nonce ?? '';
    this.enqueue(call, resp.typeUrl, version, nonce, resp.resources?.length ?? 0, () =>
      this.apply(call, resp, version, nonce),
    );
  }

  /** What both protocols do with a response: checked, reported, and queued behind the one being applied. */
  private enqueue(
    call: AdsCall | DeltaCall,
    typeUrl: string | undefined,
    version: string,
    nonce: string,
    resources: number,
    apply: () => Promise<void>,
  ): void {
    if (call !== this.call || this.closed) return;
    // The stream works: the next break starts the backoff from the initial interval again.
    this.backoff.reset();
    if (typeUrl !== RATELIMIT_CONFIG_TYPE_URL) {
      this.log.warn({ typeUrl }, 'ignoring xDS response of an unrequested type');
      return;
    }
    this.emit('response', { version, nonce, resources });
    this.applying = this.applying
      .then(apply)
      .catch((err: unknown) => this.log.error({ err }, 'xDS response not handled'));
  }

  /** The whole set of encoded resources to the service: its refusal message, or undefined once applied. */
  private async validate(messages: Uint8Array[], version: string): Promise<string | undefined> {
    if (this.opts.onEncodedConfig) return this.opts.onEncodedConfig(messages, version);
    const documents = messages.map((bytes) => {
      const msg = decodeRateLimitConfig(bytes);
      return { name: msg.name, document: rateLimitConfigToDocument(msg) };
    });
    return this.opts.onConfig!(documents, version);
  }

  /** Validates and applies one response, then ACKs or NACKs it on its stream if that still runs. */
  private async apply(
    call: AdsCall,
    resp: WireDiscoveryResponse,
    version: string,
    nonce: string,
  ): Promise<void> {
    // A response of a stream that ended meanwhile: the next stream gets the current config again.
    if (call !== this.call || this.closed) return;
    const resources = resp.resources ?? [];
    let error: string | undefined;
    try {
      const messages = resources.map((any, i) => {
        if (any.type_url !== RATELIMIT_CONFIG_TYPE_URL) {
          throw new Error(`resource ${i}: unexpected type ${any.type_url ?? ''}`);
        }
        return any.value ?? new Uint8Array();
      });
      error = await this.validate(messages, version);
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    if (this.closed) return;
    this.answer(call === this.call, version, nonce, error, resources.length, (message) =>
      this.send(
        call,
        message === undefined
          ? { versionInfo: version, responseNonce: nonce }
          : {
              versionInfo: this.acked ?? '',
              responseNonce: nonce,
              errorDetail: { code: NACK_CODE, message },
            },
      ),
    );
  }

  /**
   * The end of applying a response, either protocol's: a valid config is the one the pod runs (announced
   * on the next stream if this one ended) and is ACKed by `reply()`; an invalid one is NACKed by
   * `reply(message)` on its stream, if that still runs, while the previous config keeps serving.
   */
  private answer(
    current: boolean,
    version: string,
    nonce: string,
    error: string | undefined,
    resources: number,
    reply: (message?: string) => void,
    logFields: object = {},
  ): void {
    if (error === undefined) {
      this.acked = version;
      if (current) reply();
      this.log.info({ version, resources, ...logFields }, `xDS config applied: version ${version}`);
      this.emit('config', { version, resources });
      if (current) this.emit('ack', { version, nonce });
    } else {
      if (!current) return;
      reply(error);
      this.log.error({ version, message: error, keepServing: this.acked }, 'xDS config rejected');
      this.emit('nack', { version, nonce, message: error });
    }
  }

  private onDeltaResponse(call: DeltaCall, resp: WireDeltaDiscoveryResponse): void {
    const version = resp.systemVersionInfo ?? '';
    const nonce = resp.nonce ?? '';
    this.enqueue(call, resp.typeUrl, version, nonce, resp.resources?.length ?? 0, () =>
      this.applyDelta(call, resp, version, nonce),
    );
  }

  /** Applies one delta response to a copy of what the pod has, validates the whole set, ACKs or NACKs. */
  private async applyDelta(
    call: DeltaCall,
    resp: WireDeltaDiscoveryResponse,
    version: string,
    nonce: string,
  ): Promise<void> {
    if (call !== this.call || this.closed) return;
    const next = new Map(this.held);
    let error: string | undefined;
    try {
      for (const name of resp.removedResources ?? []) next.delete(name);
      for (const [i, r] of (resp.resources ?? []).entries()) {
        const name = r.name ?? '';
        const any = r.resource;
        if (name === '') throw new Error(`resource ${i}: no name`);
        // A resource without its body is the server saying the name is unknown to it.
        if (!any) {
          next.delete(name);
          continue;
        }
        if (any.type_url !== RATELIMIT_CONFIG_TYPE_URL) {
          throw new Error(`resource ${JSON.stringify(name)}: unexpected type ${any.type_url ?? ''}`);
        }
        next.set(name, { version: r.version ?? '', value: any.value ?? new Uint8Array() });
      }
      // Sorted by name, as a SotW response is: the config does not depend on the arrival order.
      const names = [...next.keys()].sort();
      const messages = names.map((n) => next.get(n)!.value);
      error = await this.validate(messages, version);
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    if (this.closed) return;
    if (error === undefined) this.held = next;
    this.answer(
      call === this.call,
      version,
      nonce,
      error,
      next.size,
      (message) =>
        this.sendDelta(
          call,
          message === undefined
            ? { responseNonce: nonce }
            : { responseNonce: nonce, errorDetail: { code: NACK_CODE, message } },
        ),
      { changed: resp.resources?.length ?? 0, removed: resp.removedResources?.length ?? 0 },
    );
  }
}
