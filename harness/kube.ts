// A real Kubernetes API server for tests: etcd + kube-apiserver on free loopback ports in a temp dir, with
// static token auth (a system:masters user) and a kubeconfig written next to them. The binaries are the ones
// scripts/build-go-tools.sh builds into a cache outside the work tree; KUBEBUILDER_ASSETS (envtest layout)
// overrides them, and E2E_USE_EXISTING_CLUSTER=true uses $KUBECONFIG (e.g. a kind cluster) instead.
// Without kube-controller-manager there is no garbage collection and namespaces never finish deleting.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { freePorts, LOOPBACK, makeTempDir, removeTempDir, ServerProcess, waitUntil } from './proc.js';

/** The Go-built tools the e2e tests use, by binary name. */
export type GoTool =
  | 'kube-apiserver'
  | 'etcd'
  | 'kubectl'
  | 'helm'
  | 'service_cmd'
  | 'client_cmd'
  | 'h2spec'
  | 'eg-check'
  | 'istio-check';

const BUILD_HINT = 'run `bash scripts/build-go-tools.sh` (about 15 min cold on 2 cores) to build it';

/** Where scripts/build-go-tools.sh caches its builds: `$RATELIMIT_TOOLS_CACHE` or `~/.cache/ratelimit-ts-tools`. */
export function toolsCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.RATELIMIT_TOOLS_CACHE || join(homedir(), '.cache', 'ratelimit-ts-tools');
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Absolute path of a Go-built tool. `kube-apiserver`, `etcd` and `kubectl` come from `$KUBEBUILDER_ASSETS` when
 * it is set (and then must be there); everything else, and those without it, from the build cache's `bin/`.
 * Throws a message that says how to build the tool when it is missing.
 */
export function resolveGoTool(name: GoTool, env: NodeJS.ProcessEnv = process.env): string {
  const assets = env.KUBEBUILDER_ASSETS;
  if (assets && (name === 'kube-apiserver' || name === 'etcd' || name === 'kubectl')) {
    const p = join(assets, name);
    if (isExecutable(p)) return p;
    // envtest bundles may lack kubectl; fall back to the cache for it only.
    if (name !== 'kubectl') {
      throw new Error(
        `KUBEBUILDER_ASSETS=${assets} has no executable ${name}; fix the path or unset it and ${BUILD_HINT}`,
      );
    }
  }
  const p = join(toolsCacheDir(env), 'bin', name);
  if (!isExecutable(p)) throw new Error(`${name} not found at ${p}: ${BUILD_HINT}`);
  return p;
}

export const resolveKubectl = (env: NodeJS.ProcessEnv = process.env): string => resolveGoTool('kubectl', env);
export const resolveHelm = (env: NodeJS.ProcessEnv = process.env): string => resolveGoTool('helm', env);
/** The reference envoyproxy/ratelimit service (`service_cmd`). */
export const resolveReferenceRatelimit = (env: NodeJS.ProcessEnv = process.env): string =>
  resolveGoTool('service_cmd', env);
/** The reference envoyproxy/ratelimit gRPC client (`client_cmd`). */
export const resolveReferenceRatelimitClient = (env: NodeJS.ProcessEnv = process.env): string =>
  resolveGoTool('client_cmd', env);

export interface KubeHarness {
  /** A kubeconfig file for kubectl, helm and the operator. */
  kubeconfigPath: string;
  /** API server URL, e.g. https://127.0.0.1:39123. */
  server: string;
  /** Bearer token of a system:masters user (empty for an existing cluster that authenticates otherwise). */
  token: string;
  /** Loaded from kubeconfigPath. */
  kubeConfig: KubeConfig;
  /** True when E2E_USE_EXISTING_CLUSTER=true: nothing was started and stop() does nothing. */
  existing: boolean;
  /** The temp dir with data, certs and logs (etcd.log, kube-apiserver.log); empty for an existing cluster. */
  dir: string;
  /** Stops what this harness started (kube-apiserver, then etcd) and removes its temp dir. Idempotent. */
  stop(): Promise<void>;
}

