// The benchmark workloads: the rate limit config they run against (one YAML file per domain, loaded by
// both services) and the requests they send. Requests are pre-encoded gRPC frames: a pool cycled through
// for random keys, or made on the fly for the high-cardinality workload (every key distinct).
import { cfg10kYaml, CFG10K_TENANTS, HUGE } from '../../harness/fixtures.js';
import { encodeRequest, grpcFrame, type BenchRequest } from './frames.js';

export type WorkloadName = 'hot' | 'uniform' | 'highcard' | 'desc1' | 'desc3' | 'desc8' | 'cfg10k';
export const WORKLOADS: readonly WorkloadName[] = [
  'hot',
  'uniform',
  'highcard',
  'desc1',
  'desc3',
  'desc8',
  'cfg10k',
];

export const WORKLOAD_TITLES: Record<WorkloadName, string> = {
  hot: 'one hot key',
  uniform: '10k uniform keys',
  highcard: 'distinct keys (high cardinality, over limit)',
  desc1: '1 descriptor (nested, 1k tenants)',
  desc3: '3 descriptors',
  desc8: '8 descriptors',
  cfg10k: '10k-descriptor config (nesting, wildcards)',
};

/** Seeded PRNG (mulberry32), so both services see the same request sequence. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The YAML config files of the benchmark: file name -> text. `reloadVersion` adds a probe rule. */
export function configFiles(reloadVersion = 0): Record<string, string> {
  const files: Record<string, string> = {};
  files['bench_hot.yaml'] = [
    'domain: bench_hot',
    'descriptors:',
    '  - key: hot',
    '    value: k',
    `    rate_limit: { unit: minute, requests_per_unit: ${HUGE} }`,
    '',
  ].join('\n');
  files['bench_uniform.yaml'] = [
    'domain: bench_uniform',
    'descriptors:',
    '  - key: user',
    `    rate_limit: { unit: minute, requests_per_unit: ${HUGE} }`,
    '',
  ].join('\n');
  // requests_per_unit 0: every key is over limit at its first hit and enters the local over-limit cache.
  files['bench_highcard.yaml'] = [
    'domain: bench_highcard',
    'descriptors:',
    '  - key: ip',
    '    rate_limit: { unit: hour, requests_per_unit: 0 }',
    '',
  ].join('\n');
  files['bench_desc.yaml'] = [
    'domain: bench_desc',
    'descriptors:',
    '  - key: tenant',
    '    descriptors:',
    '      - key: route',
    `        rate_limit: { unit: minute, requests_per_unit: ${HUGE} }`,
    '',
  ].join('\n');
  files['bench_check.yaml'] = [
    'domain: bench_check',
    'descriptors:',
    '  - key: a',
    '    rate_limit: { unit: hour, requests_per_unit: 5 }',
    '  - key: b',
    '    value: x',
    '    rate_limit: { unit: hour, requests_per_unit: 2 }',
    '    descriptors:',
    '      - key: c',
    '        rate_limit: { unit: hour, requests_per_unit: 3 }',
    '  - key: w',
    '    value: pre*',
    '    rate_limit: { unit: hour, requests_per_unit: 4 }',
    '  - key: z',
    '    rate_limit: { unit: hour, requests_per_unit: 0 }',
    '  - key: u',
    '    rate_limit: { unlimited: true }',
    '',
  ].join('\n');
  files['bench_cfg10k.yaml'] = cfg10kYaml(reloadVersion);
  return files;
}

/** The request a workload sends as its i-th request (deterministic for a seed). */
export function requestMaker(w: WorkloadName, seed: number, keyBase = 0): (i: number) => BenchRequest {
  const rand = rng(seed);
  const pick = (n: number) => Math.floor(rand() * n);
  switch (w) {
    case 'hot':
      return () => ({ domain: 'bench_hot', descriptors: [[['hot', 'k']]] });
    case 'uniform':
      return () => ({ domain: 'bench_uniform', descriptors: [[['user', `u${pick(10_000)}`]]] });
    case 'highcard':
      return (i) => ({ domain: 'bench_highcard', descriptors: [[['ip', `10.${keyBase + i}`]]] });
    case 'desc1':
    case 'desc3':
    case 'desc8': {
      const n = Number(w.slice(4));
      return () => {
        const d: [string, string][][] = [];
        for (let j = 0; j < n; j++)
          d.push([
            ['tenant', `t${pick(1000)}`],
            ['route', `/r${j}`],
          ]);
        return { domain: 'bench_desc', descriptors: d };
      };
    }
    case 'cfg10k':
      return () => {
        const t = pick(CFG10K_TENANTS);
        const tenant = t < 900 ? `t${t}` : `g${t}-${pick(100)}`;
        const r = pick(10);
        const route = r < 8 ? `/r${r}` : `/w${pick(1000)}`;
        return {
          domain: 'bench_cfg10k',
          descriptors: [
            [['tenant', tenant]],
            [
              ['tenant', tenant],
              ['route', route],
            ],
          ],
        };
      };
  }
}

/** Descriptors per request of a workload. */
export function descriptorsPerRequest(w: WorkloadName): number {
  if (w === 'desc3') return 3;
  if (w === 'desc8') return 8;
  if (w === 'cfg10k') return 2;
  return 1;
}

export interface FrameSource {
  /** The gRPC frame of the i-th request. */
  frame(i: number): Buffer;
}

/**
 * Frames for a workload: a pre-encoded pool of `poolSize` (cycled), or on the fly for highcard. `domain`
 * replaces the workload's own (the same requests against another domain's config, e.g. another algorithm).
 */
export function frameSource(
  w: WorkloadName,
  seed: number,
  keyBase = 0,
  poolSize = 1 << 16,
  domain?: string,
): FrameSource {
  const base = requestMaker(w, seed, keyBase);
  const make = domain === undefined ? base : (i: number) => ({ ...base(i), domain });
  if (w === 'highcard') return { frame: (i) => grpcFrame(encodeRequest(make(i))) };
  const n = w === 'hot' ? 1 : poolSize;
  const pool: Buffer[] = new Array(n);
  for (let i = 0; i < n; i++) pool[i] = grpcFrame(encodeRequest(make(i)));
  return { frame: (i) => pool[i % n] };
}

/** The decision-check sequence: small limits, so OK, near-limit and over-limit answers all occur. */
export function checkSequence(seed = 7, n = 60): BenchRequest[] {
  const rand = rng(seed);
  const pick = (k: number) => Math.floor(rand() * k);
  const out: BenchRequest[] = [];
  for (let i = 0; i < n; i++) {
    const ds: [string, string][][] = [];
    const nd = 1 + pick(3);
    for (let j = 0; j < nd; j++) {
      switch (pick(7)) {
        case 0:
          ds.push([['a', `a${pick(3)}`]]);
          break;
        case 1:
          ds.push([['b', 'x']]);
          break;
        case 2:
          ds.push([
            ['b', 'x'],
            ['c', `c${pick(2)}`],
          ]);
          break;
        case 3:
          ds.push([['w', `pre${pick(3)}`]]);
          break;
        case 4:
          ds.push([['z', 'q']]);
          break;
        case 5:
          ds.push([['u', 'any']]);
          break;
        default:
          ds.push([['nomatch', 'n']]);
      }
    }
    out.push({ domain: 'bench_check', descriptors: ds, hitsAddend: pick(4) === 0 ? 2 : 0 });
  }
  return out;
}
