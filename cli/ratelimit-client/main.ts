// `ratelimit-client`: the reference's command-line test client.
//   ratelimit-client -dial_string localhost:8081 -domain mydomain -descriptors key=value,key2=value2 [-descriptors ...]
import * as grpc from '@grpc/grpc-js';
import { rateLimitServiceDefinition } from '../../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../../proto/index.js';

export interface ClientArgs {
  dialString: string;
  domain: string;
  descriptors: { key: string; value: string }[][];
  hitsAddend?: number;
}

export function parseArgs(argv: string[]): ClientArgs {
  const out: ClientArgs = { dialString: 'localhost:8081', domain: '', descriptors: [] };
  for (let i = 0; i < argv.length; i++) {
    const raw = argv[i];
    const [flag, inline] =
      raw.includes('=') && raw.startsWith('-')
        ? [raw.slice(0, raw.indexOf('=')), raw.slice(raw.indexOf('=') + 1)]
        : [raw, undefined];
    const value = () => {
      if (inline !== undefined) return inline;
      const v = argv[++i];
      if (v === undefined) throw new Error(`flag ${flag} needs a value`);
      return v;
    };
    switch (flag.replace(/^--?/, '')) {
      case 'dial_string':
        out.dialString = value();
        break;
      case 'domain':
        out.domain = value();
        break;
      case 'hits_addend':
        out.hitsAddend = Number(value());
        break;
      case 'descriptors': {
        const pairs = value()
          .split(',')
          .filter((p) => p !== '')
          .map((p) => {
            const eq = p.indexOf('=');
            if (eq <= 0) throw new Error(`invalid descriptor entry '${p}' (expected name=value)`);
            return { key: p.slice(0, eq), value: p.slice(eq + 1) };
          });
        out.descriptors.push(pairs);
        break;
      }
      case 'h':
      case 'help':
        throw new HelpRequested();
      default:
        throw new Error(`unknown flag ${flag}`);
    }
  }
  return out;
}

class HelpRequested extends Error {}

export const USAGE = `Usage: ratelimit-client [flags]
  -dial_string string   address of the rate limit server (default "localhost:8081")
  -domain string        rate limit domain
  -descriptors name=value,name=value
                        one descriptor; repeat the flag for several descriptors
  -hits_addend int      hits to add (default 1)
`;

export async function callOnce(args: ClientArgs): Promise<WireRateLimitResponse> {
  const Client = grpc.makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Client(args.dialString, grpc.credentials.createInsecure());
  const request: WireRateLimitRequest = {
    domain: args.domain,
    descriptors: args.descriptors.map((entries) => ({ entries })),
    hitsAddend: args.hitsAddend,
  };
  try {
    return await new Promise<WireRateLimitResponse>((resolve, reject) =>
      (
        client as unknown as {
          ShouldRateLimit: grpc.requestCallback<WireRateLimitResponse> & ((...a: unknown[]) => void);
        }
      ).ShouldRateLimit(
        request,
        { deadline: Date.now() + 10_000 },
        (err: grpc.ServiceError | null, res?: WireRateLimitResponse) => (err ? reject(err) : resolve(res!)),
      ),
    );
  } finally {
    client.close();
  }
}

export async function main(argv: string[]): Promise<number> {
  let args: ClientArgs;
  try {
    args = parseArgs(argv);
  } catch (err) {
    if (err instanceof HelpRequested) {
      process.stdout.write(USAGE);
      return 0;
    }
    process.stderr.write(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  process.stdout.write(`domain: ${args.domain}\n`);
  process.stdout.write('descriptors: ');
  for (const d of args.descriptors)
    process.stdout.write(`[${d.map((e) => `${e.key}=${e.value}`).join(', ')}] `);
  process.stdout.write('\n');
  try {
    const response = await callOnce(args);
    process.stdout.write(`response: ${JSON.stringify(response, null, 2)}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`request error: ${(err as Error).message}\n`);
    return 1;
  }
}
