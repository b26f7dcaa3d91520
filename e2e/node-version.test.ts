// Every program refuses a Node.js older than 22 with one line that says how to get Node.js 24, and exit
// code 1, instead of failing later inside a dependency. Needs an old node on the machine (Debian's, the
// usual one a fresh machine has before `bash scripts/install-node.sh`); skipped, saying so, without one.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../harness/dist.js';

const oldNode = ['/usr/bin/node', '/usr/local/bin/node', '/bin/node'].find((p) => {
  if (!existsSync(p)) return false;
  const r = spawnSync(p, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' });
  return r.status === 0 && Number(r.stdout.trim()) < 22;
});
const programs = Object.keys(JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).bin);

t.test(
  'an old Node.js is refused in one line that says how to get 24',
  { skip: oldNode ? false : 'no Node.js older than 22 on this machine to run the programs with' },
  async (t) => {
    t.equal(programs.length, 5, 'five programs');
    for (const name of programs) {
      for (const args of [['--help'], []]) {
        const r = spawnSync(oldNode!, [join(REPO_ROOT, 'bin', `${name}.js`), ...args], {
          cwd: REPO_ROOT,
          encoding: 'utf8',
          timeout: 60_000,
          env: { PATH: process.env.PATH ?? '' },
        });
        t.equal(r.status, 1, `${name} ${args.join(' ')}: exit 1`);
        t.equal(r.stdout, '', `${name}: nothing on stdout`);
        const lines = r.stderr.trimEnd().split('\n');
        t.equal(lines.length, 1, `${name}: one line`);
        t.match(lines[0], new RegExp(`^${name}: needs Node\\.js 22 or newer, this is v\\d+\\.`));
        t.match(lines[0], /bash scripts\/install-node\.sh && \. scripts\/env\.sh/, 'says how to get 24');
      }
    }
  },
);
