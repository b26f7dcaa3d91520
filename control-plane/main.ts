// ratelimit-control-plane: serves RateLimitConfig resources from a directory over ADS (SotW).
import * as grpc from '@grpc/grpc-js';
import { Registry } from 'prom-client';
import {
  cliLogOptions,
  createLogger,
  EndpointServer,
  metricsEndpoint,
  packageVersion,
  parseProgramArgs,
  runProgram,
  UsageError,
  checkListenFlag,
} from '../common/index.js';
import { DEFAULT_NODE, InMemorySnapshotCache } from './cache.js';
import { buildConfigSet, hasErrors, problemLine, readSources } from './config-set/index.js';
import { DirectoryConfigSource } from './file-source.js';
import { registerAdsMetrics, registerSourceMetrics } from './metrics.js';
import { AdsServer, DEFAULT_LISTEN } from './server.js';
import { USAGE } from './usage.js';

function int(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${name}: not a non-negative integer: ${v}`);
  return n;
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseProgramArgs({
    args: argv,
    options: {
      dir: { type: 'string' },
      listen: { type: 'string', default: DEFAULT_LISTEN },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'tls-client-ca': { type: 'string' },
      'merge-domain-config': { type: 'boolean', default: false },
      'rescan-interval': { type: 'string' },
      debounce: { type: 'string' },
      settle: { type: 'string' },
      'reread-delay': { type: 'string' },
      'reread-attempts': { type: 'string' },
      'keepalive-time': { type: 'string' },
      'keepalive-timeout': { type: 'string' },
      'max-connection-age': { type: 'string' },
      'max-send-bytes': { type: 'string' },
      'max-receive-bytes': { type: 'string' },
      'max-delta-names': { type: 'string' },
      'max-delta-name-bytes': { type: 'string' },
      'metrics-listen': { type: 'string' },
      'log-level': { type: 'string' },
      'log-format': { type: 'string' },
      check: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
      version: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`ratelimit-control-plane ${packageVersion()}\n`);
    return 0;
  }
  if (!values.dir) throw new UsageError('--dir is required');
  checkListenFlag(values['metrics-listen'], '--metrics-listen');
  if (!!values['tls-cert'] !== !!values['tls-key'])
    throw new UsageError('--tls-cert and --tls-key go together');
  if (values['tls-client-ca'] && !values['tls-cert'])
    throw new UsageError('--tls-client-ca needs --tls-cert/--tls-key');

  const logOptions = cliLogOptions({ level: values['log-level'], format: values['log-format'] });
  const log = createLogger({ ...logOptions, defaultLevel: 'info' });
  const cache = new InMemorySnapshotCache();
  const source = new DirectoryConfigSource({
    dir: values.dir,
    cache,
    mergeDomainConfig: values['merge-domain-config'],
    rescanIntervalMs: int(values['rescan-interval'], 'rescan-interval'),
    debounceMs: int(values.debounce, 'debounce'),
    settleMs: int(values.settle, 'settle'),
    rereadDelayMs: int(values['reread-delay'], 'reread-delay'),
    rereadAttempts: int(values['reread-attempts'], 'reread-attempts'),
    logger: log,
  });
  if (values.check) {
    // The folder checked as `ratelimit-config validate` checks it, each problem in its words and lines.
    const set = buildConfigSet(readSources([values.dir]), {
      mergeDomainConfig: values['merge-domain-config'],
    });
    for (const p of set.problems) process.stderr.write(`${problemLine(p)}\n`);
    return hasErrors(set) ? 1 : 0;
  }

  const server = new AdsServer({
    cache,
    listen: values.listen,
    tls: values['tls-cert']
      ? { certFile: values['tls-cert'], keyFile: values['tls-key']!, caFile: values['tls-client-ca'] }
      : undefined,
    keepalive: {
      timeMs: int(values['keepalive-time'], 'keepalive-time'),
      timeoutMs: int(values['keepalive-timeout'], 'keepalive-timeout'),
      maxConnectionAgeMs: int(values['max-connection-age'], 'max-connection-age'),
    },
    maxSendMessageBytes: int(values['max-send-bytes'], 'max-send-bytes'),
    maxReceiveMessageBytes: int(values['max-receive-bytes'], 'max-receive-bytes'),
    delta: {
      maxNames: int(values['max-delta-names'], 'max-delta-names'),
      maxNameBytes: int(values['max-delta-name-bytes'], 'max-delta-name-bytes'),
    },
    identifier: 'ratelimit-control-plane',
    logger: log,
  });

  let metricsServer: EndpointServer | undefined;
  if (values['metrics-listen']) {
    const registry = new Registry();
    registerAdsMetrics(server, { registry });
    registerSourceMetrics(source, { registry });
    metricsServer = new EndpointServer(
      values['metrics-listen'],
      { '/metrics': metricsEndpoint(registry) },
      '--metrics-listen',
    );
    const port = await metricsServer.start();
    log.info(
      { listen: values['metrics-listen'], port },
      `metrics listening on ${metricsServer.boundAddress}`,
    );
  }

  // `ready` (a line the e2e harness and humans wait for) only once the folder's default snapshot has
  // loaded: until then a service pointed here would get nothing.
  let ready = false;
  const announce = () => {
    if (ready) return;
    ready = true;
    log.info({ port: server.port, dir: values.dir }, 'ratelimit-control-plane ready');
  };
  let defaultLoaded = false;
  source.on('loaded', (e) => {
    if (e.node !== DEFAULT_NODE) return;
    defaultLoaded = true;
    if (server.port > 0) announce();
  });
  await source.start();
  await server.start();
  if (defaultLoaded) announce();
  else
    log.warn(
      { port: server.port, dir: values.dir },
      `listening on port ${server.port}, serving nothing until ${values.dir} holds a valid config`,
    );

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await source.close();
  await server.close();
  await metricsServer?.close();
  return 0;
}

// Run when executed directly (the bin shim imports this module).
// grpc-js's own log lines (e.g. a bind failure, which this program reports itself) stay out of its output.
grpc.setLogVerbosity(grpc.logVerbosity.NONE);
runProgram('ratelimit-control-plane', () => main(process.argv.slice(2)));
