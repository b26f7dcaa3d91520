// ratelimit-operator: parses flags, loads Kubernetes credentials, runs one replica until SIGTERM/SIGINT.
import * as grpc from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import {
  checkListenFlag,
  cliLogOptions,
  createLogger,
  packageVersion,
  parseProgramArgs,
  runProgram,
} from '../common/index.js';
import { parseDomainPolicy } from './domain-policy.js';
import { defaultIdentity, defaultLeaseNamespace, RateLimitOperator } from './operator.js';
import { USAGE } from './usage.js';

function ms(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name}: not a positive integer (ms): ${v}`);
  return n;
}

function positive(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`--${name}: not a positive integer: ${v}`);
  return n;
}

function bool(v: string, name: string): boolean {
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw new Error(`--${name}: true or false, not ${v}`);
}

function off(v: string): string | undefined {
  return v === 'off' || v === '' ? undefined : v;
}

export function loadKubeConfig(path: string | undefined, env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else if (!env.KUBECONFIG && env.KUBERNETES_SERVICE_HOST) kc.loadFromCluster();
  else kc.loadFromDefault();
  return kc;
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseProgramArgs({
    args: argv,
    options: {
      kubeconfig: { type: 'string' },
      namespace: { type: 'string' },
      'xds-listen': { type: 'string', default: '0.0.0.0:18000' },
      'xds-tls-cert': { type: 'string' },
      'xds-tls-key': { type: 'string' },
      'xds-tls-client-ca': { type: 'string' },
      'max-send-bytes': { type: 'string' },
      'max-delta-names': { type: 'string' },
      'max-delta-name-bytes': { type: 'string' },
      'metrics-listen': { type: 'string', default: '0.0.0.0:8080' },
      'health-listen': { type: 'string', default: '0.0.0.0:8081' },
      'leader-elect': { type: 'string', default: 'true' },
      'leader-election-namespace': { type: 'string' },
      'leader-election-id': { type: 'string', default: 'ratelimit-operator' },
      'lease-duration': { type: 'string' },
      'renew-deadline': { type: 'string' },
      'retry-period': { type: 'string' },
      identity: { type: 'string' },
      resync: { type: 'string' },
      'pod-report-ttl': { type: 'string' },
      'domain-policy': { type: 'string' },
      'log-level': { type: 'string' },
      'log-format': { type: 'string' },
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
    process.stdout.write(`ratelimit-operator ${packageVersion()}\n`);
    return 0;
  }
  checkListenFlag(values['metrics-listen'], '--metrics-listen');
  checkListenFlag(values['health-listen'], '--health-listen');
  if (!!values['xds-tls-cert'] !== !!values['xds-tls-key'])
    throw new Error('--xds-tls-cert and --xds-tls-key go together');
  if (values['xds-tls-client-ca'] && !values['xds-tls-cert'])
    throw new Error('--xds-tls-client-ca needs --xds-tls-cert/--xds-tls-key');
  // A policy that does not parse stops the operator: starting without it would drop tenant isolation.
  const domainPolicy = parseDomainPolicy(values['domain-policy'] ?? process.env.DOMAIN_POLICY);
  const logOptions = cliLogOptions({ level: values['log-level'], format: values['log-format'] });
  const log = createLogger({ ...logOptions, defaultLevel: 'info' });
  const leaderElect = bool(values['leader-elect'], 'leader-elect');
  const operator = new RateLimitOperator({
    kubeConfig: loadKubeConfig(values.kubeconfig),
    namespace: values.namespace,
    xdsListen: values['xds-listen'],
    xdsTls: values['xds-tls-cert']
      ? {
          certFile: values['xds-tls-cert'],
          keyFile: values['xds-tls-key']!,
          caFile: values['xds-tls-client-ca'],
        }
      : undefined,
    xdsMaxSendBytes: positive(values['max-send-bytes'], 'max-send-bytes'),
    xdsDelta: {
      maxNames: positive(values['max-delta-names'], 'max-delta-names'),
      maxNameBytes: positive(values['max-delta-name-bytes'], 'max-delta-name-bytes'),
    },
    metricsListen: off(values['metrics-listen']),
    healthListen: off(values['health-listen']),
    leaderElection: leaderElect
      ? {
          namespace: values['leader-election-namespace'] ?? defaultLeaseNamespace(),
          name: values['leader-election-id'],
          leaseDurationMs: ms(values['lease-duration'], 'lease-duration'),
          renewDeadlineMs: ms(values['renew-deadline'], 'renew-deadline'),
          retryPeriodMs: ms(values['retry-period'], 'retry-period'),
        }
      : undefined,
    identity: values.identity ?? defaultIdentity(),
    resyncMs: ms(values.resync, 'resync'),
    podReportTtlMs: ms(values['pod-report-ttl'], 'pod-report-ttl'),
    domainPolicy,
    logger: log,
  });
  if (domainPolicy) log.info({ domainPolicy: domainPolicy.text }, 'domain policy in force');
  await operator.start();
  await new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  }).then((signal) => log.info({ signal }, 'shutting down'));
  await operator.close();
  return 0;
}

// grpc-js's own log lines (e.g. a bind failure, which this program reports itself) stay out of its output.
grpc.setLogVerbosity(grpc.logVerbosity.NONE);
runProgram('ratelimit-operator', () => main(process.argv.slice(2)));
