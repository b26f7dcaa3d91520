// The operator's own ADS server takes the incremental-stream bounds from its options (the
// --max-delta-names and --max-delta-name-bytes flags): a pod's delta stream over them is ended with
// INVALID_ARGUMENT naming the flag. Only the xDS server is started; no API server is needed for it.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import { openRawDeltaStream } from '../control-plane/testing.js';
import { RateLimitOperator } from './operator.js';
import { USAGE, USAGE_FLAGS } from './usage.js';

function unusedKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'none', server: 'https://127.0.0.1:1' }],
    users: [{ name: 'none' }],
    contexts: [{ name: 'none', cluster: 'none', user: 'none' }],
    currentContext: 'none',
  });
  return kc;
}

t.test('the delta bounds reach the operator xDS server', async (t) => {
  const op = new RateLimitOperator({
    kubeConfig: unusedKubeConfig(),
    xdsListen: '127.0.0.1:0',
    xdsDelta: { maxNames: 2, maxNameBytes: 8 },
  });
  await op.ads.start();
  t.teardown(() => op.ads.close());
  const address = `127.0.0.1:${op.ads.port}`;

  const many = openRawDeltaStream(address, 'many');
  t.teardown(() => many.close());
  many.send({ resourceNamesSubscribe: ['a', 'b', 'c'] });
  const e1 = await many.ended;
  t.equal(e1.code, grpc.status.INVALID_ARGUMENT);
  t.match(e1.details, /more than 2 resource names in one request \(--max-delta-names\)/);

  const long = openRawDeltaStream(address, 'long');
  t.teardown(() => long.close());
  long.send({ resourceNamesSubscribe: ['much-too-long-name'] });
  const e2 = await long.ended;
  t.equal(e2.code, grpc.status.INVALID_ARGUMENT);
  t.match(e2.details, /more than 8 \(--max-delta-name-bytes\)/);
});

t.test('--help lists the delta flags', async (t) => {
  for (const f of ['--max-delta-names', '--max-delta-name-bytes']) {
    t.ok(USAGE_FLAGS.includes(f), `${f} is a known flag`);
    t.match(USAGE, f);
  }
});
