// The three shipped binaries (ratelimit, ratelimit-control-plane, ratelimit-operator) write one log
// format, so one log stack reads them all: logrus-style text by default, JSON with LOG_FORMAT=json,
// the same field names and word levels everywhere. Each binary runs from dist/ as a real process,
// the service taking its config over xDS from the control plane; the operator runs against an API
// server that is not there (its list attempts fail: warning lines, the same shape).
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { builtBin, REPO_ROOT } from '../harness/dist.js';
import { freePorts, waitUntil } from '../harness/net.js';

const LEVELS = new Set(['debug', 'info', 'warning', 'error', 'fatal']);
const QUOTED = String.raw`"(?:[^"\\]|\\.)*"`;
const VALUE = String.raw`(?:${QUOTED}|[^\s"=]+)`;
/** A whole text line: time, level, msg, then key=value pairs. */
const TEXT_LINE = new RegExp(
  String.raw`^time=${QUOTED} level=(debug|info|warning|error|fatal) msg=${VALUE}( [A-Za-z0-9_.@-]+=${VALUE})*$`,
);
const PAIR = new RegExp(String.raw`([A-Za-z0-9_.@-]+)=(${VALUE})`, 'g');

interface Entry {
  level: string;
  message: string;
  fields: Record<string, unknown>;
  raw: string;
}

/** One log line in either format as an entry, or a description of why it is not one. */
function parseLine(line: string, format: 'text' | 'json'): Entry | string {
  if (format === 'json') {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line);
    } catch {
      return `not JSON: ${line}`;
    }
    if (typeof o['@timestamp'] !== 'string' || Number.isNaN(Date.parse(o['@timestamp'])))
      return `no @timestamp: ${line}`;
    if (typeof o.level !== 'string' || !LEVELS.has(o.level)) return `level not a word: ${line}`;
    if (typeof o['@message'] !== 'string') return `no @message: ${line}`;
    const { level, '@message': message, ...fields } = o;
    return { level, message: message as string, fields, raw: line };
  }
  if (!TEXT_LINE.test(line)) return `not a logrus text line: ${line}`;
  const pairs: Record<string, unknown> = {};
  for (const m of line.matchAll(PAIR)) pairs[m[1]!] = m[2]!.startsWith('"') ? JSON.parse(m[2]!) : m[2];
  const { time, level, msg, ...fields } = pairs;
  if (Number.isNaN(Date.parse(String(time)))) return `time is not a time: ${line}`;
  return { level: String(level), message: String(msg), fields, raw: line };
}

/** A binary run with stdout and stderr collected line by line. */
class Run {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  private exit?: string;

