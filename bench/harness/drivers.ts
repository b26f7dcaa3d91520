// Load drivers and load shapes. A driver is a process speaking loadgen.ts' protocol (one LoadSpec JSON
// argument; MEASURE_START / MEASURE_END lines around the measured window; one JSON LoadResult line):
//   loadgen — ours (loadgen.ts: Node.js, the raw HTTP/2 client of h2raw.ts, ~15–20 µs of CPU per call);
//   go      — the independent one (go-driver/: grpc-go with go-control-plane's generated client, as a Go
//             caller writes it), built on demand into the tools cache, never into the work tree.
// A shape is how the load reaches the service: `connections` HTTP/2 connections x `inFlight` calls in
// flight on each (closed loop); in open loop only the connection count applies.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { LoadSpec } from '../load/loadgen.js';
import { encodeRequest } from '../load/frames.js';
import { REPO_ROOT } from './services.js';
import { requestMaker, type WorkloadName } from '../load/workloads.js';

export type DriverName = 'loadgen' | 'go';
export const DRIVER_NAMES: readonly DriverName[] = ['loadgen', 'go'];

export interface LoadDriver {
  name: DriverName;
  /** The command line (taskset prefix excluded) that runs one load spec. */
  argv(spec: LoadSpec): string[];
}

export interface Shape {
  connections: number;
  /** Calls in flight per connection (closed loop). */
  inFlight: number;
  /** `2x50`: the form `--shapes=` takes and the label in the tables. */
  label: string;
}

/** Envoy's pattern (a couple of connections, many streams each), then many connections with few each. */
export const DEFAULT_SHAPES = '2x50,64x2';

export function parseShapes(text: string): Shape[] {
  return text
    .split(',')
    .filter(Boolean)
    .map((t) => {
      const m = /^(\d+)x(\d+)$/.exec(t.trim());
      if (!m || Number(m[1]) < 1 || Number(m[2]) < 1 || Number(m[1]) > 1024 || Number(m[2]) > 1000)
        throw new Error(`--shapes: "${t}" is not <connections>x<in flight per connection>, e.g. 2x50`);
      return { connections: Number(m[1]), inFlight: Number(m[2]), label: `${m[1]}x${m[2]}` };
    });
}

export const loadgenDriver: LoadDriver = {
  name: 'loadgen',
  // A young generation no window's garbage fills, and `gc()` for the collection before the window
  // (loadgen.ts): the driver's own GC pauses would otherwise land in the window as latency.
  argv: (spec) => [
    process.execPath,
    '--min-semi-space-size=64',
    '--max-semi-space-size=64',
    '--expose-gc',
    '--import',
    'tsx',
    join(REPO_ROOT, 'bench/load/loadgen.ts'),
    JSON.stringify(spec),
  ],
};

const GO_DRIVER_DIR = join(REPO_ROOT, 'bench/load/go-driver');
const TOOLS_CACHE = process.env.RATELIMIT_TOOLS_CACHE ?? join(homedir(), '.cache', 'ratelimit-ts-tools');

/** Where a Go program of bench/load/<dir> lives: versioned by a hash of main.go, go.mod and go.sum. */
function goProgramPath(dir: string, name: string): string {
  const h = createHash('sha256');
  for (const f of ['main.go', 'go.mod', 'go.sum']) h.update(readFileSync(join(dir, f)));
  return join(TOOLS_CACHE, `${name}-${h.digest('hex').slice(0, 12)}`, name);
}

/** Where the Go driver of these sources lives. */
export function goDriverPath(): string {
  return goProgramPath(GO_DRIVER_DIR, 'bench-go-driver');
}

function goCommand(): string | undefined {
  if (process.env.GO) return process.env.GO;
  for (const dir of (process.env.PATH ?? '').split(':'))
    if (dir && existsSync(join(dir, 'go'))) return join(dir, 'go');
  return existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : undefined;
}

/**
 * A Go program of bench/load/, built first when missing (`go build`, module proxy only, ~15 s to a
 * minute; nice 10) into the tools cache, never into the work tree. Returns undefined with the reason
 * logged when Go is missing or the build fails.
 */
function ensureGoProgram(dir: string, name: string, log: (m: string) => void): string | undefined {
  const out = goProgramPath(dir, name);
  if (existsSync(out)) return out;
  const go = goCommand();
  if (!go) {
    log(`${name}: no go command (set GO=...)`);
    return undefined;
  }
  log(`${name}: building ${out} ...`);
  mkdirSync(join(out, '..'), { recursive: true });
  const tmp = `${out}.tmp-${process.pid}`;
  const r = spawnSync('nice', ['-n', '10', go, 'build', '-trimpath', '-o', tmp, '.'], {
    cwd: dir,
    env: { ...process.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0', GOFLAGS: '-mod=readonly' },
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (r.status !== 0) {
    log(`${name}: build failed: ${(r.stderr || r.error?.message || '').slice(-1500)}`);
    return undefined;
  }
  renameSync(tmp, out);
  const link = join(TOOLS_CACHE, 'bin', name);
  try {
    mkdirSync(join(TOOLS_CACHE, 'bin'), { recursive: true });
    if (existsSync(link)) unlinkSync(link);
    symlinkSync(out, link);
  } catch {
    /* the symlink is a convenience only */
  }
  return out;
}

/** The Go driver's binary (see ensureGoProgram); undefined when it cannot be built. */
export function ensureGoDriver(log: (m: string) => void): string | undefined {
  const bin = ensureGoProgram(GO_DRIVER_DIR, 'bench-go-driver', log);
  if (!bin) log('go driver: measuring with our load generator only');
  return bin;
}

/** The go-control-plane SnapshotCache server of the xds-compare phase (load/go-xds/). */
export function ensureGoXdsServer(log: (m: string) => void): string | undefined {
  return ensureGoProgram(join(REPO_ROOT, 'bench/load/go-xds'), 'bench-go-xds', log);
}

/**
 * The Go driver over `bin`. Its requests are the same as our generator's (requestMaker with the same
 * seed), written once per workload and seed to `dir` as <uint32 BE length><RateLimitRequest> records;
 * highcard keys are made by the driver itself (a new key per call).
 */
export function goDriver(bin: string, dir: string): LoadDriver {
  const files = new Map<string, string>();
  const framesFile = (w: WorkloadName, seed: number): string => {
    const key = `${w}-${seed}`;
    let f = files.get(key);
    if (!f) {
      f = join(dir, `frames-${key}.bin`);
      const make = requestMaker(w, seed);
      const n = w === 'hot' ? 1 : 1 << 16;
      const parts: Buffer[] = [];
      for (let i = 0; i < n; i++) {
        const msg = encodeRequest(make(i));
        const len = Buffer.alloc(4);
        len.writeUInt32BE(msg.length);
        parts.push(len, Buffer.from(msg));
      }
      writeFileSync(f, Buffer.concat(parts));
      files.set(key, f);
    }
    return f;
  };
  return {
    name: 'go',
    argv: (spec) => [
      bin,
      JSON.stringify(
        spec.workload === 'highcard' ? spec : { ...spec, framesFile: framesFile(spec.workload, spec.seed) },
      ),
    ],
  };
}
