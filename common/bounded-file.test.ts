// The one file reader: a regular file within its bound is read; a FIFO (named directly or through a
// symlink), a socket, a device and a directory are refused without blocking; a huge file is refused from
// fstat without being read; a file that grows past the bound while read is refused; a read the system
// holds past the deadline is given up and the caller goes on.
import t, { type Test } from 'tap';
import { constants, closeSync, mkdirSync, openSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { makeTempDir, removeTempDir, waitUntil } from '../harness/net.js';
import { mkfifo, sparseFile, watchProcess } from '../harness/files.js';
import {
  FileReadError,
  readBoundedFile,
  readBoundedFileSync,
  readBoundedText,
  type FileReadFailure,
} from './bounded-file.js';

const MiB = 1024 * 1024;

function dir(t: { teardown(fn: () => unknown): void }): string {
  const d = makeTempDir('rl-bounded');
  t.teardown(() => removeTempDir(d));
  return d;
}

async function refusal(p: Promise<unknown>): Promise<FileReadError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof FileReadError) return err;
    throw err;
  }
  throw new Error('read, not refused');
}

function refusalSync(fn: () => unknown): FileReadError {
  try {
    fn();
  } catch (err) {
    if (err instanceof FileReadError) return err;
    throw err;
  }
  throw new Error('read, not refused');
}

/** Both readers give the same refusal for the same file. */
async function refusedBoth(
  t: Test,
  path: string,
  maxBytes: number,
  reason: FileReadFailure,
  detail: RegExp,
): Promise<void> {
  const opts = { maxBytes, maxBytesSetting: 'SOME_SETTING' };
  const a = await refusal(readBoundedFile(path, opts));
  const s = refusalSync(() => readBoundedFileSync(path, opts));
  t.equal(a.reason, reason, `${path}: ${a.message}`);
  t.match(a.detail, detail);
  t.equal(a.message, `${path}: ${a.detail}`, 'the message names the file');
  t.equal(s.message, a.message, 'the synchronous reader says the same');
  t.equal(s.reason, a.reason);
}

t.test('a regular file within the bound is read whole, through a symlink too', async (t) => {
  const d = dir(t);
  const text = 'domain: a\n'.repeat(20_000); // several read chunks
  writeFileSync(join(d, 'a.yaml'), text);
  symlinkSync(join(d, 'a.yaml'), join(d, 'link.yaml'));
  writeFileSync(join(d, 'empty.yaml'), '');
  for (const name of ['a.yaml', 'link.yaml']) {
    t.equal(await readBoundedText(join(d, name), { maxBytes: text.length }), text, `${name}: async`);
    t.equal(readBoundedFileSync(join(d, name), { maxBytes: text.length }).toString(), text, `${name}: sync`);
  }
  t.equal((await readBoundedFile(join(d, 'empty.yaml'), { maxBytes: 10 })).length, 0, 'an empty file');
  await refusedBoth(
    t,
    join(d, 'a.yaml'),
    text.length - 1,
    'too-large',
    /exceeds the limit of 199999 \(SOME_SETTING\)$/,
  );
});

t.test('a FIFO, a symlink to one, a socket, a device and a directory are refused at once', async (t) => {
  const d = dir(t);
  mkfifo(join(d, 'fifo.yaml'));
  symlinkSync(join(d, 'fifo.yaml'), join(d, 'fifo-link.yaml'));
  mkdirSync(join(d, 'dir.yaml'));
  symlinkSync(join(d, 'dir.yaml'), join(d, 'dir-link.yaml'));
  const server = createServer();
  await new Promise<void>((r) => server.listen(join(d, 'sock.yaml'), r));
  t.teardown(() => server.close());
  const cases: [string, RegExp][] = [
    [join(d, 'fifo.yaml'), /not a regular file \(a FIFO\)/],
    [join(d, 'fifo-link.yaml'), /not a regular file \(a FIFO\)/],
    [join(d, 'dir.yaml'), /not a regular file \(a directory\)/],
    [join(d, 'dir-link.yaml'), /not a regular file \(a directory\)/],
    [join(d, 'sock.yaml'), /not a regular file \(a socket\)/],
    ['/dev/zero', /not a regular file \(a character device\)/],
  ];
  for (const [path, detail] of cases) await refusedBoth(t, path, MiB, 'not-regular', detail);
  await refusedBoth(t, join(d, 'missing.yaml'), MiB, 'io', /ENOENT/);
  t.equal((await refusal(readBoundedFile(join(d, 'missing.yaml'), { maxBytes: 1 }))).code, 'ENOENT');
});

t.test('a 50 MB file is refused from fstat: no memory taken, the loop never held', async (t) => {
  const d = dir(t);
  const big = join(d, 'big.yaml');
  sparseFile(big, 50 * 1000 * 1000);
  let err: FileReadError | undefined;
  const watch = await watchProcess(async () => {
    for (let i = 0; i < 5; i++) err = await refusal(readBoundedFile(big, { maxBytes: 8 * MiB }));
  });
  t.equal(err?.reason, 'too-large');
  t.match(err?.detail, /^the file's size \(50000000 bytes\) exceeds the limit of 8388608$/);
  t.ok(watch.rssGrowth < 64 * MiB, `RSS grew ${(watch.rssGrowth / MiB).toFixed(1)} MiB`);
  t.ok(watch.maxLoopDelayMs < 200, `the loop was held ${watch.maxLoopDelayMs.toFixed(0)} ms at most`);
});

t.test('a file whose fstat size is below its content is cut at bound + 1 and refused', async (t) => {
  // /proc files report size 0 and then read their content: as a file that grows after fstat.
  await refusedBoth(
    t,
    '/proc/self/maps',
    16,
    'too-large',
    /^the file's size \(more than 16 bytes\) exceeds the limit of 16 \(SOME_SETTING\)$/,
  );
});

t.test('a read held by the system past the deadline is given up; the caller goes on', async (t) => {
  // Every thread of libuv's pool is held in a blocking open of a FIFO nobody writes (as a slow
  // filesystem would hold them), so the reader's open waits behind them.
  const d = dir(t);
  writeFileSync(join(d, 'a.yaml'), 'domain: a\n');
  const size = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  const blockers: Promise<unknown>[] = [];
  for (let i = 0; i < size; i++) {
    mkfifo(join(d, `held-${i}`));
    blockers.push(open(join(d, `held-${i}`), constants.O_RDONLY).then((h) => h.close()));
  }
  const fds = () => readdirSync('/proc/self/fd').length;
  const before = fds();
  const started = performance.now();
  const err = await refusal(readBoundedFile(join(d, 'a.yaml'), { maxBytes: MiB, timeoutMs: 300 }));
  t.equal(err.reason, 'timeout');
  t.equal(err.message, `${join(d, 'a.yaml')}: not read within 300 ms`);
  t.ok(performance.now() - started < 10_000, 'the caller was answered at the deadline');
  // Released: each blocked open finds a writer; the abandoned open completes and is closed.
  for (let i = 0; i < size; i++)
    closeSync(openSync(join(d, `held-${i}`), constants.O_WRONLY | constants.O_NONBLOCK));
  await Promise.all(blockers);
  await waitUntil(() => fds() <= before, { deadlineMs: 10_000, what: 'the late descriptor closed' });
  t.equal(await readBoundedText(join(d, 'a.yaml'), { maxBytes: MiB, timeoutMs: 300 }), 'domain: a\n');
});
