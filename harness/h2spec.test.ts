// harness/h2spec.ts reports a server that breaks HTTP/2 as failing, with h2spec's case ids, and reads the
// JUnit report (escapes, failures, errors, skips) right; the conformance test's green result rests on both.
import t from 'tap';
import { createServer, type Socket } from 'node:net';
import { h2specBinary, parseJUnitReport, runH2spec } from './h2spec.js';
import { freePort } from './proc.js';

t.test('a server that never sends SETTINGS fails every case it is given', async (t) => {
  // Accepts connections and reads what h2spec sends, but answers nothing: no SETTINGS, no GOAWAY, no close.
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('data', () => {});
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const r = await runH2spec({
    port: (server.address() as { port: number }).port,
    sections: ['http2/3.5'],
    caseTimeoutSeconds: 2,
    timeoutMs: 60_000,
  });
  t.equal(r.passed, 0, 'nothing passes');
  t.same(
    r.failed.map((f) => f.id),
    ['http2/3.5/1', 'http2/3.5/2'],
    'both cases of 3.5 fail, under their h2spec ids',
  );
  t.equal(r.failed[0].name, 'Sends client connection preface');
  t.ok(
    r.failed.every((f) => f.message.length > 0),
    'each failure says what went wrong',
  );
});

t.test('no listener: runH2spec rejects with h2spec output instead of reporting a result', async (t) => {
  const port = await freePort(); // free now, and nothing listens on it
  await t.rejects(runH2spec({ port, sections: ['http2/3.5'], caseTimeoutSeconds: 2, timeoutMs: 60_000 }), {
    message: /h2spec wrote no report[\s\S]*connection refused/,
  });
});

t.test('sections are groups; single cases are refused', async (t) => {
  await t.rejects(runH2spec({ port: 1, sections: ['http2/5.1/8'] }), { message: /is not a group of h2spec/ });
  await t.rejects(runH2spec({ port: 1, sections: ['http3'] }), { message: /is not a group of h2spec/ });
});

t.test('the binary comes from the tools cache; a missing one names the build script', async (t) => {
  t.match(h2specBinary(), /\/bin\/h2spec$/);
  t.throws(() => h2specBinary({ RATELIMIT_TOOLS_CACHE: '/nonexistent-rl-tools' }), /build-go-tools\.sh/);
});

t.test('parseJUnitReport: ids per group, failures, errors, skips, XML escapes', async (t) => {
  const xml = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="6.1. DATA" package="http2/6.1" id="6.1" tests="3" skipped="0" failures="0" errors="1">
    <testcase package="http2/6.1" classname="Sends a DATA frame with 0x0 stream identifier" time="0.0010"></testcase>
    <testcase package="http2/6.1" classname="Sends a DATA frame on the stream that is not in &#34;open&#34; state" time="5.0">
      <error>GOAWAY Frame (Error Code: STREAM_CLOSED)
Connection closed
HEADERS Frame (length:29, flags:0x05, stream_id:1)</error>
    </testcase>
    <testcase package="http2/6.1" classname="Sends a DATA frame with invalid pad length" time="0.0010"></testcase>
  </testsuite>
  <testsuite name="6.9.2. Initial Flow-Control Window Size" package="http2/6.9.2" id="6.9.2" tests="2" skipped="1" failures="1" errors="0">
    <testcase package="http2/6.9.2" classname="Changes SETTINGS_INITIAL_WINDOW_SIZE" time="0.0005">
      <skipped></skipped>
    </testcase>
    <testcase package="http2/6.9.2" classname="a &lt;b&gt; &amp; c" time="0.0005">
      <failure>Expect:
DATA Frame (length:1)
Actual:
Timeout</failure>
    </testcase>
  </testsuite>
</testsuites>`;
  const r = parseJUnitReport(xml);
  t.equal(r.passed, 2);
  t.same(r.failed, [
    {
      id: 'http2/6.1/2',
      name: 'Sends a DATA frame on the stream that is not in "open" state',
      message:
        'expected GOAWAY Frame (Error Code: STREAM_CLOSED) or Connection closed; ' +
        'got HEADERS Frame (length:29, flags:0x05, stream_id:1)',
    },
    { id: 'http2/6.9.2/2', name: 'a <b> & c', message: 'expected DATA Frame (length:1); got Timeout' },
  ]);
  t.same(r.skipped, [{ id: 'http2/6.9.2/1', name: 'Changes SETTINGS_INITIAL_WINDOW_SIZE', message: '' }]);
});