export interface StartKubeOptions {
  /** Deadline for etcd and the API server to become ready (default 90 s; a cold start on 2 busy cores is slow). */
  readyTimeoutMs?: number;
  /** Extra kube-apiserver flags, e.g. `--feature-gates=...`. */
  apiserverArgs?: string[];
  /** Keep the temp dir after stop() (also when E2E_KEEP_TMP=true), to read the logs. */
  keepDir?: boolean;
  /** Environment to read KUBEBUILDER_ASSETS, KUBECONFIG, E2E_USE_EXISTING_CLUSTER, RATELIMIT_TOOLS_CACHE from. */
  env?: NodeJS.ProcessEnv;
}

const TOKEN_USER = 'e2e-admin';
/** SIGTERM first; SIGKILL what has not exited after this long. */
const STOP_GRACE_MS = 10_000;

/** Starts etcd + kube-apiserver (or attaches to an existing cluster) and waits until /readyz answers ok. */
export async function startKube(opts: StartKubeOptions = {}): Promise<KubeHarness> {
  const env = opts.env ?? process.env;
  if (env.E2E_USE_EXISTING_CLUSTER === 'true') return useExistingCluster(env);
  const apiserverBin = resolveGoTool('kube-apiserver', env);
  const etcdBin = resolveGoTool('etcd', env);
  const keepDir = opts.keepDir ?? env.E2E_KEEP_TMP === 'true';

  // A port found free can be taken before the server binds it; start over on new ports a few times.
  const attempts = 3;
  for (let attempt = 1; ; attempt++) {
    // A kept dir must outlive the test process, so it is not one of net.ts's tracked temp dirs.
    const dir = keepDir ? mkdtempSync(join(tmpdir(), 'e2e-kube-')) : makeTempDir('e2e-kube');
    try {
      return await startOnce(dir, apiserverBin, etcdBin, opts, keepDir);
    } catch (err) {
      const portClash = err instanceof PortInUseError;
      if (!keepDir) removeTempDir(dir);
      if (!portClash || attempt >= attempts) throw err;
    }
  }
}

class PortInUseError extends Error {}

