// Errors a ShouldRateLimit call can end in, with the gRPC and HTTP status each maps to.
import { status as GrpcStatus } from '@grpc/grpc-js';

/** A request the service refuses (validation) or cannot serve (no config): counted as service_error. */
export class ServiceError extends Error {
  constructor(
    message: string,
    readonly grpcCode: GrpcStatus = GrpcStatus.INVALID_ARGUMENT,
    readonly httpStatus = 400,
  ) {
    super(message);
    this.name = 'ServiceError';
  }
}

export const NO_CONFIG_MESSAGE = 'no rate limit configuration loaded';
