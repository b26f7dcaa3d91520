// The built-in statsd-to-Prometheus mapping: the reference's src/stats/prom/default_mapper.yaml
// (statsd_exporter format), kept as a string so it ships inside the build. One deliberate
// change: the regex rules end in `$`, so a two-level `...over_limit_with_local_cache` is not
// also counted as `over_limit` (statsd_exporter regexes are unanchored). Another addition: each rule
// has a `help` text, the HELP line Prometheus shows for the metric.
const RULE_STATS = ['near_limit', 'over_limit', 'total_hits', 'within_limit', 'shadow_mode'];

const RULE_HELP: Record<string, string> = {
  near_limit: 'Hits counted while a rule was at or above its near-limit ratio but still within its limit',
  over_limit: 'Hits over a rule limit (answered OVER_LIMIT unless the rule is in shadow mode)',
  total_hits: 'Hits counted against a rule (every descriptor that matched it, times hits_addend)',
  within_limit: 'Hits within a rule limit (answered OK)',
  shadow_mode: 'Hits over the limit of a rule in shadow mode (answered OK, counted here instead)',
};

function ruleGlob(stat: string): string {
  return `  - match: "ratelimit.service.rate_limit.*.*.${stat}"
    name: "ratelimit_service_rate_limit_${stat}"
    help: "${RULE_HELP[stat]}, by domain and descriptor key"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
`;
}

function ruleRegex(stat: string): string {
  return `  - match: "ratelimit\\\\.service\\\\.rate_limit\\\\.([^\\\\.]*)\\\\.([^\\\\.]*)\\\\.([^\\\\.]*)(\\\\..*)?\\\\.${stat}$"
    match_type: regex
    name: "ratelimit_service_rate_limit_${stat}"
    help: "${RULE_HELP[stat]}, by domain and descriptor key"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
      key2: "$3"
`;
}

export const DEFAULT_MAPPING_YAML = `mappings:
${RULE_STATS.map(ruleGlob).join('')}
${RULE_STATS.map(ruleRegex).join('')}
  - match: "ratelimit\\\\.service\\\\.named_limit\\\\.(.+)\\\\.over_limit$"
    match_type: regex
    name: "ratelimit_service_named_limit_over_limit"
    help: "Hits a named limit rejected (answered OVER_LIMIT), by limit name"
    match_metric_type: counter
    labels:
      name: "$1"
  - match: "ratelimit.service.call.should_rate_limit.*"
    name: "ratelimit_service_should_rate_limit_error"
    help: "ShouldRateLimit calls that failed, by err_type (redis_error: the counter store; service_error: anything else)"
    match_metric_type: counter
    labels:
      err_type: "$1"

  - match: "ratelimit_server.*.total_requests"
    name: "ratelimit_service_total_requests"
    help: "gRPC rate limit calls received, by method (HTTP /json requests are not counted)"
    match_metric_type: counter
    labels:
      grpc_method: "$1"
  - match: "ratelimit_server.*.response_time"
    name: "ratelimit_service_response_time_seconds"
    help: "Time to answer a gRPC rate limit call, in seconds, by method"
    timer_type: histogram
    labels:
      grpc_method: "$1"

  - match: "ratelimit.service.failure_mode.*"
    name: "ratelimit_service_failure_mode_total"
    help: "Descriptors decided by a failure mode (error, allow, deny, local) because their counter could not be counted"
    match_metric_type: counter
    labels:
      mode: "$1"
  - match: "ratelimit.redis.*.*.circuit_state"
    name: "ratelimit_redis_circuit_state"
    help: "Circuit breaker state of a Redis shard: 0 closed, 1 half open, 2 open"
    match_metric_type: gauge
    labels:
      deployment: "$1"
      shard: "$2"
  - match: "ratelimit.redis.*.*.circuit_open"
    name: "ratelimit_redis_circuit_open_total"
    help: "Times the circuit breaker of a Redis shard opened"
    match_metric_type: counter
    labels:
      deployment: "$1"
      shard: "$2"
  - match: "ratelimit.redis.*.*.replica"
    name: "ratelimit_redis_replica"
    help: "1 while the Redis the service writes to answers as a read-only replica"
    match_metric_type: gauge
    labels:
      deployment: "$1"
      shard: "$2"

  - match: "ratelimit.service.config_load_success"
    name: "ratelimit_service_config_load_success"
    help: "Rate limit configs loaded and served"
    match_metric_type: counter
  - match: "ratelimit.service.config_load_error"
    name: "ratelimit_service_config_load_error"
    help: "Rate limit configs rejected (the last good config keeps serving)"
    match_metric_type: counter
`;
