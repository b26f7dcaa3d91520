// MEMCACHE_SRV: the memcached nodes from a DNS SRV record, as the reference's srv package does.
import { promises as dns, type SrvRecord } from 'node:dns';

export type SrvResolver = (name: string) => Promise<SrvRecord[]>;

const SRV_NAME = /^_(.+?)\._(.+?)\.(.+)$/;

/** Checks the `_service._proto.name` form; throws a message naming the variable otherwise. */
export function parseSrv(srv: string): { service: string; proto: string; name: string } {
  const m = SRV_NAME.exec(srv);
  if (!m) throw new Error(`MEMCACHE_SRV: could not parse '${srv}' to SRV parts (_service._proto.name)`);
  return { service: m[1], proto: m[2], name: m[3] };
}

/**
 * The node list `target:port`, sorted: gomemcache assigns keys by position in the list, so every
 * instance must see the same order. Targets keep Go's fully-qualified form (a trailing dot) so the
 * sort order is the reference's too.
 */
export async function serversFromSrv(srv: string, resolve: SrvResolver = dns.resolveSrv): Promise<string[]> {
  parseSrv(srv);
  const records = await resolve(srv);
  if (records.length === 0) throw new Error(`MEMCACHE_SRV: no SRV records for '${srv}'`);
  return records.map((r) => `${r.name.endsWith('.') ? r.name : r.name + '.'}:${r.port}`).sort();
}
