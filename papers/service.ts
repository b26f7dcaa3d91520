// The HTTP API (fastify 5; request bodies validated by ajv through fastify's route schemas) and the web page.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { ErrorObject } from 'ajv';
import { type AbstractEmbedder, localSpecter } from './embed.js';
import { type Dimensions, type Embedding, type Paper, Store } from './data.js';
import { SearchQueueFull } from './searcher.js';
import { PUBLIC_DIR } from './paths.js';
import { normTitle } from './text.js';

export interface AppOptions {
  /** Resolves to the loaded store; the API answers 503 until it does. */
  load: (log: FastifyBaseLogger) => Promise<Store>;
  embedder?: AbstractEmbedder;
  logger?: FastifyServerOptions['logger'];
  /** Called if loading fails (the bin exits). */
  onLoadError?: (err: Error) => void;
  /** Run similarity searches in a worker thread (default), or in the server thread. */
  searchWorker?: boolean;
  /** Searches waiting for the worker, at most; more answer 503 (default 256). */
  maxPendingSearches?: number;
}

type PublicPaper = Omit<Paper, 'glove_embedding' | 'specter_embedding'>;

export interface Result extends PublicPaper {
  distance: number;
  similarity: number;
  rank: number;
}

const strings = { type: 'array', minItems: 1, maxItems: 1000, items: { type: 'string', maxLength: 2000 } };
const inputType = { type: 'string', enum: ['Title', 'ID'] };
const limit = { type: 'integer', minimum: 1 };

const paperOut = {
  type: 'object',
  additionalProperties: true,
  properties: {
    ID: { type: 'string' },
    Title: { type: 'string' },
    Authors: { type: 'array', items: { type: 'string' } },
    Source: { type: 'string' },
    Year: { type: ['integer', 'null'] },
    Abstract: { type: 'string' },
    Keywords: { type: 'array', items: { type: 'string' } },
    CitationCounts: { type: 'number' },
    glove_umap: { type: 'array', items: { type: 'number' } },
    specter_umap: { type: 'array', items: { type: 'number' } },
  },
};
const resultOut = {
  ...paperOut,
  properties: {
    ...paperOut.properties,
    distance: { type: 'number' },
    similarity: { type: 'number' },
    rank: { type: 'integer' },
    matched_keywords: { type: 'array', items: { type: 'string' } },
  },
};
const similarOut = {
  200: {
    type: 'object',
    properties: {
      count: { type: 'integer' },
      results: { type: 'array', items: resultOut },
      not_found: { type: 'array', items: { type: 'string' } },
    },
  },
};

export const schemas = {
  getSimilarPapers: {
    type: 'object',
    additionalProperties: false,
    required: ['input_data', 'input_type', 'limit'],
    properties: {
      input_data: strings,
      input_type: inputType,
      limit,
      embedding: { type: 'string', enum: ['glove', 'specter'], default: 'specter' },
      dimensions: { type: 'string', enum: ['2D', 'nD'], default: 'nD' },
    },
  },
  getSimilarPapersByKeyword: {
    type: 'object',
    additionalProperties: false,
    required: ['input_data', 'limit'],
    properties: { input_data: strings, limit: { type: 'integer', minimum: -1 } },
  },
  getSimilarPapersByAbstract: {
    type: 'object',
    additionalProperties: false,
    required: ['input_data', 'limit'],
    properties: {
      input_data: {
        type: 'object',
        additionalProperties: false,
        required: ['title', 'abstract'],
        properties: {
          title: { type: 'string', maxLength: 2000 },
          abstract: { type: 'string', minLength: 1, maxLength: 100_000 },
        },
      },
      limit,
    },
  },
  checkoutPapers: {
    type: 'object',
    additionalProperties: false,
    required: ['input_data', 'input_type'],
    properties: { input_data: strings, input_type: inputType },
  },
} as const;

/** Turns ajv errors into one message naming the field, e.g. `body.input_type must be one of: Title, ID`. */
export function describeValidation(
  errors: ErrorObject[],
  dataVar: string,
): { field: string; message: string } {
  const e = errors[0];
  const path = (extra?: string) =>
    [dataVar, ...e.instancePath.split('/').filter(Boolean), ...(extra ? [extra] : [])].join('.');
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return {
        field: path(String(p.missingProperty)),
        message: `${path(String(p.missingProperty))} is required`,
      };
    case 'additionalProperties':
      return {
        field: path(String(p.additionalProperty)),
        message: `${path(String(p.additionalProperty))} is not an allowed field`,
      };
    case 'enum':
      return {
        field: path(),
        message: `${path()} must be one of: ${(p.allowedValues as unknown[]).join(', ')}`,
      };
    default:
      return { field: path(), message: `${path()} ${e.message ?? 'is invalid'}` };
  }
}

