// The bound on a config's size (CONFIG_MAX_DESCRIPTORS) as every door applies it: descriptors at every
// level of every document, counted before anything is compiled.
import t from 'tap';
import {
  buildConfigInSlices,
  compileConfig,
  ConfigError,
  countDescriptors,
  DEFAULT_MAX_DESCRIPTORS,
  toCheckedDocument,
} from './index.js';

const nested = {
  domain: 'd',
  descriptors: [
    { key: 'a', descriptors: [{ key: 'b', descriptors: [{ key: 'c' }] }, { key: 'b2' }] },
    { key: 'x', value: '1' },
  ],
};

t.test('every level is counted', async (t) => {
  t.equal(countDescriptors(nested.descriptors), 5);
  t.equal(countDescriptors(undefined), 0);
  t.equal(toCheckedDocument('n.yaml', nested).descriptors, 5, 'the worker counts what it checked');
});

t.test('a config past the bound is refused with the count, the bound and the setting', async (t) => {
  const src = [{ name: 'n.yaml', document: nested }];
  t.ok(compileConfig(src, { maxDescriptors: 5 }).hasDomain('d'), 'at the bound: accepted');
  t.throws(
    () => compileConfig(src, { maxDescriptors: 4 }),
    new ConfigError(
      'n.yaml',
      '',
      "error loading config: the config has 5 descriptors (every level of every domain counted), more than the limit of 4 (CONFIG_MAX_DESCRIPTORS); raise it together with the pod's memory limit",
    ),
  );
  const other = { ...nested, domain: 'e' };
  const docs = [toCheckedDocument('n.yaml', nested), toCheckedDocument('o.yaml', other)];
  await t.rejects(buildConfigInSlices(docs, false, { maxDescriptors: 9 }), {
    source: 'o.yaml',
    message: /the config has 10 descriptors .*limit of 9 \(CONFIG_MAX_DESCRIPTORS\)/,
  });
  t.ok(
    (await buildConfigInSlices(docs, false, { maxDescriptors: 10 })).hasDomain('e'),
    'all documents together',
  );
});

t.test('without a setting the default bound applies', async (t) => {
  const one = toCheckedDocument('big.yaml', { domain: 'big', descriptors: [{ key: 'k' }] });
  const counted = (descriptors: number) => [{ ...one, descriptors }];
  t.ok((await buildConfigInSlices(counted(DEFAULT_MAX_DESCRIPTORS), false)).hasDomain('big'));
  await t.rejects(buildConfigInSlices(counted(DEFAULT_MAX_DESCRIPTORS + 1), false), {
    message: new RegExp(
      `has ${DEFAULT_MAX_DESCRIPTORS + 1} descriptors .*limit of ${DEFAULT_MAX_DESCRIPTORS} `,
    ),
  });
});
