// From the suite's runs to medians, back-to-back ratios, RESULTS.md and charts.

import { COMMAND_WORDS, type Protocol } from '../loadgen/options.ts';
import type { LoadResult } from '../loadgen/run.ts';
import { barChart, lineChart } from '../report/svg.ts';
import { fmtBytes, fmtInt, fmtUs } from '../report/text.ts';
import type { Point } from './matrix.ts';

/** One run of one server at one point. */
export interface RunRecord {
  point: string;
  server: string;
  /** Round number: runs of the same round were back to back. */
  round: number;
  /** Position in its round (the order is rotated from round to round). */
  order: number;
  ok: boolean;
  failures: string[];
  jobsPerSec: number;
  commandsPerSec: number;
  /** Length of the measured window (grows past --duration to hold 20 waves of in-flight jobs). */
  windowS: number;
  p50Us: { put: number; reserve: number; delete: number };
  p99Us: { put: number; reserve: number; delete: number };
  p999Us: { put: number; reserve: number; delete: number };
  generatorCpuShare: number;
  serverCpuShare: number | null;
  otherCpuShare: number | null;
  timeline: Array<[number, number]>;
  lost: number;
  duplicated: number;
}

export interface MemRecord {
  server: string;
  jobs: number;
  ok: boolean;
  failures: string[];
  rssBeforeBytes: number | null;
  rssAfterBytes: number | null;
  bytesPerJob: number | null;
  putsPerSec: number;
}

export interface SuiteContext {
  startedAt: string;
  finishedAt: string;
  command: string;
  machine: { cores: number; cpuModel: string; node: string; kernel: string; loadAverage: string };
  commit: string;
  servers: Array<{ name: string; description: string }>;
  /** Servers that failed to start or crashed, with the reason. */
  broken: Record<string, string>;
  runs: number;
  durationS: number;
  warmupS: number;
  threads: number;
  quick: boolean;
  /** Absent in suite.json files from before workq: beanstalk. */
  protocol?: Protocol;
}

export function recordOf(point: Point, server: string, round: number, order: number, r: LoadResult): RunRecord {
  const l = r.latencyUs;
  return {
    point: point.id,
    server,
    round,
    order,
    ok: r.ok,
    failures: r.failures,
    jobsPerSec: r.jobsPerSec,
    commandsPerSec: r.commandsPerSec,
    windowS: r.elapsedS,
    p50Us: { put: l.put.p50Us, reserve: l.reserve.p50Us, delete: l.delete.p50Us },
    p99Us: { put: l.put.p99Us, reserve: l.reserve.p99Us, delete: l.delete.p99Us },
    p999Us: { put: l.put.p999Us, reserve: l.reserve.p999Us, delete: l.delete.p999Us },
    generatorCpuShare: r.generatorCpu.shareOfOneCore,
    serverCpuShare: r.serverCpu?.shareOfOneCore ?? null,
    otherCpuShare: r.otherCpu?.shareOfOneCore ?? null,
    timeline: r.timeline.map((s) => [Number(s.tS.toFixed(3)), Math.round(s.jobsPerSec)]),
    // A put run without a drain reserves nothing: its ledger has nothing to say.
    lost: r.verify.checked ? r.verify.lost : 0,
    duplicated: r.verify.checked ? r.verify.duplicated : 0,
  };
}

export function failedRecord(point: Point, server: string, round: number, order: number, reason: string): RunRecord {
  const zero = { put: 0, reserve: 0, delete: 0 };
  return {
    point: point.id,
    server,
    round,
    order,
    ok: false,
    failures: [reason],
    jobsPerSec: 0,
    commandsPerSec: 0,
    windowS: 0,
    p50Us: zero,
    p99Us: zero,
    p999Us: zero,
    generatorCpuShare: 0,
    serverCpuShare: null,
    otherCpuShare: null,
    timeline: [],
    lost: 0,
    duplicated: 0,
  };
}

export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export interface Cell {
  runs: number;
  failed: number;
  median: number;
  min: number;
  max: number;
}

