// Human-readable output: the end-of-run report and the live progress bar.

import type { LatencySummary } from '../loadgen/histogram.ts';
import { COMMAND_WORDS } from '../loadgen/options.ts';
import type { LoadResult, Progress } from '../loadgen/run.ts';

const int = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export function fmtInt(n: number): string {
  return int.format(n);
}

/** 1234 → "1.23k", 1234567 → "1.23M". */
export function fmtSi(n: number): string {
  const a = Math.abs(n);
  if (a >= 1e6) return `${(n / 1e6).toFixed(a >= 1e7 ? 1 : 2)}M`;
  if (a >= 1e3) return `${(n / 1e3).toFixed(a >= 1e5 ? 0 : a >= 1e4 ? 1 : 2)}k`;
  return n.toFixed(0);
}

/** Microseconds as "850µs", "12.3ms", "1.20s". */
export function fmtUs(us: number): string {
  if (us >= 1e6) return `${(us / 1e6).toFixed(2)}s`;
  if (us >= 1e4) return `${(us / 1e3).toFixed(1)}ms`;
  if (us >= 1e3) return `${(us / 1e3).toFixed(2)}ms`;
  return `${us.toFixed(0)}µs`;
}

export function fmtBytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(2)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}

function latencyRow(name: string, l: LatencySummary): string {
  const cells = [l.p50Us, l.p99Us, l.p999Us, l.maxUs].map((v) => fmtUs(v).padStart(9));
  return `    ${name.padEnd(8)}${cells.join('')}${fmtInt(l.count).padStart(12)}`;
}

export function formatReport(r: LoadResult): string {
  const o = r.options;
  const words = COMMAND_WORDS[o.protocol];
  const lines: string[] = [];
  const window = o.durationS !== null && r.mode !== 'reserve' ? `${o.durationS} s${o.warmupS > 0 ? ` (+${o.warmupS} s warm-up)` : ''}` : `-n ${fmtInt(o.jobs ?? 0)}`;
  lines.push(
    `shardstalk-bench ${r.mode} → ${r.target}   c=${o.connections} P=${o.pipeline} s=${o.bodyBytes}B tubes=${o.tubes} watch=${o.watch} threads=${o.threads}${o.rate !== null ? ` rate=${fmtInt(o.rate)}/s` : ''}   ${window}`,
  );
  for (const w of r.warnings) lines.push(`  warning: ${w}`);
  const prefill = r.phases.find((p) => p.phase === 'prefill');
  if (prefill) lines.push(`  prefill      ${fmtInt(prefill.totals.puts)} jobs in ${prefill.elapsedS.toFixed(2)} s (${fmtInt(prefill.jobsPerSec)} ${words.put}s/s)`);
  lines.push(`  throughput   ${fmtInt(r.jobsPerSec)} jobs/s   ${fmtInt(r.commandsPerSec)} commands/s   (${fmtInt(r.jobs)} jobs in ${r.elapsedS.toFixed(2)} s)`);
  const extended = r.phases.find((p) => p.phase === 'load')?.windowExtendedS ?? 0;
  if (extended > 0) lines.push(`  window       extended by ${extended.toFixed(1)} s to hold ${o.minWaves} waves of the ${fmtInt(o.connections * o.pipeline)} jobs in flight (--min-waves)`);
  if (o.rate !== null) {
    const load = r.phases.find((p) => p.phase === 'load');
    const putsPerSec = load && load.elapsedS > 0 ? load.puts / load.elapsedS : 0;
    const missed = load?.rateMissed ?? 0;
    const put = words.put;
    lines.push(`  open loop    target ${fmtInt(o.rate)} ${put}s/s, sent ${fmtInt(putsPerSec)} ${put}s/s${missed ? `, ${fmtInt(missed)} due ${put}s dropped (backlog full)` : ''}; latency counts from each ${put}'s intended send time`);
  }
  lines.push(`  latency           p50      p99    p99.9      max       count`);
  for (const [name, l] of Object.entries(r.latencyUs)) if (l.count > 0) lines.push(latencyRow(words[name as keyof typeof words], l));
  const g = r.generatorCpu;
  const cores = r.machine.cores;
  let cpu = `  CPU          generator ${g.cpuS.toFixed(2)} s = ${(g.shareOfOneCore * 100).toFixed(0)}% of a core (${((g.shareOfOneCore / cores) * 100).toFixed(0)}% of ${cores} cores)`;
  if (r.serverCpu) cpu += `;  server ${r.serverCpu.cpuS.toFixed(2)} s = ${(r.serverCpu.shareOfOneCore * 100).toFixed(0)}% of a core`;
  lines.push(cpu);
  if (r.otherCpu && r.otherCpu.shareOfOneCore >= 0.1) {
    lines.push(`  warning      other processes used ${(r.otherCpu.shareOfOneCore * 100).toFixed(0)}% of a core during the run: figures are not trustworthy`);
  }
  if (r.otherCpu && r.otherCpu.stealS > 0.05 * r.elapsedS) {
    lines.push(`  warning      the hypervisor stole ${r.otherCpu.stealS.toFixed(2)} s of CPU during the run`);
  }
  if (r.serverRss && !r.memory) {
    const grew = r.serverRss.endBytes - r.serverRss.startBytes;
    lines.push(`  server RSS   ${fmtBytes(r.serverRss.startBytes)} → ${fmtBytes(r.serverRss.endBytes)} over the measured window (${grew >= 0 ? '+' : '−'}${fmtBytes(Math.abs(grew))})`);
  }
  if (r.memory) {
    lines.push(
      `  memory       server RSS ${fmtBytes(r.memory.rssBeforeBytes)} → ${fmtBytes(r.memory.rssAfterBytes)} for ${fmtInt(r.memory.jobs)} jobs = ${r.memory.bytesPerJob.toFixed(0)} bytes/job`,
    );
  }
  const v = r.verify;
  if (v.checked) {
    lines.push(
      `  verify       ${fmtInt(v.inserted)} acknowledged ${words.put}s: ${fmtInt(v.deletedOnce)} ${words.reserve}d and ${words.delete}d exactly once, lost ${v.lost}, duplicated ${v.duplicated}` +
        `${v.unacknowledged ? `, unacknowledged ${v.unacknowledged}` : ''}${v.foreign ? `, foreign ${v.foreign}` : ''}${v.idMismatches ? `, wrong id ${v.idMismatches}` : ''}   (final drain: ${fmtInt(v.drained)})`,
    );
  } else {
    lines.push(`  verify       not checked (put run without --drain)`);
  }
  const samples = r.phases.flatMap((p) => p.errorSamples).slice(0, 5);
  for (const s of samples) lines.push(`  error        ${s}`);
  lines.push(r.ok ? '  OK' : `  FAILED: ${r.failures.join('; ')}`);
  return lines.join('\n');
}