class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  404: 'Not Found',
  415: 'Unsupported Media Type',
  413: 'Payload Too Large',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

export function publicPaper(p: Paper): PublicPaper {
  const { glove_embedding: _g, specter_embedding: _s, ...rest } = p;
  return rest;
}

const STATIC: Record<string, [string, string]> = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/app.css': ['app.css', 'text/css; charset=utf-8'],
};

export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: opts.logger ?? false,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
    schemaErrorFormatter: (errors, dataVar) => {
      const d = describeValidation(errors as ErrorObject[], dataVar);
      return Object.assign(new Error(d.message), { field: d.field });
    },
  });
  const embedder = opts.embedder ?? localSpecter();
  let store: Store | undefined;
  let state: 'loading' | 'ready' | 'failed' = 'loading';
  let failure = '';

  app.setErrorHandler(
    (err: Error & { statusCode?: number; validation?: unknown; field?: string }, req, reply) => {
      if (err instanceof HttpError) {
        return reply.code(err.statusCode).send({
          statusCode: err.statusCode,
          error: STATUS_TEXT[err.statusCode],
          message: err.message,
          ...err.extra,
        });
      }
      const code = err.validation ? 400 : err.statusCode && err.statusCode >= 400 ? err.statusCode : 500;
      if (code >= 500) req.log.error({ err }, 'request failed');
      return reply.code(code).send({
        statusCode: code,
        error: STATUS_TEXT[code] ?? 'Error',
        message: code >= 500 ? 'internal error' : err.message,
        ...(err.field ? { field: err.field } : {}),
      });
    },
  );

  app.addHook('onRequest', async (req, reply) => {
    const path = req.url.split('?')[0];
    if (STATIC[path] || path === '/health' || path === '/favicon.ico' || state === 'ready') return;
    reply.header('retry-after', '5');
    throw new HttpError(
      503,
      state === 'loading' ? 'papers are still loading, try again shortly' : `loading failed: ${failure}`,
      { state },
    );
  });

  const need = () => store as Store;
  const search = async (
    s: Store,
    kind: Embedding,
    dims: Dimensions,
    q: ArrayLike<number>,
    k: number,
    ex?: number[],
  ) => {
    try {
      return await s.search(kind, dims, q, k, ex);
    } catch (e) {
      if (e instanceof SearchQueueFull)
        throw new HttpError(503, `too many searches waiting, try again shortly`);
      throw e;
    }
  };
  const out = (s: Store, hits: { index: number; distance: number; similarity: number }[]): Result[] =>
    hits.map((h, r) => ({
      ...publicPaper(s.papers[h.index]),
      distance: h.distance,
      similarity: h.similarity,
      rank: r + 1,
    }));

  for (const [path, [file, type]] of Object.entries(STATIC)) {
    app.get(path, async (_req, reply) => reply.type(type).send(await readFile(join(PUBLIC_DIR, file))));
  }

  app.get('/favicon.ico', async (_req, reply) => reply.code(204).send());
  app.get('/health', async () => ({
    state,
    papers: store?.papers.length ?? 0,
    ...(failure ? { failure } : {}),
  }));

  app.get<{ Querystring: { embeddings?: 'true' | 'false' } }>(
    '/getPapers',
    {
      schema: {
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { embeddings: { type: 'string', enum: ['true', 'false'] } },
        },
      },
    },
    async (req) => {
      const s = need();
      const full = req.query.embeddings === 'true';
      return { count: s.papers.length, papers: full ? s.papers : s.papers.map(publicPaper) };
    },
  );

  app.post<{
    Body: {
      input_data: string[];
      input_type: 'ID' | 'Title';
      limit: number;
      embedding: Embedding;
      dimensions: Dimensions;
    };
  }>(
    '/getSimilarPapers',
    { schema: { body: schemas.getSimilarPapers, response: similarOut } },
    async (req) => {
      const s = need();
      const { input_data, input_type, limit, embedding, dimensions } = req.body;
      if (limit >= s.papers.length)
        throw new HttpError(400, `body.limit must be less than the number of papers (${s.papers.length})`, {
          field: 'body.limit',
        });
      const { found, notFound } = s.resolve(input_data, input_type);
      if (found.length === 0)
        throw new HttpError(404, `no paper matches any ${input_type} in body.input_data`, {
          not_found: notFound,
        });
      const index = s.index[embedding][dimensions];
      const key = dimensions === 'nD' ? (`${embedding}_embedding` as const) : (`${embedding}_umap` as const);
      const dim = index.dim;
      const q = new Float64Array(dim);
      for (const i of found) for (let d = 0; d < dim; d++) q[d] += s.papers[i][key][d] / found.length;
      const hits = await search(s, embedding, dimensions, q, limit, found);
      const results = out(
        s,
        hits.map((h) => ({ ...h, similarity: index.similarity(h.distance) })),
      );
      return { count: results.length, results, not_found: notFound };
    },
  );

  app.post<{ Body: { input_data: string[]; limit: number } }>(
    '/getSimilarPapersByKeyword',
    { schema: { body: schemas.getSimilarPapersByKeyword, response: similarOut } },
    async (req) => {
      const s = need();
      const wanted = [...new Set(req.body.input_data.map(normTitle).filter(Boolean))];
      const matched = new Map<number, string[]>();
      const notFound: string[] = [];
      for (const k of wanted) {
        const list = s.byKeyword.get(k);
        if (!list) notFound.push(k);
        for (const i of list ?? []) matched.set(i, [...(matched.get(i) ?? []), k]);
      }
      // Most matched keywords first, then most cited, then ID.
      const ranked = [...matched.entries()].sort(
        ([a, ka], [b, kb]) =>
          kb.length - ka.length ||
          s.papers[b].CitationCounts - s.papers[a].CitationCounts ||
          (s.papers[a].ID < s.papers[b].ID ? -1 : 1),
      );
      const take = req.body.limit === -1 ? ranked.length : req.body.limit;
      const results = ranked.slice(0, take).map(([i, ks], r) => {
        const similarity = wanted.length ? ks.length / wanted.length : 0;
        return {
          ...publicPaper(s.papers[i]),
          matched_keywords: ks,
          distance: 1 - similarity,
          similarity,
          rank: r + 1,
        };
      });
      return { count: results.length, results, not_found: notFound };
    },
  );

  app.post<{ Body: { input_data: { title: string; abstract: string }; limit: number } }>(
    '/getSimilarPapersByAbstract',
    { schema: { body: schemas.getSimilarPapersByAbstract, response: similarOut } },
    async (req) => {
      const s = need();
      const { title, abstract } = req.body.input_data;
      if (!abstract.trim())
        throw new HttpError(400, 'body.input_data.abstract is empty', { field: 'body.input_data.abstract' });
      let v: Float32Array;
      try {
        v = await embedder.embed(title, abstract);
      } catch (e) {
        throw new HttpError(502, `embedding failed: ${(e as Error).message}`);
      }
      const index = s.index.specter.nD;
      if (v.length !== index.dim)
        throw new HttpError(502, `embedder returned ${v.length} values, the specter index has ${index.dim}`);
      const hits = await search(s, 'specter', 'nD', v, req.body.limit);
      const results = out(
        s,
        hits.map((h) => ({ ...h, similarity: index.similarity(h.distance) })),
      );
      return { count: results.length, results, not_found: [] };
    },
  );

  app.post<{ Body: { input_data: string[]; input_type: 'ID' | 'Title' } }>(
    '/checkoutPapers',
    { schema: { body: schemas.checkoutPapers } },
    async (req, reply) => {
      const s = need();
      const { found, notFound } = s.resolve(req.body.input_data, req.body.input_type);
      if (found.length === 0)
        throw new HttpError(404, `no paper matches any ${req.body.input_type} in body.input_data`, {
          not_found: notFound,
        });
      reply
        .header('content-disposition', 'attachment; filename="papers.json"')
        .header('x-papers-not-found', encodeURIComponent(JSON.stringify(notFound)))
        .type('application/json; charset=utf-8');
      return JSON.stringify(found.map((i) => s.papers[i]));
    },
  );

  let closed = false;
  app.addHook('onClose', async () => {
    closed = true;
    await store?.searcher.close();
  });

  // Start loading once the caller has had a chance to listen, so the API can answer 503 meanwhile.
  setImmediate(() => void startLoading());
  const startLoading = () =>
    opts
      .load(app.log)
      .then(async (s) => {
        s.searcher.maxPending = opts.maxPendingSearches ?? 256;
        if ((opts.searchWorker ?? true) && !closed) await s.searcher.start(app.log);
        if (closed) await s.searcher.close();
        store = s;
        state = 'ready';
      })
      .catch((e: Error) => {
        state = 'failed';
        failure = e.message;
        app.log.error({ err: e }, 'loading papers failed');
        opts.onLoadError?.(e);
      });

  return app;
}
