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

export interface RawAdsStream {
  send(req: WireDiscoveryRequest): void;
  /** The next response; rejects after timeoutMs. */
  next(timeoutMs?: number): Promise<WireDiscoveryResponse>;
  /** Resolves true when no response arrives within ms. */
  quiet(ms: number): Promise<boolean>;
  close(): void;
}

export function openRawAdsStream(
  address: string,
  nodeId: string,
  creds = grpc.credentials.createInsecure(),
): RawAdsStream {
  const Ctor = adsClientConstructor();
  const client = new Ctor(address, creds);
  const call = (
    client as unknown as Record<
      string,
      () => grpc.ClientDuplexStream<WireDiscoveryRequest, WireDiscoveryResponse>
    >
  )[ADS_STREAM_METHOD].call(client);
  const queue: WireDiscoveryResponse[] = [];
  let waiter: ((r: WireDiscoveryResponse) => void) | undefined;
  call.on('data', (r: WireDiscoveryResponse) => {
    if (waiter) {
      const w = waiter;
      waiter = undefined;
      w(r);
    } else queue.push(r);
  });
  call.on('error', () => {});
  return {
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

export interface RawDeltaStream {
  /** Sends a request (type URL and node filled in). */
  send(req: WireDeltaDiscoveryRequest): void;
  /** The next response; rejects after timeoutMs. */
  next(timeoutMs?: number): Promise<WireDeltaDiscoveryResponse>;
  /** Resolves true when no response arrives within ms. */
  quiet(ms: number): Promise<boolean>;
  /** The status the stream ended with. */
  readonly ended: Promise<grpc.ServiceError>;
  close(): void;
}

export function openRawDeltaStream(address: string, nodeId: string): RawDeltaStream {
  const Ctor = adsClientConstructor();
  const client = new Ctor(address, grpc.credentials.createInsecure());
  const call = (
    client as unknown as Record<
      string,
      () => grpc.ClientDuplexStream<WireDeltaDiscoveryRequest, WireDeltaDiscoveryResponse>
    >
  )[ADS_DELTA_METHOD].call(client);
  const queue: WireDeltaDiscoveryResponse[] = [];
  let waiter: ((r: WireDeltaDiscoveryResponse) => void) | undefined;
  call.on('data', (r: WireDeltaDiscoveryResponse) => {
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
