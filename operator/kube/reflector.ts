// A reflector that never stops: list, then watch from the list's resourceVersion; on 410 Gone (or any
// ERROR event) list again; on a failed list or watch wait with exponential backoff and try again; on
// a watch that ends normally (server timeout) watch again from the last resourceVersion seen. The backoff
// starts over after a successful list and after a watch that delivered events.
// resourceVersion is opaque: only ever passed back to the server, never compared.
import { EventEmitter } from 'node:events';
import { Watch, type KubeConfig } from '@kubernetes/client-node';

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  resourceVersion?: string;
}
export interface KubeObject {
  metadata: ObjectMeta & Record<string, unknown>;
}

export interface ListPage<T> {
  items: T[];
  metadata?: { resourceVersion?: string; continue?: string };
}

export interface ReflectorOptions<T extends KubeObject> {
  readonly kubeConfig: KubeConfig;
  /** List one page (`continueToken` for the next). */
  readonly list: (continueToken: string | undefined) => Promise<ListPage<T>>;
  /** Watch path, e.g. /apis/ratelimit.envoyproxy.io/v1alpha1/ratelimitconfigs. */
  readonly watchPath: string;
  /** Extra watch query parameters, e.g. labelSelector (the list must apply the same). */
  readonly watchParams?: Readonly<Record<string, string>>;
  /** Backoff after errors (default 200 ms doubling to 30 s). */
  readonly backoffInitialMs?: number;
  readonly backoffMaxMs?: number;
  /** Server-side watch timeout, randomized +-25% (default 300 s). */
  readonly watchTimeoutSeconds?: number;
  /** For tests: a Watch-compatible implementation. */
  readonly watcher?: Pick<Watch, 'watch'>;
}

export interface ReflectorEvents<T> {
  /** An object was added, changed or deleted (old/new undefined for add/delete). */
  change: [{ key: string; old: T | undefined; new: T | undefined }];
  /** The store reflects a complete list (after every list). */
  synced: [];
  /** A list or watch failed; a retry follows after delayMs. */
  error: [{ error: Error; delayMs: number; phase: 'list' | 'watch' }];
  /** The watch ended with 410 Gone or an ERROR event: relisting. */
  relist: [{ reason: string }];
}

export function keyOf(o: KubeObject): string {
  return `${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`;
}

class GoneError extends Error {}

export class Reflector<T extends KubeObject> extends EventEmitter<ReflectorEvents<T>> {
  private readonly store = new Map<string, T>();
  private closed = false;
  private hasSynced = false;
  private abort: AbortController | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private readonly watcher: Pick<Watch, 'watch'>;
  /** Last resourceVersion seen (list or watch event), to resume a watch from. */
  private resourceVersion: string | undefined;
  /** The current watch delivered at least one event. */
  private watchProgress = false;

  constructor(private readonly opts: ReflectorOptions<T>) {
    super();
    this.watcher = opts.watcher ?? new Watch(opts.kubeConfig);
  }

  get synced(): boolean {
    return this.hasSynced;
  }

  get(key: string): T | undefined {
    return this.store.get(key);
  }

  list(): T[] {
    return [...this.store.values()];
  }

  keys(): string[] {
    return [...this.store.keys()];
  }

  start(): void {
    this.loop ??= this.run();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.abort?.abort();
    if (this.sleepTimer) clearTimeout(this.sleepTimer);
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    const initial = this.opts.backoffInitialMs ?? 200;
    const max = this.opts.backoffMaxMs ?? 30_000;
    let delay = initial;
    let needList = true;
    while (!this.closed) {
      try {
        if (needList) {
          await this.relist();
          needList = false;
          delay = initial; // progress: a later failure starts the backoff over
        }
        this.watchProgress = false;
        await this.watchOnce();
        delay = initial; // a watch that ended normally: resume at once
      } catch (err) {
        if (this.closed) break;
        if (err instanceof GoneError) {
          needList = true;
          this.emit('relist', { reason: err.message });
          continue;
        }
        const phase = needList ? 'list' : 'watch';
        if (this.watchProgress) delay = initial; // the watch delivered events before it failed
        this.emit('error', { error: err as Error, delayMs: delay, phase });
        await this.sleep(delay);
        delay = Math.min(max, delay * 2);
        // After a failed watch resume from the last resourceVersion; a 410 then triggers a relist.
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.sleepTimer = setTimeout(resolve, ms);
    });
  }

  private async relist(): Promise<void> {
    const items: T[] = [];
    let token: string | undefined;
    let rv: string | undefined;
    do {
      const page = await this.opts.list(token);
      items.push(...page.items);
      token = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion;
    } while (token);
    if (this.closed) return;
    const seen = new Set<string>();
    for (const item of items) {
      const key = keyOf(item);
      seen.add(key);
      const old = this.store.get(key);
      this.store.set(key, item);
      if (old?.metadata.resourceVersion !== item.metadata.resourceVersion) {
        this.emit('change', { key, old, new: item });
      }
    }
    for (const [key, old] of [...this.store]) {
      if (!seen.has(key)) {
        this.store.delete(key);
        this.emit('change', { key, old, new: undefined });
      }
    }
    this.resourceVersion = rv;
    this.hasSynced = true;
    this.emit('synced');
  }

  private watchOnce(): Promise<void> {
    const base = this.opts.watchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.max(1, Math.round(base * (0.75 + Math.random() * 0.5)));
    return new Promise<void>((resolve, reject) => {
      let failure: Error | undefined;
      const onEvent = (phase: string, obj: any) => {
        if (phase === 'ERROR') {
          const code = obj?.code;
          failure = new GoneError(`watch ERROR ${code ?? ''} ${obj?.message ?? ''}`.trim());
          this.abort?.abort();
          return;
        }
        this.watchProgress = true;
        const rv = obj?.metadata?.resourceVersion;
        if (typeof rv === 'string' && rv !== '') this.resourceVersion = rv;
        if (phase === 'BOOKMARK') return;
        const key = keyOf(obj as T);
        const old = this.store.get(key);
        if (phase === 'DELETED') {
          this.store.delete(key);
          this.emit('change', { key, old, new: undefined });
        } else {
          this.store.set(key, obj as T);
          this.emit('change', { key, old, new: obj as T });
        }
      };
      const onDone = (err: any) => {
        if (failure) return reject(failure);
        if (err && !this.closed && err.name !== 'AbortError') {
          const status = err.statusCode ?? err.code;
          if (status === 410) return reject(new GoneError('410 Gone'));
          return reject(err instanceof Error ? err : new Error(String(err)));
        }
        resolve();
      };
      this.watcher
        .watch(
          this.opts.watchPath,
          {
            ...this.opts.watchParams,
            allowWatchBookmarks: true,
            resourceVersion: this.resourceVersion,
            timeoutSeconds,
          },
          onEvent,
          onDone,
        )
        .then(
          (ac) => {
            this.abort = ac;
            if (this.closed) ac.abort();
          },
          (err) => {
            const status = (err as any)?.statusCode ?? (err as any)?.code;
            reject(status === 410 ? new GoneError('410 Gone') : err);
          },
        );
    });
  }
}
