// Turns the results of a run into a Markdown table (ours, reference, ratio ours/reference) and a
// hand-written SVG chart of throughput and latency per workload.
import { WORKLOAD_TITLES, type WorkloadName } from '../load/workloads.js';
import type { Stat } from '../harness/measure.js';

export interface Figure {
  /** Group heading, e.g. the workload. */
  group: string;
  name: string;
  unit: string;
  /** 'higher' when more is better. */
  better: 'higher' | 'lower';
  ours: Stat;
  reference?: Stat;
  /** A target on the ratio ours/reference or on ours alone. */
  target?: { text: string; met: boolean | undefined; rule?: TargetRule };
  /** What the row measures, for the summary table and for matching rows across runs. */
  key?: FigureKey;
  /** Over several runs (`--runs=N`): the ratio ours/reference of each run (median, min–max). */
  ratioRuns?: Stat;
}

export interface FigureKey {
  workload: string;
  metric: string;
  shape?: string;
  driver?: string;
  rate?: number;
}

/** A target: on the ratio ours/reference (at least / at most, with a counting tolerance), or on ours. */
export interface TargetRule {
  ratioMin?: number;
  ratioMax?: number;
  /** Added to ratioMax (counting noise of Redis commands at the window's edges). */
  tolerance?: number;
  oursMax?: number;
  /** Text of an `oursMax` target, e.g. 'stall ≤ 10 ms (ours)'. */
  text?: string;
}

export function evaluateTarget(rule: TargetRule, f: Figure): NonNullable<Figure['target']> {
  const rt = ratio(f);
  if (rule.ratioMin !== undefined)
    return { text: `≥ ${rule.ratioMin}x`, met: Number.isFinite(rt) ? rt >= rule.ratioMin : undefined, rule };
  if (rule.ratioMax !== undefined)
    return {
      text: `≤ ${rule.ratioMax}x`,
      met: Number.isFinite(rt) ? rt <= rule.ratioMax + (rule.tolerance ?? 0) : undefined,
      rule,
    };
  const ours = f.ours.median;
  return {
    text: rule.text ?? `≤ ${rule.oursMax}`,
    met: Number.isFinite(ours) && rule.oursMax !== undefined ? ours <= rule.oursMax : undefined,
    rule,
  };
}

