import t from 'tap';
import { compareClaimAge, resolveDomainClaims, type DomainClaim } from './domain-claims.js';

const claim = (
  key: string,
  domain: string,
  keys: string[],
  mergeDomain = false,
  createdMs?: number,
): DomainClaim => ({
  key,
  domain,
  mergeDomain,
  ...(createdMs === undefined ? {} : { createdMs }),
  descriptors: keys.map((k) => {
    const [key, value] = k.split('=');
    return value === undefined ? { key } : { key, value };
  }),
});

t.test('the oldest claim owns a domain; ties and missing times by key', async (t) => {
  const younger = claim('ns/a', 'd', ['x'], false, 2000);
  const older = claim('ns/z', 'd', ['y'], false, 1000);
  const [r] = resolveDomainClaims([younger, older]);
  t.equal(r!.members[0], older);
  t.match(r!.rejected, [
    { claim: younger, reason: 'DomainConflict', message: /belongs to ns\/z .*both must set/ },
  ]);
  t.same(r!.document, { domain: 'd', descriptors: [{ key: 'y' }] });
  t.ok(compareClaimAge(claim('a', 'd', []), claim('b', 'd', [])) < 0, 'ties by key');
  t.ok(compareClaimAge(claim('z', 'd', [], false, 5), claim('a', 'd', [])) < 0, 'a time sorts before none');
});

t.test('merge needs both sides; a repeated top-level key rejects the newer claim whole', async (t) => {
  const owner = claim('ns/owner', 'd', ['path=/a'], true, 1);
  const noOptIn = claim('ns/plain', 'd', ['path=/p'], false, 2);
  const clash = claim('ns/clash', 'd', ['path=/b', 'path=/a'], true, 3);
  const ok = claim('ns/ok', 'd', ['path=/c', 'path'], true, 4);
  const [r] = resolveDomainClaims([ok, clash, noOptIn, owner]);
  t.same(
    r!.members.map((m) => m.key),
    ['ns/owner', 'ns/ok'],
  );
  t.match(r!.rejected, [
    { claim: noOptIn, reason: 'DomainConflict', message: /which shares it: set spec.mergeDomain: true/ },
    {
      claim: clash,
      reason: 'DescriptorConflict',
      message: `descriptor 'path_/a' of shared domain "d" is already defined by ns/owner`,
    },
  ]);
  t.same(r!.document.descriptors, [
    { key: 'path', value: '/a' },
    { key: 'path', value: '/c' },
    { key: 'path' },
  ]);
});

t.test('one resolution per domain, in the order of their oldest claims', async (t) => {
  const r = resolveDomainClaims([claim('b', 'two', ['k'], false, 2), claim('a', 'one', ['k'], false, 1)]);
  t.same(
    r.map((x) => x.domain),
    ['one', 'two'],
  );
  t.same(
    r.map((x) => x.rejected.length),
    [0, 0],
  );
});
