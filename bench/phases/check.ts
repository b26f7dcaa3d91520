// Phase `check`: the same 60 sequential requests to each service after a FLUSHALL; decisions must be identical.
import type { CheckResult } from '../report/results.js';
import type { ServiceKind } from '../harness/services.js';
import { checkSequence } from '../load/workloads.js';
import type { Phase, PhaseContext } from './phase.js';

/**
 * Decision summary of a response: overall code and, per descriptor, code / remaining / limit. Proto3 reads an
 * absent scalar as 0, so a limit sent as an explicit 0 (protobufjs) and one left out (Go) compare equal.
 */
function decisionOf(r: {
  overallCode?: string;
  statuses?: { code?: string; limitRemaining?: number; currentLimit?: { requestsPerUnit?: number } | null }[];
}): string {
  const st = (r.statuses ?? []).map(
    (s) =>
      `${s.code ?? 'UNKNOWN'}/${s.limitRemaining ?? 0}/${s.currentLimit ? (s.currentLimit.requestsPerUnit ?? 0) : '-'}`,
  );
  return `${r.overallCode ?? 'UNKNOWN'} [${st.join(' ')}]`;
}

async function run({ svcs, redis, log, results }: PhaseContext): Promise<void> {
  // The check uses hour windows: stay clear of an hour boundary so both services count in the same window.
  const intoHour = (Date.now() / 1000) % 3600;
  if (intoHour > 3590) await new Promise((r) => setTimeout(r, (3601 - intoHour) * 1000));
  const seq = checkSequence();
  const got: Partial<Record<ServiceKind, string[]>> = {};
  for (const kind of ['ours', 'reference'] as const) {
    const svc = svcs[kind];
    if (!svc) continue;
    await redis.flushAll();
    const out: string[] = [];
    for (const r of seq) out.push(decisionOf(await svc.call(r)));
    got[kind] = out;
  }
  const mismatches: CheckResult['mismatches'] = [];
  if (got.ours && got.reference) {
    for (let i = 0; i < seq.length; i++)
      if (got.ours[i] !== got.reference[i])
        mismatches.push({ index: i, ours: got.ours[i], reference: got.reference[i] });
  }
  const res: CheckResult = {
    requests: seq.length,
    identical: got.reference ? mismatches.length === 0 : undefined,
    mismatches,
    oursOverLimit: (got.ours ?? []).filter((d) => d.startsWith('OVER_LIMIT')).length,
  };
  log(
    `decision check: ${seq.length} requests, ${res.oursOverLimit} over limit, identical=${res.identical ?? 'n/a (no reference)'}`,
  );
  results.check = res;
}

export const checkPhase: Phase = { name: 'check', run };