async function startOnce(
  dir: string,
  apiserverBin: string,
  etcdBin: string,
  opts: StartKubeOptions,
  keepDir: boolean,
): Promise<KubeHarness> {
  const readyTimeoutMs = opts.readyTimeoutMs ?? 90_000;
  const certDir = join(dir, 'certs');
  mkdirSync(certDir);
  mkdirSync(join(dir, 'etcd'));

  // Service account signing key: kube-apiserver requires one even when nothing uses service accounts.
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  });
  writeFileSync(join(certDir, 'sa.pub'), publicKey);
  writeFileSync(join(certDir, 'sa.key'), privateKey, { mode: 0o600 });
  const token = randomBytes(24).toString('hex');
  writeFileSync(join(dir, 'tokens.csv'), `${token},${TOKEN_USER},${TOKEN_USER}-uid,"system:masters"\n`, {
    mode: 0o600,
  });

  const [etcdClientPort, etcdPeerPort, apiPort] = await freePorts(3);
  const etcdUrl = `http://${LOOPBACK}:${etcdClientPort}`;
  const peerUrl = `http://${LOOPBACK}:${etcdPeerPort}`;
  const server = `https://${LOOPBACK}:${apiPort}`;
  const started: ServerProcess[] = [];
  const stopAll = async () => {
    // Reverse order: the API server first, so it does not log etcd connection errors while going down.
    for (const p of started.reverse()) await p.stop(STOP_GRACE_MS);
  };

  try {
    const etcd = new ServerProcess(
      'etcd',
      etcdBin,
      [
        '--name=e2e',
        `--data-dir=${join(dir, 'etcd')}`,
        '--unsafe-no-fsync', // test data: durability costs seconds per start on a busy disk
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=e2e=${peerUrl}`,
        '--log-level=warn',
      ],
      { logPath: join(dir, 'etcd.log'), cwd: dir, env: childEnv() },
    );
    started.push(etcd);
    await waitReady(etcd, readyTimeoutMs, 'etcd /health', async () => {
      const { status, body } = await get(`${etcdUrl}/health`);
      return status === 200 && body.includes('"health":"true"');
    });

    const apiserver = new ServerProcess(
      'kube-apiserver',
      apiserverBin,
      [
        `--etcd-servers=${etcdUrl}`,
        `--advertise-address=${LOOPBACK}`, // without it a loopback-only host has "no suitable network address"
        `--bind-address=${LOOPBACK}`,
        `--secure-port=${apiPort}`,
        `--cert-dir=${certDir}`,
        `--service-account-issuer=${server}/`,
        `--service-account-key-file=${join(certDir, 'sa.pub')}`,
        `--service-account-signing-key-file=${join(certDir, 'sa.key')}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--authorization-mode=RBAC',
        `--token-auth-file=${join(dir, 'tokens.csv')}`,
        '--disable-admission-plugins=ServiceAccount',
        '--allow-privileged=true',
        ...(opts.apiserverArgs ?? []),
      ],
      { logPath: join(dir, 'kube-apiserver.log'), cwd: dir, env: childEnv() },
    );
    started.push(apiserver);
    // --cert-dir gets a self-signed serving cert (followed by its CA) for 127.0.0.1; clients trust that file.
    const caPath = join(certDir, 'apiserver.crt');
    await waitReady(apiserver, readyTimeoutMs, 'kube-apiserver /readyz', async () => {
      if (!existsSync(caPath)) return false;
      const { status, body } = await get(`${server}/readyz`, { ca: readFileSync(caPath), token });
      if (status !== 200) throw new Error(`/readyz ${status}: ${body.slice(0, 300)}`);
      return true;
    });

    const kubeconfigPath = join(dir, 'kubeconfig');
    writeFileSync(kubeconfigPath, kubeconfigYaml(server, caPath, token), { mode: 0o600 });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfigPath);

    let stopped: Promise<void> | undefined;
    return {
      kubeconfigPath,
      server,
      token,
      kubeConfig,
      existing: false,
      dir,
      stop() {
        stopped ??= (async () => {
          await stopAll();
          if (!keepDir) removeTempDir(dir);
        })();
        return stopped;
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** The child's environment: ours, minus KUBECONFIG so nothing the apiserver or etcd does reads a user's cluster. */
function childEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.KUBECONFIG;
  return env;
}

async function waitReady(
  proc: ServerProcess,
  timeoutMs: number,
  what: string,
  probe: () => Promise<boolean>,
): Promise<void> {
  try {
    await waitUntil(probe, { deadlineMs: timeoutMs, intervalMs: 200, what, abort: () => proc.exitReason() });
  } catch (err) {
    const tail = proc.logTail(40);
    const message = `${(err as Error).message}\n${tail}`;
    if (!proc.running && /address already in use/i.test(tail))
      throw new PortInUseError(message, { cause: err });
    throw new Error(message, { cause: err });
  }
}

function get(
  url: string,
  opts: { ca?: Buffer; token?: string } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const headers: Record<string, string> = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
    const options = { headers, timeout: 5_000 };
    const req = u.protocol === 'https:' ? request(u, { ...options, ca: opts.ca }) : httpRequest(u, options);
    req.once('timeout', () => req.destroy(new Error(`${url}: no answer in 5 s`)));
    req.once('error', reject);
    req.once('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.once('error', reject);
    });
    req.end();
  });
}

/** A kubeconfig (JSON is valid YAML, which every client reads). */
function kubeconfigYaml(server: string, caPath: string, token: string): string {
  return `${JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'e2e', cluster: { server, 'certificate-authority': caPath } }],
      users: [{ name: TOKEN_USER, user: { token } }],
      contexts: [{ name: 'e2e', context: { cluster: 'e2e', user: TOKEN_USER, namespace: 'default' } }],
      'current-context': 'e2e',
    },
    null,
    2,
  )}\n`;
}

function useExistingCluster(env: NodeJS.ProcessEnv): KubeHarness {
  const kubeconfigPath = env.KUBECONFIG?.split(':')[0] || join(homedir(), '.kube', 'config');
  if (!existsSync(kubeconfigPath)) {
    throw new Error(
      `E2E_USE_EXISTING_CLUSTER=true but there is no kubeconfig at ${kubeconfigPath} (set KUBECONFIG)`,
    );
  }
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error(`${kubeconfigPath} has no current cluster`);
  return {
    kubeconfigPath,
    server: cluster.server,
    token: kubeConfig.getCurrentUser()?.token ?? '',
    kubeConfig,
    existing: true,
    dir: '',
    stop: async () => {},
  };
}
