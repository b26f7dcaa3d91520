// The common log format: logrus-style text quoted once, JSON with word levels, and the flag/env
// precedence the control plane and the operator share.
import t from 'tap';
import { cliLogOptions, createLogger } from './log.js';

function capture(opts: Parameters<typeof createLogger>[0]) {
  const lines: string[] = [];
  return { log: createLogger(opts, { write: (s: string) => lines.push(s) }), lines };
}

t.test('text: logrus quoting, once; an error field shows its message', async (t) => {
  const { log, lines } = capture({ format: 'text', level: 'info' });
  log.error(
    { error: 'a.yaml: bad\n  - key: [x\n', addr: '0.0.0.0:80', n: 3, word: 'plain' },
    'config rejected',
  );
  t.match(
    lines[0],
    /^time="[^"]+" level=error msg="config rejected" error="a\.yaml: bad\\n {2}- key: \[x\\n" addr="0\.0\.0\.0:80" n=3 word=plain\n$/,
  );
  log.warn({ err: new Error('boom "x"') }, 'failed');
  t.match(lines[1], / level=warning msg=failed err="boom \\"x\\""\n$/);
  t.notMatch(lines.join(''), /\\\\/, 'nothing escaped twice');
});

t.test('json: @timestamp, a word level, @message', async (t) => {
  const { log, lines } = capture({ format: 'json', level: 'debug' });
  log.debug({ version: 'v1' }, 'applied');
  const o = JSON.parse(lines[0]!);
  t.equal(o.level, 'debug');
  t.equal(o['@message'], 'applied');
  t.equal(o.version, 'v1');
  t.ok(!Number.isNaN(Date.parse(o['@timestamp'])));
});

t.test('levels: the level given, else the default level; logrus and pino names', async (t) => {
  t.equal(capture({ level: 'WARNING' }).log.level, 'warn');
  t.equal(capture({ level: 'panic' }).log.level, 'fatal');
  t.equal(capture({}).log.level, 'warn', "the service's default");
  t.equal(capture({ defaultLevel: 'info' }).log.level, 'info');
  t.equal(capture({ level: 'chatty', defaultLevel: 'info' }).log.level, 'info');
});

t.test('cliLogOptions: the flag, else the environment, else info and text; a typo is an error', async (t) => {
  t.same(cliLogOptions({}, {}), { level: 'info', format: 'text' });
  t.same(cliLogOptions({}, { LOG_LEVEL: 'WARN', LOG_FORMAT: 'json' }), { level: 'warn', format: 'json' });
  t.same(cliLogOptions({ level: 'debug', format: 'text' }, { LOG_LEVEL: 'warn', LOG_FORMAT: 'json' }), {
    level: 'debug',
    format: 'text',
  });
  t.throws(() => cliLogOptions({ level: 'loud' }, {}), /^--log-level: not a level/);
  t.throws(() => cliLogOptions({}, { LOG_FORMAT: 'xml' }), /LOG_FORMAT: text or json, not xml/);
});
