// The container image, built as `npm run image` builds it (scripts/build-image.mjs, no Docker daemon) and
// run from its own filesystem: the layers extracted into a directory, the image config's entry point
// started there under chroot as the image's user with the image's environment. A file, a library or a
// permission the image lacks fails here, not on a cluster. Needs root (chroot); skipped otherwise.
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../harness/dist.js';
import { freePorts, LOOPBACK, waitUntil } from '../harness/net.js';
import { findObject, helmTemplate } from '../harness/system.js';

const CHROOT = ['/usr/sbin/chroot', '/usr/bin/chroot'].find((p) => existsSync(p));
const canRun = process.getuid?.() === 0 && CHROOT !== undefined;

t.test(
  'the image runs its entry point from its own filesystem, as its user, with no shell',
  { skip: canRun ? false : 'needs root and chroot to run the image from its extracted layers' },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-image-test-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const tarball = join(dir, 'image.oci.tar');
    const build = spawnSync(
      process.execPath,
      [join(REPO_ROOT, 'scripts', 'build-image.mjs'), '--out', tarball],
      {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        timeout: 600_000,
      },
    );
    t.equal(build.status, 0, `npm run image's script builds the tarball ${build.stderr.slice(-2000)}`);

    // The tarball as `docker load` and OCI tools read it.
    const oci = join(dir, 'oci');
    mkdirSync(oci);
    spawnSync('tar', ['-xf', tarball, '-C', oci]);
    const blob = (digest: string) => readFileSync(join(oci, 'blobs', ...digest.split(':')));
    const index = JSON.parse(readFileSync(join(oci, 'index.json'), 'utf8'));
    t.same(JSON.parse(readFileSync(join(oci, 'oci-layout'), 'utf8')), { imageLayoutVersion: '1.0.0' });
    const manifest = JSON.parse(blob(index.manifests[0].digest).toString());
    const config = JSON.parse(blob(manifest.config.digest).toString());
    const dockerManifest = JSON.parse(readFileSync(join(oci, 'manifest.json'), 'utf8'));
    t.match(dockerManifest[0].RepoTags[0], /^envoy-ratelimit-ts:/, 'docker load names the image');
    t.same(
      config.config.Entrypoint,
      ['/bin/ratelimit'],
      'entry point /bin/ratelimit, as Envoy Gateway runs it',
    );
    t.equal(config.config.User, '65532:65532', 'runs as a non-root user');
    t.equal(config.rootfs.diff_ids.length, manifest.layers.length);

    const rootfs = join(dir, 'rootfs');
    mkdirSync(rootfs);
    for (const layer of manifest.layers) {
      const r = spawnSync('tar', ['-xzf', join(oci, 'blobs', ...layer.digest.split(':')), '-C', rootfs]);
      t.equal(r.status, 0, `layer ${layer.digest} extracts`);
    }
    for (const name of [
      'ratelimit',
      'ratelimit-config',
      'ratelimit-client',
      'ratelimit-control-plane',
      'ratelimit-operator',
    ])
      t.ok(existsSync(join(rootfs, 'bin', name)), `/bin/${name}`);
    t.notOk(existsSync(join(rootfs, 'bin', 'sh')), 'no shell in the image');

    // A config where the service looks by default (RUNTIME_ROOT, RUNTIME_APPDIRECTORY).
    const configDir = join(rootfs, 'srv', 'runtime_data', 'current', 'config');
    mkdirSync(configDir, { recursive: true });
    writeFileSync(
      join(configDir, 'a.yaml'),
      'domain: a\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n',
    );
    const [grpc, http, debug] = await freePorts(3);
    const env: Record<string, string> = Object.fromEntries(
      (config.config.Env as string[]).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
    );
    Object.assign(env, {
      BACKEND_TYPE: 'memory',
      USE_STATSD: 'false',
      RUNTIME_WATCH_ROOT: 'false',
      HOST: LOOPBACK,
      PORT: String(http),
      GRPC_HOST: LOOPBACK,
      GRPC_PORT: String(grpc),
      DEBUG_HOST: LOOPBACK,
      DEBUG_PORT: String(debug),
    });
    const user = `--userspec=${config.config.User}`;
    // Through `env -i`: exactly this environment (the test runner adds its hooks to a child's
    // NODE_OPTIONS, also through a direct `env`, so env is started by unshare, here without new namespaces).
    const inImage = (args: string[]) => [
      '/usr/bin/env',
      '-i',
      ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
      CHROOT!,
      user,
      rootfs,
      ...args,
    ];
    const child = spawn('/usr/bin/unshare', inImage(config.config.Entrypoint), {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    t.teardown(() => child.kill('SIGKILL'));
    await waitUntil(async () => (await fetch(`http://${LOOPBACK}:${http}/healthcheck`)).status === 200, {
      what: 'the image entry point to answer /healthcheck',
      deadlineMs: 60_000,
      context: () => out,
      abort: () => (child.exitCode !== null ? `exited ${child.exitCode}: ${out}` : undefined),
    });
    const decide = async () =>
      (
        await fetch(`http://${LOOPBACK}:${http}/json`, {
          method: 'POST',
          body: '{"domain":"a","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}',
        })
      ).status;
    t.equal(await decide(), 200, 'the first call is allowed');
    t.equal(await decide(), 429, 'the second is over the limit');
    const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
    t.match(status, /^Uid:\s+65532\s/m, 'the process runs as 65532');
    t.match(out, /Listening for gRPC on/, 'its log');

    // The V8 settings the chart's pods run with (its rendered command and NODE_OPTIONS), read from the
    // running process: /bin/ratelimit started as Envoy Gateway and Istio start it runs the same way.
    const rendered = findObject(
      await helmTemplate('rl', 'rl-system', ['--set', 'redis.url=redis:6379']),
      'Deployment',
      'rl-ratelimit',
    ).spec.template.spec.containers[0];
    const chartCommand: string[] = rendered.command;
    t.equal(chartCommand[0], 'node');
    t.equal(chartCommand.at(-1), 'bin/ratelimit.js');
    const chartFlags = chartCommand.slice(1, -1);
    t.ok(chartFlags.includes('--single-threaded-gc'), 'the chart passes --single-threaded-gc');
    const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
    t.same(
      argv,
      ['/usr/local/bin/node', ...chartFlags, '/bin/ratelimit'],
      "the image's node runs with the chart's V8 flags",
    );
    const processEnv = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0');
    const chartNodeOptions = rendered.env.find((e: { name: string }) => e.name === 'NODE_OPTIONS')?.value;
    t.match(chartNodeOptions, /--max-semi-space-size=/, 'the chart sets NODE_OPTIONS');
    t.ok(processEnv.includes(`NODE_OPTIONS=${chartNodeOptions}`), "the image's NODE_OPTIONS is the chart's");

    // The other programs answer --help from the image too.
    for (const name of [
      'ratelimit-config',
      'ratelimit-control-plane',
      'ratelimit-operator',
      'ratelimit-client',
    ]) {
      const r = spawnSync('/usr/bin/unshare', inImage([`/bin/${name}`, '--help']), {
        encoding: 'utf8',
        timeout: 60_000,
      });
      t.equal(r.status, 0, `/bin/${name} --help runs in the image ${r.stderr.slice(0, 500)}`);
    }
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  },
);
