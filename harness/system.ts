// The pieces a whole-system test needs to run what the Helm chart deploys, on loopback, without a
// kubelet: the chart rendered by `helm template`, the pods' environment and arguments taken from it
// (Secrets written where the kubelet would mount them, fieldRefs filled in), a TCP balancer standing in
// for a Service (kube-proxy: a new connection goes to a live backend), and a client that calls
// ShouldRateLimit the way Envoy's ratelimit filter does (one call per request, a 20 ms timeout, failure
// mode allow).
import { mkdirSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { parseAllDocuments } from 'yaml';
import { rateLimitServiceDefinition } from '../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../proto/index.js';
import { resolveHelm } from './kube.js';
import { LOOPBACK } from './net.js';
import { runCommand } from './proc.js';
import { REPO_ROOT } from './dist.js';

export type K8sObject = { kind: string; metadata: { name: string }; [k: string]: any };

/** `helm template <release> charts/ratelimit -n <namespace> <args>`, parsed. Throws on a render error. */
export async function helmTemplate(release: string, namespace: string, args: string[]): Promise<K8sObject[]> {
  const r = await runCommand(resolveHelm(), [
    'template',
    release,
    join(REPO_ROOT, 'charts', 'ratelimit'),
    '--namespace',
    namespace,
    ...args,
  ]);
  if (r.code !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as K8sObject)
    .filter(Boolean);
}

export function findObject(objs: K8sObject[], kind: string, name: string): K8sObject {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`the chart renders no ${kind}/${name}`);
  return o;
}

/** Secret name → its data (file name → content), as the kubelet would mount it. */
export type Secrets = Record<string, Record<string, string>>;

/** One container of a rendered Deployment, made runnable on this machine. */
export class RenderedContainer {
  private readonly container: any;
  private readonly podSpec: any;

  constructor(deployment: K8sObject) {
    this.podSpec = deployment.spec.template.spec;
    this.container = this.podSpec.containers[0];
  }

  /** Writes each mounted Secret's files under root/<secret>/ and returns mountPath → that directory. */
  mountSecrets(root: string, secrets: Secrets): Map<string, string> {
    const dirs = new Map<string, string>();
    for (const m of this.container.volumeMounts ?? []) {
      const vol = (this.podSpec.volumes ?? []).find((v: any) => v.name === m.name);
      const name: string | undefined = vol?.secret?.secretName;
      if (!name) throw new Error(`volume ${m.name} is not a Secret volume`);
      const data = secrets[name];
      if (!data) throw new Error(`the test provides no Secret ${name} (mounted at ${m.mountPath})`);
      const dir = join(root, name);
      mkdirSync(dir, { recursive: true });
      for (const [file, text] of Object.entries(data)) writeFileSync(join(dir, file), text);
      dirs.set(m.mountPath.replace(/\/$/, ''), dir);
    }
    return dirs;
  }

  /** The container's args with mounted paths mapped to the local directories. */
  args(mounts: Map<string, string>): string[] {
    return (this.container.args ?? []).map((a: string) => mapPaths(a, mounts));
  }

  /**
   * The container's environment as the kubelet builds it: values as rendered (mounted paths mapped to the
   * local directories), fieldRefs from the pod's metadata, secretKeyRefs from `secrets`.
   */
  env(
    pod: { name: string; namespace: string },
    secrets: Secrets,
    mounts: Map<string, string>,
  ): Record<string, string> {
    const out: Record<string, string> = {};
    for (const e of this.container.env ?? []) {
      if (e.value !== undefined) out[e.name] = mapPaths(String(e.value), mounts);
      else if (e.valueFrom?.fieldRef) {
        const path = e.valueFrom.fieldRef.fieldPath;
        if (path === 'metadata.name') out[e.name] = pod.name;
        else if (path === 'metadata.namespace') out[e.name] = pod.namespace;
        else throw new Error(`fieldRef ${path} not supported by the test`);
      } else if (e.valueFrom?.secretKeyRef) {
        const { name, key } = e.valueFrom.secretKeyRef;
        const v = secrets[name]?.[key];
        if (v === undefined)
          throw new Error(`the test provides no Secret ${name} key ${key} (env ${e.name})`);
        out[e.name] = v;
      } else throw new Error(`env ${e.name}: unsupported source`);
    }
    return out;
  }
}

