// Phase `xds` (standalone, ours only): our AdsServer on core 0 and N XdsConfigClients on core 1
// (xds-fanout-process.ts); a 100-descriptor config changes a few times; time until the 1st, 50th and last client ACKed.
import { spawn } from 'node:child_process';
import { stat } from '../harness/measure.js';
import type { Figure } from '../report/table.js';
import type { BenchResults, XdsResult } from '../report/results.js';
import { REPO_ROOT } from '../harness/services.js';
import { AUX_CPUS, SERVICE_CPUS, type Phase, type PhaseContext } from './phase.js';

function spawnLines(args: string[], cpusList: string): { lines: AsyncIterable<string>; kill: () => void } {
  const child = spawn('taskset', ['-c', cpusList, process.execPath, '--import', 'tsx', ...args], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  async function* lines(): AsyncIterable<string> {
    let buf = '';
    for await (const chunk of child.stdout.setEncoding('utf8')) {
      buf += chunk as string;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        yield buf.slice(0, nl);
        buf = buf.slice(nl + 1);
      }
    }
  }
  return { lines: lines(), kill: () => child.kill('SIGTERM') };
}

async function xdsBench(clientsN: number, changes: number): Promise<XdsResult> {
  const server = spawnLines(
    ['bench/phases/xds-fanout-process.ts', 'server', String(clientsN), String(changes), '100'],
    SERVICE_CPUS,
  );
  let clients: ReturnType<typeof spawnLines> | undefined;
  try {
    for await (const line of server.lines) {
      if (line.startsWith('PORT ')) {
        clients = spawnLines(
          ['bench/phases/xds-fanout-process.ts', 'clients', line.slice(5), String(clientsN)],
          AUX_CPUS,
        );
        void (async () => {
          for await (const _ of clients.lines); // drain
        })();
      } else if (line.startsWith('{')) return JSON.parse(line) as XdsResult;
    }
    throw new Error('xds bench server ended without a result');
  } finally {
    clients?.kill();
    server.kill();
  }
}

async function run({ o, results, log }: PhaseContext): Promise<void> {
  try {
    results.xds = await xdsBench(o.xdsClients, o.xdsChanges);
    log(`xds: ${JSON.stringify(results.xds.changes.map((c) => c.ms))}`);
  } catch (err) {
    log(`xds bench failed: ${(err as Error).message}`);
  }
}

function figures(r: BenchResults): Figure[] {
  const out: Figure[] = [];
  if (!r.xds) return out;
  for (const m of r.xds.milestones) {
    const vals = r.xds.changes.map((c) => c.ms[String(m)]).filter((x) => x !== undefined);
    const f: Figure = {
      group: `xDS fan-out (ours, ${r.xds.clients} clients)`,
      name: `time until ${m} clients ACKed a change`,
      unit: 'ms',
      better: 'lower',
      ours: stat(vals),
    };
    if (m === r.xds.clients && m >= 500)
      f.target = {
        text: '≤ 2000 ms',
        met: f.ours.median <= 2000 && f.ours.max <= 2000,
        rule: { oursMax: 2000, text: '≤ 2000 ms' },
      };
    out.push(f);
  }
  return out;
}

export const xdsPhase: Phase = { name: 'xds', needs: 'standalone', run, figures };
