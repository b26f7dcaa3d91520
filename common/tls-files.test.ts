// The one TLS file reader and reloader: a good rotation is taken once, a half-written one (unreadable
// file, key of another certificate, a FIFO or a file past the size bound) is reported once and the last
// good set stays current.
import t from 'tap';
import {
  closeSync,
  constants,
  copyFileSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { mkfifo, sparseFile } from '../harness/files.js';
import { TLS_FILE_MAX_BYTES } from './bounded-file.js';
import { join } from 'node:path';
import { makeCerts, type Certs } from '../harness/tls.js';
import { makeTempDir, removeTempDir } from '../harness/net.js';
import { clientTlsOptions, readTlsFiles, TlsFileWatcher, type TlsPem } from './tls-files.js';

t.test('readTlsFiles reads only the paths given; clientTlsOptions adds the hostname switch', async (t) => {
  const c = await makeCerts();
  t.teardown(() => c.remove());
  t.same(Object.keys(readTlsFiles({ caFile: c.caPath })), ['ca']);
  t.same(Object.keys(readTlsFiles({ certFile: '', keyFile: undefined })), [], 'empty paths are not read');
  const o = clientTlsOptions({ caCert: c.caPath, clientCert: c.clientCertPath, clientKey: c.clientKeyPath });
  t.ok(o.ca && o.cert && o.key, 'all three read');
  t.equal(o.checkServerIdentity, undefined, 'hostnames verified by default');
  const skip = clientTlsOptions({ caCert: c.caPath, skipHostnameVerification: true });
  t.equal(typeof skip.checkServerIdentity, 'function');
  t.throws(() => readTlsFiles({ caFile: join(c.dir, 'missing.pem') }), { code: 'ENOENT' });
});

t.test('a rotation is taken once; a broken one is reported once and the last good set stays', async (t) => {
  const [a, b] = [await makeCerts(), await makeCerts()];
  const dir = makeTempDir('rl-tls-files');
  t.teardown(() => {
    a.remove();
    b.remove();
    removeTempDir(dir);
  });
  const paths = {
    certFile: join(dir, 'tls.crt'),
    keyFile: join(dir, 'tls.key'),
    caFile: join(dir, 'ca.crt'),
  };
  const install = (c: Certs) => {
    for (const [from, to] of [
      [c.certPath, paths.certFile],
      [c.keyPath, paths.keyFile],
      [c.caPath, paths.caFile],
    ]) {
      copyFileSync(from, `${to}.new`);
      renameSync(`${to}.new`, to);
    }
  };
  install(a);
  const changes: TlsPem[] = [];
  const errors: string[] = [];
  const w = new TlsFileWatcher(paths, {
    onChange: (pem) => changes.push(pem),
    onError: (err) => errors.push(err.message),
  });
  t.ok(w.current.cert?.equals(readFileSync(a.certPath)), 'read at construction');
  t.notOk(await w.reload(), 'unchanged files are no change');

  install(b);
  t.ok(await w.reload(), 'new files are taken');
  t.notOk(await w.reload(), 'and only once');
  t.equal(changes.length, 1);
  t.ok(w.current.cert?.equals(readFileSync(b.certPath)), 'current is B');

  copyFileSync(a.keyPath, paths.keyFile); // half-written: B's certificate with A's key
  t.notOk(await w.reload());
  t.notOk(await w.reload());
  t.equal(errors.length, 1, 'the same failure is reported once');
  t.match(errors[0], /key values mismatch|KEY_VALUES_MISMATCH/);
  rmSync(paths.keyFile); // now a different failure
  t.notOk(await w.reload());
  t.equal(errors.length, 2, 'a different failure is reported');
  t.match(errors[1], /ENOENT/);
  t.ok(w.current.cert?.equals(readFileSync(b.certPath)), 'B is still current');
  t.ok(w.current.key?.equals(readFileSync(b.keyPath)), "with B's key");
  t.equal(changes.length, 1, 'no change was announced');

  install(a);
  t.ok(await w.reload(), 'a good set after a broken one is taken');
  t.ok(w.current.cert?.equals(readFileSync(a.certPath)));
});

t.test('files that make no TLS context are refused at construction', async (t) => {
  const c = await makeCerts();
  t.teardown(() => c.remove());
  const onChange = () => undefined;
  t.throws(
    () => new TlsFileWatcher({ certFile: c.certPath, keyFile: c.clientKeyPath }, { onChange }),
    /key values mismatch|KEY_VALUES_MISMATCH/,
  );
  t.throws(() => new TlsFileWatcher({ certFile: c.caKeyPath, keyFile: c.keyPath }, { onChange }));
});

t.test('start() re-reads on the interval; close() stops it', async (t) => {
  const [a, b] = [await makeCerts(), await makeCerts()];
  const dir = makeTempDir('rl-tls-files');
  t.teardown(() => {
    a.remove();
    b.remove();
    removeTempDir(dir);
  });
  const paths = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  copyFileSync(a.certPath, paths.certFile);
  copyFileSync(a.keyPath, paths.keyFile);
  let changed = 0;
  const w = new TlsFileWatcher(paths, { intervalMs: 20, onChange: () => changed++ });
  w.start();
  t.teardown(() => w.close());
  copyFileSync(b.keyPath, `${paths.keyFile}.new`);
  copyFileSync(b.certPath, paths.certFile);
  renameSync(`${paths.keyFile}.new`, paths.keyFile);
  const deadline = Date.now() + 10_000;
  while (changed === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(changed, 1, 'the timer took the new files');
  t.ok(w.current.cert?.equals(readFileSync(b.certPath)));
});

t.test(
  'a rotation to a FIFO or a huge file is refused by the bounded reader; the last good set stays',
  async (t) => {
    const c = await makeCerts();
    const dir = makeTempDir('rl-tls-fifo');
    t.teardown(() => {
      c.remove();
      removeTempDir(dir);
    });
    const paths = {
      certFile: join(dir, 'tls.crt'),
      keyFile: join(dir, 'tls.key'),
      caFile: join(dir, 'ca.crt'),
    };
    copyFileSync(c.certPath, paths.certFile);
    copyFileSync(c.keyPath, paths.keyFile);
    copyFileSync(c.caPath, paths.caFile);
    const errors: string[] = [];
    const w = new TlsFileWatcher(paths, {
      onChange: () => undefined,
      onError: (err) => errors.push(err.message),
    });
    mkfifo(join(dir, 'pipe'));
    rmSync(paths.keyFile);
    symlinkSync(join(dir, 'pipe'), paths.keyFile);
    t.teardown(() => {
      try {
        closeSync(openSync(join(dir, 'pipe'), constants.O_WRONLY | constants.O_NONBLOCK));
      } catch {
        // no reader waiting
      }
    });
    t.notOk(await w.reload(), 'a key that is a FIFO is refused at once');
    t.same(errors, [`${paths.keyFile}: not a regular file (a FIFO); not read`]);
    t.throws(() => readTlsFiles({ keyFile: paths.keyFile }), /not a regular file \(a FIFO\)/, 'at start too');
    rmSync(paths.keyFile);
    copyFileSync(c.keyPath, paths.keyFile);
    sparseFile(paths.caFile, TLS_FILE_MAX_BYTES + 1);
    t.notOk(await w.reload());
    t.match(errors[1], /ca\.crt: the file's size \(4194305 bytes\) exceeds the limit of 4194304$/);
    t.ok(w.current.key?.equals(readFileSync(c.keyPath)), 'the last good set is current');
  },
);