export function cellOf(records: RunRecord[], pick: (r: RunRecord) => number | null = (r) => r.jobsPerSec): Cell | null {
  const ok = records.filter((r) => r.ok);
  const values = ok.map(pick).filter((v): v is number => v !== null);
  if (records.length === 0) return null;
  return {
    runs: records.length,
    failed: records.length - ok.length,
    median: median(values),
    min: values.length ? Math.min(...values) : NaN,
    max: values.length ? Math.max(...values) : NaN,
  };
}

/**
 * Ratio server/baseline from back-to-back pairs: one ratio per round in which both runs passed.
 * Why pairs rather than a ratio of medians: this VM changes speed by up to 2x within minutes, and
 * only runs next to each other in time saw the same machine.
 */
export function pairedRatio(records: RunRecord[], server: string, baseline: string): Cell | null {
  const byRound = new Map<number, { s?: RunRecord; b?: RunRecord }>();
  for (const r of records) {
    const e = byRound.get(r.round) ?? {};
    if (r.server === server) e.s = r;
    if (r.server === baseline) e.b = r;
    byRound.set(r.round, e);
  }
  const ratios: number[] = [];
  for (const { s, b } of byRound.values()) {
    if (s?.ok && b?.ok && b.jobsPerSec > 0) ratios.push(s.jobsPerSec / b.jobsPerSec);
  }
  if (ratios.length === 0) return null;
  return { runs: ratios.length, failed: 0, median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) };
}

function fmtCell(c: Cell | null, f: (n: number) => string = fmtInt): string {
  if (c === null) return '—';
  if (c.runs === c.failed) return `**FAILED** (${c.failed}/${c.runs})`;
  const range = c.max > c.min ? ` [${f(c.min)}–${f(c.max)}]` : '';
  return `${f(c.median)}${range}${c.failed ? ` (**${c.failed} failed**)` : ''}`;
}

function fmtRatio(c: Cell | null): string {
  if (c === null) return '—';
  return `**${c.median.toFixed(2)}×**${c.max > c.min ? ` [${c.min.toFixed(2)}–${c.max.toFixed(2)}]` : ''}`;
}

const pct = (n: number): string => `${(n * 100).toFixed(0)}%`;

/** Above this share of a core the generator, sharing 2 cores with the server, may set the pace. */
export const GENERATOR_BOUND_SHARE = 0.9;
/** Above this share of a core used by other processes, a run is noisy. */
export const NOISY_SHARE = 0.1;

function mostly(records: RunRecord[], test: (r: RunRecord) => boolean): boolean {
  const ok = records.filter((r) => r.ok);
  return ok.length > 0 && ok.filter(test).length * 2 > ok.length;
}

const generatorBound = (rs: RunRecord[]): boolean => mostly(rs, (r) => r.generatorCpuShare > GENERATOR_BOUND_SHARE);
const noisy = (rs: RunRecord[]): boolean => mostly(rs, (r) => (r.otherCpuShare ?? 0) > NOISY_SHARE);

export const BASELINE = 'beanstalkd';

