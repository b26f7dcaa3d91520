// What a resource's status should say, from its verdict and what the connected pods run. Pure.
//
// Programmed=True only when at least one pod is connected and every connected pod has ACKed a version
// whose content contains this resource at its current generation. A pod whose last NACK was for such
// a version (and that has not ACKed one since) makes it Programmed=False reason Nacked with the pod's
// message.
import type { Verdict } from './reconcile.js';
import type { Condition, ConditionStatus, RateLimitConfigStatus } from './resource.js';

/** One connected ratelimit pod (one xDS stream), as any replica sees it. */
export interface PodState {
  /** `<node id> (<peer> via <replica>)`, as status messages name it. */
  readonly pod: string;
  /** The operator replica the pod is connected to. */
  readonly replica?: string;
  readonly ackedVersion: string | undefined;
  readonly lastNack: { readonly version: string; readonly message: string } | undefined;
}

/**
 * Which resource generations each published version contains. Versions are content hashes, so a
 * version published again (the same content) maps to the same contents.
 */
export class VersionIndex {
  private readonly versions = new Map<string, ReadonlyMap<string, number>>();

  constructor(private readonly capacity = 256) {}

  record(version: string, contents: ReadonlyMap<string, number>): void {
    this.versions.delete(version); // re-insert as newest
    this.versions.set(version, contents);
    while (this.versions.size > this.capacity) {
      const oldest = this.versions.keys().next().value as string;
      this.versions.delete(oldest);
    }
  }

  contains(version: string | undefined, key: string, generation: number): boolean {
    if (version === undefined) return false;
    return this.versions.get(version)?.get(key) === generation;
  }
}

export interface DesiredStatusInput {
  readonly verdict: Verdict;
  /** Version of the snapshot now served. */
  readonly version: string;
  readonly pods: readonly PodState[];
  readonly index: VersionIndex;
  readonly previous: RateLimitConfigStatus | undefined;
  readonly now: Date;
}

const MAX_MESSAGE = 32768;

function condition(
  type: string,
  status: ConditionStatus,
  reason: string,
  message: string,
  generation: number,
  previous: readonly Condition[] | undefined,
  now: Date,
): Condition {
  const prev = previous?.find((c) => c.type === type);
  return {
    type,
    status,
    observedGeneration: generation,
    // Kept while the status stays the same, as metav1.Condition prescribes.
    lastTransitionTime:
      prev && prev.status === status ? prev.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, 'Z'),
    reason,
    message: message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message,
  };
}

export function desiredStatus(input: DesiredStatusInput): RateLimitConfigStatus {
  const { verdict: v, pods, index, now } = input;
  const prevConditions = input.previous?.conditions;
  const accepted = condition(
    'Accepted',
    v.accepted ? 'True' : 'False',
    v.reason,
    v.message,
    v.generation,
    prevConditions,
    now,
  );
  let acked = 0;
  let nacked = 0;
  const nacks: string[] = [];
  if (v.accepted) {
    for (const p of pods) {
      if (index.contains(p.ackedVersion, v.key, v.generation)) acked++;
      else if (p.lastNack && index.contains(p.lastNack.version, v.key, v.generation)) {
        nacked++;
        nacks.push(`pod ${p.pod} rejected version ${p.lastNack.version}: ${p.lastNack.message}`);
      }
    }
  }
  const connected = pods.length;
  let programmed: Condition;
  if (!v.accepted) {
    programmed = condition(
      'Programmed',
      'False',
      'NotAccepted',
      'not served: the resource is not accepted',
      v.generation,
      prevConditions,
      now,
    );
  } else if (connected === 0) {
    programmed = condition(
      'Programmed',
      'False',
      'NoPods',
      'no ratelimit pod is connected to the control plane',
      v.generation,
      prevConditions,
      now,
    );
  } else if (nacked > 0) {
    programmed = condition(
      'Programmed',
      'False',
      'Nacked',
      nacks.join('; '),
      v.generation,
      prevConditions,
      now,
    );
  } else if (acked < connected) {
    programmed = condition(
      'Programmed',
      'False',
      'Pending',
      `${acked}/${connected} connected pods ACKed a version with generation ${v.generation}`,
      v.generation,
      prevConditions,
      now,
    );
  } else {
    programmed = condition(
      'Programmed',
      'True',
      'Programmed',
      `all ${connected} connected pods ACKed version ${input.version}`,
      v.generation,
      prevConditions,
      now,
    );
  }
  return {
    observedGeneration: v.generation,
    ...(v.accepted ? { version: input.version } : {}),
    pods: { connected, acked, nacked },
    podsAcked: `${acked}/${connected}`,
    conditions: [accepted, programmed],
  };
}

/** Equal for the purpose of writing: everything but lastTransitionTime of unchanged conditions. */
export function sameStatus(a: RateLimitConfigStatus | undefined, b: RateLimitConfigStatus): boolean {
  if (!a) return false;
  const norm = (s: RateLimitConfigStatus) =>
    JSON.stringify([
      s.observedGeneration,
      s.version,
      s.pods?.connected,
      s.pods?.acked,
      s.pods?.nacked,
      s.podsAcked,
      (s.conditions ?? []).map((c) => [c.type, c.status, c.reason, c.message, c.observedGeneration]),
    ]);
  return norm(a) === norm(b);
}
