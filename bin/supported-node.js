// Every program's first step: on a Node.js older than the project supports (package.json `engines`),
// one line saying so and how to get Node.js 24, and exit 1, instead of failing later in a dependency.
export const MIN_NODE_MAJOR = 22;

export function requireSupportedNode(program) {
  const major = Number(process.versions.node.split('.')[0]);
  if (major >= MIN_NODE_MAJOR) return;
  process.stderr.write(
    `${program}: needs Node.js ${MIN_NODE_MAJOR} or newer, this is ${process.version}; get Node.js 24 with ` +
      '`bash scripts/install-node.sh && . scripts/env.sh` (in this repository) or from https://nodejs.org\n',
  );
  process.exit(1);
}