export function writeResultsMarkdown(ctx: SuiteContext, points: Point[], records: RunRecord[], mem: MemRecord[], summarySvgName: string): string {
  const servers = ctx.servers.map((s) => s.name);
  const contenders = servers.filter((s) => s !== BASELINE);
  const hasBaseline = servers.includes(BASELINE);
  // A workq run is one section of RESULTS.md (the beanstalk suite's is the page): one level down.
  const workq = ctx.protocol === 'workq';
  const w = COMMAND_WORDS[ctx.protocol ?? 'beanstalk'];
  const h2 = workq ? '###' : '##';
  const out: string[] = [];
  if (workq) {
    out.push(`## workq: shardstalk's workq listener (${w.put} → ${w.reserve} → ${w.delete})`, '');
    out.push(`Generated ${ctx.finishedAt.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')} by \`bench/suite.ts --protocol workq\`${ctx.quick ? ' (quick mode)' : ''}.`, '');
  } else {
    out.push('# shardstalk vs beanstalkd: load-test results', '');
    out.push(`Generated ${ctx.finishedAt.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')} by the side-by-side suite (\`bench/suite.ts\`${ctx.quick ? ', quick mode' : ''}).`, '');
  }
  out.push('| | |', '|---|---|');
  out.push(`| machine | ${ctx.machine.cores} cores, ${ctx.machine.cpuModel}, Linux ${ctx.machine.kernel}, load average at start ${ctx.machine.loadAverage} |`);
  out.push(`| software | Node ${ctx.machine.node}; shardstalk at ${ctx.commit} |`);
  for (const s of ctx.servers) out.push(`| ${s.name} | ${s.description} |`);
  const longest = Math.max(0, ...records.map((r) => r.windowS ?? 0));
  const grown = longest > ctx.durationS * 1.05 ? ` (longer where many jobs are in flight, up to ${longest.toFixed(1)} s, so that each window holds at least 20 "waves" of them)` : '';
  out.push(`| method | ${ctx.runs} run${ctx.runs > 1 ? 's' : ''} per point and server, ${ctx.durationS} s measured${grown} after ${ctx.warmupS} s of warm-up, a fresh server for every run; the servers take turns run by run (order rotated each round), so each round is a back-to-back comparison |`);
  out.push(`| generator | \`bench/cli.ts\`${workq ? ' --protocol workq' : ''} in-process, ${ctx.threads} worker thread${ctx.threads > 1 ? 's' : ''}; every acknowledged job checked ${w.reserve}d and ${w.delete}d exactly once (cycle) |`);
  out.push(`| started / finished | ${ctx.startedAt} / ${ctx.finishedAt} |`);
  out.push('');
  out.push('Reproduce:', '', '```sh', ctx.command, '```', '');
  if (workq) {
    out.push(
      'Figures are medians with [min–max] over the runs. No reference workq server (github.com/iamduo/workq)',
      'is installed on this machine, so there is no baseline column and no ratio. This VM switches between',
      'speed states about 2× apart within minutes: compare columns of the same table, not figures across days.',
      '',
    );
  } else {
    out.push('Figures are medians with [min–max] over the runs. Ratios are medians of per-round ratios (each', 'round ran the servers back to back); this VM switches between speed states about 2× apart within', 'minutes, so only the ratios are meaningful, not the absolute numbers.', '');
  }
  const broken = Object.entries(ctx.broken);
  if (broken.length > 0) {
    out.push(`${h2} ⚠ Servers that failed`, '');
    for (const [name, reason] of broken) out.push(`- **${name}**: ${reason.split('\n')[0]}`);
    out.push('');
  }
  out.push(`![throughput per configuration](${summarySvgName})`, '');

  out.push(`${h2} Throughput (jobs/s)`, '');
  const ratioHeads = hasBaseline ? contenders.map((s) => `${s} / ${BASELINE}`) : [];
  out.push(`| point | ${[...servers, ...ratioHeads].join(' | ')} |`);
  out.push(`|---|${[...servers, ...ratioHeads].map(() => '---:').join('|')}|`);
  for (const p of points) {
    const rs = records.filter((r) => r.point === p.id);
    const cells = servers.map((s) => {
      const mine = rs.filter((r) => r.server === s);
      return fmtCell(cellOf(mine)) + (generatorBound(mine) ? ' †' : '') + (noisy(mine) ? ' ‡' : '');
    });
    const ratios = hasBaseline ? contenders.map((s) => fmtRatio(pairedRatio(rs, s, BASELINE))) : [];
    out.push(`| ${p.label} | ${[...cells, ...ratios].join(' | ')} |`);
  }
  out.push('');
  out.push(
    ...(workq
      ? ['Points: `mode connections×pipeline body [job names]`. put: each connection only adds, jobs = adds answered', '+OK; cycle: each connection pipelines add → lease → complete and jobs = completes answered +OK.']
      : ['Points: `mode connections×pipeline body [tubes]`. put: jobs = INSERTED replies; cycle: each connection', 'pipelines put → reserve → delete and jobs = DELETED replies.']),
    '',
    `- † the generator used more than ${pct(GENERATOR_BOUND_SHARE)} of a core in most runs: the figure may be the generator's limit rather than the server's.`,
    `- ‡ other processes used more than ${pct(NOISY_SHARE)} of a core in most runs: noisy.`,
    '',
  );

  out.push(`${h2} Latency p99 (${w.put} / ${w.reserve} / ${w.delete})`, '');
  out.push(`| point | ${servers.join(' | ')} |`);
  out.push(`|---|${servers.map(() => '---:').join('|')}|`);
  for (const p of points) {
    const rs = records.filter((r) => r.point === p.id);
    const cells = servers.map((s) => {
      const mine = rs.filter((r) => r.server === s && r.ok);
      if (mine.length === 0) return '—';
      const put = median(mine.map((r) => r.p99Us.put));
      if (p.mode === 'put') return fmtUs(put);
      return `${fmtUs(put)} / ${fmtUs(median(mine.map((r) => r.p99Us.reserve)))} / ${fmtUs(median(mine.map((r) => r.p99Us.delete)))}`;
    });
    out.push(`| ${p.label} | ${cells.join(' | ')} |`);
  }
  out.push('');

  out.push(`${h2} CPU (share of one core: generator / server)`, '');
  out.push('The generator shares the machine with the server; if it were near 100% of a core it, not the server, would set the pace.', '');
  out.push(`| point | ${servers.join(' | ')} |`);
  out.push(`|---|${servers.map(() => '---:').join('|')}|`);
  for (const p of points) {
    const rs = records.filter((r) => r.point === p.id);
    const cells = servers.map((s) => {
      const mine = rs.filter((r) => r.server === s && r.ok);
      if (mine.length === 0) return '—';
      const server = mine.map((r) => r.serverCpuShare).filter((v): v is number => v !== null);
      return `${pct(median(mine.map((r) => r.generatorCpuShare)))} / ${server.length ? pct(median(server)) : '?'}`;
    });
    out.push(`| ${p.label} | ${cells.join(' | ')} |`);
  }
  out.push('');

  if (mem.length > 0) {
    out.push(`${h2} Memory: server RSS growth with queued 100-byte jobs`, '');
    out.push('| server | jobs | RSS before | RSS after | bytes per job |', '|---|---:|---:|---:|---:|');
    for (const m of mem) {
      if (!m.ok || m.bytesPerJob === null) {
        out.push(`| ${m.server} | ${fmtInt(m.jobs)} | — | — | **FAILED**: ${m.failures.join('; ')} |`);
      } else {
        out.push(`| ${m.server} | ${fmtInt(m.jobs)} | ${fmtBytes(m.rssBeforeBytes!)} | ${fmtBytes(m.rssAfterBytes!)} | ${m.bytesPerJob.toFixed(0)} |`);
      }
    }
    out.push('');
  }

  const reference = referenceRows(records, mem);
  if (reference.length > 0) {
    out.push('## beanstalkd here vs /work/shared/MEASURED.md', '');
    out.push(
      'The same beanstalkd, measured earlier with a C epoll generator. If beanstalkd used ~100% of a core',
      '(CPU table) and still ran below these figures, the VM was in a slow state (MEASURED.md: two speed',
      'states about 2× apart); `tools/bench-c-put.c` cross-checks the generator on the spot.',
      '',
    );
    out.push('| figure | here | MEASURED.md | here / MEASURED |', '|---|---:|---:|---:|');
    out.push(...reference, '');
  }

  out.push(`${h2} Trust`, '');
  const failedRuns = records.filter((r) => !r.ok);
  const lost = records.reduce((n, r) => n + r.lost, 0);
  const dup = records.reduce((n, r) => n + r.duplicated, 0);
  out.push(`- Runs: ${records.length}, failed: ${failedRuns.length}. Jobs lost: ${lost}, duplicated: ${dup} (cycle runs check every acknowledged job).`);
  const others = records.map((r) => r.otherCpuShare).filter((v): v is number => v !== null);
  if (others.length > 0) {
    const noisy = others.filter((v) => v > 0.1).length;
    out.push(`- CPU used by other processes during runs: median ${pct(median(others))} of a core, max ${pct(Math.max(...others))}; ${noisy} run${noisy === 1 ? '' : 's'} above 10%.`);
  }
  const gen = records.filter((r) => r.ok).map((r) => r.generatorCpuShare);
  if (gen.length > 0) out.push(`- Generator CPU: median ${pct(median(gen))} of a core, max ${pct(Math.max(...gen))}.`);
  for (const r of failedRuns.slice(0, 20)) out.push(`- FAILED ${r.server} ${r.point} round ${r.round + 1}: ${r.failures.join('; ').split('\n')[0]}`);
  out.push('');
  return out.join('\n');
}

