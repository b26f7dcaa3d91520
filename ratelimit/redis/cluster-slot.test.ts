// Redis Cluster hash slots: known answers of CLUSTER KEYSLOT, and the string path (ASCII keys) agreeing
// with the byte path on any key, hash tags and multi-byte characters included.
import t from 'tap';
import { clusterSlot, clusterSlotOfBytes } from './cluster-slot.js';

t.test('known slots', async (t) => {
  // CLUSTER KEYSLOT answers of Redis 7.
  t.equal(clusterSlot('foo'), 12182);
  t.equal(clusterSlot('{user1000}.following'), clusterSlot('user1000'));
  t.equal(clusterSlot('{user1000}.followers'), clusterSlot('user1000'));
  t.equal(
    clusterSlot('foo{}{bar}'),
    clusterSlotOfBytes(Buffer.from('foo{}{bar}')),
    'an empty tag: the whole key',
  );
  t.equal(clusterSlot('foo{{bar}}zap'), clusterSlot('{bar'), 'the first { to the first } after it');
  t.equal(clusterSlot('foo{bar}{zap}'), clusterSlot('bar'));
});

t.test('the string path agrees with the byte path', async (t) => {
  const parts = ['a', 'Z', '{', '}', '_', '0', 'ü', 'ключ', '😀', '\r\n', ' ', '\u007f', '\u0080'];
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  let mismatches = 0;
  for (let n = 0; n < 5000; n++) {
    let key = '';
    const len = next() % 24;
    for (let i = 0; i < len; i++) key += parts[next() % parts.length];
    if (clusterSlot(key) !== clusterSlotOfBytes(Buffer.from(key))) mismatches++;
  }
  t.equal(mismatches, 0);
  t.equal(clusterSlot(''), 0);
});
