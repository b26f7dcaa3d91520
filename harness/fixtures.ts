// Config fixtures shared by the benchmark and the unit tests: the 10,000-descriptor file the benchmark
// reloads and parses, which the YAML tests also use as their large, realistic input. It lives here and not
// in bench/ so that a product test never imports the benchmark.

/** Large enough never to be reached in a run: every decision is OK and counted. */
export const HUGE = 1_000_000_000;
/** Tenants of the 10k-descriptor config (each with 10 descriptors: its own limit and 9 routes). */
export const CFG10K_TENANTS = 1000;

/**
 * 10,000 descriptors: 1000 tenants (900 exact, 100 prefix wildcards), each with a limit and 9 nested
 * routes (8 exact, 1 wildcard). A probe rule `probe: v<version>` (limit 0) marks the reloaded version.
 */
export function cfg10kYaml(reloadVersion: number): string {
  const out: string[] = ['domain: bench_cfg10k', 'descriptors:'];
  for (let t = 0; t < CFG10K_TENANTS; t++) {
    out.push('  - key: tenant');
    out.push(t < 900 ? `    value: t${t}` : `    value: g${t}-*`);
    out.push(`    rate_limit: { unit: minute, requests_per_unit: ${HUGE} }`);
    out.push('    descriptors:');
    for (let r = 0; r < 8; r++) {
      out.push('      - key: route');
      out.push(`        value: /r${r}`);
      out.push(`        rate_limit: { unit: minute, requests_per_unit: ${HUGE} }`);
    }
    out.push('      - key: route');
    out.push('        value: /w*');
    out.push(`        rate_limit: { unit: minute, requests_per_unit: ${HUGE} }`);
  }
  out.push('  - key: probe');
  out.push(`    value: v${reloadVersion}`);
  out.push('    rate_limit: { unit: hour, requests_per_unit: 0 }');
  return out.join('\n') + '\n';
}

/**
 * One domain (`mem`) of `n` top-level descriptors, each with its own limit (`k: v<i>`), one line each
 * (about 80 bytes: 100,000 descriptors stay under the default CONFIG_YAML_MAX_BYTES). The config
 * memory benchmark loads it into our service and the reference.
 */
export function flatConfigYaml(n: number): string {
  const out: string[] = ['domain: mem', 'descriptors:'];
  for (let i = 0; i < n; i++)
    out.push(`  - {key: k, value: v${i}, rate_limit: {unit: minute, requests_per_unit: 1000}}`);
  return out.join('\n') + '\n';
}
