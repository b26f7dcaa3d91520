// The words of ratelimit-config's command line: each command's help with examples (`<command> --help`),
// the version (package.json), and "did you mean" for a misspelt command or option. Kept apart from
// main.ts so the commands' code stays about what they do.

export const COMMANDS = ['validate', 'convert', 'envoy', 'explain', 'diff', 'counters'] as const;
export type Command = (typeof COMMANDS)[number];

const EXIT = `exit status: 0 ok / no change; 1 invalid config (validate, convert), changes (diff), a key
without a source (envoy), nothing deleted (counters reset); 2 usage or input error, or Redis failure`;

export const USAGE = `usage: ratelimit-config <command> [options]

commands:
  validate   check plain ratelimit YAML files and RateLimitConfig manifests (files, folders, kind: List)
  convert    plain ratelimit YAML files to RateLimitConfig manifests, one per domain
  envoy      the Envoy route rate_limits that send a config's descriptors
  explain    which rule a descriptor matches, why, and the keys it is counted under
  diff       what changes between two config sets, as pods would serve them (markdown or json)
  counters   read (get) or delete (reset) a descriptor's counters in Redis

Run 'ratelimit-config <command> --help' for a command's options and examples.
'ratelimit-config --version' prints the version. Manual: docs/cli.md.

${EXIT}
`;

