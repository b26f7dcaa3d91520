// Deterministic 2-D PCA (power iteration with deflation), used when loaded records lack 2-D projections.
export function pca2(rows: ArrayLike<number>[], dim: number): [number, number][] {
  const n = rows.length;
  const mu = new Float64Array(dim);
  for (const r of rows) for (let d = 0; d < dim; d++) mu[d] += r[d] / n;
  const centred = rows.map((r) => Float64Array.from({ length: dim }, (_, d) => r[d] - mu[d]));
  const comps: Float64Array[] = [];
  for (let c = 0; c < 2; c++) {
    let v = Float64Array.from({ length: dim }, (_, d) => 1 / Math.sqrt(dim) + (d % 7) * 1e-3);
    for (let it = 0; it < 100; it++) {
      const next = new Float64Array(dim);
      for (const x of centred) {
        let p = 0;
        for (let d = 0; d < dim; d++) p += x[d] * v[d];
        for (let d = 0; d < dim; d++) next[d] += p * x[d];
      }
      for (const u of comps) {
        let p = 0;
        for (let d = 0; d < dim; d++) p += next[d] * u[d];
        for (let d = 0; d < dim; d++) next[d] -= p * u[d];
      }
      const norm = Math.hypot(...next) || 1;
      for (let d = 0; d < dim; d++) next[d] /= norm;
      v = next;
    }
    comps.push(v);
  }
  return centred.map((x) => {
    const p = comps.map((u) => x.reduce((s, xd, d) => s + xd * u[d], 0));
    return [p[0], p[1]];
  });
}
