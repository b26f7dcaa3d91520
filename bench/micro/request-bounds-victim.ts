// The victim of request-bounds-attack.ts, in a worker thread of its own so that the attacker's work
// (serializing megabytes) does not delay it: ordinary calls one after another; on each message from
// the parent it answers with the worst latency seen since the last one and the calls made.
import * as grpc from '@grpc/grpc-js';
import { parentPort, workerData } from 'node:worker_threads';
import { SHOULD_RATE_LIMIT_PATH } from '../../proto/index.js';

const { address, request } = workerData as { address: string; request: Uint8Array };
const client = new grpc.Client(address, grpc.credentials.createInsecure());
let worst = 0;
let calls = 0;
let stop = false;
parentPort!.on('message', (m: string) => {
  if (m === 'stop') stop = true;
  parentPort!.postMessage({ worst, calls });
  worst = 0;
  calls = 0;
});
while (!stop) {
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) =>
    client.makeUnaryRequest(
      SHOULD_RATE_LIMIT_PATH,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.from(request),
      (err) => (err ? reject(err) : resolve()),
    ),
  );
  worst = Math.max(worst, performance.now() - t0);
  calls++;
}
client.close();
