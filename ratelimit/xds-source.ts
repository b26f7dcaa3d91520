// Placeholder until the xDS client lands: CONFIG_TYPE=GRPC_XDS_SOTW is refused with a clear message.
import type { ConfigSource, RateLimitApp } from './app.js';

export async function createXdsSource(_app: RateLimitApp): Promise<ConfigSource> {
  throw new Error('CONFIG_TYPE=GRPC_XDS_SOTW: the xDS client is not available in this build');
}
