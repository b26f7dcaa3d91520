// The child processes of the `xds-compare` phase (phases/xds-compare.ts), which measures our control
// plane's fan-out side by side with a go-control-plane SnapshotCache server (load/go-xds/):
//
//   server <domains> <descriptors>  our AdsServer + InMemorySnapshotCache from dist/ (or from the dist/
//                                   directory in XDS_SERVER_DIST), speaking the same
//                                   line protocol as load/go-xds/main.go: prints "PORT <n>"; on stdin
//                                   "change <i>" domain i gets a new generation and the snapshot is set,
//                                   then prints "SET". Same content as the Go side.
//   pods <port> <n>                 n simulated pods: one ADS stream each, each on its own connection,
//                                   ACKing every response at once. Responses are not decoded beyond
//                                   version and nonce (the pods must not be the bottleneck). Prints
//                                   "READY" once every pod has a first version; on stdin "mark" prints
//                                   "MARKED", then "DONE <json>" once every pod received a version newer
//                                   than the one it had at the mark, with each pod's arrival time
//                                   (ms, performance.timeOrigin + performance.now(), comparable across
//                                   processes of one machine).
//   delta-pods <port> <n>           the same pods speaking delta xDS (DeltaAggregatedResources, wildcard):
//                                   "version" is system_version_info, ACKed by nonce alone.
//
//   node --import tsx bench/phases/xds-compare-process.ts server 10 10
//   node --import tsx bench/phases/xds-compare-process.ts pods <port> 100
import * as grpc from '@grpc/grpc-js';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { importBuilt } from '../../harness/dist.js';

const TYPE_URL = 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig';
const METHOD = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';
const DELTA_METHOD = '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources';

const wallMs = () => performance.timeOrigin + performance.now();

async function server(domains: number, descriptors: number): Promise<void> {
  type ControlPlane = typeof import('../../control-plane/index.js');
  // XDS_SERVER_DIST: the dist/ of another build, to compare two builds in the same run.
  const other = process.env.XDS_SERVER_DIST;
  const { AdsServer, InMemorySnapshotCache, rateLimitConfigResource } = other
    ? ((await import(pathToFileURL(join(other, 'control-plane', 'index.js')).href)) as ControlPlane)
    : await importBuilt<ControlPlane>('control-plane/index');
  const domain = (i: number, generation: number) =>
    rateLimitConfigResource({
      name: `d${i}`,
      domain: `d${i}`,
      descriptors: Array.from({ length: descriptors }, (_, j) => ({
        key: 'tenant',
        value: `t${j}`,
        rateLimit: { unit: 'MINUTE' as const, requestsPerUnit: 1000 + j + generation },
      })),
    });
  const generations = new Array<number>(domains).fill(0);
  const resources = generations.map((g, i) => domain(i, g));
  const cache = new InMemorySnapshotCache();
  cache.setDefaultSnapshot(resources);
  const ads = new AdsServer({ cache, listen: '127.0.0.1:0' });
  await ads.start();
  process.stdout.write(`PORT ${ads.port}\n`);
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    const [cmd, arg] = line.trim().split(/\s+/);
    const i = Number(arg);
    if (cmd !== 'change' || !Number.isInteger(i) || i < 0 || i >= domains) {
      process.stderr.write(`bad change: ${line}\n`);
      return;
    }
    resources[i] = domain(i, ++generations[i]);
    cache.setDefaultSnapshot(resources);
    process.stdout.write('SET\n');
  });
  rl.on('close', () => void ads.close().then(() => process.exit(0)));
}

// DiscoveryRequest: version_info = 1, node = 2 (Node.id = 1), type_url = 4, response_nonce = 5.
function lengthDelimited(tag: number, b: Buffer): Buffer {
  const len: number[] = [];
  let n = b.length;
  while (n >= 0x80) {
    len.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from([tag, ...len]), b]);
}
function request(nodeId: string, version: string, nonce: string): Buffer {
  const parts = [lengthDelimited(0x12, lengthDelimited(0x0a, Buffer.from(nodeId)))];
  if (version) parts.push(lengthDelimited(0x0a, Buffer.from(version)));
  parts.push(lengthDelimited(0x22, Buffer.from(TYPE_URL)));
  if (nonce) parts.push(lengthDelimited(0x2a, Buffer.from(nonce)));
  return Buffer.concat(parts);
}

