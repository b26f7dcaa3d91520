// The --help text of ratelimit-control-plane (kept apart from main.ts, which runs on import).
import { DEFAULT_LISTEN } from './server.js';

export const USAGE = `Usage: ratelimit-control-plane --dir <folder> [options]

Serves rate limit configuration to ratelimit pods over xDS (ADS, state of the world and incremental), resource type
type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig.

The folder holds RateLimitConfig custom-resource manifests (apiVersion ratelimit.envoyproxy.io/v1alpha1,
kind RateLimitConfig, spec {domain, descriptors}) or plain ratelimit YAML files (*.yaml, *.yml):
  <dir>/*.yaml                  served to every node without its own folder
  <dir>/nodes/<node-id>/*.yaml  served to pods whose CONFIG_GRPC_XDS_NODE_ID is <node-id>
Files are validated with the service's validator (an empty file is refused for its empty domain, as
the service and ratelimit-config validate refuse it). Content that fails is read again a few times
after a short pause (a file caught mid-write); if it still fails it is logged and the last good
configuration keeps serving.

Options:
  --dir <folder>              configuration folder (required)
  --listen <host:port>        xDS listen address (default ${DEFAULT_LISTEN})
  --tls-cert <file>           server certificate chain (PEM); enables TLS
  --tls-key <file>            server private key (PEM)
  --tls-client-ca <file>      CA bundle for client certificates; enables mutual TLS
  --merge-domain-config       allow several files with the same domain (MERGE_DOMAIN_CONFIG)
  --rescan-interval <ms>      periodic rescan besides fs.watch (default 5000; 0 disables)
  --debounce <ms>             coalescing window: at most one change-triggered read per window;
                              the first change after a quiet window is read at once (default 200)
  --settle <ms>               quiet period after a change's last file event before reading it
                              (default 10)
  --reread-delay <ms>         pause before reading failing content again (default 250)
  --reread-attempts <n>       re-reads of failing content before it is rejected (default 3)
  --keepalive-time <ms>       server keepalive ping interval (default 30000)
  --keepalive-timeout <ms>    keepalive ping timeout (default 10000)
  --max-connection-age <ms>   send GOAWAY after this connection age (default: never)
  --max-send-bytes <n>        largest response (default 4194304, as pods accept by default)
  --max-receive-bytes <n>     largest request (default 4194304)
  --max-delta-names <n>       names one incremental (delta) stream may subscribe to, and entries of
                              its initial_resource_versions (default 50000)
  --max-delta-name-bytes <n>  bytes of one resource name or version a delta stream sends (default 1024)
  --metrics-listen <host:port> serve Prometheus metrics on /metrics (default: off)
  --log-level <level>         trace, debug, info, warn, error (default: $LOG_LEVEL, else info)
  --log-format <text|json>    text (logrus-style key=value lines) or json (default: $LOG_FORMAT,
                              else text); logs go to stderr
  --check                     validate the folder as ratelimit-config validate does and exit
                              (status 1 when invalid; file:line:col: field: message on stderr)
  -h, --help                  show this help
`;

/** Every flag the CLI accepts (the --help test checks each is listed). */
export const USAGE_FLAGS = [
  '--dir',
  '--listen',
  '--tls-cert',
  '--tls-key',
  '--tls-client-ca',
  '--merge-domain-config',
  '--rescan-interval',
  '--debounce',
  '--settle',
  '--reread-delay',
  '--reread-attempts',
  '--keepalive-time',
  '--keepalive-timeout',
  '--max-connection-age',
  '--max-send-bytes',
  '--max-receive-bytes',
  '--max-delta-names',
  '--max-delta-name-bytes',
  '--metrics-listen',
  '--log-level',
  '--log-format',
  '--check',
  '--help',
];
