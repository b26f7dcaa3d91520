// The `papers` bin: the paper similarity service on PORT (3000), data from PAPERS_DATA (the shipped dataset by
// default), new abstracts embedded locally or by SPECTER_URL.
import { loadStore } from './data.js';
import { localSpecter, remoteSpecter } from './embed.js';
import { DEFAULT_DATA } from './paths.js';
import { buildApp } from './service.js';

export async function main(env = process.env): Promise<void> {
  const port = Number(env.PORT ?? 3000);
  const host = env.HOST ?? '0.0.0.0';
  const source = env.PAPERS_DATA || DEFAULT_DATA;
  const embedder = env.SPECTER_URL ? remoteSpecter(env.SPECTER_URL) : localSpecter();
  const queue = Number(env.PAPERS_SEARCH_QUEUE ?? 256);
  if (!Number.isInteger(queue) || queue < 1)
    throw new Error(`PAPERS_SEARCH_QUEUE must be a whole number >= 1, got ${env.PAPERS_SEARCH_QUEUE}`);
  const app = await buildApp({
    logger: { level: env.LOG_LEVEL ?? 'info' },
    embedder,
    maxPendingSearches: queue,
    load: (log) => loadStore(source, log),
    onLoadError: () => {
      process.exitCode = 1;
      void app.close();
    },
  });
  app.log.info({ source, embedder: embedder.name }, 'loading papers');
  await app.listen({ port, host });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void app.close());
}

main().catch((e: Error) => {
  console.error(e);
  process.exit(1);
});
