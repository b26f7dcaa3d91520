// The debug listener: / lists the paths, /rlconfig prints the loaded config, /stats the
// statistics, /debug/pprof/ the profiles. Go's pprof formats do not exist in Node; the
// equivalents are V8's: a .cpuprofile (CPU, sampled for ?seconds=N) and a .heapsnapshot, both
// opened by Chrome DevTools (Performance / Memory tab, "Load").
import { Session } from 'node:inspector/promises';
import { getHeapSnapshot } from 'node:v8';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from '../../common/index.js';
import { FastifyListener } from './listener.js';
import type { RateLimitService } from '../service/index.js';
import type { StatsStore } from '../stats/index.js';

export interface DebugServerOptions {
  service: RateLimitService;
  stats: StatsStore;
  logger: Logger;
  host: string;
  port: number;
  /**
   * DEBUG_PPROF_ENABLED: serve the CPU profile and the heap snapshot. Off by default: a heap snapshot
   * is the process' memory, secrets included (Redis passwords, TLS keys, xDS headers), and a profile
   * costs CPU on demand; the debug port has no authentication.
   */
  pprofEnabled?: boolean;
  /** /rlconfig ends each line with the limit's name (when a NAMED_LIMITS_* output is on). */
  rlconfigNames?: boolean;
}

/** Longest CPU profile one request may ask for. */
const MAX_PROFILE_SECONDS = 300;

const PPROF_OFF = `/debug/pprof/

profiles are off: set DEBUG_PPROF_ENABLED=true to serve them (a heap snapshot holds every secret the
process knows; bind the debug port to loopback, DEBUG_HOST=127.0.0.1, and reach it by port-forward)
`;

const PPROF_INDEX = `/debug/pprof/

profiles (V8 formats; open them in Chrome DevTools):
  /debug/pprof/profile?seconds=N  CPU profile sampled for N seconds (default 30, at most ${MAX_PROFILE_SECONDS}); a .cpuprofile file for the Performance tab
  /debug/pprof/heap               heap snapshot; a .heapsnapshot file for the Memory tab (pauses the process while it is taken)
`;

function stamp(): string {
  return new Date().toISOString().replace(/[:.]/g, '-');
}

export class DebugServer extends FastifyListener {
  private readonly paths = new Map<string, string>();
  private readonly handlers = new Map<string, () => Promise<string>>();
  private profiling = false;

  constructor(private readonly opts: DebugServerOptions) {
    super({ name: 'debug', ...opts });
    this.addPath('/rlconfig', 'print out the currently loaded configuration for debugging', async () => {
      return opts.service.getConfig()?.dump(opts.rlconfigNames === true) ?? '';
    });
    this.addPath('/stats', 'print out stats', async () => {
      const lines = Object.entries(opts.stats.snapshot()).map(([k, v]) => `${k}: ${v}`);
      for (const [k, t] of Object.entries(opts.stats.timerSnapshot())) {
        const mean = t.count > 0 ? t.sumMs / t.count : 0;
        lines.push(`${k}: count=${t.count} mean_ms=${mean.toFixed(3)}`);
      }
      return lines.join('\n');
    });
    this.paths.set('/debug/pprof/', 'root of various pprof endpoints. hit for help.');
  }

  protected configure(app: FastifyInstance): void {
    app.get('/', async (_req, reply) => {
      const lines = [...this.paths].map(([p, help]) => `${p}: ${help}`);
      return reply.type('text/plain').send(lines.join('\n') + '\n');
    });
    for (const [path, handler] of this.handlers) {
      app.get(path, async (_req, reply) => reply.type('text/plain').send(await handler()));
    }
    const pprof = this.opts.pprofEnabled === true;
    app.get('/debug/pprof/', async (_req, reply) =>
      reply.type('text/plain').send(pprof ? PPROF_INDEX : PPROF_OFF),
    );
    // Off: the profile routes do not exist (404 like any unknown path).
    if (!pprof) return;
    app.get('/debug/pprof/profile', async (req, reply) => this.cpuProfile(req.query, reply));
    app.get('/debug/pprof/heap', async (_req, reply) => {
      reply
        .type('application/octet-stream')
        .header('content-disposition', `attachment; filename="heap-${stamp()}.heapsnapshot"`);
      return reply.send(getHeapSnapshot());
    });
  }

  private async cpuProfile(query: unknown, reply: FastifyReply): Promise<FastifyReply> {
    const raw = (query as { seconds?: string }).seconds;
    const seconds = raw === undefined || raw === '' ? 30 : Number(raw);
    if (!Number.isFinite(seconds) || seconds <= 0 || seconds > MAX_PROFILE_SECONDS) {
      return reply.code(400).type('text/plain').send(`seconds must be in (0, ${MAX_PROFILE_SECONDS}]\n`);
    }
    if (this.profiling) return reply.code(409).type('text/plain').send('a CPU profile is already running\n');
    this.profiling = true;
    const session = new Session();
    try {
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
      await new Promise((r) => setTimeout(r, seconds * 1000));
      const { profile } = await session.post('Profiler.stop');
      return reply
        .type('application/json')
        .header('content-disposition', `attachment; filename="cpu-${stamp()}.cpuprofile"`)
        .send(JSON.stringify(profile));
    } finally {
      session.disconnect();
      this.profiling = false;
    }
  }

  /** Registers a text endpoint listed on `/` (before the first request). */
  addPath(path: string, help: string, handler: () => Promise<string>): void {
    this.paths.set(path, help);
    this.handlers.set(path, handler);
  }
}
