// Hand-written SVG charts: grouped bars (with min–max whiskers) and lines. No browser, no
// dependency: the output is a string that renders in any browser, in GitHub's Markdown preview,
// and diffs reasonably in git.

/** Okabe–Ito palette: distinguishable with the common forms of colour blindness. */
const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#000000'];
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';

export function colorOf(index: number): string {
  return PALETTE[index % PALETTE.length]!;
}

export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Tick step giving about `count` ticks up to `max`: 1, 2, 2.5 or 5 times a power of ten. */
export function niceStep(max: number, count = 5): number {
  if (!(max > 0)) return 1;
  const raw = max / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const residual = raw / magnitude;
  const nice = residual <= 1 ? 1 : residual <= 2 ? 2 : residual <= 2.5 ? 2.5 : residual <= 5 ? 5 : 10;
  return nice * magnitude;
}

/** Axis label: 250000 → "250k", 1500000 → "1.5M". */
export function shortNumber(n: number): string {
  const a = Math.abs(n);
  const trim = (x: number): string => String(Number(x.toFixed(2)));
  if (a >= 1e6) return `${trim(n / 1e6)}M`;
  if (a >= 1e3) return `${trim(n / 1e3)}k`;
  return trim(n);
}

function fmt(n: number): string {
  return Number(n.toFixed(1)).toString();
}