/** beanstalkd figures from MEASURED.md (C epoll generator, same 2-core machine type). */
const MEASURED_BEANSTALKD: Array<{ point: string; label: string; jobsPerSec: number }> = [
  { point: 'put-c100-p16-s100-t1', label: 'put 100×16 100B, jobs/s', jobsPerSec: 228_000 },
  { point: 'cycle-c100-p16-s100-t1', label: 'cycle 100×16 100B, jobs/s', jobsPerSec: 96_000 },
  { point: 'cycle-c100-p1-s100-t1', label: 'cycle 100×1 100B, jobs/s', jobsPerSec: 78_000 },
  { point: 'cycle-c1000-p1-s100-t1', label: 'cycle 1000×1 100B, jobs/s', jobsPerSec: 61_000 },
];
const MEASURED_BEANSTALKD_BYTES_PER_JOB = 292;

function referenceRows(records: RunRecord[], mem: MemRecord[]): string[] {
  const rows: string[] = [];
  for (const ref of MEASURED_BEANSTALKD) {
    const c = cellOf(records.filter((r) => r.point === ref.point && r.server === BASELINE));
    if (c === null || !Number.isFinite(c.median)) continue;
    rows.push(`| ${ref.label} | ${fmtInt(c.median)} | ~${fmtInt(ref.jobsPerSec)} | ${(c.median / ref.jobsPerSec).toFixed(2)} |`);
  }
  const m = mem.find((x) => x.server === BASELINE && x.ok && x.bytesPerJob !== null);
  if (m) rows.push(`| RSS per queued 100-byte job, bytes | ${m.bytesPerJob!.toFixed(0)} | ~${MEASURED_BEANSTALKD_BYTES_PER_JOB} | ${(m.bytesPerJob! / MEASURED_BEANSTALKD_BYTES_PER_JOB).toFixed(2)} |`);
  return rows;
}

