// The operator and the ratelimit pods as the e2e tests run them: the shipped operator bin (built dist/) on
// free loopback ports against a test API server, and a real ratelimit service taking its config over xDS.
import { join } from 'node:path';
import { waitFor } from '../operator/testing.js';
import { startTestApp, type StartTestAppOptions, type TestApp } from '../ratelimit/test-support.js';
import { createXdsSource } from '../ratelimit/sources/index.js';
import { builtBin, REPO_ROOT } from './dist.js';
import type { KubeHarness } from './kube.js';
import { freePorts, ServerProcess } from './net.js';

export interface OperatorProcess {
  readonly identity: string;
  readonly proc: ServerProcess;
  /** Ports of its xDS, Prometheus /metrics and /healthz + /readyz listeners. */
  readonly xds: number;
  readonly metrics: number;
  readonly health: number;
}

/**
 * Starts `ratelimit-operator` from dist/ with its listeners on loopback and `args` after them (leader
 * election, timings, ...), and waits until /readyz answers 200. The caller stops it.
 */
export async function startOperatorProcess(
  kube: KubeHarness,
  identity: string,
  args: readonly string[] = [],
): Promise<OperatorProcess> {
  const [xds, metrics, health] = await freePorts(3);
  const proc = new ServerProcess(
    identity,
    process.execPath,
    [
      builtBin('ratelimit-operator'),
      `--kubeconfig=${kube.kubeconfigPath}`,
      `--xds-listen=127.0.0.1:${xds}`,
      `--metrics-listen=127.0.0.1:${metrics}`,
      `--health-listen=127.0.0.1:${health}`,
      ...args,
    ],
    { logPath: join(kube.dir || '/tmp', `${identity}.log`), cwd: REPO_ROOT, env: process.env },
  );
  await waitFor(
    `${identity} ready`,
    async () => {
      if (!proc.running) throw new Error(`${identity} exited: ${proc.exitReason()}\n${proc.logTail(30)}`);
      return (await fetch(`http://127.0.0.1:${health}/readyz`)).status === 200;
    },
    60_000,
  );
  return { identity, proc, xds, metrics, health };
}

/**
 * The environment of a ratelimit pod taking config over xDS from 127.0.0.1:xdsPort, with quick retries;
 * incremental (delta) xDS by default, as the chart deploys pods.
 */
export function xdsPodEnv(
  node: string,
  xdsPort: number,
  protocol: 'delta' | 'sotw' = 'delta',
): Record<string, string> {
  return {
    CONFIG_TYPE: protocol === 'delta' ? 'GRPC_XDS_DELTA' : 'GRPC_XDS_SOTW',
    CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xdsPort}`,
    CONFIG_GRPC_XDS_NODE_ID: node,
    CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '200ms',
    XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '100ms',
    XDS_CLIENT_BACKOFF_MAX_INTERVAL: '500ms',
    FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
  };
}

/** A real ratelimit service (in this process) taking config over xDS; `appOptions` as startTestApp's. */
export function startXdsPod(
  node: string,
  xdsPort: number,
  appOptions: StartTestAppOptions['appOptions'] = { xdsSourceFactory: createXdsSource },
  protocol: 'delta' | 'sotw' = 'delta',
): Promise<TestApp> {
  return startTestApp({ env: xdsPodEnv(node, xdsPort, protocol), appOptions });
}
