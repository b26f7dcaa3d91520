// The B3 propagator on its own: each encoding, the reference's validity rules, and the fallback from a
// bad single header to the x-b3-* headers.
import t from 'tap';
import { ROOT_CONTEXT, trace, defaultTextMapGetter, defaultTextMapSetter } from '@opentelemetry/api';
import { B3Propagator } from './b3.js';

const p = new B3Propagator();
const T = '4bf92f3577b34da6a3ce929d0e0e4736';
const S = '00f067aa0ba902b7';
const read = (headers: Record<string, string>) =>
  trace.getSpanContext(p.extract(ROOT_CONTEXT, headers, defaultTextMapGetter));

t.test('valid contexts', async (t) => {
  t.match(
    read({ b3: `${T}-${S}` }),
    { traceId: T, spanId: S, traceFlags: 0, isRemote: true },
    'no sampling state',
  );
  t.match(read({ b3: `${T}-${S}-1` }), { traceFlags: 1 });
  t.match(read({ b3: `${T}-${S}-0-${'1'.repeat(16)}` }), { traceFlags: 0 }, 'with a parent span id');
  t.match(
    read({ b3: `${S}-${S}-d` }),
    { traceId: `${'0'.repeat(16)}${S}`, traceFlags: 1 },
    '64-bit id, debug',
  );
  t.match(read({ 'x-b3-traceid': T, 'x-b3-spanid': S, 'x-b3-sampled': 'true' }), {
    traceId: T,
    traceFlags: 1,
  });
  t.match(
    read({ 'x-b3-traceid': T, 'x-b3-spanid': S, 'x-b3-sampled': '0', 'x-b3-flags': '1' }),
    {
      traceFlags: 1,
    },
    'flags 1 (debug) means sampled',
  );
  t.match(
    read({ b3: `${T}-${S}-x`, 'x-b3-traceid': T, 'x-b3-spanid': S, 'x-b3-sampled': '1' }),
    {
      traceFlags: 1,
    },
    'a malformed single header falls back to the x-b3-* headers',
  );
});

t.test('ignored as a whole', async (t) => {
  const cases: Record<string, string>[] = [
    { b3: '1' },
    { b3: `${T}` },
    { b3: `${T}-${S}-2` },
    { b3: `${T.toUpperCase()}-${S}-1` },
    { b3: `${'0'.repeat(32)}-${S}-1` },
    { b3: `${T}-${'0'.repeat(16)}-1` },
    { b3: `${T}-${S}-1-${S}-x` },
    { 'x-b3-traceid': T },
    { 'x-b3-spanid': S },
    { 'x-b3-traceid': T, 'x-b3-spanid': S, 'x-b3-sampled': 'yes' },
    { 'x-b3-traceid': T, 'x-b3-spanid': S, 'x-b3-parentspanid': 'zz' },
    { 'x-b3-traceid': `${T}00`, 'x-b3-spanid': S },
    {},
  ];
  for (const h of cases) {
    t.equal(read(h), undefined, JSON.stringify(h));
  }
});

t.test('inject writes the x-b3-* headers', async (t) => {
  const out: Record<string, string> = {};
  const ctx = trace.setSpanContext(ROOT_CONTEXT, { traceId: T, spanId: S, traceFlags: 1 });
  p.inject(ctx, out, defaultTextMapSetter);
  t.same(out, { 'x-b3-traceid': T, 'x-b3-spanid': S, 'x-b3-sampled': '1' });
});
