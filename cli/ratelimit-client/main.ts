// `ratelimit-client`: the reference's command-line test client.
//   ratelimit-client -dial_string localhost:8081 -domain mydomain -descriptors key=value,key2=value2 [-descriptors ...]
import * as grpc from '@grpc/grpc-js';
import { packageVersion, parseProgramArgs, UsageError } from '../../common/index.js';
import { rateLimitServiceDefinition } from '../../proto/index.js';
import type { WireRateLimitRequest, WireRateLimitResponse } from '../../proto/index.js';

export interface ClientArgs {
  dialString: string;
  domain: string;
  descriptors: { key: string; value: string }[][];
  hitsAddend?: number;
}

/** Go's flag syntax (`-flag`, `-flag=value`, `--flag`) as node:util's parseArgs reads it (`--flag`). */
function goFlags(argv: readonly string[]): string[] {
  return argv.map((a) => (/^-[A-Za-z][A-Za-z_]/.test(a) ? `-${a}` : a));
}

/** The client's flags; a mistake is a UsageError (exit 2) that names the nearest flag. */
export function parseArgs(argv: readonly string[]): ClientArgs {
  const { values } = parseProgramArgs({
    args: goFlags(argv),
    options: {
      dial_string: { type: 'string', default: 'localhost:8081' },
      domain: { type: 'string', default: '' },
      descriptors: { type: 'string', multiple: true, default: [] },
      hits_addend: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
      version: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) throw new Answer(USAGE);
  if (values.version) throw new Answer(`ratelimit-client ${packageVersion()}\n`);
  const out: ClientArgs = { dialString: values.dial_string, domain: values.domain, descriptors: [] };
  if (values.hits_addend !== undefined) {
    const n = Number(values.hits_addend);
    if (!Number.isInteger(n) || n < 0)
      throw new UsageError(`-hits_addend: not a non-negative integer: ${values.hits_addend}`);
    out.hitsAddend = n;
  }
  for (const d of values.descriptors) {
    out.descriptors.push(
      d
        .split(',')
        .filter((p) => p !== '')
        .map((p) => {
          const eq = p.indexOf('=');
          if (eq <= 0) throw new UsageError(`invalid descriptor entry '${p}' (expected name=value)`);
          return { key: p.slice(0, eq), value: p.slice(eq + 1) };
        }),
    );
  }
  return out;
}

/** --help or --version: the text to print, exit 0. */
class Answer extends Error {}

export const USAGE = `Usage: ratelimit-client [flags]
  -dial_string string   address of the rate limit server (default "localhost:8081")
  -domain string        rate limit domain
  -descriptors name=value,name=value
                        one descriptor; repeat the flag for several descriptors
  -hits_addend int      hits to add (default 1)
  -h, --help            this text
  --version             the version
Flags take one or two dashes. Exit status: 0 with the response, 1 when the call fails, 2 for bad usage.
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

/** Runs one call; resolves with the exit status, rejects with a UsageError or the call's failure. */
export async function main(argv: readonly string[]): Promise<number> {
  let args: ClientArgs;
  try {
    args = parseArgs(argv);
  } catch (err) {
    if (!(err instanceof Answer)) throw err;
    process.stdout.write(err.message);
    return 0;
  }
  process.stdout.write(`domain: ${args.domain}\n`);
  process.stdout.write('descriptors: ');
  for (const d of args.descriptors)
    process.stdout.write(`[${d.map((e) => `${e.key}=${e.value}`).join(', ')}] `);
  process.stdout.write('\n');
  let response: WireRateLimitResponse;
  try {
    response = await callOnce(args);
  } catch (err) {
    throw new Error(`request error: ${(err as Error).message}`, { cause: err });
  }
  process.stdout.write(`response: ${JSON.stringify(response, null, 2)}\n`);
  return 0;
}
