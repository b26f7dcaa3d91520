// The xDS server's certificate rotates without a restart: new connections get the new certificate and
// CA once the files change; a broken rotation keeps the previous certificate serving.
import t from 'tap';
import { copyFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { silentLogger } from '../common/index.js';
import { makeCerts, type Certs } from '../harness/tls.js';
import { makeTempDir, removeTempDir } from '../harness/net.js';
import { InMemorySnapshotCache } from './cache.js';
import { AdsServer } from './server.js';
import { ReloadingTlsFiles } from './tls.js';

interface Handshake {
  fingerprint: string;
  /** The server accepted our client certificate (the connection stayed open after the handshake). */
  accepted: boolean;
}

/** One TLS connection as an xDS client makes it (ALPN h2, a client certificate); never verifies the server. */
function handshake(port: number, client: Certs): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const socket: TLSSocket = connect({
      host: '127.0.0.1',
      port,
      ALPNProtocols: ['h2'],
      cert: readFileSync(client.clientCertPath),
      key: readFileSync(client.clientKeyPath),
      rejectUnauthorized: false,
    });
    let fingerprint = '';
    const done = (accepted: boolean) => {
      socket.destroy();
      resolve({ fingerprint, accepted });
    };
    socket.once('secureConnect', () => {
      fingerprint = socket.getPeerCertificate().fingerprint256;
      // TLS 1.3: a refused client certificate shows as an alert after the client's handshake is done.
      socket.once('data', () => done(true));
      setTimeout(() => done(true), 500).unref();
    });
    socket.once('error', (err) => (fingerprint ? done(false) : reject(err)));
    socket.once('close', () => done(false));
  });
}

const fingerprintOf = (path: string) => new X509Certificate(readFileSync(path)).fingerprint256;

async function until<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: last ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('a rotated certificate and CA are served to new connections without a restart', async (t) => {
  const [a, b] = [await makeCerts(), await makeCerts()];
  const dir = makeTempDir('rl-xds-tls');
  t.teardown(() => {
    a.remove();
    b.remove();
    removeTempDir(dir);
  });
  const files = {
    certFile: join(dir, 'tls.crt'),
    keyFile: join(dir, 'tls.key'),
    caFile: join(dir, 'ca.crt'),
  };
  // A Secret volume swaps its files atomically; so does this.
  const install = (c: Certs) => {
    for (const [from, to] of [
      [c.certPath, files.certFile],
      [c.keyPath, files.keyFile],
      [c.caPath, files.caFile],
    ]) {
      copyFileSync(from, `${to}.new`);
      renameSync(`${to}.new`, to);
    }
  };
  install(a);
  const logged: string[] = [];
  const log = (level: string) => (_o: object, msg?: string) => logged.push(`${level}: ${msg}`);
  const server = new AdsServer({
    cache: new InMemorySnapshotCache(),
    listen: '127.0.0.1:0',
    tls: { ...files, reloadIntervalMs: 50 },
    logger: { ...silentLogger, info: log('info'), warn: log('warn'), error: log('error') },
  });
  await server.start();
  t.teardown(() => server.close());

  const first = await until(
    'the first handshake',
    () => handshake(server.port, a),
    (h) => h.accepted,
  );
  t.equal(first.fingerprint, fingerprintOf(a.certPath), 'serves certificate A');
  t.notOk((await handshake(server.port, b)).accepted, "a client of CA B is refused while the CA is A's");

  install(b);
  const rotated = await until(
    'certificate B',
    () => handshake(server.port, b),
    (h) => h.fingerprint === fingerprintOf(b.certPath),
  );
  t.ok(rotated.accepted, 'a client signed by the new CA is accepted');
  t.notOk((await handshake(server.port, a)).accepted, 'a client of the old CA is refused');
  t.ok(logged.includes('info: xDS TLS files changed: new connections use them'), 'the change is logged');

  // A broken rotation (a key that does not match the certificate) is refused; B keeps serving.
  copyFileSync(a.keyPath, files.keyFile);
  await until(
    'the error log',
    async () => logged.filter((l) => l.startsWith('error:')),
    (l) => l.length > 0,
  );
  const after = await handshake(server.port, b);
  t.equal(after.fingerprint, fingerprintOf(b.certPath), 'still certificate B');
  t.ok(after.accepted, 'and still accepting its clients');
  t.equal(logged.filter((l) => l.startsWith('error:')).length, 1, 'the same error is logged once');
});

t.test('files that make no TLS context are refused at start, naming the problem', async (t) => {
  const c = await makeCerts();
  t.teardown(() => c.remove());
  const dir = makeTempDir('rl-xds-tls');
  t.teardown(() => removeTempDir(dir));
  const silent = silentLogger;
  const garbage = join(dir, 'garbage.pem');
  writeFileSync(garbage, 'not a certificate');
  t.throws(() => new ReloadingTlsFiles({ certFile: garbage, keyFile: c.keyPath }, silent));
  t.throws(
    () => new ReloadingTlsFiles({ certFile: c.certPath, keyFile: c.clientKeyPath }, silent),
    /key values mismatch|KEY_VALUES_MISMATCH/,
  );
  t.throws(() => new ReloadingTlsFiles({ certFile: join(dir, 'missing.crt'), keyFile: c.keyPath }, silent), {
    code: 'ENOENT',
  });
  const ok = new ReloadingTlsFiles({ certFile: c.certPath, keyFile: c.keyPath, caFile: c.caPath }, silent);
  t.notOk(await ok.reload(), 'unchanged files are no change');
  ok.close();
});
