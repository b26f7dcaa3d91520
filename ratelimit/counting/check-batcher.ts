// The scripted checks (other algorithms, several limits) of one event-loop turn, sent to the store
// together: one store call per shard per turn instead of one per request, as the coalescing store does
// for fixed-window increments and with the same timing (turn.ts), so the layers under it (circuit
// breaker, deadline, connection) cost once per turn. Checks are never merged: admission is all or
// nothing per check, and each keeps its own verdict. When the store settles each check on its own
// (evaluateEach), a check Redis refuses fails only the request it belongs to; otherwise a failed store
// call fails every request with a check in it, whole.
import { storeCall, type CounterStore, type LimitCheck, type LimitVerdict } from './store.js';
import { scheduleTurnFlush } from './turn.js';

interface Request {
  readonly checks: readonly LimitCheck[];
  readonly verdicts: LimitVerdict[];
  remaining: number;
  settled: boolean;
  resolve(v: LimitVerdict[]): void;
  reject(err: unknown): void;
}

interface Group {
  readonly checks: LimitCheck[];
  /** Per check of the group: its request and its index there. */
  readonly owners: Request[];
  readonly indices: number[];
}

/** Hands each check of the group its verdict; a check's own error fails only its request. */
function settleGroup(g: Group, results: readonly (LimitVerdict | Error)[]): void {
  for (let k = 0; k < g.checks.length; k++) {
    const r = g.owners[k]!;
    if (r.settled) continue;
    const v = results[k]!;
    if (v instanceof Error) {
      r.settled = true;
      r.reject(v);
      continue;
    }
    r.verdicts[g.indices[k]!] = v;
    if (--r.remaining === 0) {
      r.settled = true;
      r.resolve(r.verdicts);
    }
  }
}

/** A failed store call fails every request with a check in it, whole. */
function failGroup(g: Group, err: unknown): void {
  for (const r of g.owners) {
    if (r.settled) continue;
    r.settled = true;
    r.reject(err);
  }
}

export class CheckBatcher {
  private queue: Request[] = [];
  /** Store calls sent and not yet settled. */
  private inFlight = 0;
  private readonly settledOne = (): void => {
    this.inFlight--;
  };
  /** What shardOf is asked about for a check (its first key and routing); reused, never stored. */
  private readonly probe = { key: '', hits: 0, expireSeconds: 0, perSecond: false };

  constructor(private readonly inner: CounterStore) {}

  evaluate(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    if (checks.length === 0) return Promise.resolve([]);
    return new Promise<LimitVerdict[]>((resolve, reject) => {
      const r: Request = {
        checks,
        verdicts: new Array<LimitVerdict>(checks.length),
        remaining: checks.length,
        settled: false,
        resolve,
        reject,
      };
      if (this.queue.push(r) === 1) scheduleTurnFlush(this.flush, this.inFlight);
    });
  }

  private readonly flush = (): void => {
    const queue = this.queue;
    this.queue = [];
    if (queue.length === 1) {
      const r = queue[0]!;
      this.send(r.checks).then(r.resolve, r.reject);
      return;
    }
    const groups = new Map<string, Group>();
    const inner = this.inner;
    const probe = this.probe;
    for (let q = 0; q < queue.length; q++) {
      const r = queue[q]!;
      for (let i = 0; i < r.checks.length; i++) {
        const c = r.checks[i]!;
        let shard = '';
        if (inner.shardOf) {
          probe.key = c.keys[0]!;
          probe.perSecond = c.perSecond;
          shard = inner.shardOf(probe);
        }
        let g = groups.get(shard);
        if (!g) groups.set(shard, (g = { checks: [], owners: [], indices: [] }));
        g.checks.push(c);
        g.owners.push(r);
        g.indices.push(i);
      }
    }
    for (const g of groups.values()) {
      if (inner.evaluateEach && g.owners.length > 1) {
        this.sendEach(inner, g);
        continue;
      }
      this.send(g.checks).then(
        (verdicts) => settleGroup(g, verdicts),
        (err: unknown) => failGroup(g, err),
      );
    }
  };

  /** One store call for the group; each check's own error fails only its request. */
  private sendEach(inner: CounterStore, g: Group): void {
    this.inFlight++;
    const call = storeCall(() => inner.evaluateEach!(g.checks));
    call.then(this.settledOne, this.settledOne);
    call.then(
      (results) => settleGroup(g, results),
      (err: unknown) => failGroup(g, err),
    );
  }

  private send(checks: readonly LimitCheck[]): Promise<LimitVerdict[]> {
    this.inFlight++;
    const call = storeCall(() => this.inner.evaluate!(checks));
    call.then(this.settledOne, this.settledOne);
    return call;
  }
}
