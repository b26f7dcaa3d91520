// What a Redis error reply means for the op that got it and for its shard. A reply caused by the op's own
// key or data (WRONGTYPE, `ERR ...`, an INCRBY past the 64-bit range) fails that op only and never counts
// against the shard's circuit breaker; a reply that says the server cannot serve anyone right now
// (READONLY after a demotion, LOADING, MASTERDOWN, CLUSTERDOWN, OOM...) is a shard failure, as a
// timeout or a lost connection is. Shared by the ioredis paths and the direct counting connection.
import { CacheError, CounterRefusedError, SATURATED_COUNT } from '../counting/index.js';

/** Redis's answer to an INCRBY whose result would leave the signed 64-bit range. */
export function isOverflowReply(message: string): boolean {
  return message.startsWith('ERR increment or decrement would overflow');
}

/** A demoted master (a replica now) refusing a write. */
export function isReadOnlyReply(message: string): boolean {
  return message.startsWith('READONLY');
}

/**
 * A cluster refusing a command without running it, to be sent elsewhere or again (MOVED, ASK) or once
 * the cluster settles (TRYAGAIN, CLUSTERDOWN).
 */
export function isRedirectReply(message: string): boolean {
  return /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(message);
}

/** Error replies that say the server (not the op) is the problem: they count against the shard. */
function isServerStateReply(message: string): boolean {
  // Redis's error codes are the reply's first word; `ERR` is the generic one for a bad command or value.
  if (message.startsWith('ERR max number of clients')) return true;
  return !(message.startsWith('ERR') || message.startsWith('WRONGTYPE'));
}

/**
 * The result of an INCRBY error reply for its op: an overflow is that key saturated (over any limit),
 * a server-state reply a CacheError (the shard's failure), anything else a CounterRefusedError.
 */
export function incrbyErrorResult(message: string, cause?: unknown): number | CacheError {
  if (isOverflowReply(message)) return SATURATED_COUNT;
  return replyError(`redis INCRBY failed: ${message}`, message, cause);
}

/** A CacheError for an error reply, as a CounterRefusedError when the op's data caused it. */
export function replyError(text: string, message: string, cause?: unknown): CacheError {
  return isServerStateReply(message) ? new CacheError(text, cause) : new CounterRefusedError(text, cause);
}

/** The text of an error reply: ioredis' ReplyError carries it as its message. */
export function isReplyError(err: unknown): err is Error {
  return err instanceof Error && err.name === 'ReplyError';
}
