// The baseline the accuracy measurement compares the quota server with: an RLQS server that gives every
// Envoy the rule's FULL budget, whatever the others do (what the known open-source RLQS servers do). It
// answers each usage report at once with a token bucket of the budget per second for every reported
// bucket, so a fleet of N Envoys may admit up to N times the budget.
import * as grpc from '@grpc/grpc-js';
import { LOOPBACK } from '../net.js';
import {
  duration,
  rlqsServiceDefinition,
  type BucketId,
  type QuotaResponse,
  type UsageReports,
} from './wire.js';

export interface StaticQuotaServerOptions {
  /** The budget in requests per second of a bucket (the rule that bucket id falls under). */
  budgetPerSecond: (id: BucketId) => number;
  /** assignment_time_to_live of each answer (ms, Envoy reads whole seconds). Default 10 s. */
  ttlMs?: number;
}

export class StaticQuotaServer {
  private server: grpc.Server | undefined;
  port = 0;
  /** Usage reports received (all streams). */
  reports = 0;

  constructor(private readonly opts: StaticQuotaServerOptions) {}

  get target(): string {
    return `${LOOPBACK}:${this.port}`;
  }

  async start(): Promise<void> {
    const server = new grpc.Server();
    const ttl = duration(this.opts.ttlMs ?? 10_000);
    server.addService(rlqsServiceDefinition(), {
      StreamRateLimitQuotas: (call: grpc.ServerDuplexStream<UsageReports, QuotaResponse>) => {
        call.on('data', (r: UsageReports) => {
          this.reports++;
          const usages = r.bucket_quota_usages ?? [];
          if (!usages.length) return;
          call.write({
            bucket_action: usages.map((u) => {
              const budget = Math.max(1, Math.round(this.opts.budgetPerSecond(u.bucket_id)));
              return {
                bucket_id: u.bucket_id,
                quota_assignment_action: {
                  assignment_time_to_live: ttl,
                  rate_limit_strategy: {
                    token_bucket: {
                      max_tokens: budget,
                      tokens_per_fill: { value: budget },
                      fill_interval: { seconds: 1 },
                    },
                  },
                },
              };
            }),
          });
        });
        call.on('end', () => call.end());
        call.on('error', () => undefined);
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${LOOPBACK}:0`, grpc.ServerCredentials.createInsecure(), (err, port) =>
        err ? reject(err) : resolve(port),
      ),
    );
    this.server = server;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        s.forceShutdown();
        resolve();
      }, 2000);
      s.tryShutdown(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}
