// The checked form the parse worker hands to the main thread: keys, the descriptors' JSON in one UTF-8
// buffer found by byte offsets, the features, and the buffers moved (not copied) by a postMessage.
import t from 'tap';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { checkedBuffers, checkedEntry, toCheckedDocument, type CheckedDocument } from './index.js';

t.test('entries are found by byte offsets, also after values of several bytes per character', async (t) => {
  const descriptors = [
    { key: 'city', value: 'Zürich €', rate_limit: { unit: 'second', requests_per_unit: 1 } },
    {
      key: 'emoji',
      value: '😀',
      rate_limits: [{ unit: 'second', requests_per_unit: 1, algorithm: 'token_bucket' as const }],
    },
    { key: 'plain' },
  ];
  const doc = toCheckedDocument('d.yaml', { domain: 'd', descriptors });
  t.same(doc.keys, ['city_Zürich €', 'emoji_😀', 'plain']);
  t.same(
    doc.keys.map((_, i) => checkedEntry(doc, i)),
    descriptors,
    'each entry decodes to its descriptor',
  );
  t.same(doc.features, ['token_bucket']);
});

t.test(
  'checkedBuffers moves every document buffer: the sender keeps none, the receiver has them all',
  async (t) => {
    const docs = [
      toCheckedDocument('a.yaml', { domain: 'a', descriptors: [{ key: 'k', value: 'v' }] }),
      toCheckedDocument('b.yaml', { domain: 'b', descriptors: [{ key: 'x' }, { key: 'y' }] }),
    ];
    const { port1, port2 } = new MessageChannel();
    t.teardown(() => port1.close());
    const received = new Promise<CheckedDocument[]>((resolve) =>
      (port2 as MessagePort).once('message', resolve),
    );
    port1.postMessage(docs, checkedBuffers(docs));
    const got = await received;
    port2.close();
    for (const d of docs) {
      t.equal(d.json.byteLength, 0, `${d.name}: the sender's JSON buffer is detached`);
      t.equal(d.offsets.length, 0, `${d.name}: the sender's offsets are detached`);
    }
    t.same(
      got.map((d) => d.keys.map((_, i) => checkedEntry(d, i))),
      [[{ key: 'k', value: 'v' }], [{ key: 'x' }, { key: 'y' }]],
    );
  },
);
