// What a ShouldRateLimit call can end in, as kinds the service knows, not transport status codes: the
// gRPC server (grpc-server.ts) and the HTTP server (http-server.ts) each map a kind to their own code in
// one table.

/**
 * - `invalid`: the caller's request is refused (a bad or unbounded value, a key the backend cannot take);
 * - `no-config`: no rate limit configuration is loaded yet;
 * - `unavailable`: the counter store failed (the failure modes did not answer for it).
 */
export type ServiceErrorKind = 'invalid' | 'no-config' | 'unavailable';

/** A request the service refuses or cannot serve; `kind` says which (see ServiceErrorKind). */
export class ServiceError extends Error {
  constructor(
    message: string,
    readonly kind: ServiceErrorKind = 'invalid',
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ServiceError';
  }
}

export const NO_CONFIG_MESSAGE = 'no rate limit configuration loaded';
