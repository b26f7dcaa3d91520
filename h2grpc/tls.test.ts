// The gRPC listener's certificate rotates without a restart (GRPC_SERVER_TLS_* files re-read on an
// interval): new connections get the new certificate; a broken rotation keeps the last good one
// serving and is logged once, not on every re-read.
import t from 'tap';
import { copyFileSync, renameSync, rmSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import type { Logger } from 'pino';
import { makeCerts, type Certs } from '../harness/tls.js';
import { makeTempDir, removeTempDir } from '../harness/net.js';
import { H2GrpcServer } from './server.js';

/** The fingerprint of the certificate a new TLS connection is served. */
function servedFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ALPNProtocols: ['h2'], rejectUnauthorized: false });
    socket.once('secureConnect', () => {
      const fp = socket.getPeerCertificate().fingerprint256;
      socket.destroy();
      resolve(fp);
    });
    socket.once('error', reject);
  });
}

const fingerprintOf = (path: string) => new X509Certificate(readFileSync(path)).fingerprint256;

async function until(what: string, ok: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

t.test('a rotated certificate reaches new connections; a broken rotation is logged once', async (t) => {
  const [a, b] = [await makeCerts(), await makeCerts()];
  const dir = makeTempDir('rl-h2-tls');
  t.teardown(() => {
    a.remove();
    b.remove();
    removeTempDir(dir);
  });
  const files = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  const install = (c: Certs) => {
    for (const [from, to] of [
      [c.certPath, files.certFile],
      [c.keyPath, files.keyFile],
    ]) {
      copyFileSync(from, `${to}.new`);
      renameSync(`${to}.new`, to);
    }
  };
  install(a);
  const logged: string[] = [];
  const log = (level: string) => (o: unknown, msg?: string) => logged.push(`${level}: ${msg ?? o}`);
  const logger = {
    debug() {},
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
  } as unknown as Logger;
  const server = new H2GrpcServer({ logger, maxReceiveMessageLength: 1 << 20, tls: files, tlsReloadMs: 20 });
  const port = await server.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => server.close(1000));
  t.equal(await servedFingerprint(port), fingerprintOf(a.certPath), 'serves certificate A');

  install(b);
  await until('certificate B', async () => (await servedFingerprint(port)) === fingerprintOf(b.certPath));
  t.ok(
    logged.some((l) => l.startsWith('info: gRPC TLS certificate files changed')),
    'the change is logged',
  );

  // A re-read during the install may have caught it half-way (B's certificate, A's key) and said so.
  const errors = () => logged.filter((l) => l.startsWith('error:')).length;
  const before = errors();
  rmSync(files.keyFile); // a rotation caught half-way: the key is missing
  await until('the error log', () => errors() > before);
  // Many re-reads (every 20 ms) see the same missing file in the meantime.
  await new Promise((r) => setTimeout(r, 400));
  t.equal(await servedFingerprint(port), fingerprintOf(b.certPath), 'still certificate B');
  t.equal(errors() - before, 1, 'the same failure is logged once', { logged });

  install(a);
  await until(
    'certificate A again',
    async () => (await servedFingerprint(port)) === fingerprintOf(a.certPath),
  );
});
