// CONFIG_TYPE=GRPC_XDS_SOTW or GRPC_XDS_DELTA (incremental): the xDS client feeds validated configs to the app (through ConfigSourceDeps).
// A config that fails validation is NACKed with the validator's message and the previous one keeps
// serving; while disconnected the last good config keeps serving.
// A push takes the files' path: decoded and validated on the config worker thread (ConfigParsePool), then
// indexed here in time slices (each descriptor compiles on its first lookup), so a 10k-descriptor push
// does not stall the decisions; the previous config serves until the new one is built.
import { NODE_FEATURES_METADATA_KEY } from '../../proto/index.js';
import { buildConfigInSlices } from '../config/index.js';
import { ConfigParsePool } from './parse-pool.js';
import type { ConfigSource, ConfigSourceDeps } from './source.js';
import { XdsConfigClient } from './xds-client.js';

/** The xDS config source; its client's events say when a push arrived and how it ended. */
export interface XdsConfigSource extends ConfigSource {
  readonly client: XdsConfigClient;
}

export async function createXdsSource(deps: ConfigSourceDeps): Promise<XdsConfigSource> {
  const s = deps.settings;
  const x = s.xds;
  const log = deps.logger.child({ component: 'xds' });
  const worker = new ConfigParsePool({ limits: s.configYamlLimits, timeoutMs: s.configParseTimeoutMs });
  let closing = false;
  const client = new XdsConfigClient({
    protocol: s.configType === 'GRPC_XDS_DELTA' ? 'delta' : 'sotw',
    nodeId: x.nodeId,
    // What this pod enforces beyond the reference's fields; the control plane sends nothing else.
    nodeMetadata: { ...x.nodeMetadata, [NODE_FEATURES_METADATA_KEY]: deps.features().join(',') },
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
    onEncodedConfig: async (messages) => {
      try {
        const documents = await worker.decodeXds(messages);
        const config = await buildConfigInSlices(documents, s.mergeDomainConfig, {
          maxDescriptors: s.configMaxDescriptors,
        });
        deps.setConfig(config);
        return undefined;
      } catch (err) {
        // A decode abandoned by close() is not a bad config.
        if (!closing) deps.onUpdate({ error: err as Error });
        return (err as Error).message;
      }
    },
  });
  return {
    client,
    start: async () => client.start(),
    // The worker first: a decode in progress is abandoned, so closing never waits on it.
    close: async () => {
      closing = true;
      await worker.close();
      await client.close();
    },
  };
}