  constructor(
    readonly name: string,
    args: string[],
    env: Record<string, string>,
  ) {
    this.child = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const s of [this.child.stdout!, this.child.stderr!]) {
      let rest = '';
      s.setEncoding('utf8').on('data', (d: string) => {
        const parts = (rest + d).split('\n');
        rest = parts.pop()!;
        this.lines.push(...parts.filter((l) => l.length > 0));
      });
    }
    this.child.on('exit', (code, signal) => (this.exit = `exited with ${code ?? signal}`));
  }

  /** Waits for a line whose message matches `re` (generous: a busy machine starts Node slowly). */
  waitFor(format: 'text' | 'json', re: RegExp, what: string): Promise<Entry> {
    return waitUntil(
      () =>
        this.lines
          .map((l) => parseLine(l, format))
          .find((e): e is Entry => typeof e !== 'string' && re.test(e.message)),
      {
        deadlineMs: 60_000,
        what: `${this.name}: ${what}`,
        abort: () => this.exit,
        context: () => this.lines.slice(-20).join('\n'),
      },
    );
  }

  stop(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

const RULES = (domain: string, n: number) =>
  `domain: ${domain}\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: ${n}}\n`;

for (const [format, host] of [
  ['text', '127.0.0.1'],
  ['json', '0.0.0.0'],
] as const) {
  t.test(
    `LOG_FORMAT=${format}: one shape across the three binaries, listeners bound on ${host}`,
    async (t) => {
      const dir = mkdtempSync(join(tmpdir(), 'rl-logs-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const env = { LOG_LEVEL: 'info', LOG_FORMAT: format };
      const runs: Run[] = [];
      t.teardown(() => runs.forEach((r) => r.stop()));

      // The control plane, serving a folder.
      copyFileSync(join(REPO_ROOT, 'examples/config/example.yaml'), join(dir, 'example.yaml'));
      const cp = new Run(
        'ratelimit-control-plane',
        [builtBin('ratelimit-control-plane'), '--dir', dir, '--listen', `${host}:0`, '--debounce', '50'],
        env,
      );
      runs.push(cp);
      const cpListening = await cp.waitFor(format, /^xDS server listening on /, 'the xDS listening line');
      const cpAddress = /listening on (\S+)$/.exec(cpListening.message)![1]!;
      t.match(
        cpAddress,
        new RegExp(`^${host.replace(/\./g, '\\.')}:\\d+$`),
        'the control plane names its bound address',
      );
      const xdsPort = Number(cpAddress.split(':').pop());
      const loaded = await cp.waitFor(format, /^config loaded/, 'the config loaded line');
      t.equal(loaded.level, 'info');
      const firstVersion = String(loaded.fields.version);
      t.match(loaded.message, `version ${firstVersion}`, 'the load line names the version');
      t.match(loaded.message, 'example.yaml', 'and the files');

      // The service, taking that config over xDS.
      const [http, grpc, debug] = await freePorts(3, host);
      const svc = new Run('ratelimit', [builtBin('ratelimit')], {
        ...env,
        HOST: host,
        PORT: String(http),
        GRPC_HOST: host,
        GRPC_PORT: String(grpc),
        DEBUG_HOST: host,
        DEBUG_PORT: String(debug),
        BACKEND_TYPE: 'memory',
        USE_STATSD: 'false',
        CONFIG_TYPE: 'GRPC_XDS_SOTW',
        CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xdsPort}`,
        CONFIG_GRPC_XDS_NODE_ID: 'pod',
      });
      runs.push(svc);
      for (const [name, port] of [
        ['HTTP', http],
        ['debug', debug],
        ['gRPC', grpc],
      ] as const) {
        const e = await svc.waitFor(
          format,
          new RegExp(`^Listening for ${name} on '`),
          `the ${name} listening line`,
        );
        t.equal(e.level, 'warning', `${name}: at warning, as the reference logs it`);
        t.match(e.message, `on '${host}:${port}'`, `${name}: the bound address, as bound`);
      }
      const applied = await svc.waitFor(format, /^xDS config applied/, 'the xDS applied line');
      t.equal(String(applied.fields.version), firstVersion, 'the service names the version it applied');
      t.match(applied.message, `version ${firstVersion}`);

      // A change: the control plane names the new version, the service applies that one.
      writeFileSync(join(dir, 'other.yaml'), RULES('other', 7));
      const reloaded = await cp.waitFor(format, /^config loaded.*other\.yaml/, 'the reload line');
      const secondVersion = String(reloaded.fields.version);
      t.not(secondVersion, firstVersion, 'a new version');
      await svc.waitFor(
        format,
        new RegExp(`^xDS config applied: version ${secondVersion}$`),
        'the reload applied',
      );
      const summary = await svc.waitFor(format, /^configuration applied/, 'the service reload line');
      t.equal(summary.level, 'warning', 'an applied edit shows at the default level');

      // A broken file: the rejection is one readable line, its YAML error quoted once.
      writeFileSync(join(dir, 'broken.yaml'), 'domain: broken\ndescriptors:\n  - key: [unclosed\n');
      const rejected = await cp.waitFor(format, /^config rejected/, 'the rejection line');
      t.equal(rejected.level, 'error');
      const error = String(rejected.fields.error);
      t.ok(error.length > 0, `the validator's message: ${error}`);
      t.notMatch(error, /\\[n"]/, 'the message carries no escape sequences once read back');
      t.notMatch(rejected.raw, /\\\\/, 'the line is not escaped twice');

      // The operator, against an API server that does not answer.
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(
        kubeconfig,
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]',
          'users: [{name: u, user: {}}]',
          'contexts: [{name: x, context: {cluster: c, user: u}}]',
          'current-context: x',
        ].join('\n'),
      );
      const op = new Run(
        'ratelimit-operator',
        [
          builtBin('ratelimit-operator'),
          `--kubeconfig=${kubeconfig}`,
          '--leader-elect=false',
          `--xds-listen=${host}:0`,
          `--metrics-listen=${host}:0`,
          `--health-listen=${host}:0`,
        ],
        env,
      );
      runs.push(op);
      for (const name of ['xDS server', 'metrics', 'health']) {
        const e = await op.waitFor(
          format,
          new RegExp(`^${name} listening on `),
          `the ${name} listening line`,
        );
        t.equal(e.level, 'info');
        t.match(
          e.message,
          new RegExp(`on ${host.replace(/\./g, '\\.')}:\\d+$`),
          `operator ${name}: the bound address`,
        );
      }
      t.equal((await op.waitFor(format, /^ratelimit-operator started/, 'the started line')).level, 'info');
      const failed = await op.waitFor(format, /failed; retrying/, 'a failed list');
      t.equal(failed.level, 'warning', 'a problem at warning');

      // Every line of every binary, on stdout and stderr alike, has the one shape.
      for (const r of runs) {
        t.ok(r.lines.length > 0, `${r.name} logged`);
        const bad = r.lines.map((l) => parseLine(l, format)).filter((e) => typeof e === 'string');
        t.same(bad, [], `${r.name}: every line is a ${format} log line`);
      }
    },
  );
}