export function summaryChart(ctx: SuiteContext, points: Point[], records: RunRecord[]): string {
  const servers = ctx.servers.map((s) => s.name);
  return barChart({
    title: 'Throughput per configuration (jobs/s)',
    subtitle: `median of ${ctx.runs} run${ctx.runs > 1 ? 's' : ''}, whiskers: range · ${ctx.machine.cores} cores, ${ctx.machine.cpuModel} · ${ctx.finishedAt.slice(0, 10)}`,
    yLabel: 'jobs/s',
    categories: points.map((p) => p.label),
    series: servers.map((s) => {
      const cells = points.map((p) => cellOf(records.filter((r) => r.point === p.id && r.server === s)));
      const v = (c: Cell | null, f: (c: Cell) => number): number | null => (c === null || !Number.isFinite(f(c)) ? null : f(c));
      return {
        name: s,
        values: cells.map((c) => v(c, (x) => x.median)),
        low: cells.map((c) => v(c, (x) => x.min)),
        high: cells.map((c) => v(c, (x) => x.max)),
      };
    }),
  });
}

export function ratioChart(ctx: SuiteContext, points: Point[], records: RunRecord[]): string | null {
  const contenders = ctx.servers.map((s) => s.name).filter((s) => s !== BASELINE);
  if (contenders.length === 0 || !ctx.servers.some((s) => s.name === BASELINE)) return null;
  return barChart({
    title: `Throughput ratio to ${BASELINE} (back-to-back pairs)`,
    subtitle: '1.0 = as fast as beanstalkd; median of per-round ratios, whiskers: range',
    yLabel: `× ${BASELINE}`,
    refLine: 1,
    categories: points.map((p) => p.label),
    series: contenders.map((s) => {
      const cells = points.map((p) => pairedRatio(records.filter((r) => r.point === p.id), s, BASELINE));
      return { name: s, values: cells.map((c) => c?.median ?? null), low: cells.map((c) => c?.min ?? null), high: cells.map((c) => c?.max ?? null) };
    }),
  });
}

