// CONFIG_TYPE=GRPC_XDS_SOTW: the xDS client feeds validated configs to the app.
// A config that fails validation is NACKed with the validator's message and the previous one keeps
// serving; while disconnected the last good config keeps serving.
import type { ConfigSource, RateLimitApp } from './app.js';
import { compileConfig } from './config/index.js';
import { XdsConfigClient } from './xds/index.js';
import { NODE_FEATURES_METADATA_KEY } from '../proto/index.js';

export async function createXdsSource(app: RateLimitApp): Promise<ConfigSource> {
  const s = app.settings;
  const x = s.xds;
  const log = app.logger.child({ component: 'xds' });
  const client = new XdsConfigClient({
    nodeId: x.nodeId,
    // What this pod enforces beyond the reference's fields; the control plane sends nothing else.
    nodeMetadata: { ...x.nodeMetadata, [NODE_FEATURES_METADATA_KEY]: app.supportedFeatures().join(',') },
    serverUrl: x.serverUrl,
    connectRetryInterval: x.connectRetryIntervalMs,
    useTls: x.useTls,
    clientCert: x.clientTlsCert || undefined,
    clientKey: x.clientTlsKey || undefined,
    serverCaCert: x.serverTlsCaCert || undefined,
    serverSan: x.serverTlsSan || undefined,
    additionalHeaders: x.additionalHeaders,
    backoff: {
      initialMs: x.backoffInitialMs,
      maxMs: x.backoffMaxMs,
      randomFactor: x.backoffRandomFactor,
      jitter: x.backoffJitter,
    },
    maxMessageSize: x.maxMsgSizeBytes > 0 ? x.maxMsgSizeBytes : undefined,
    logger: log,
    onConfig: (documents) => {
      try {
        const config = compileConfig(documents, { mergeDomainConfig: s.mergeDomainConfig });
        app.setConfig(config);
        return undefined;
      } catch (err) {
        app.applyConfig({ error: err as Error });
        return (err as Error).message;
      }
    },
  });
  return {
    start: async () => client.start(),
    close: () => client.close(),
  };
}
