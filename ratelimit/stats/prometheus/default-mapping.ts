// The built-in statsd-to-Prometheus mapping: the reference's src/stats/prom/default_mapper.yaml
// (statsd_exporter format), kept as a string so it ships inside the build. One deliberate
// change: the regex rules end in `$`, so a two-level `...over_limit_with_local_cache` is not
// also counted as `over_limit` (statsd_exporter regexes are unanchored).
const RULE_STATS = ['near_limit', 'over_limit', 'total_hits', 'within_limit', 'shadow_mode'];

function ruleGlob(stat: string): string {
  return `  - match: "ratelimit.service.rate_limit.*.*.${stat}"
    name: "ratelimit_service_rate_limit_${stat}"
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
  - match: "ratelimit.service.call.should_rate_limit.*"
    name: "ratelimit_service_should_rate_limit_error"
    match_metric_type: counter
    labels:
      err_type: "$1"

  - match: "ratelimit_server.*.total_requests"
    name: "ratelimit_service_total_requests"
    match_metric_type: counter
    labels:
      grpc_method: "$1"
  - match: "ratelimit_server.*.response_time"
    name: "ratelimit_service_response_time_seconds"
    timer_type: histogram
    labels:
      grpc_method: "$1"

  - match: "ratelimit.service.failure_mode.*"
    name: "ratelimit_service_failure_mode_total"
    match_metric_type: counter
    labels:
      mode: "$1"
  - match: "ratelimit.redis.*.*.circuit_state"
    name: "ratelimit_redis_circuit_state"
    match_metric_type: gauge
    labels:
      deployment: "$1"
      shard: "$2"
  - match: "ratelimit.redis.*.*.circuit_open"
    name: "ratelimit_redis_circuit_open_total"
    match_metric_type: counter
    labels:
      deployment: "$1"
      shard: "$2"
  - match: "ratelimit.redis.*.*.replica"
    name: "ratelimit_redis_replica"
    match_metric_type: gauge
    labels:
      deployment: "$1"
      shard: "$2"

  - match: "ratelimit.service.config_load_success"
    name: "ratelimit_service_config_load_success"
    match_metric_type: counter
  - match: "ratelimit.service.config_load_error"
    name: "ratelimit_service_config_load_error"
    match_metric_type: counter
`;
