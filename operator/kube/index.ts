// Public face of operator/kube/: the small client-go pieces @kubernetes/client-node does not ship — a
// reflector that never stops, a deduplicating work queue with backoff, Lease-based leader election.
// Generic Kubernetes machinery, kept apart so the operator's own folder shows its domain.
export * from './reflector.js';
export * from './workqueue.js';
export * from './leader-election.js';
