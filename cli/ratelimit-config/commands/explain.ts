// ratelimit-config explain: for each --descriptor, the rule it matches, its name, limit, window and
// cache key; for each --bucket, the descriptor it matches as, and with --rlqs-url the live assignments.
import { parseArgs } from 'node:util';
import type { Settings } from '../../../ratelimit/settings/index.js';
import { compileSet } from '../../../control-plane/config-set/index.js';
import { Explainer, formatExplanations, parseDescriptor } from '../explain.js';
import {
  type BucketReading,
  fetchAssignments,
  formatAssignments,
  formatBucketReading,
  type LiveSubscriber,
  parseBucket,
  readBuckets,
} from '../explain-bucket.js';
import {
  loadSet,
  REQUEST,
  requireValid,
  settingsFrom,
  UsageError,
  type Io,
  type RequestValues,
} from './common.js';

export const options = REQUEST;

/** explain's work: the --descriptor requests, then each --bucket read as the descriptor it matches as. */
export function explainWithBuckets(values: RequestValues, io: Io, settings: Settings) {
  if (!values.domain) throw new UsageError('--domain is required');
  if (!values.descriptor?.length && !values.bucket?.length)
    throw new UsageError('at least one --descriptor k=v[,k=v] (or --bucket k=v[,k=v]) is required');
  const descriptors = (values.descriptor ?? []).map((d) => {
    try {
      return parseDescriptor(d);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  });
  const bucketMaps = (values.bucket ?? []).map((b) => {
    try {
      return parseBucket(b);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  });
  const set = loadSet(values.config ?? [], values, io);
  if (!requireValid(set, 'explain', io)) return undefined;
  let buckets: BucketReading[] = [];
  if (bucketMaps.length > 0) {
    try {
      buckets = readBuckets(compileSet(set), values.domain, bucketMaps);
    } catch (err) {
      io.err(`explain: ${(err as Error).message}\n`);
      return undefined;
    }
  }
  let nowSeconds: number | undefined;
  if (values.now !== undefined) {
    nowSeconds = Number(values.now);
    if (!Number.isInteger(nowSeconds) || nowSeconds < 0) throw new UsageError('--now must be unix seconds');
  }
  const explainer = new Explainer(set);
  const opts = {
    cacheKeyPrefix: settings.cacheKeyPrefix,
    ...(nowSeconds === undefined ? {} : { nowSeconds }),
  };
  const list = explainer.explain(values.domain, descriptors.length > 0 ? descriptors : [], opts);
  const bucketList = buckets.map((b) =>
    b.descriptor === undefined ? undefined : explainer.explain(values.domain!, [[...b.descriptor]], opts)[0]!,
  );
  return { list, buckets, bucketList };
}

export async function run(args: string[], io: Io): Promise<number> {
  // The config's files and folders: --config, or as positional arguments (as validate takes them).
  const { values: flags, positionals } = parseArgs({ args, options, allowPositionals: true });
  const values = { ...flags, config: [...(flags.config ?? []), ...positionals] };
  const format = values.format ?? 'text';
  if (!['text', 'json'].includes(format)) throw new UsageError(`unknown --format ${format}`);
  const r = explainWithBuckets(values, io, settingsFrom(values, io));
  if (!r) return 2;
  const url = values['rlqs-url'];
  const timeoutMs = values.timeout === undefined ? 10_000 : Number(values.timeout) * 1000;
  if (!(timeoutMs > 0)) throw new UsageError('--timeout must be a positive number of seconds');
  const live: (LiveSubscriber[] | string)[] = [];
  if (url !== undefined) {
    for (const b of r.buckets) {
      try {
        live.push(await fetchAssignments(url, values.domain!, b.bucket, timeoutMs));
      } catch (err) {
        live.push(`cannot read ${url}/rlqs: ${(err as Error).message}`);
      }
    }
  }
  if (format === 'json') {
    const buckets = r.buckets.map((b, i) => ({
      bucket: b.bucket,
      descriptor: b.descriptor ?? null,
      explanation: r.bucketList[i] ?? null,
      ...(url === undefined ? {} : { assignments: live[i] }),
    }));
    io.out(JSON.stringify({ domain: values.domain, descriptors: r.list, buckets }, null, 2) + '\n');
    return 0;
  }
  if (r.list.length > 0) io.out(formatExplanations(values.domain!, r.list));
  r.buckets.forEach((b, i) => {
    io.out(formatBucketReading(b));
    const x = r.bucketList[i];
    if (x) io.out(formatExplanations(values.domain!, [x]));
    if (url !== undefined) {
      const l = live[i]!;
      io.out(typeof l === 'string' ? `  ${l}\n` : formatAssignments(url, l));
    }
  });
  return 0;
}