const fmt = (x: number): string => {
  if (!Number.isFinite(x)) return '–';
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString('en-US');
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  return x.toFixed(3);
};
export const cell = (s: Stat | undefined): string =>
  !s || s.n === 0 ? '–' : s.n === 1 ? fmt(s.median) : `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;

export function ratio(f: Figure): number {
  return f.reference && f.reference.median !== 0 ? f.ours.median / f.reference.median : NaN;
}

export function markdownTable(figures: Figure[]): string {
  const lines = [
    '| Workload | Figure | Ours: median (min–max) | Reference: median (min–max) | Ours/ref | Target |',
    '|---|---|---|---|---|---|',
  ];
  for (const f of figures) {
    const r = ratio(f);
    const rr = f.ratioRuns && f.ratioRuns.n > 1 ? ` (${fmt(f.ratioRuns.min)}–${fmt(f.ratioRuns.max)})` : '';
    const t = f.target
      ? `${f.target.text} ${f.target.met === undefined ? '?' : f.target.met ? '✅' : '❌'}`
      : '';
    lines.push(
      `| ${f.group} | ${f.name} (${f.unit}) | ${cell(f.ours)} | ${cell(f.reference)} | ${Number.isFinite(r) ? r.toFixed(2) + rr : '–'} | ${t} |`,
    );
  }
  return lines.join('\n') + '\n';
}

export interface ChartWorkload {
  workload: WorkloadName;
  throughput: { ours: Stat; reference?: Stat };
  /** Latency at fixed open-loop rates: rate -> [p50, p99, p99.9] medians in µs. */
  latency: { rate: number; ours: number[]; reference?: number[] }[];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');

/** One row per workload: a throughput bar pair (median, min–max whisker) and latency bars per rate. */
export function svgChart(rows: ChartWorkload[], title: string): string {
  const W = 960;
  const rowH = 150;
  const H = 70 + rows.length * rowH;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="22" font-size="16" font-weight="bold">${esc(title)}</text>`,
    `<rect x="10" y="34" width="12" height="12" fill="#2b6cb0"/><text x="26" y="45">ours</text>`,
    `<rect x="70" y="34" width="12" height="12" fill="#dd6b20"/><text x="86" y="45">reference (Go)</text>`,
  ];
  const colors = { ours: '#2b6cb0', reference: '#dd6b20' };
  rows.forEach((row, i) => {
    const y0 = 60 + i * rowH;
    out.push(`<text x="10" y="${y0 + 14}" font-weight="bold">${esc(WORKLOAD_TITLES[row.workload])}</text>`);
    // Throughput panel: x 10..330
    const tmax = Math.max(row.throughput.ours.max || 0, row.throughput.reference?.max || 0, 1);
    const px = 10;
    const pw = 300;
    const by = y0 + 24;
    out.push(`<text x="${px}" y="${by + 10}" fill="#555">decisions per core-second (saturation)</text>`);
    (['ours', 'reference'] as const).forEach((k, j) => {
      const s = row.throughput[k];
      if (!s || s.n === 0) return;
      const yy = by + 18 + j * 34;
      const w = (s.median / tmax) * pw;
      out.push(`<rect x="${px}" y="${yy}" width="${w.toFixed(1)}" height="22" fill="${colors[k]}"/>`);
      const x1 = px + (s.min / tmax) * pw;
      const x2 = px + (s.max / tmax) * pw;
      out.push(`<line x1="${x1}" y1="${yy + 11}" x2="${x2}" y2="${yy + 11}" stroke="black"/>`);
      out.push(`<text x="${Math.max(px + w, x2) + 6}" y="${yy + 15}">${fmt(s.median)}</text>`);
    });
    // Latency panel: x 380..950, grouped bars per rate: p50, p99, p99.9 (log scale)
    const lx = 400;
    out.push(
      `<text x="${lx}" y="${by + 10}" fill="#555">latency at fixed rates, µs (log scale): p50 / p99 / p99.9</text>`,
    );
    const lat = row.latency;
    if (lat.length === 0) {
      out.push(`<text x="${lx}" y="${by + 40}" fill="#999">not measured for this workload</text>`);
      return;
    }
    const maxV = Math.max(...lat.flatMap((l) => [...l.ours, ...(l.reference ?? [])]), 10);
    const scale = (v: number) => (Math.log10(Math.max(v, 10)) - 1) / (Math.log10(maxV) - 1 || 1);
    const groupW = 540 / lat.length;
    const baseY = by + 110;
    lat.forEach((l, g) => {
      const gx = lx + g * groupW;
      out.push(`<text x="${gx}" y="${baseY + 14}">${l.rate}/s</text>`);
      (['ours', 'reference'] as const).forEach((k, j) => {
        const vals = l[k];
        if (!vals) return;
        vals.forEach((v, q) => {
          const h = scale(v) * 68;
          const x = gx + j * 3 * 18 + q * 18;
          out.push(
            `<rect x="${x}" y="${(baseY - h).toFixed(1)}" width="15" height="${h.toFixed(1)}" fill="${colors[k]}" fill-opacity="${[1, 0.7, 0.45][q]}"><title>${k} ${['p50', 'p99', 'p99.9'][q]} ${fmt(v)} µs</title></rect>`,
          );
        });
        out.push(
          `<text x="${gx}" y="${baseY - 72 - (1 - j) * 12}" font-size="10" fill="${colors[k]}">p99 ${fmt(vals[1] / 1000)} ms</text>`,
        );
      });
    });
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
