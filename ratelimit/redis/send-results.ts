// How the send paths turn Redis replies and failures into each op's result: the exec result of
// INCRBY/EXPIRE pairs, an error reply that settles its own op only (reply-errors.ts), and a failure
// of the whole call as a CacheError. Used by RedisDeployment (redis-deployment.ts) and its layers.
import { CacheError, MAX_OP_HITS } from '../counting/index.js';
import { incrbyErrorResult, isReplyError, replyError } from './reply-errors.js';
import { countOf } from './resp-reader.js';

export type ExecResult = [Error | null, unknown][] | null;

export function cacheError(what: string, err: unknown): CacheError {
  return err instanceof CacheError ? err : new CacheError(`${what}: ${(err as Error).message}`, err);
}

/** An op's hits as sent: saturated at MAX_OP_HITS (store.ts), so no op can overflow a counter alone. */
export function sentHits(hits: number): number {
  return hits < MAX_OP_HITS ? hits : MAX_OP_HITS;
}

/** An INCRBY's failure as its op's result: an error reply settles that op only (reply-errors.ts). */
export function incrbyFailure(err: unknown): number | Error {
  if (isReplyError(err)) return incrbyErrorResult(err.message, err);
  return cacheError('redis INCRBY/EXPIRE failed', err);
}

/**
 * Per op its count, or the error of its own INCRBY, from an exec result holding INCRBY/EXPIRE pairs,
 * starting at pair `from`. An EXPIRE refused after its INCRBY ran keeps the count (it was counted).
 */
export function countsFrom(res: ExecResult, from: number, n: number): (number | Error)[] {
  if (!res) {
    const err = new CacheError('redis pipeline returned no result');
    return new Array<Error>(n).fill(err);
  }
  const out = new Array<number | Error>(n);
  for (let i = 0; i < n; i++) {
    const [err, value] = res[(from + i) * 2];
    out[i] = err ? incrbyFailure(err) : countOf(value);
  }
  return out;
}

/** A failed script call as a CacheError: an error reply is that call's own (reply-errors.ts) unless it is the server's state. */
export function scriptFailure(err: unknown): CacheError {
  if (isReplyError(err)) return replyError(`redis limit script failed: ${err.message}`, err.message, err);
  return cacheError('redis limit script failed', err);
}

/** Per op its INCRBY's count or error, once every command of the call has settled. */
export async function eachSettled(pending: Promise<number>[], n: number): Promise<(number | Error)[]> {
  const settled = await Promise.allSettled(pending);
  const out = new Array<number | Error>(n);
  for (let i = 0; i < n; i++) {
    const s = settled[2 * i]!;
    out[i] = s.status === 'fulfilled' ? countOf(s.value) : incrbyFailure(s.reason);
  }
  return out;
}
