// Test helpers for the operator's e2e tests (real API server): install the CRD, server-side apply
// resources, read and delete them. Production code never imports this.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { GROUP, PLURAL, VERSION, type RateLimitConfigObject } from './resource.js';

export const REPO_ROOT = join(import.meta.dirname, '..');
export const CRD_FILE = join(REPO_ROOT, 'charts', 'ratelimit', 'crds', 'ratelimitconfigs.yaml');

/** The API server's message from a client-node ApiException (its Status body), else the error text. */
export function apiMessage(err: unknown): string {
  const e = err as { body?: unknown; message?: string };
  let body = e?.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      return body as string;
    }
  }
  const m = (body as { message?: unknown } | undefined)?.message;
  return typeof m === 'string' ? m : String(e?.message ?? err);
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  deadlineMs = 20_000,
  intervalMs = 100,
): Promise<T> {
  const until = Date.now() + deadlineMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until) {
      throw new Error(
        `timed out after ${deadlineMs} ms waiting for ${what}${last ? `: ${apiMessage(last)}` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Creates (or updates by server-side apply) the committed CRD and waits until it is Established. */
export async function installCrd(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const crd = parse(readFileSync(CRD_FILE, 'utf8'));
  await api.patchCustomResourceDefinition(
    { name: crd.metadata.name, body: crd, fieldManager: 'e2e', force: true },
    setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
  );
  await waitFor('CRD Established', async () => {
    const got = await api.readCustomResourceDefinition({ name: crd.metadata.name });
    return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
  });
}

/** Server-side apply of a RateLimitConfig (fieldValidation Strict, as kubectl does). */
export async function applyRlc(
  kc: KubeConfig,
  obj: RateLimitConfigObject,
  opts: { namespace?: string; fieldManager?: string } = {},
): Promise<RateLimitConfigObject> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const namespace = opts.namespace ?? obj.metadata.namespace ?? 'default';
  return api.patchNamespacedCustomObject(
    {
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
      namespace,
      name: obj.metadata.name!,
      body: { ...obj, metadata: { ...obj.metadata, namespace } },
      fieldManager: opts.fieldManager ?? 'e2e',
      fieldValidation: 'Strict',
      force: true,
    },
    setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
  );
}

export async function getRlc(
  kc: KubeConfig,
  name: string,
  namespace = 'default',
): Promise<RateLimitConfigObject> {
  const api = kc.makeApiClient(CustomObjectsApi);
  return api.getNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name });
}

export async function deleteRlc(kc: KubeConfig, name: string, namespace = 'default'): Promise<void> {
  const api = kc.makeApiClient(CustomObjectsApi);
  await api.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name });
}

/** A RateLimitConfig from a YAML text (the ratelimit file shape goes under spec). */
export function rlcFromYaml(name: string, specYaml: string): RateLimitConfigObject {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'RateLimitConfig',
    metadata: { name },
    spec: parse(specYaml),
  };
}

export function readExamples(
  dir: string,
): { file: string; text: string; objects: RateLimitConfigObject[] }[] {
  return readdirSync(dir)
    .filter((f: string) => f.endsWith('.yaml'))
    .sort()
    .map((file: string) => {
      const text = readFileSync(join(dir, file), 'utf8');
      return { file, text, objects: parseAllDocuments(text).map((d) => d.toJS() as RateLimitConfigObject) };
    });
}

export function toYaml(obj: unknown): string {
  return stringify(obj);
}

export function condition(obj: RateLimitConfigObject | undefined, type: string) {
  return obj?.status?.conditions?.find((c) => c.type === type);
}
