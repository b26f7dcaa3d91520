// Test helper: a raw ADS stream, to drive the protocol step by step (nonces, versions, NACKs), state
// of the world or delta.
import * as grpc from '@grpc/grpc-js';
import {
  ADS_DELTA_METHOD,
  ADS_STREAM_METHOD,
  adsClientConstructor,
  RATELIMIT_CONFIG_TYPE_URL,
  type WireDeltaDiscoveryRequest,
  type WireDeltaDiscoveryResponse,
  type WireDiscoveryRequest,
  type WireDiscoveryResponse,
} from '../proto/index.js';

/** One ADS stream of either protocol, driven by hand. */
export interface RawStream<Req, Res> {
  /** Sends a request (type URL and node filled in). */
  send(req: Req): void;
  /** The next response; rejects after timeoutMs. */
  next(timeoutMs?: number): Promise<Res>;
  /** Resolves true when no response arrives within ms. */
  quiet(ms: number): Promise<boolean>;
  /** The status the stream ended with. */
  readonly ended: Promise<grpc.ServiceError>;
  close(): void;
}

export type RawAdsStream = RawStream<WireDiscoveryRequest, WireDiscoveryResponse>;
export type RawDeltaStream = RawStream<WireDeltaDiscoveryRequest, WireDeltaDiscoveryResponse>;

function openRawStream<Req extends object, Res>(
  method: string,
  address: string,
  nodeId: string,
  creds: grpc.ChannelCredentials,
): RawStream<Req, Res> {
  const Ctor = adsClientConstructor();
  const client = new Ctor(address, creds);
  const call = (client as unknown as Record<string, () => grpc.ClientDuplexStream<Req, Res>>)[method].call(
    client,
  );
  const queue: Res[] = [];
  let waiter: ((r: Res) => void) | undefined;
  call.on('data', (r: Res) => {
    if (waiter) {
      const w = waiter;
      waiter = undefined;
      w(r);
    } else queue.push(r);
  });
  const ended = new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
  return {
    ended,
    send(req) {
      call.write({ node: { id: nodeId }, typeUrl: RATELIMIT_CONFIG_TYPE_URL, ...req });
    },
    next(timeoutMs = 5000) {
      const q = queue.shift();
      if (q) return Promise.resolve(q);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => {
          waiter = undefined;
          reject(new Error(`no response within ${timeoutMs} ms`));
        }, timeoutMs);
        waiter = (r) => {
          clearTimeout(t);
          resolve(r);
        };
      });
    },
    async quiet(ms) {
      if (queue.length > 0) return false;
      return new Promise((resolve) => {
        const t = setTimeout(() => {
          waiter = undefined;
          resolve(true);
        }, ms);
        waiter = (r) => {
          clearTimeout(t);
          queue.push(r);
          resolve(false);
        };
      });
    },
    close() {
      call.cancel();
      client.close();
    },
  };
}

export function openRawAdsStream(
  address: string,
  nodeId: string,
  creds = grpc.credentials.createInsecure(),
): RawAdsStream {
  return openRawStream(ADS_STREAM_METHOD, address, nodeId, creds);
}

export function openRawDeltaStream(address: string, nodeId: string): RawDeltaStream {
  return openRawStream(ADS_DELTA_METHOD, address, nodeId, grpc.credentials.createInsecure());
}
