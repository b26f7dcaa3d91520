// Values shared by the chart tests (charts/*.test.ts): a Redis address (the chart requires one unless
// redis.deploy), and the standard values well-kept charts accept, rendered in one test and dry-run on a
// real API server in another.

/** The smallest values the chart renders with: a Redis to point at. */
export const REDIS = { redis: { url: 'redis:6379' } };

// Values the well-kept charts (cert-manager's, Envoy Gateway's) accept, on both Deployments.
const standard = (component: 'ratelimit' | 'operator') => ({
  podSecurityContext: { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001, seccompProfile: null },
  securityContext: { readOnlyRootFilesystem: true, runAsGroup: 10001 },
  extraEnv: [
    { name: 'PLAIN', value: 'x' },
    { name: 'FROM_SECRET', valueFrom: { secretKeyRef: { name: 'creds', key: 'token' } } },
  ],
  envFrom: [{ configMapRef: { name: `${component}-env` } }],
  extraVolumes: [{ name: 'scratch', emptyDir: {} }],
  extraVolumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
  podAnnotations: { 'example.com/a': 'b' },
  podLabels: { team: 'edge' },
  priorityClassName: 'high',
  nodeSelector: { 'kubernetes.io/os': 'linux' },
  tolerations: [{ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }],
  affinity: { nodeAffinity: {} },
  topologySpreadConstraints: [
    { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway' },
  ],
});
/** Every standard value on both Deployments, with a fullnameOverride and a nameOverride. */
export const STANDARD_VALUES = {
  ...REDIS,
  nameOverride: 'rl',
  fullnameOverride: 'edge-limits',
  ratelimit: standard('ratelimit'),
  operator: standard('operator'),
};
