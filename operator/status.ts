// What a resource's status should say, from its verdict and what the connected pods run. Pure.
//
// Programmed=True only when at least one pod is connected and every connected pod has ACKed a version
// whose content contains this resource at its current generation. A pod whose last NACK was for such
// a version (and that has not ACKed one since) makes it Programmed=False reason Nacked with the pod's
// message.
//
// While a newer generation is rejected and the last accepted one is still served (servedGeneration),
// Programmed is False reason NotAccepted and its message names the served generation and its pods.
//
// A version the control plane refused to send because it is over the maximum xDS message size (recorded
// as the stream's last NACK, control-plane/stream-protocol.ts) makes it Programmed=False reason
// TooLarge, naming the size and the limit: no pod can take it, whatever the pods do, until the config
// shrinks or both bounds are raised.
import { isOversizeMessage } from '../control-plane/index.js';
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
  const prev = input.previous?.conditions;
  const cond = (type: string, status: ConditionStatus, reason: string, message: string) =>
    condition(type, status, reason, message, v.generation, prev, now);
  const accepted = cond('Accepted', v.accepted ? 'True' : 'False', v.reason, v.message);
  const served = v.servedGeneration;
  let acked = 0;
  let nacked = 0;
  const nacks: string[] = [];
  let tooLarge: string | undefined;
  if (served !== undefined) {
    for (const p of pods) {
      if (index.contains(p.ackedVersion, v.key, served)) acked++;
      else if (p.lastNack && index.contains(p.lastNack.version, v.key, served)) {
        nacked++;
        if (isOversizeMessage(p.lastNack.message)) {
          // The same for every pod (one snapshot, one bound): said once.
          tooLarge ??= `version ${p.lastNack.version} (with generation ${served}) is ${p.lastNack.message}; pods keep enforcing their previous config`;
        } else nacks.push(`pod ${p.pod} rejected version ${p.lastNack.version}: ${p.lastNack.message}`);
      }
    }
  }
  const connected = pods.length;
  let programmed: Condition;
  if (served === undefined) {
    programmed = cond('Programmed', 'False', 'NotAccepted', 'not served: the resource is not accepted');
  } else if (!v.accepted) {
    // The last good generation is still enforced: say which, and how far it reached.
    const pods =
      connected === 0
        ? 'no ratelimit pod is connected'
        : nacked > 0
          ? [...(tooLarge !== undefined ? [tooLarge] : []), ...nacks].join('; ')
          : `${acked}/${connected} connected pods ACKed version ${input.version}`;
    programmed = cond(
      'Programmed',
      'False',
      'NotAccepted',
      `generation ${v.generation} is not accepted; pods keep enforcing generation ${served}, the last accepted: ${pods}`,
    );
  } else if (connected === 0) {
    programmed = cond('Programmed', 'False', 'NoPods', 'no ratelimit pod is connected to the control plane');
  } else if (tooLarge !== undefined) {
    programmed = cond('Programmed', 'False', 'TooLarge', tooLarge);
  } else if (nacked > 0) {
    programmed = cond('Programmed', 'False', 'Nacked', nacks.join('; '));
  } else if (acked < connected) {
    programmed = cond(
      'Programmed',
      'False',
      'Pending',
      `${acked}/${connected} connected pods ACKed a version with generation ${v.generation}`,
    );
  } else {
    programmed = cond(
      'Programmed',
      'True',
      'Programmed',
      `all ${connected} connected pods ACKed version ${input.version}`,
    );
  }
  const conditions = [accepted, programmed, ...kstatusConditions(accepted, programmed, cond)];
  return {
    observedGeneration: v.generation,
    // null removes a field under the merge patch the status is written with.
    version: served !== undefined ? input.version : null,
    servedGeneration: served ?? null,
    ...(v.lastAccepted !== undefined
      ? { lastAccepted: v.lastAccepted }
      : input.previous?.lastAccepted
        ? { lastAccepted: input.previous.lastAccepted }
        : {}),
    pods: { connected, acked, nacked },
    podsAcked: `${acked}/${connected}`,
    conditions,
  };
}

/**
 * The kstatus conditions (what Flux and kstatus-based tools read without configuration): Ready, True
 * only when this generation is Accepted and Programmed; Stalled=True when a person must act (the
 * resource is rejected, or a pod NACKs it); Reconciling=True while pods are still to ACK it. Stalled and
 * Reconciling are "abnormal-true" conditions: present only while True.
 */
function kstatusConditions(
  accepted: Condition,
  programmed: Condition,
  cond: (type: string, status: ConditionStatus, reason: string, message: string) => Condition,
): Condition[] {
  const blocking = accepted.status !== 'True' ? accepted : programmed;
  const ready =
    accepted.status === 'True' && programmed.status === 'True'
      ? cond('Ready', 'True', 'Ready', `accepted and programmed: ${programmed.message}`)
      : cond('Ready', 'False', blocking.reason, blocking.message);
  const out = [ready];
  if (accepted.status !== 'True' || programmed.reason === 'Nacked' || programmed.reason === 'TooLarge') {
    out.push(cond('Stalled', 'True', blocking.reason, blocking.message));
  } else if (programmed.status !== 'True') {
    out.push(cond('Reconciling', 'True', programmed.reason, programmed.message));
  }
  return out;
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
      s.servedGeneration ?? null,
      s.lastAccepted?.generation,
      s.lastAccepted?.spec,
      (s.conditions ?? []).map((c) => [c.type, c.status, c.reason, c.message, c.observedGeneration]),
    ]);
  return norm(a) === norm(b);
}
