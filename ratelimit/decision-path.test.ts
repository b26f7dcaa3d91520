// One ShouldRateLimit decision, measured: the source files of the repository it executes, from the
// gRPC request on a real socket to its count in a real redis-server and back. V8's precise coverage
// (node:inspector, call counts) is reset after a warm-up, one decision is made, and every file with a
// function called at least once is on the path; the HTTP/2 package (h2grpc/) counts as one door.
// The path may not grow past MAX_FILES; docs/development.md
// lists it file by file, and the test fails when the list there and the measured path differ, naming
// what to add or remove.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedis } from '../harness/redis/index.js';
import { descriptor, startTestApp } from './test-support.js';

/** The most files of the service one decision may cross. */
export const MAX_FILES = 15;

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const DOC = join(ROOT, 'docs/development.md');
/** The folders that ship (tsconfig.build.json); tests and test helpers in them are not the service. */
const PRODUCTION = /^(common|proto|h2grpc|ratelimit)\//;
const NOT_SERVICE = /(\.test\.ts|\/test-support\.ts|\/testing\.ts)$/;

interface Coverage {
  result: { url: string; functions: { functionName: string; ranges: { count: number }[] }[] }[];
}

/** The service's files with a function called since the last take; h2grpc/ as one entry. */
export function pathOf(coverage: Coverage, root = ROOT): Set<string> {
  const files = new Set<string>();
  for (const script of coverage.result) {
    if (!script.url.startsWith('file:')) continue;
    const file = relative(root, fileURLToPath(script.url)).replaceAll('\\', '/');
    if (!PRODUCTION.test(file) || NOT_SERVICE.test(file)) continue;
    if (!script.functions.some((f) => f.ranges[0]!.count > 0)) continue;
    files.add(file.startsWith('h2grpc/') ? 'h2grpc/' : file);
  }
  return files;
}

/** The files the manual lists under "One decision, file by file", in its order. */
export function documentedPath(markdown: string): string[] {
  const at = markdown.indexOf('\n### One decision, file by file\n');
  if (at < 0) return [];
  const end = markdown.indexOf('\n#', at + 1);
  const section = markdown.slice(at, end < 0 ? undefined : end);
  return [...section.matchAll(/^\d+\. `([^`]+)`/gm)].map((m) => m[1]!);
}

t.test('pathOf: production files with a call, h2grpc/ as one door', async (t) => {
  const fn = (count: number) => ({ functionName: 'f', ranges: [{ count }] });
  const url = (p: string) => `file://${join('/r', p)}`;
  const path = pathOf(
    {
      result: [
        { url: url('h2grpc/h2/session.ts'), functions: [fn(0), fn(3)] },
        { url: url('h2grpc/grpc/unary.ts'), functions: [fn(1)] },
        { url: url('ratelimit/limiter/limiter.ts'), functions: [fn(1)] },
        { url: url('ratelimit/stats/store.ts'), functions: [fn(0)] },
        { url: url('ratelimit/test-support.ts'), functions: [fn(1)] },
        { url: url('ratelimit/x.test.ts'), functions: [fn(1)] },
        { url: url('harness/redis/node.ts'), functions: [fn(1)] },
        { url: url('node_modules/ioredis/built/index.js'), functions: [fn(1)] },
        { url: 'node:internal/timers', functions: [fn(1)] },
      ],
    },
    '/r',
  );
  t.same([...path].sort(), ['h2grpc/', 'ratelimit/limiter/limiter.ts']);
});

t.test('documentedPath: the numbered list of its section only', async (t) => {
  const md = [
    '## Layers',
    '1. `not/this.ts` — another list',
    '### One decision, file by file',
    'Intro.',
    '1. `h2grpc/` — the door',
    '2. `ratelimit/service/ratelimit-service.ts` — the service',
    '## Next',
    '3. `nor/this.ts`',
  ].join('\n');
  t.same(documentedPath(md), ['h2grpc/', 'ratelimit/service/ratelimit-service.ts']);
});

t.test('one ShouldRateLimit decision over gRPC, counted in Redis', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const svc = await startTestApp({
    files: {
      'path.yaml': [
        'domain: path',
        'descriptors:',
        '  - key: k',
        '    rate_limit: { unit: hour, requests_per_unit: 1000000 }',
      ].join('\n'),
    },
    env: { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: redis.url },
  });
  t.teardown(() => svc.close());

  const session = new Session();
  session.connect();
  t.teardown(() => session.disconnect());
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  const request = { domain: 'path', descriptors: [descriptor(['k', 'v'])] };
  for (let i = 0; i < 20; i++) await svc.call(request);

  // Three decisions, each measured alone; a file is on the path when every one of them executed it
  // (a timer of the service that fires during one decision is not part of it).
  let path: Set<string> | undefined;
  for (let round = 0; round < 3; round++) {
    await session.post('Profiler.takePreciseCoverage');
    const response = await svc.call(request);
    t.equal(response.overallCode, 'OK');
    const files = pathOf((await session.post('Profiler.takePreciseCoverage')) as Coverage);
    path = path === undefined ? files : new Set([...path].filter((f) => files.has(f)));
  }
  await session.post('Profiler.stopPreciseCoverage');
  const measured = [...path!].sort();
  t.comment(`${measured.length} files:\n${measured.join('\n')}`);

  t.ok(
    measured.length <= MAX_FILES,
    `one decision crosses ${measured.length} files of the service, at most ${MAX_FILES}`,
  );
  const documented = documentedPath(readFileSync(DOC, 'utf8'));
  t.same(
    {
      missing: measured.filter((f) => !documented.includes(f)),
      extra: documented.filter((f) => !measured.includes(f)),
    },
    { missing: [], extra: [] },
    'docs/development.md "One decision, file by file" lists the measured path (missing: add it; extra: remove it)',
  );
});