export function timelineChart(ctx: SuiteContext, p: Point, records: RunRecord[]): string {
  const servers = ctx.servers.map((s) => s.name);
  const series = records
    .filter((r) => r.point === p.id && r.timeline.length > 0)
    .map((r) => ({ name: `${r.server} round ${r.round + 1}`, points: r.timeline, color: servers.indexOf(r.server), dashed: !r.ok }));
  return lineChart({
    title: `Throughput over time: ${p.label}`,
    subtitle: 'every run, sampled every 250 ms; shaded: measured window',
    xLabel: 'seconds since start',
    yLabel: 'jobs/s',
    shade: [ctx.warmupS, ctx.warmupS + ctx.durationS],
    series,
    legendNames: servers,
  });
}

export function memChart(ctx: SuiteContext, mem: MemRecord[]): string {
  const ok = mem.filter((m) => m.ok && m.bytesPerJob !== null);
  return barChart({
    title: 'Server RSS growth per queued 100-byte job',
    subtitle: `${fmtInt(mem[0]?.jobs ?? 0)} jobs · ${ctx.finishedAt.slice(0, 10)}`,
    yLabel: 'bytes per job',
    labels: true,
    categories: ok.map((m) => m.server),
    series: [{ name: 'bytes/job', values: ok.map((m) => m.bytesPerJob) }],
  });
}

/** The suite's own part of RESULTS.md lies between these; everything else in the file is kept. */
export const GENERATED_BEGIN = '<!-- bench/suite.ts: generated from here; edit outside these markers -->';
export const GENERATED_END = '<!-- bench/suite.ts: generated up to here -->';
/** The part a `--protocol workq` suite run writes, a section of the same file. */
export const WORKQ_GENERATED_BEGIN = '<!-- bench/suite.ts --protocol workq: generated from here; edit outside these markers -->';
export const WORKQ_GENERATED_END = '<!-- bench/suite.ts --protocol workq: generated up to here -->';
/** Headings the suite writes, to find its part in a file written before the markers existed. */
const GENERATED_HEADINGS = ['## ⚠ Servers that failed', '## Throughput (jobs/s)', '## Latency p99', '## CPU (', '## Memory:', '## beanstalkd here vs', '## Trust'];

/**
 * Puts a freshly generated summary into an existing RESULTS.md without losing what others wrote
 * there (e.g. a durability comparison or an analysis appended below): only the generated block is
 * replaced. A workq block that is not in the file yet is appended at its end.
 */
export function mergeResults(existing: string | null, generated: string, protocol: Protocol = 'beanstalk'): string {
  const workq = protocol === 'workq';
  const BEGIN = workq ? WORKQ_GENERATED_BEGIN : GENERATED_BEGIN;
  const END = workq ? WORKQ_GENERATED_END : GENERATED_END;
  const block = `${BEGIN}\n${generated.trimEnd()}\n${END}\n`;
  if (existing === null || existing.trim() === '') return block;
  const begin = existing.indexOf(BEGIN);
  const end = existing.indexOf(END);
  if (begin >= 0 && end > begin) {
    return existing.slice(0, begin) + block + existing.slice(end + END.length).replace(/^\n/, '');
  }
  if (workq) return `${existing.trimEnd()}\n\n${block}`;
  // A file from before the markers: the generated part is the top, up to the first heading the
  // suite does not write; keep everything from there on.
  const lines = existing.split('\n');
  let keepFrom = lines.length;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('## ') && !GENERATED_HEADINGS.some((h) => line.startsWith(h))) {
      keepFrom = i;
      break;
    }
  }
  const kept = lines.slice(keepFrom).join('\n');
  return kept.trim() === '' ? block : `${block}\n${kept}`;
}
