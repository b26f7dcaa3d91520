// Time from a config file's change to the push reaching a pod (docs/performance.md): the standalone
// control plane's directory source and ADS server in one process, one raw ADS stream as the pod, a
// 10-descriptor file renamed into place every 500 ms (as editors and ConfigMap updates write), 10 times.
//   npx tsx bench/micro/xds-first-push.ts
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdsServer, DirectoryConfigSource, InMemorySnapshotCache } from '../../control-plane/index.js';
import { openRawAdsStream } from '../../control-plane/testing.js';
const dir = mkdtempSync(join(tmpdir(), 'fp-'));
const doc = (n: number) => {
  let s = 'domain: d\ndescriptors:\n';
  for (let i = 0; i < 10; i++)
    s += `  - key: k\n    value: v${i}\n    rate_limit: { unit: minute, requests_per_unit: ${n + i} }\n`;
  return s;
};
const put = (n: number) => {
  writeFileSync(join(dir, '.a.tmp'), doc(n));
  renameSync(join(dir, '.a.tmp'), join(dir, 'a.yaml'));
};
put(0);
const cache = new InMemorySnapshotCache();
const src = new DirectoryConfigSource({ dir, cache, rescanIntervalMs: 0 });
await src.start();
const server = new AdsServer({ cache, listen: '127.0.0.1:0' });
await server.start();
const s = openRawAdsStream(`127.0.0.1:${server.port}`, 'p');
s.send({ versionInfo: '' });
let r = await s.next(30000);
s.send({ versionInfo: r.versionInfo, responseNonce: r.nonce });
const out: number[] = [];
for (let i = 1; i <= 10; i++) {
  await new Promise((res) => setTimeout(res, 500));
  const t0 = performance.now();
  put(i);
  r = await s.next(30000);
  out.push(performance.now() - t0);
  s.send({ versionInfo: r.versionInfo, responseNonce: r.nonce });
}
out.sort((a, b) => a - b);
console.log('write->push ms sorted', out.map((x) => x.toFixed(1)).join(' '));
s.close();
await server.close();
await src.close();
process.exit(0);
