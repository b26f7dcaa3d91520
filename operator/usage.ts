// The --help text of ratelimit-operator (kept apart from main.ts, which runs on import).
export const USAGE = `Usage: ratelimit-operator [options]

Watches RateLimitConfig resources (ratelimit.envoyproxy.io/v1alpha1), validates them with the rate
limit service's own validator, and serves them to ratelimit pods over xDS (ADS, state of the world
and incremental, type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig). Every replica serves the same
content (so the same versions); the replica holding the Lease writes status and Events.

Kubernetes credentials: --kubeconfig, else $KUBECONFIG, else the in-cluster service account, else
~/.kube/config.

Options:
  --kubeconfig <file>              kubeconfig to use
  --namespace <ns>                 watch RateLimitConfigs in one namespace only (default: all)
  --xds-listen <host:port>         xDS (ADS) listen address (default 0.0.0.0:18000)
  --xds-tls-cert <file>            xDS server certificate chain (PEM); enables TLS (re-read every 10 s)
  --xds-tls-key <file>             xDS server private key (PEM)
  --xds-tls-client-ca <file>       CA bundle for pod client certificates; enables mutual TLS
  --max-send-bytes <n>             largest xDS response (default 4194304, what pods accept by default,
                                   XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES; raise both together). A larger
                                   config is not sent: pods keep theirs and the resources it changes
                                   get Programmed=False reason TooLarge
  --max-delta-names <n>            names one incremental (delta) stream may subscribe to, and entries of
                                   its initial_resource_versions (default 50000); a stream over it is
                                   ended with INVALID_ARGUMENT, the other streams are untouched
  --max-delta-name-bytes <n>       bytes of one resource name or version a delta stream sends (default 1024)
  --metrics-listen <host:port>     Prometheus /metrics (default 0.0.0.0:8080; "off" disables)
  --health-listen <host:port>      /healthz and /readyz (default 0.0.0.0:8081; "off" disables)
  --leader-elect <true|false>      take part in Lease leader election (default true; false: always write status)
  --leader-election-namespace <ns> namespace of the Lease (default: $POD_NAMESPACE, the in-cluster
                                   namespace, else default)
  --leader-election-id <name>      name of the Lease (default ratelimit-operator)
  --lease-duration <ms>            Lease duration (default 15000)
  --renew-deadline <ms>            a leader that cannot renew for this long steps down (default 10000)
  --retry-period <ms>              acquire/renew interval (default 2000)
  --identity <id>                  this replica's identity (default: hostname-random)
  --resync <ms>                    re-check every status this often (default 60000)
  --pod-report-ttl <ms>            with leader election: this replica's report of its pods (a Lease
                                   <leader-election-id>-pods-<identity>) counts this long after its
                                   last renewal; renewed every third of it (default 30000)
  --domain-policy <rules>          tenant isolation: which namespaces may claim which domains, as
                                   <namespace>=<pattern>[,<pattern>...] entries separated by ";"
                                   (namespace * = every namespace; in a pattern * matches anything and
                                   {namespace} is the resource's namespace), e.g.
                                   "team-a=checkout,checkout-*;*={namespace}-*". Default: $DOMAIN_POLICY,
                                   else none (any namespace may claim any domain)
  --log-level <level>              trace, debug, info, warn, error (default: $LOG_LEVEL, else info)
  --log-format <text|json>         text (logrus-style key=value lines) or json (default: $LOG_FORMAT,
                                   else text); logs go to stderr
  -h, --help                       show this help
`;

/** Every flag the CLI accepts (the --help test checks each is listed). */
export const USAGE_FLAGS = [
  '--kubeconfig',
  '--namespace',
  '--xds-listen',
  '--xds-tls-cert',
  '--xds-tls-key',
  '--xds-tls-client-ca',
  '--max-send-bytes',
  '--max-delta-names',
  '--max-delta-name-bytes',
  '--metrics-listen',
  '--health-listen',
  '--leader-elect',
  '--leader-election-namespace',
  '--leader-election-id',
  '--lease-duration',
  '--renew-deadline',
  '--retry-period',
  '--identity',
  '--resync',
  '--pod-report-ttl',
  '--domain-policy',
  '--log-level',
  '--log-format',
  '--help',
];
