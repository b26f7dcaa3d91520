// Tables keyed by request values (the local failure mode's counters, write-behind entries) are bounded in
// bytes, not keys: a key's characters are the part a caller controls. V8 keeps a string of Latin-1
// characters at one byte each and any other string at two.

/** Heap bytes of a key's characters: 1 per character for Latin-1 keys, 2 otherwise. */
export function keyBytes(key: string): number {
  for (let i = 0; i < key.length; i++) {
    if (key.charCodeAt(i) > 0xff) return 2 * key.length;
  }
  return key.length;
}
