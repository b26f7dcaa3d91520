// The reflector against a scripted list and watch: resourceVersions are opaque (passed back as given,
// never compared), paging, relist on an ERROR event and on a 410 from the watch call, backoff on errors
// (doubling, capped, reset by success), resume from the last resourceVersion after a failed watch.
// e2e/operator-reflector.test.ts drives the same against a real API server.
import { KubeConfig } from '@kubernetes/client-node';
import t from 'tap';
import { Reflector, type KubeObject, type ListPage } from './reflector.js';

type Obj = KubeObject & { data?: string };
const obj = (name: string, rv: string, data = ''): Obj => ({
  metadata: { name, namespace: 'ns', resourceVersion: rv },
  data,
});

type Done = (err: unknown) => void;
type OnEvent = (phase: string, obj: unknown) => void;
interface WatchCall {
  path: string;
  params: Record<string, unknown>;
  onEvent: OnEvent;
  done: Done;
  aborted: boolean;
}

/** A Watch stand-in: records every call; the test drives events and ends. */
class FakeWatcher {
  calls: WatchCall[] = [];
  failNext: unknown[] = [];
  private waiters: ((c: WatchCall) => void)[] = [];

  async watch(path: string, params: any, onEvent: OnEvent, done: Done): Promise<AbortController> {
    const fail = this.failNext.shift();
    if (fail) throw fail;
    const call: WatchCall = { path, params, onEvent, done, aborted: false };
    this.calls.push(call);
    const ac = new AbortController();
    ac.signal.addEventListener('abort', () => {
      call.aborted = true;
      const e = new Error('aborted');
      e.name = 'AbortError';
      done(e);
    });
    this.waiters.splice(0).forEach((w) => w(call));
    return ac;
  }

  /** The n-th watch call (0-based), waiting for it. */
  async call(n: number): Promise<WatchCall> {
    while (this.calls.length <= n) await new Promise<WatchCall>((r) => this.waiters.push(r));
    return this.calls[n];
  }
}

const kubeConfig = new KubeConfig();

function setup(
  lists: (ListPage<Obj> | Error)[][],
  opts: { backoffInitialMs?: number; backoffMaxMs?: number } = {},
) {
  const watcher = new FakeWatcher();
  const listCalls: (string | undefined)[] = [];
  let listRound = -1;
  let page = 0;
  const r = new Reflector<Obj>({
    kubeConfig,
    watchPath: '/apis/x/v1/things',
    watchParams: { labelSelector: 'a=b' },
    watcher,
    backoffInitialMs: opts.backoffInitialMs ?? 5,
    backoffMaxMs: opts.backoffMaxMs ?? 40,
    list: async (token) => {
      listCalls.push(token);
      if (token === undefined) {
        listRound++;
        page = 0;
      }
      const round = lists[Math.min(listRound, lists.length - 1)];
      const p = round[page++];
      if (p instanceof Error) {
        page = 0;
        throw p;
      }
      return p;
    },
  });
  const events: string[] = [];
  const errors: { delayMs: number; phase: string; message: string }[] = [];
  r.on('change', ({ key, old, new: cur }) =>
    events.push(
      `${!old ? 'add' : !cur ? 'delete' : 'update'} ${key}${cur ? `@${cur.metadata.resourceVersion}` : ''}`,
    ),
  );
  r.on('synced', () => events.push('synced'));
  r.on('relist', ({ reason }) => events.push(`relist ${reason}`));
  r.on('error', ({ error, delayMs, phase }) => errors.push({ delayMs, phase, message: error.message }));
  return { r, watcher, listCalls, events, errors };
}

const until = async (what: string, fn: () => boolean, ms = 2000) => {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
};

t.test('resourceVersions are opaque: passed back exactly as the server gave them', async (t) => {
  const { r, watcher, listCalls, events } = setup([
    [
      { items: [obj('a', 'rv:α/1')], metadata: { continue: 'page 2 token', resourceVersion: 'ignored' } },
      { items: [obj('b', 'zz')], metadata: { resourceVersion: 'list-rv:Ω' } },
    ],
  ]);
  r.start();
  t.teardown(() => r.close());
  const w0 = await watcher.call(0);
  t.same(listCalls, [undefined, 'page 2 token'], 'pages followed by continue token');
  t.equal(w0.path, '/apis/x/v1/things');
  t.equal(w0.params.resourceVersion, 'list-rv:Ω', 'watch from the last page resourceVersion');
  t.equal(w0.params.labelSelector, 'a=b', 'extra watch params');
  t.equal(w0.params.allowWatchBookmarks, true);
  t.same(r.keys().sort(), ['ns/a', 'ns/b']);

  // A "smaller" or non-numeric resourceVersion is taken as is: nothing is compared.
  w0.onEvent('MODIFIED', obj('a', '0000'));
  w0.onEvent('BOOKMARK', { metadata: { resourceVersion: 'bookmark~7' } });
  t.equal(r.get('ns/a')?.metadata.resourceVersion, '0000');
  w0.done(null); // the server's watch timeout: resume where we were, without a list
  const w1 = await watcher.call(1);
  t.equal(w1.params.resourceVersion, 'bookmark~7', 'resumed from the last bookmark');
  t.same(listCalls.length, 2, 'no relist after a normal end');
  t.same(events, ['add ns/a@rv:α/1', 'add ns/b@zz', 'synced', 'update ns/a@0000']);
});

