// Stream state as Prometheus metrics, on a Registry passed in (never the global one). Per-stream
// gauges are computed at scrape time from AdsServer.streams(), so closed streams disappear.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { DirectoryConfigSource } from './file-source.js';
import type { AdsServer } from './server.js';

export interface AdsMetricsOptions {
  readonly registry: Registry;
  /** Metric name prefix (default `ratelimit_control_plane_`). */
  readonly prefix?: string;
}

export function registerAdsMetrics(server: AdsServer, opts: AdsMetricsOptions): void {
  const p = opts.prefix ?? 'ratelimit_control_plane_';
  const registers = [opts.registry];

  const oversize = new Counter({
    name: `${p}xds_response_too_large_total`,
    help: 'xDS responses not sent because they exceed the maximum message size a client accepts',
    labelNames: ['node_id', 'type_url'],
    registers,
  });
  server.on('oversize', (e) => oversize.inc({ node_id: e.stream.nodeId, type_url: e.typeUrl }));

  new Gauge({
    name: `${p}xds_streams`,
    help: 'Open ADS streams',
    registers,
    collect() {
      this.set(server.streams().length);
    },
  });
  new Gauge({
    name: `${p}xds_stream_info`,
    help: 'One series per open stream and type: node id, peer, protocol (sotw or delta), version sent and version ACKed (value 1)',
    labelNames: ['stream', 'node_id', 'peer', 'protocol', 'type_url', 'version_sent', 'version_acked'],
    registers,
    collect() {
      this.reset();
      for (const s of server.streams()) {
        for (const ts of s.types.values()) {
          this.set(
            {
              stream: String(s.id),
              node_id: s.nodeId,
              peer: s.peer,
              protocol: s.protocol,
              type_url: ts.typeUrl,
              version_sent: ts.versionSent ?? '',
              version_acked: ts.versionAcked ?? '',
            },
            1,
          );
        }
      }
    },
  });
  new Gauge({
    name: `${p}xds_stream_connected_since_seconds`,
    help: 'Unix time the stream was opened',
    labelNames: ['stream', 'node_id', 'peer'],
    registers,
    collect() {
      this.reset();
      for (const s of server.streams()) {
        this.set(
          { stream: String(s.id), node_id: s.nodeId, peer: s.peer },
          s.connectedSince.getTime() / 1000,
        );
      }
    },
  });
  new Gauge({
    name: `${p}xds_stream_last_nack_info`,
    help: 'Last NACK of an open stream: the rejected version and the client message (value: unix time)',
    labelNames: ['stream', 'node_id', 'type_url', 'version', 'message'],
    registers,
    collect() {
      this.reset();
      for (const s of server.streams()) {
        for (const ts of s.types.values()) {
          if (!ts.lastNack) continue;
          this.set(
            {
              stream: String(s.id),
              node_id: s.nodeId,
              type_url: ts.typeUrl,
              version: ts.lastNack.version,
              message: ts.lastNack.message.slice(0, 512),
            },
            ts.lastNack.at.getTime() / 1000,
          );
        }
      }
    },
  });

  const acks = new Counter({
    name: `${p}xds_acks_total`,
    help: 'ACKs received',
    labelNames: ['node_id'],
    registers,
  });
  const nacks = new Counter({
    name: `${p}xds_nacks_total`,
    help: 'NACKs received',
    labelNames: ['node_id'],
    registers,
  });
  const responses = new Counter({
    name: `${p}xds_responses_total`,
    help: 'Responses sent',
    labelNames: ['node_id'],
    registers,
  });
  const stale = new Counter({
    name: `${p}xds_stale_requests_total`,
    help: 'Requests ignored for a stale nonce',
    registers,
  });
  const connects = new Counter({ name: `${p}xds_stream_connects_total`, help: 'Streams opened', registers });
  server.on('ack', (e) => {
    if (!e.resumed) acks.inc({ node_id: e.stream.nodeId });
  });
  server.on('nack', (e) => nacks.inc({ node_id: e.stream.nodeId }));
  server.on('response', (e) => responses.inc({ node_id: e.stream.nodeId }));
  server.on('stale', () => stale.inc());
  server.on('connect', () => connects.inc());
}

/** The directory source's loads, re-reads and rejections (a rejected group keeps its last good snapshot). */
export function registerSourceMetrics(source: DirectoryConfigSource, opts: AdsMetricsOptions): void {
  const p = opts.prefix ?? 'ratelimit_control_plane_';
  const registers = [opts.registry];
  const rejected = new Counter({
    name: `${p}config_rejected_total`,
    help: 'Config folder contents rejected by the validator (the last good snapshot keeps serving)',
    labelNames: ['node_id'],
    registers,
  });
  const rereads = new Counter({
    name: `${p}config_reread_total`,
    help: 'Re-reads of config content that failed, in case it was caught mid-write',
    labelNames: ['node_id'],
    registers,
  });
  const stale = new Gauge({
    name: `${p}config_rejected`,
    help: '1 while the latest content of a node group is rejected and its last good snapshot serves',
    labelNames: ['node_id'],
    registers,
  });
  source.on('rejected', (e) => {
    rejected.inc({ node_id: e.node });
    stale.set({ node_id: e.node }, 1);
  });
  source.on('reread', (e) => rereads.inc({ node_id: e.node }));
  source.on('loaded', (e) => stale.set({ node_id: e.node }, 0));
}