export const COMMAND_HELP: Readonly<Record<Command, string>> = {
  validate: `usage: ratelimit-config validate [options] <files or folders...>

Checks every *.yaml / *.yml file (folders recursively): plain ratelimit config files as the service
loads them, RateLimitConfig manifests as the operator accepts them (domain conflicts included), and
kind: List documents (kubectl get rlc -A -o yaml) item by item. No YAML file, or no config in them,
is an error.

options:
  --format text|json|annotations|github   how problems are printed (default text)
  --merge-domain-config                    plain files may share a domain (MERGE_DOMAIN_CONFIG)
  --namespace NS                           namespace of manifests without one (default "default")
  --rlqs                                   a domain ambiguous for rate limit quota buckets is an error
                                           (default: a warning; a service with RLQS_ENABLED=true refuses it)

examples:
  ratelimit-config validate examples/config examples/crds
  ratelimit-config validate --format annotations deploy/
  kubectl get rlc -A -o yaml > all.yaml && ratelimit-config validate all.yaml

exit status: 0 valid (warnings allowed), 1 invalid or nothing to check, 2 usage or unreadable input
`,
  convert: `usage: ratelimit-config convert [options] <files or folders...>

Turns plain ratelimit config files into RateLimitConfig manifests (ratelimit.envoyproxy.io/v1alpha1),
one per domain, named after the domain (a DNS-1123 label). Input validate refuses is refused with the
same messages; the output is checked to validate and to read back as the same rules.

options:
  --namespace NS                 metadata.namespace of every resource (default: none)
  --out DIR                      write DIR/<name>.yaml per resource instead of one stream on stdout
  --merge-domain-config          several files of one domain become one resource
  --format text|annotations|github   how refused input is reported (stderr)

examples:
  ratelimit-config convert --namespace ratelimit deploy/ratelimit > ratelimitconfigs.yaml
  ratelimit-config convert --out deploy/crds deploy/ratelimit

exit status: 0 converted, 1 invalid input or no config, 2 usage error or a document already a RateLimitConfig
`,
  envoy: `usage: ratelimit-config envoy [--config] <paths> [--domain D] [--header|--generic-key|--match ...]

Prints the rate_limits (YAML) of an Envoy route or virtual host: one entry per path of the descriptor
tree that ends at a limit, one action per level. remote_address, destination_cluster, source_cluster
and generic_key are Envoy's own; every other key needs a source:

  --header KEY=HEADER                       request_headers: the header's value is sent under KEY
  --generic-key KEY                         generic_key: the config's value, a constant of the route
  --match KEY=VALUE:HEADER[=TEXT|~TEXT]     header_value_match: (KEY, VALUE) when HEADER is present,
                                            equals TEXT, or contains TEXT

options:
  --config PATH       files or folders (repeatable)
  --domain D          the domain (may be left out when the config has one)
  --merge-domain-config

examples:
  ratelimit-config envoy --config examples/config --domain example \\
    --generic-key path --header user=x-user --header tenant=x-tenant \\
    --match client=banned:user-agent~BadBot --match client=canary:x-canary

exit status: 0 printed, 1 a key has no source (listed), 2 usage error or invalid config
`,
  explain: `usage: ratelimit-config explain [--config] <paths> --domain D (--descriptor k=v[,k=v...] | --bucket k=v[,k=v...]) [...]

For each descriptor: the entry matched at each level and why, the rule, its limits and algorithm,
and the keys it is counted under right now; or why nothing matches.

options:
  --config PATH           files or folders (repeatable; or give them as arguments)
  --domain D
  --descriptor k=v,...    one request descriptor (repeatable: replaces applies across them)
  --bucket k=v,...        a rate limit quota BucketId (repeatable): the descriptor it is matched as
                          (its pairs in the tree's order) and that descriptor's rule
  --rlqs-url URL          with --bucket: a pod's debug server (http://host:6070); shows the bucket's
                          current subscribers, demand and shares there (its /rlqs)
  --timeout SECONDS       for --rlqs-url (default 10)
  --now UNIX_SECONDS      the time the windows are computed for (default now)
  --format text|json
  --env-file FILE, --env NAME=VALUE   CACHE_KEY_PREFIX and other settings
  --merge-domain-config

examples:
  ratelimit-config explain examples/config --domain example --descriptor path=/api,user=bob
  ratelimit-config explain --config deploy/api --domain api --descriptor user=alice --descriptor tenant=acme
  ratelimit-config explain --config deploy/api --domain api --bucket path=/api,tenant=acme --rlqs-url http://127.0.0.1:6070

exit status: 0 explained (a descriptor that matches nothing included), 2 usage error or invalid config
`,
  diff: `usage: ratelimit-config diff [options] <old> <new>

The semantic difference of two config sets (files or folders), as pods would serve them: added,
removed, raised, lowered, window changed, made unlimited, made shadow, exempted, changed.

options:
  --format markdown|json   (default markdown, for a pull request)
  --merge-domain-config
  --namespace NS

examples:
  git worktree add /tmp/base origin/main
  ratelimit-config diff /tmp/base/deploy/ratelimit deploy/ratelimit > rate-limits.md

exit status: 0 no change, 1 changes, 2 usage error or either side invalid
`,
  counters: `usage: ratelimit-config counters get|reset [--config] <paths> --domain D --descriptor k=v[,k=v...] [...]

Reads (get) or deletes (reset --yes) the counters of descriptors in the Redis the service uses, with
the service's settings: REDIS_TYPE, REDIS_URL, REDIS_SOCKET_TYPE, REDIS_AUTH, REDIS_TLS*,
REDIS_PERSECOND*, CACHE_KEY_PREFIX, ... from the environment, then --env-file, then --env.

options:
  --config PATH, --domain D, --descriptor k=v,...   as for explain (paths also as arguments after get|reset)
  --env-file FILE         NAME=VALUE lines (repeatable)
  --env NAME=VALUE        one setting (repeatable)
  --timeout SECONDS       bound on the whole command: connecting and reading (default 10)
  --yes                   needed by reset
  --format text|json

examples:
  REDIS_SOCKET_TYPE=tcp REDIS_URL=redis:6379 ratelimit-config counters get deploy/ratelimit \\
    --domain example --descriptor remote_address=10.1.2.3
  ratelimit-config counters reset --yes --env-file pod.env --config deploy/api --domain api --descriptor user=alice

exit status: 0 read / deleted, 1 reset deleted nothing, 2 usage error, invalid config or Redis failure
`,
};

export { editDistance, packageVersion, suggest } from '../../common/index.js';
