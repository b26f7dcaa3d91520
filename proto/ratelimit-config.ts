// proto/'s second entry point, beside index.ts: what the configuration model and the config parse
// worker need from the wire contract (the RateLimitConfig resource, its codec, the unit table, the
// Struct helpers, the feature names), without @grpc/grpc-js or @grpc/proto-loader, which index.ts
// loads. Everything here is also exported by index.ts; eslint.config.js lists it as an allowed entry.
export * from './rls-conf.js';
export * from './units.js';
export * from './struct.js';
export * from './features.js';
