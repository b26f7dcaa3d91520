// Text helpers shared by the embedders and the dataset generator: tokenising, stop words, a seeded RNG
// and a string hash. Everything here is deterministic.

export const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    'a about above across after again against all almost also although always am among an and any are as at ' +
    'be been before being below between both but by can could did do does doing done down during each either ' +
    'etc few for from further had has have having he her here hers him his how however i if in into is it its ' +
    'itself just may might more most much must my no nor not now of off on once only or other our ours out over ' +
    'own per same she should since so some such than that the their theirs them then there these they this ' +
    'those through thus to too under until up upon us very via was we were what when where whether which while ' +
    'who whom whose why will with within without would yet you your'
  ).split(' '),
);

/** Lower-cased word tokens (letters, digits, inner hyphens and apostrophes dropped). */
export function words(text: string): string[] {
  const out: string[] = [];
  for (const m of text.toLowerCase().matchAll(/[a-z0-9]+(?:-[a-z0-9]+)*/g)) {
    for (const part of m[0].split('-')) if (part) out.push(part);
  }
  return out;
}

/** Content words: tokens minus stop words and one-letter tokens. */
export function contentWords(text: string): string[] {
  return words(text).filter((w) => w.length > 1 && !STOP_WORDS.has(w));
}

/** FNV-1a 32-bit hash of a string. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Normalises a title for lookup: trimmed, lower-cased, inner whitespace collapsed. */
export function normTitle(s: string): string {
  return s.trim().replace(/\s+/g, ' ').toLowerCase();
}