// DeltaDiscoveryRequest: node = 1 (Node.id = 1), type_url = 2, response_nonce = 6; an empty first
// subscription is the wildcard.
function deltaRequest(nodeId: string | undefined, nonce: string): Buffer {
  const parts: Buffer[] = [];
  if (nodeId !== undefined) parts.push(lengthDelimited(0x0a, lengthDelimited(0x0a, Buffer.from(nodeId))));
  parts.push(lengthDelimited(0x12, Buffer.from(TYPE_URL)));
  if (nonce) parts.push(lengthDelimited(0x32, Buffer.from(nonce)));
  return Buffer.concat(parts);
}

/** version_info and nonce of a DiscoveryResponse; of a DeltaDiscoveryResponse, system_version_info and nonce (the same field numbers). */
interface Header {
  version: string;
  nonce: string;
}
/** version_info (1) and nonce (5) of a DiscoveryResponse, skipping every other field by its length. */
function header(b: Buffer): Header {
  let pos = 0;
  const out: Header = { version: '', nonce: '' };
  const varint = () => {
    let v = 0;
    let mul = 1;
    for (;;) {
      const byte = b[pos++];
      v += (byte & 0x7f) * mul;
      if (byte < 0x80) return v;
      mul *= 128;
    }
  };
  while (pos < b.length) {
    const tag = varint();
    const wire = tag & 7;
    if (wire === 0) {
      varint();
      continue;
    }
    if (wire !== 2) throw new Error(`unexpected wire type ${wire}`);
    const len = varint();
    const field = tag >>> 3;
    if (field === 1) out.version = b.toString('utf8', pos, pos + len);
    else if (field === 5) out.nonce = b.toString('utf8', pos, pos + len);
    pos += len;
  }
  return out;
}

function pods(port: number, n: number, delta: boolean): void {
  const versions: string[] = new Array<string>(n).fill('');
  const arrived: number[] = new Array<number>(n).fill(0);
  let marked: string[] | undefined;
  let pending = 0;
  let ready = 0;
  const clients: grpc.Client[] = [];
  for (let i = 0; i < n; i++) {
    // A local subchannel pool per client: each pod gets its own connection, as pods do.
    const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
      'grpc.use_local_subchannel_pool': 1,
      'grpc.max_receive_message_length': -1,
    });
    clients.push(client);
    const nodeId = `pod-${i}`;
    const call = client.makeBidiStreamRequest(
      delta ? DELTA_METHOD : METHOD,
      (b: Buffer) => b,
      (b: Buffer) => b,
    );
    call.on('data', (b: Buffer) => {
      const h = header(b);
      call.write(delta ? deltaRequest(undefined, h.nonce) : request(nodeId, h.version, h.nonce));
      if (versions[i] === '') ready++;
      versions[i] = h.version;
      if (marked && arrived[i] === 0 && h.version !== marked[i]) {
        arrived[i] = wallMs();
        if (--pending === 0) {
          process.stdout.write(`DONE ${JSON.stringify(arrived)}\n`);
          marked = undefined;
        }
      }
      if (ready === n) {
        ready = n + 1; // once
        process.stdout.write('READY\n');
      }
    });
    call.on('error', (err) => process.stderr.write(`pod ${i}: ${err.message}\n`));
    call.write(delta ? deltaRequest(nodeId, '') : request(nodeId, '', ''));
  }
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    if (line.trim() !== 'mark') return;
    marked = versions.slice();
    arrived.fill(0);
    pending = n;
    process.stdout.write('MARKED\n');
  });
  rl.on('close', () => {
    for (const c of clients) c.close();
    process.exit(0);
  });
}

const [mode, a, b] = process.argv.slice(2);
if (mode === 'server') void server(Number(a), Number(b));
else if (mode === 'pods') pods(Number(a), Number(b), false);
else if (mode === 'delta-pods') pods(Number(a), Number(b), true);
else {
  process.stderr.write(
    'usage: xds-compare-process.ts server <domains> <descriptors> | pods <port> <n> | delta-pods <port> <n>\n',
  );
  process.exit(2);
}