t.test(
  'an ERROR event relists: the store is replaced by the new list, with the changes emitted',
  async (t) => {
    const { r, watcher, listCalls, events } = setup([
      [{ items: [obj('a', '1'), obj('b', '2')], metadata: { resourceVersion: '2' } }],
      [{ items: [obj('a', '1'), obj('c', '9')], metadata: { resourceVersion: 'after' } }],
    ]);
    r.start();
    t.teardown(() => r.close());
    const w0 = await watcher.call(0);
    w0.onEvent('ERROR', {
      kind: 'Status',
      code: 410,
      reason: 'Expired',
      message: 'too old resource version: 2 (50)',
    });
    const w1 = await watcher.call(1);
    t.ok(w0.aborted, 'the expired watch is closed');
    t.equal(listCalls.length, 2, 'listed again');
    t.equal(w1.params.resourceVersion, 'after');
    t.same(r.keys().sort(), ['ns/a', 'ns/c']);
    t.same(events, [
      'add ns/a@1',
      'add ns/b@2',
      'synced',
      'relist watch ERROR 410 too old resource version: 2 (50)',
      'add ns/c@9', // a is unchanged (same resourceVersion): no event
      'delete ns/b',
      'synced',
    ]);
  },
);

t.test('a watch call answered 410 Gone relists at once (no backoff)', async (t) => {
  const { r, watcher, listCalls, events, errors } = setup(
    [[{ items: [], metadata: { resourceVersion: 'x' } }]],
    { backoffInitialMs: 10_000 },
  );
  const gone = Object.assign(new Error('Gone'), { statusCode: 410 });
  watcher.failNext.push(gone);
  r.start();
  t.teardown(() => r.close());
  await watcher.call(0);
  t.equal(listCalls.length, 2);
  t.same(errors, [], 'a 410 is not an error');
  t.same(events, ['synced', 'relist 410 Gone', 'synced']);

  // The same 410 reported through the done callback (after the watch started).
  const w0 = await watcher.call(0);
  w0.done(Object.assign(new Error('Gone'), { statusCode: 410 }));
  await watcher.call(1);
  t.equal(listCalls.length, 3);
});

t.test('failed lists back off exponentially up to the cap; success resets the backoff', async (t) => {
  const down = new Error('connect ECONNREFUSED');
  const { r, watcher, errors, events } = setup([
    [down],
    [down],
    [down],
    [down],
    [down],
    [{ items: [obj('a', '1')], metadata: { resourceVersion: '1' } }],
  ]);
  const started = Date.now();
  r.start();
  t.teardown(() => r.close());
  const w0 = await watcher.call(0);
  const took = Date.now() - started;
  t.same(
    errors.map((e) => [e.phase, e.delayMs]),
    [
      ['list', 5],
      ['list', 10],
      ['list', 20],
      ['list', 40],
      ['list', 40],
    ],
    'doubling, capped at backoffMaxMs',
  );
  t.ok(took >= 5 + 10 + 20 + 40 + 40 - 5, `the reflector waited (${took} ms)`);
  t.notOk(events.includes('relist'), 'no relist event for plain errors');
  t.ok(r.synced);

  // A failed watch: backoff from the initial delay again, resume from the last resourceVersion, no list.
  w0.onEvent('ADDED', obj('b', 'seen-7'));
  w0.done(new Error('socket hang up'));
  const w1 = await watcher.call(1);
  t.same(
    errors.slice(5).map((e) => [e.phase, e.delayMs, e.message]),
    [['watch', 5, 'socket hang up']],
  );
  t.equal(w1.params.resourceVersion, 'seen-7');
});

t.test('a failed watch call backs off and then resumes; repeated failures double', async (t) => {
  const { r, watcher, errors, listCalls } = setup([[{ items: [], metadata: { resourceVersion: 'r' } }]]);
  const refused = new Error('ECONNREFUSED');
  watcher.failNext.push(refused, refused, refused);
  r.start();
  t.teardown(() => r.close());
  const w = await watcher.call(0);
  t.same(
    errors.map((e) => [e.phase, e.delayMs]),
    [
      ['watch', 5],
      ['watch', 10],
      ['watch', 20],
    ],
  );
  t.equal(w.params.resourceVersion, 'r');
  t.equal(listCalls.length, 1, 'a watch that failed to start does not relist');
});

t.test('close() stops a reflector that is backing off, and one that is watching', async (t) => {
  const { r } = setup([[new Error('down')]], { backoffInitialMs: 60_000 });
  r.start();
  await until('first error', () => true);
  await new Promise((res) => setTimeout(res, 10));
  const started = Date.now();
  await r.close();
  t.ok(Date.now() - started < 1000, 'did not wait out the backoff');

  const s = setup([[{ items: [], metadata: { resourceVersion: '1' } }]]);
  s.r.start();
  const w = await s.watcher.call(0);
  await s.r.close();
  t.ok(w.aborted, 'the watch was aborted');
  t.equal(s.errors.length, 0, 'closing is not an error');
});