/** A one-line progress bar, redrawn in place on a terminal. */
export class ProgressBar {
  private readonly stream: NodeJS.WriteStream;
  private drawn = false;

  constructor(stream: NodeJS.WriteStream) {
    this.stream = stream;
  }

  update(p: Progress, prefix = ''): void {
    const width = 24;
    let fraction: number | null = null;
    if (p.plannedS !== null) fraction = p.elapsedS / p.plannedS;
    else if (p.jobsTarget !== null) fraction = p.jobs / p.jobsTarget;
    let bar: string;
    if (fraction === null) {
      bar = `[${' '.repeat(width)}]     `;
    } else {
      const f = Math.max(0, Math.min(1, fraction));
      const full = Math.round(f * width);
      bar = `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${(f * 100).toFixed(0).padStart(3)}%`;
    }
    const time = p.plannedS !== null ? `${p.elapsedS.toFixed(1)}/${p.plannedS.toFixed(1)} s` : `${p.elapsedS.toFixed(1)} s`;
    const errors = p.errors > 0 ? `  errors ${p.errors}` : '';
    const line = `${prefix}${bar} ${p.phase.padEnd(7)} ${time}  ${fmtSi(p.jobsPerSec)} jobs/s  ${fmtSi(p.commandsPerSec)} cmd/s${errors}`;
    const cols = this.stream.columns ?? 100;
    this.stream.write(`\r${line.slice(0, cols - 1)}\x1b[K`);
    this.drawn = true;
  }

  clear(): void {
    if (this.drawn) this.stream.write('\r\x1b[K');
    this.drawn = false;
  }
}