function header(width: number, height: number, title: string, subtitle: string | undefined): string[] {
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT} font-size="12">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="600">${escapeXml(title)}</text>`,
  ];
  if (subtitle) out.push(`<text x="${width / 2}" y="40" text-anchor="middle" fill="#555">${escapeXml(subtitle)}</text>`);
  return out;
}

function legend(names: string[], x: number, y: number, dashed: boolean[] = []): string[] {
  const out: string[] = [];
  let cx = x;
  names.forEach((name, i) => {
    const dash = dashed[i] ? ' stroke-dasharray="5,3"' : '';
    out.push(`<line x1="${cx}" y1="${y - 4}" x2="${cx + 18}" y2="${y - 4}" stroke="${colorOf(i)}" stroke-width="6"${dash}/>`);
    out.push(`<text x="${cx + 24}" y="${y}">${escapeXml(name)}</text>`);
    cx += 24 + name.length * 7 + 18;
  });
  return out;
}

function yAxis(left: number, top: number, plotW: number, plotH: number, max: number, label: string): string[] {
  const out: string[] = [];
  const step = niceStep(max);
  for (let v = 0; v <= max + step * 1e-9; v += step) {
    const y = top + plotH - (v / max) * plotH;
    out.push(`<line x1="${left}" y1="${fmt(y)}" x2="${left + plotW}" y2="${fmt(y)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${left - 6}" y="${fmt(y + 4)}" text-anchor="end" fill="#333">${shortNumber(v)}</text>`);
  }
  out.push(`<line x1="${left}" y1="${top}" x2="${left}" y2="${top + plotH}" stroke="#333"/>`);
  out.push(`<line x1="${left}" y1="${top + plotH}" x2="${left + plotW}" y2="${top + plotH}" stroke="#333"/>`);
  out.push(`<text transform="translate(16 ${top + plotH / 2}) rotate(-90)" text-anchor="middle" fill="#333">${escapeXml(label)}</text>`);
  return out;
}

/** Axis maximum: the next tick above the data. */
function axisMax(dataMax: number): number {
  if (!(dataMax > 0)) return 1;
  const step = niceStep(dataMax);
  return Math.ceil((dataMax * 1.02) / step) * step;
}

export interface BarSeries {
  name: string;
  /** One value per category; null draws no bar (e.g. a server that failed). */
  values: Array<number | null>;
  /** Optional whiskers: the range of the runs behind each value. */
  low?: Array<number | null>;
  high?: Array<number | null>;
}

export interface BarChartSpec {
  title: string;
  subtitle?: string;
  categories: string[];
  series: BarSeries[];
  yLabel: string;
  /** Print each bar's value above it. */
  labels?: boolean;
  /** Logarithmic y axis (decades), for values spanning orders of magnitude such as latencies. */
  log?: boolean;
  /** A dashed horizontal reference line, e.g. 1.0 on a ratio chart. */
  refLine?: number;
}

/** Decade ticks of a log axis from `lo` to `hi` (both powers of ten). */
function logAxis(left: number, top: number, plotW: number, plotH: number, lo: number, hi: number, label: string, yOf: (v: number) => number): string[] {
  const out: string[] = [];
  for (let v = lo; v <= hi * 1.0001; v *= 10) {
    const y = yOf(v);
    out.push(`<line x1="${left}" y1="${fmt(y)}" x2="${left + plotW}" y2="${fmt(y)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${left - 6}" y="${fmt(y + 4)}" text-anchor="end" fill="#333">${shortNumber(v)}</text>`);
  }
  out.push(`<line x1="${left}" y1="${top}" x2="${left}" y2="${top + plotH}" stroke="#333"/>`);
  out.push(`<line x1="${left}" y1="${top + plotH}" x2="${left + plotW}" y2="${top + plotH}" stroke="#333"/>`);
  out.push(`<text transform="translate(16 ${top + plotH / 2}) rotate(-90)" text-anchor="middle" fill="#333">${escapeXml(label)}</text>`);
  return out;
}

export function barChart(spec: BarChartSpec): string {
  const n = spec.series.length;
  const barW = n <= 2 ? 22 : n <= 4 ? 16 : 10;
  const groupW = n * barW + 18;
  const left = 70;
  const top = spec.subtitle ? 70 : 56;
  const longest = Math.max(0, ...spec.categories.map((c) => c.length));
  const rotate = spec.categories.length > 4 || longest > 14;
  const bottom = rotate ? 30 + Math.min(longest, 40) * 5.6 : 48;
  const plotW = Math.max(520, spec.categories.length * groupW);
  const width = left + plotW + 20;
  const plotH = 300;
  const height = top + plotH + bottom;
  let dataMax = 0;
  let dataMin = Infinity;
  for (const s of spec.series) {
    for (const v of [...s.values, ...(s.high ?? []), ...(s.low ?? [])]) {
      if (v === null || v === undefined) continue;
      if (v > dataMax) dataMax = v;
      if (v > 0 && v < dataMin) dataMin = v;
    }
  }
  const out = header(width, height, spec.title, spec.subtitle);
  out.push(...legend(spec.series.map((s) => s.name), left, top - 12));
  const slotW = plotW / Math.max(1, spec.categories.length);
  let yOf: (v: number) => number;
  if (spec.log) {
    const lo = 10 ** Math.floor(Math.log10(Number.isFinite(dataMin) ? Math.max(dataMin, 1e-9) : 1));
    const hi = 10 ** Math.ceil(Math.log10(Math.max(dataMax, lo * 10)));
    const span = Math.log10(hi) - Math.log10(lo);
    yOf = (v: number): number => top + plotH - ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / span) * plotH;
    out.push(...logAxis(left, top, plotW, plotH, lo, hi, spec.yLabel, yOf));
  } else {
    const max = axisMax(dataMax);
    yOf = (v: number): number => top + plotH - (v / max) * plotH;
    out.push(...yAxis(left, top, plotW, plotH, max, spec.yLabel));
  }
  if (spec.refLine !== undefined) {
    const y = fmt(yOf(spec.refLine));
    out.push(`<line x1="${left}" y1="${y}" x2="${left + plotW}" y2="${y}" stroke="#c00" stroke-dasharray="6,4"/>`);
  }
  spec.categories.forEach((cat, ci) => {
    const x0 = left + ci * slotW + (slotW - n * barW) / 2;
    spec.series.forEach((s, si) => {
      const v = s.values[ci];
      if (v === null || v === undefined) return;
      const x = x0 + si * barW;
      const y = yOf(v);
      out.push(`<rect x="${fmt(x + 1)}" y="${fmt(y)}" width="${barW - 2}" height="${fmt(top + plotH - y)}" fill="${colorOf(si)}"><title>${escapeXml(`${s.name} · ${cat}: ${Math.round(v).toLocaleString('en-US')}`)}</title></rect>`);
      const lo = s.low?.[ci];
      const hi = s.high?.[ci];
      if (lo !== null && lo !== undefined && hi !== null && hi !== undefined && hi > lo) {
        const cx = x + barW / 2;
        out.push(`<path d="M${fmt(cx)} ${fmt(yOf(hi))}V${fmt(yOf(lo))}M${fmt(cx - 3)} ${fmt(yOf(hi))}h6M${fmt(cx - 3)} ${fmt(yOf(lo))}h6" stroke="#222" stroke-width="1"/>`);
      }
      if (spec.labels) {
        out.push(`<text transform="translate(${fmt(x + barW / 2 + 3)} ${fmt(y - 4)}) rotate(-90)" font-size="9" fill="#333">${shortNumber(v)}</text>`);
      }
    });
    const cx = left + ci * slotW + slotW / 2;
    const ly = top + plotH + 14;
    if (rotate) {
      out.push(`<text transform="translate(${fmt(cx + 4)} ${ly}) rotate(-40)" text-anchor="end" font-size="11">${escapeXml(cat)}</text>`);
    } else {
      out.push(`<text x="${fmt(cx)}" y="${ly + 4}" text-anchor="middle" font-size="11">${escapeXml(cat)}</text>`);
    }
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

export interface LineSeries {
  name: string;
  points: Array<[number, number]>;
  dashed?: boolean;
  /** Colour index, so that several series can share a colour (e.g. runs of one server). */
  color?: number;
}

export interface LineChartSpec {
  title: string;
  subtitle?: string;
  series: LineSeries[];
  xLabel: string;
  yLabel: string;
  /** Shade [x0, x1]: e.g. the measured window after a warm-up. */
  shade?: [number, number];
  /** Legend entries (defaults to the series names). */
  legendNames?: string[];
}

export function lineChart(spec: LineChartSpec): string {
  const left = 70;
  const top = spec.subtitle ? 70 : 56;
  const plotW = 600;
  const plotH = 280;
  const width = left + plotW + 20;
  const height = top + plotH + 50;
  let xMax = 0;
  let yMaxData = 0;
  for (const s of spec.series) {
    for (const [x, y] of s.points) {
      if (x > xMax) xMax = x;
      if (y > yMaxData) yMaxData = y;
    }
  }
  if (spec.shade && spec.shade[1] > xMax) xMax = spec.shade[1];
  const xAxisMax = axisMax(xMax);
  const yMax = axisMax(yMaxData);
  const xOf = (x: number): number => left + (x / xAxisMax) * plotW;
  const yOf = (y: number): number => top + plotH - (y / yMax) * plotH;
  const out = header(width, height, spec.title, spec.subtitle);
  if (spec.shade) {
    const [a, b] = spec.shade;
    out.push(`<rect x="${fmt(xOf(a))}" y="${top}" width="${fmt(xOf(b) - xOf(a))}" height="${plotH}" fill="#f3f6fa"/>`);
  }
  out.push(...yAxis(left, top, plotW, plotH, yMax, spec.yLabel));
  const xStep = niceStep(xAxisMax, 8);
  for (let x = 0; x <= xAxisMax + xStep * 1e-9; x += xStep) {
    out.push(`<text x="${fmt(xOf(x))}" y="${top + plotH + 16}" text-anchor="middle" fill="#333">${shortNumber(x)}</text>`);
  }
  out.push(`<text x="${left + plotW / 2}" y="${top + plotH + 38}" text-anchor="middle" fill="#333">${escapeXml(spec.xLabel)}</text>`);
  const legendColors: number[] = [];
  spec.series.forEach((s, i) => {
    if (s.points.length === 0) return;
    const color = colorOf(s.color ?? i);
    const d = s.points.map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${fmt(xOf(x))} ${fmt(yOf(y))}`).join('');
    const dash = s.dashed ? ' stroke-dasharray="5,3"' : '';
    out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="1.6"${dash}><title>${escapeXml(s.name)}</title></path>`);
    legendColors.push(s.color ?? i);
  });
  const names = spec.legendNames ?? spec.series.map((s) => s.name);
  out.push(...legend(names, left, top - 12));
  out.push('</svg>');
  return out.join('\n') + '\n';
}