function mapPaths(value: string, mounts: Map<string, string>): string {
  for (const [mountPath, dir] of mounts) {
    if (value.includes(`${mountPath}/`)) value = value.split(`${mountPath}/`).join(`${dir}/`);
  }
  return value;
}

/**
 * A Service on loopback: each accepted connection is piped to the next backend (round robin) that
 * accepts; a backend that refuses is skipped. Killing a backend closes its connections, as a dead pod's do.
 */
export class TcpBalancer {
  private server: Server | undefined;
  private next = 0;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly backends: number[]) {}

  async start(): Promise<void> {
    this.server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve) => this.server!.listen(0, LOOPBACK, resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  private accept(client: Socket, tried = 0): void {
    this.sockets.add(client);
    client.once('close', () => this.sockets.delete(client));
    client.on('error', () => {});
    client.pause();
    const port = this.backends[this.next++ % this.backends.length];
    const upstream = createConnection({ host: LOOPBACK, port });
    upstream.once('connect', () => {
      this.sockets.add(upstream);
      upstream.once('close', () => this.sockets.delete(upstream));
      client.pipe(upstream).pipe(client);
      client.resume();
      upstream.once('close', () => client.destroy());
      client.once('close', () => upstream.destroy());
    });
    upstream.once('error', () => {
      if (upstream.connecting && tried + 1 < this.backends.length) {
        this.sockets.delete(client);
        this.accept(client, tried + 1);
      } else client.destroy();
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

export type FilterOutcome = 'OK' | 'OVER_LIMIT' | 'FAILED_OPEN';

/** ShouldRateLimit against one ratelimit pod, as Envoy's filter and as a plain client. */
export class RlsClient {
  private readonly client: grpc.Client;

  constructor(readonly target: string) {
    const Ctor = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
    this.client = new Ctor(target, grpc.credentials.createInsecure());
  }

  /** One call with a deadline; rejects with the gRPC error. */
  call(req: WireRateLimitRequest, timeoutMs = 5000): Promise<WireRateLimitResponse> {
    const c = this.client as unknown as Record<
      string,
      (
        r: WireRateLimitRequest,
        o: grpc.CallOptions,
        cb: (e: grpc.ServiceError | null, res: WireRateLimitResponse) => void,
      ) => void
    >;
    return new Promise((resolve, reject) =>
      c.ShouldRateLimit.call(this.client, req, { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? reject(err) : resolve(res),
      ),
    );
  }

  /**
   * What Envoy's ratelimit filter does with one request: one call, a 20 ms timeout, and
   * `failure_mode_deny: false` — an error or a timeout lets the request through.
   */
  async filter(req: WireRateLimitRequest): Promise<FilterOutcome> {
    try {
      const res = await this.call(req, 20);
      return res.overallCode === 'OVER_LIMIT' ? 'OVER_LIMIT' : 'OK';
    } catch {
      return 'FAILED_OPEN';
    }
  }

  /** Waits until the channel is connected (so the first filter calls do not time out on connect). */
  async connect(deadlineMs = 10_000): Promise<void> {
    await new Promise<void>((resolve, reject) =>
      this.client.waitForReady(Date.now() + deadlineMs, (err) => (err ? reject(err) : resolve())),
    );
  }

  close(): void {
    this.client.close();
  }
}

export function request(domain: string, ...entries: [string, string][]): WireRateLimitRequest {
  return {
    domain,
    descriptors: [{ entries: entries.map(([key, value]) => ({ key, value })) }],
    hitsAddend: 0,
  };
}
