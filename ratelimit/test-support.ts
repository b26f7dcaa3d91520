// Starts the real service in-process for tests: config files in a temp dir, listeners on
// 127.0.0.1 with port 0, a real gRPC client. Tests use this; production code never imports it.
import * as grpc from '@grpc/grpc-js';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rateLimitServiceDefinition } from '../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../proto/index.js';
import { RateLimitApp, type RateLimitAppOptions } from './app.js';
import { createLogger } from '../common/index.js';
import { loadSettings } from './settings/index.js';
import { loadTracing } from './tracing/index.js';

export interface TestApp {
  app: RateLimitApp;
  configDir: string;
  root: string;
  httpUrl: string;
  debugUrl: string;
  grpcAddress: string;
  call(req: WireRateLimitRequest): Promise<WireRateLimitResponse>;
  postJson(body: unknown): Promise<{ status: number; body: string; json: () => any }>;
  writeConfig(name: string, yaml: string): void;
  close(): Promise<void>;
}

export interface StartTestAppOptions {
  env?: Record<string, string>;
  files?: Record<string, string>;
  appOptions?: Partial<RateLimitAppOptions>;
}

export async function startTestApp(opts: StartTestAppOptions = {}): Promise<TestApp> {
  const root = mkdtempSync(join(tmpdir(), 'rl-app-'));
  const configDir = join(root, 'config');
  mkdirSync(configDir, { recursive: true });
  for (const [name, yaml] of Object.entries(opts.files ?? {})) writeFileSync(join(configDir, name), yaml);
  const settings = loadSettings({
    HOST: '127.0.0.1',
    PORT: '0',
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: '0',
    DEBUG_HOST: '127.0.0.1',
    DEBUG_PORT: '0',
    RUNTIME_ROOT: root,
    RUNTIME_APPDIRECTORY: 'config',
    RUNTIME_WATCH_ROOT: 'false',
    BACKEND_TYPE: 'memory',
    USE_STATSD: 'false',
    EXPIRATION_JITTER_MAX_SECONDS: '0',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'fatal',
    ...opts.env,
  });
  const logger = createLogger({ level: settings.logLevel, format: settings.logFormat });
  const app = new RateLimitApp({
    settings,
    logger,
    tracing: await loadTracing(settings.tracing, { logger }),
    ...opts.appOptions,
  });
  await app.start();
  const Client = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const grpcAddress = `127.0.0.1:${app.grpc!.port}`;
  const client = new Client(grpcAddress, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    ShouldRateLimit(
      req: WireRateLimitRequest,
      cb: (err: grpc.ServiceError | null, res?: WireRateLimitResponse) => void,
    ): void;
  };
  const httpUrl = `http://127.0.0.1:${app.http!.port}`;
  return {
    app,
    root,
    configDir,
    httpUrl,
    debugUrl: `http://127.0.0.1:${app.debug!.port}`,
    grpcAddress,
    call: (req) =>
      new Promise((resolve, reject) =>
        client.ShouldRateLimit(req, (err, res) => (err ? reject(err) : resolve(res!))),
      ),
    postJson: async (body) => {
      const res = await fetch(`${httpUrl}/json`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text, json: () => JSON.parse(text) };
    },
    writeConfig: (name, yaml) => writeFileSync(join(configDir, name), yaml),
    close: async () => {
      client.close();
      await app.close(2000);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Polls until fn returns true or the deadline passes. */
export async function eventually(
  fn: () => boolean | Promise<boolean>,
  deadlineMs = 5000,
  what = 'condition',
): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > until) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export function descriptor(...pairs: [string, string][]): { entries: { key: string; value: string }[] } {
  return { entries: pairs.map(([key, value]) => ({ key, value })) };
}

/**
 * Fixed windows roll over on the wall clock, so a test that counts several hits in one minute
 * window fails when it happens to straddle the boundary. Call this first: when less than
 * `needMs` of the current window is left, it waits for the next window to begin.
 */
export async function roomInWindow(unitSeconds = 60, needMs = 3000): Promise<void> {
  const windowMs = unitSeconds * 1000;
  const left = windowMs - (Date.now() % windowMs);
  if (left < needMs) await new Promise((r) => setTimeout(r, left + 20));
}
