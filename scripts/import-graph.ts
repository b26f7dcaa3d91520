// The repository's import graph, read with the TypeScript compiler's parser, and its circles. An
// import circle makes load order decide which side sees the other half-initialised, and it ties two
// files into one concept; ARCHITECTURE and the README promise none, type-only imports included (a type
// circle is still two files that cannot be understood apart). eslint-plugin-import's no-cycle would need
// a new dependency and its resolver; this is a parse per file and Tarjan's algorithm.
import { readFileSync } from 'node:fs';
import { dirname, posix } from 'node:path';
import ts from 'typescript';

/** Relative static imports and re-exports of one file (type-only ones too), as repository paths. */
export function importsOf(path: string, text: string): string[] {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: string[] = [];
  for (const st of sf.statements) {
    let spec: ts.Expression | undefined;
    if (ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) spec = st.moduleSpecifier;
    if (!spec || !ts.isStringLiteral(spec) || !spec.text.startsWith('.')) continue;
    out.push(posix.normalize(posix.join(dirname(path), spec.text)).replace(/\.(m?)js$/, '.$1ts'));
  }
  return out;
}

/** The graph of the given repository-relative .ts files (edges only to files in the set). */
export function importGraph(paths: readonly string[], read = (p: string) => readFileSync(p, 'utf8')) {
  const known = new Set(paths);
  const graph = new Map<string, string[]>();
  for (const p of paths) graph.set(p, [...new Set(importsOf(p, read(p)).filter((q) => known.has(q)))]);
  return graph;
}

/** Every circle: strongly connected sets of two or more files, or a file importing itself; sorted. */
export function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  // Iterative Tarjan: the bench's and the service's import chains are deep enough to matter for recursion.
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: { node: string; i: number }[] = [{ node: start, i: 0 }];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (work.length) {
      const frame = work[work.length - 1];
      const edges = graph.get(frame.node) ?? [];
      if (frame.i < edges.length) {
        const to = edges[frame.i++];
        if (!index.has(to)) {
          index.set(to, next);
          low.set(to, next++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, i: 0 });
        } else if (onStack.has(to)) low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        continue;
      }
      work.pop();
      if (work.length) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const scc: string[] = [];
        let n: string;
        do {
          n = stack.pop()!;
          onStack.delete(n);
          scc.push(n);
        } while (n !== frame.node);
        if (scc.length > 1 || (graph.get(frame.node) ?? []).includes(frame.node)) out.push(scc.sort());
      }
    }
  }
  return out.sort((a, b) => a[0].localeCompare(b[0]));
}
