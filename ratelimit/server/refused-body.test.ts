// A /json body past HTTP_MAX_BODY_BYTES is refused with 413, and a client that is still writing its body
// when the answer comes reads that 413: the server reads and discards a bounded amount of what follows
// (REFUSED_BODY_DRAIN_BYTES) instead of closing the socket with the body unread, which resets the
// connection under the client. A body far past that bound is cut, after the answer was sent.
import t from 'tap';
import { request } from 'node:http';
import { connect } from 'node:net';
import { startTestApp } from '../test-support.js';
import { REFUSED_BODY_DRAIN_BYTES } from './http-server.js';

const CONFIG =
  'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n';

/**
 * POST /json with Node's HTTP client; the status and body, or the client's error. `busyMs`: the client
 * is busy (its event loop blocked) for that long after handing over the body, as one still writing a
 * large body is, so the answer and whatever the server does next reach it before it reads anything.
 */
function post(
  url: string,
  body: Buffer,
  headers: Record<string, string> = {},
  busyMs = 0,
): Promise<{ status?: number; text?: string; error?: string }> {
  return new Promise((resolve) => {
    const req = request(`${url}/json`, { method: 'POST', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, text }));
      res.on('error', (err) => resolve({ status: res.statusCode, error: err.message }));
    });
    req.on('error', (err) => resolve({ error: `${(err as NodeJS.ErrnoException).code}: ${err.message}` }));
    req.end(body);
    const until = Date.now() + busyMs;
    while (Date.now() < until);
  });
}

t.test('a refused /json body still gets its 413 while the client writes', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env: { HTTP_MAX_BODY_BYTES: '65536' } });
  t.teardown(() => svc.close());
  const big = Buffer.alloc(100 * 1024, 0x20);
  for (let i = 0; i < 5; i++) {
    // With Content-Length (refused before reading) and chunked (refused once past the bound).
    const withLength = await post(svc.httpUrl, big, { 'content-length': String(big.length) });
    t.equal(withLength.status, 413, `content-length, try ${i + 1}: 413`, withLength);
    t.match(withLength.text ?? '', /HTTP_MAX_BODY_BYTES/);
    const chunked = await post(svc.httpUrl, big, { 'transfer-encoding': 'chunked' });
    t.equal(chunked.status, 413, `chunked, try ${i + 1}: 413`, chunked);
  }
  // A 4 MiB body, larger than the sockets' buffers: the client is still writing when the 413 is sent.
  const huge = Buffer.alloc(4 * 1024 * 1024, 0x20);
  const variants: Record<string, string>[] = [
    { 'content-length': String(huge.length) },
    { 'transfer-encoding': 'chunked' },
  ];
  for (const headers of variants) {
    const r = await post(svc.httpUrl, huge, headers, 300);
    t.equal(r.status, 413, `4 MiB, ${Object.keys(headers)[0]}: the client reads the 413`, r);
  }
  // The listener still decides after the refusals.
  const ok = await post(
    svc.httpUrl,
    Buffer.from('{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}'),
  );
  t.equal(ok.status, 200, 'a small body is decided');
});

t.test('a body far past what is drained: the answer is sent, then the connection is closed', async (t) => {
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env: { HTTP_MAX_BODY_BYTES: '1024' } });
  t.teardown(() => svc.close());
  const port = Number(new URL(svc.httpUrl).port);
  const TOTAL = 256 * 1024 * 1024;
  for (const head of [`Content-Length: ${TOTAL}`, 'Transfer-Encoding: chunked']) {
    // 256 MiB offered by a client that writes as fast as the server reads: the server must stop reading
    // past its bound, and not before it.
    const r = await new Promise<{ answer: string; sent: number; error?: string }>((resolve) => {
      const s = connect(port, '127.0.0.1');
      let answer = '';
      let sent = 0;
      let done = false;
      const finish = (error?: string) => {
        if (done) return;
        done = true;
        s.destroy();
        resolve({ answer, sent, error });
      };
      s.on('data', (d) => (answer += d));
      s.on('error', (err) => finish((err as NodeJS.ErrnoException).code));
      s.on('close', () => finish());
      const chunked = head.startsWith('Transfer');
      const data = Buffer.alloc(256 * 1024, 0x20);
      const chunk = chunked
        ? Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')])
        : data;
      const pump = () => {
        while (!done && sent < TOTAL) {
          sent += data.length;
          if (!s.write(chunk)) return void s.once('drain', pump);
        }
      };
      s.on('connect', () => {
        s.write(`POST /json HTTP/1.1\r\nHost: x\r\n${head}\r\n\r\n`);
        pump();
      });
    });
    t.match(r.answer, /^HTTP\/1\.1 413 /, `${head}: the client read the 413`);
    const mib = (n: number) => Math.round(n / 1024 / 1024);
    t.ok(
      r.sent > REFUSED_BODY_DRAIN_BYTES && r.sent < TOTAL / 2,
      `${head}: the server read past the answer, then closed the connection after ${mib(r.sent)} MiB written (${r.error ?? 'closed'}; drains at most ${mib(REFUSED_BODY_DRAIN_BYTES)} MiB)`,
    );
  }
});

t.test('a body past what is drained, injected in-process: a 413, and the process goes on', async (t) => {
  // fastify's inject hands the request a socket-like object that cannot be half-closed; cutting it must
  // not throw from the body's 'data' handler (an uncaught exception would end the process).
  const svc = await startTestApp({ files: { 'd.yaml': CONFIG }, env: { HTTP_MAX_BODY_BYTES: '1024' } });
  t.teardown(() => svc.close());
  const res = await (
    await svc.app.http!.fastify()
  ).inject({
    method: 'POST',
    url: '/json',
    payload: Buffer.alloc(REFUSED_BODY_DRAIN_BYTES + 64 * 1024, 0x20),
    headers: { 'content-type': 'application/json' },
  });
  t.equal(res.statusCode, 413);
  const ok = await fetch(`${svc.httpUrl}/healthcheck`);
  t.equal(ok.status, 200, 'the service still answers');
});
