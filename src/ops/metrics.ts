// /metrics: what `stats` and `stats-tube` say, in the Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/), under the names
// davidtannock/beanstalkd_exporter gives them, so dashboards and alerts made for that exporter
// keep working; then what only shardstalk can tell (shards, rings, threads) as shardstalk_*.
//
// Types: that exporter declares every series a gauge, but promtool's lint refuses a gauge named
// *_total or *_count (and a counter named *_count). The names are what queries use, so they stay;
// the TYPE lines say counter for the cmd-*_total counters and untyped where the exporter's name
// ends in _count or is a gauge named *_total (pause, pause-time-left), which the lint accepts and
// PromQL treats like a gauge.

import { STATS_CMD_KEYS } from '../proto/beanstalk/commands.ts';
import type { StatsEntry } from '../proto/beanstalk/stats.ts';
import {
  TOTALS_BINLOG_MIGRATED, TOTALS_BINLOG_WRITTEN, TOTALS_BURIED, TOTALS_DELAYED, TOTALS_JOB_TIMEOUTS, TOTALS_READY,
  TOTALS_RESERVED, TOTALS_URGENT,
} from '../shared/records.ts';
import type { Figures } from './gather.ts';
import { cumulative } from '../shared/histogram.ts';
import type { ThreadCpu } from './threads.ts';

export type MetricType = 'counter' | 'gauge' | 'untyped' | 'histogram';

export interface MetricDef {
  readonly name: string;
  readonly type: MetricType;
  readonly help: string;
}

/** The exposition format's Content-Type. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const def = (name: string, type: MetricType, help: string): MetricDef => ({ name, type, help });

/** stats' numeric keys → series. The cmd-* keys are made from STATS_CMD_KEYS below. */
export const SERVER_METRICS: ReadonlyMap<string, MetricDef> = new Map([
  ...STATS_CMD_KEYS.map(([key]): [string, MetricDef] => [
    key,
    def(`beanstalkd_${key.replace(/-/g, '_')}_total`, 'counter', `The cumulative number of ${key.slice(4)} commands.`),
  ]),
  // The exporter's names (internal/exporter/metrics.go), its help texts.
  ['current-jobs-urgent', def('beanstalkd_current_jobs_urgent_count', 'untyped', 'The number of ready jobs with priority < 1024.')],
  ['current-jobs-ready', def('beanstalkd_current_jobs_ready_count', 'untyped', 'The number of jobs in the ready queue.')],
  ['current-jobs-reserved', def('beanstalkd_current_jobs_reserved_count', 'untyped', 'The number of jobs reserved by all clients.')],
  ['current-jobs-delayed', def('beanstalkd_current_jobs_delayed_count', 'untyped', 'The number of delayed jobs.')],
  ['current-jobs-buried', def('beanstalkd_current_jobs_buried_count', 'untyped', 'The number of buried jobs.')],
  ['job-timeouts', def('beanstalkd_job_timeouts_count', 'untyped', 'The cumulative count of times a job has timed out.')],
  ['total-jobs', def('beanstalkd_total_jobs_count', 'untyped', 'The cumulative count of jobs created in the current beanstalkd process.')],
  ['current-tubes', def('beanstalkd_current_tubes_count', 'untyped', 'The number of currently-existing tubes.')],
  ['current-connections', def('beanstalkd_current_connections_count', 'untyped', 'The number of currently open connections.')],
  ['current-producers', def('beanstalkd_current_producers_count', 'untyped', 'The number of open connections that have each issued at least one put command.')],
  ['current-workers', def('beanstalkd_current_workers_count', 'untyped', 'The number of open connections that have each issued at least one reserve command.')],
  ['current-waiting', def('beanstalkd_current_waiting_count', 'untyped', 'The number of open connections that have issued a reserve command but not yet received a response.')],
  ['total-connections', def('beanstalkd_total_connections_count', 'untyped', 'The cumulative count of connections.')],
  // Keys the exporter leaves out, named in its style with the unit last.
  ['max-job-size', def('beanstalkd_max_job_size_bytes', 'gauge', 'The maximum size of a job body (put -z).')],
  ['pid', def('beanstalkd_pid', 'gauge', 'The process id of the server.')],
  ['rusage-utime', def('beanstalkd_rusage_utime_seconds_total', 'counter', 'User CPU time of the process, every thread.')],
  ['rusage-stime', def('beanstalkd_rusage_stime_seconds_total', 'counter', 'System CPU time of the process, every thread.')],
  ['uptime', def('beanstalkd_uptime_seconds', 'gauge', 'Seconds since the server started.')],
  ['binlog-oldest-index', def('beanstalkd_binlog_oldest_index', 'gauge', 'The index of the oldest write-ahead log file (smallest over shards; 0 without -b).')],
  ['binlog-current-index', def('beanstalkd_binlog_current_index', 'gauge', 'The index of the current write-ahead log file (largest over shards; 0 without -b).')],
  ['binlog-records-migrated', def('beanstalkd_binlog_records_migrated_total', 'counter', 'Log records rewritten to let old log files go.')],
  ['binlog-records-written', def('beanstalkd_binlog_records_written_total', 'counter', 'Log records written.')],
  ['binlog-max-size', def('beanstalkd_binlog_max_size_bytes', 'gauge', 'The size of each write-ahead log file (-s).')],
  ['draining', def('beanstalkd_draining', 'gauge', '1 in drain mode (puts are refused), else 0.')],
]);

/** stats-tube's numeric keys → series with a `tube` label (the exporter's names and help texts). */
export const TUBE_METRICS: ReadonlyMap<string, MetricDef> = new Map([
  ['current-jobs-urgent', def('beanstalkd_tube_current_jobs_urgent_count', 'untyped', 'The number of ready jobs with priority < 1024 for this tube.')],
  ['current-jobs-ready', def('beanstalkd_tube_current_jobs_ready_count', 'untyped', 'The number of jobs in the ready queue for this tube.')],
  ['current-jobs-reserved', def('beanstalkd_tube_current_jobs_reserved_count', 'untyped', 'The number of jobs reserved by all clients for this tube.')],
  ['current-jobs-delayed', def('beanstalkd_tube_current_jobs_delayed_count', 'untyped', 'The number of delayed jobs for this tube.')],
  ['current-jobs-buried', def('beanstalkd_tube_current_jobs_buried_count', 'untyped', 'The number of buried jobs for this tube.')],
  ['total-jobs', def('beanstalkd_tube_total_jobs_count', 'untyped', 'The cumulative count of jobs created for this tube in the current beanstalkd process.')],
  ['current-using', def('beanstalkd_tube_current_using_count', 'untyped', 'The number of open connections that are currently using this tube.')],
  ['current-watching', def('beanstalkd_tube_current_watching_count', 'untyped', 'The number of open connections that are currently watching this tube.')],
  ['current-waiting', def('beanstalkd_tube_current_waiting_count', 'untyped', 'The number of open connections that have issued a reserve command for this tube but not yet received a response.')],
  ['cmd-delete', def('beanstalkd_tube_cmd_delete_total', 'counter', 'The cumulative number of delete commands for this tube.')],
  ['cmd-pause-tube', def('beanstalkd_tube_cmd_pause_tube_total', 'counter', 'The cumulative number of pause-tube commands for this tube.')],
  ['pause', def('beanstalkd_tube_pause_seconds_total', 'untyped', 'The number of seconds this tube has been paused for.')],
  ['pause-time-left', def('beanstalkd_tube_pause_time_left_seconds_total', 'untyped', 'The number of seconds until this tube is un-paused.')],
]);

/** A numeric key missing from the tables above still shows, untyped, under its own name (a test keeps the tables complete). */
export function metricFor(table: ReadonlyMap<string, MetricDef>, prefix: string, key: string): MetricDef {
  return table.get(key) ?? def(`${prefix}${key.replace(/[^a-zA-Z0-9_]/g, '_')}`, 'untyped', `The ${key} figure of stats.`);
}

/** A label value as the format wants it: backslash, double quote and line feed escaped. */
export function escapeLabelValue(v: string): string {
  return v.replace(/[\\"\n]/g, (c) => (c === '\\' ? '\\\\' : c === '"' ? '\\"' : '\\n'));
}

/** HELP text: backslash and line feed escaped. */
export function escapeHelp(v: string): string {
  return v.replace(/[\\\n]/g, (c) => (c === '\\' ? '\\\\' : '\\n'));
}

/** A sample value: Go's ParseFloat reads these (NaN, +Inf, -Inf spelled as the format wants). */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** Writes metric families: HELP and TYPE once, then every sample of the family together. */
export class ExpositionWriter {
  private text = '';

  family(m: MetricDef): this {
    this.text += `# HELP ${m.name} ${escapeHelp(m.help)}\n# TYPE ${m.name} ${m.type}\n`;
    return this;
  }

  /** One sample; `labels` pairs name → value (names are ours, values are escaped here). */
  sample(name: string, value: number, labels?: Readonly<Record<string, string | number>>): this {
    let l = '';
    if (labels !== undefined) {
      const parts: string[] = [];
      for (const k in labels) parts.push(`${k}="${escapeLabelValue(String(labels[k]))}"`);
      l = `{${parts.join(',')}}`;
    }
    this.text += `${name}${l} ${formatValue(value)}\n`;
    return this;
  }

  /** A family of one sample. */
  one(m: MetricDef, value: number, labels?: Readonly<Record<string, string | number>>): this {
    return this.family(m).sample(m.name, value, labels);
  }

  toString(): string {
    return this.text;
  }
}

/** What the HTTP side adds of its own. */
export interface ScrapeExtras {
  /** /metrics requests answered so far, this one included (the exporter's beanstalkd_exporter_scrapes_total). */
  readonly scrapes: number;
  /** The --http-metrics-tubes cap. */
  readonly tubesMax: number;
  /** The largest request backlog any shard had when a connection checked it. */
  readonly backlogPeakBytes: number;
  /** Per thread, or null where /proc is not there. */
  readonly threads: ThreadCpu[] | null;
}

/** The whole /metrics body. */
export function renderMetrics(f: Figures, x: ScrapeExtras): string {
  const w = new ExpositionWriter();
  // The exporter's own two: dashboards and alerts key on beanstalkd_up.
  w.one(def('beanstalkd_up', 'gauge', 'Current health status of the backend (1 = UP, 0 = DOWN).'), 1);
  w.one(def('beanstalkd_exporter_scrapes_total', 'counter', 'Current total number of beanstalkd scrapes.'), x.scrapes);

  for (const e of f.stats) {
    if (e.value === null) continue;
    w.one(metricFor(SERVER_METRICS, 'beanstalkd_', e.key), e.value);
  }
  writeInfo(w, f.stats);

  // Per tube: family by family, every tube's sample inside it (the format wants a family's samples together).
  const keys: string[] = [];
  for (const t of f.tubes) for (const e of t.entries) if (e.value !== null && !keys.includes(e.key)) keys.push(e.key);
  for (const key of keys) {
    const m = metricFor(TUBE_METRICS, 'beanstalkd_tube_', key);
    w.family(m);
    for (const t of f.tubes) {
      const e = t.entries.find((x) => x.key === key);
      if (e !== undefined && e.value !== null) w.sample(m.name, e.value, { tube: t.name });
    }
  }
  w.one(def('shardstalk_metrics_tubes_max', 'gauge', 'At most this many tubes get beanstalkd_tube_* series (--http-metrics-tubes).'), x.tubesMax);
  w.one(def('shardstalk_metrics_tubes_omitted', 'gauge', 'Tubes left out of the beanstalkd_tube_* series by --http-metrics-tubes (the last ones in list-tubes order).'), f.tubesOmitted);

  writeShards(w, f);
  w.one(def('shardstalk_shard_request_backlog_peak_bytes', 'gauge', 'The most request bytes one shard had queued beyond its ring when a connection checked.'), x.backlogPeakBytes);

  if (x.threads !== null) {
    const m = def('shardstalk_thread_cpu_seconds_total', 'counter', 'CPU time of each thread of the process (Linux /proc/self/task), by mode.');
    w.family(m);
    for (const t of x.threads) {
      w.sample(m.name, t.userSeconds, { tid: t.tid, thread: t.name, mode: 'user' });
      w.sample(m.name, t.systemSeconds, { tid: t.tid, thread: t.name, mode: 'system' });
    }
  }
  return w.toString();
}

/** stats' text keys (version, id, hostname, os, platform) as labels of one info series. */
function writeInfo(w: ExpositionWriter, stats: readonly StatsEntry[]): void {
  const labels: Record<string, string> = {};
  for (const e of stats) {
    if (e.value !== null) continue;
    // version is printed quoted in the YAML; the label holds the bare value.
    labels[e.key.replace(/-/g, '_')] = e.key === 'version' ? e.text.replace(/^"|"$/g, '') : e.text;
  }
  w.one(def('shardstalk_info', 'gauge', 'stats\' text keys as labels; always 1.'), 1, labels);
}

function writeShards(w: ExpositionWriter, f: Figures): void {
  w.one(def('shardstalk_shards', 'gauge', 'Queue shards (--shards).'), f.shards.length);
  let m = def('shardstalk_shard_own_thread', 'gauge', '1 for a shard on a worker thread of its own, 0 for one on a thread that serves connections (the main thread, or with connection threads its own).');
  w.family(m);
  for (const s of f.shards) w.sample(m.name, s.ownThread ? 1 : 0, { shard: s.index });

  m = def('shardstalk_shard_jobs', 'gauge', 'Jobs in each shard, by state.');
  w.family(m);
  const states: [string, number][] = [['ready', TOTALS_READY], ['reserved', TOTALS_RESERVED], ['delayed', TOTALS_DELAYED], ['buried', TOTALS_BURIED]];
  for (const s of f.shards) for (const [state, i] of states) w.sample(m.name, s.totals[i], { shard: s.index, state });

  const perShard = (name: string, type: MetricType, help: string, value: (s: Figures['shards'][number]) => number | null): void => {
    const d = def(name, type, help);
    let headed = false;
    for (const s of f.shards) {
      const v = value(s);
      if (v === null) continue;
      if (!headed) w.family(d);
      headed = true;
      w.sample(name, v, { shard: s.index });
    }
  };
  perShard('shardstalk_shard_urgent_jobs', 'gauge', 'Ready jobs with priority < 1024 in each shard.', (s) => s.totals[TOTALS_URGENT]);
  perShard('shardstalk_shard_job_timeouts_total', 'counter', 'Reservations whose TTR ran out, per shard.', (s) => s.totals[TOTALS_JOB_TIMEOUTS]);
  perShard('shardstalk_shard_binlog_records_written_total', 'counter', 'Write-ahead log records written, per shard.', (s) => s.totals[TOTALS_BINLOG_WRITTEN]);
  perShard('shardstalk_shard_binlog_records_migrated_total', 'counter', 'Write-ahead log records rewritten to let old files go, per shard.', (s) => s.totals[TOTALS_BINLOG_MIGRATED]);
  perShard('shardstalk_shard_requests_pending', 'gauge', 'Requests sent to each shard and not answered yet, when the scrape began.', (s) => s.requestsPending);
  perShard('shardstalk_shard_request_backlog_bytes', 'gauge', 'Request bytes queued for each shard on the connections\' thread, not yet handed over (beyond its ring), when the scrape began.', (s) => s.backlogBytes);
  perShard('shardstalk_shard_ring_to_shard_bytes', 'gauge', 'Bytes in the ring to each shard on a thread of its own, not yet read by it.', (s) => s.ringToShardBytes);
  perShard('shardstalk_shard_ring_from_shard_bytes', 'gauge', 'Bytes in the ring from each shard on a thread of its own, not yet read by the connections\' thread.', (s) => s.ringFromShardBytes);
  perShard('shardstalk_shard_ring_capacity_bytes', 'gauge', 'Capacity of each ring (each way) of a shard on a thread of its own.', (s) => s.ringCapacityBytes);

  // Latency histograms, observed per batch where it happens (src/shared/histogram.ts).
  const histogram = (name: string, help: string, value: (s: Figures['shards'][number]) => Float64Array | null): void => {
    const d = def(name, 'histogram', help);
    let headed = false;
    for (const s of f.shards) {
      const h = value(s);
      if (h === null) continue;
      if (!headed) w.family(d);
      headed = true;
      const c = cumulative(h);
      for (const [le, n] of c.buckets) w.sample(`${name}_bucket`, n, { shard: s.index, le: String(le) });
      w.sample(`${name}_bucket`, c.count, { shard: s.index, le: '+Inf' });
      w.sample(`${name}_sum`, c.sum, { shard: s.index });
      w.sample(`${name}_count`, c.count, { shard: s.index });
    }
  };
  histogram('shardstalk_shard_hop_seconds', 'Round trips to a shard on another thread: from a batch of requests entering its ring to the first replies read after it (one observation per batch, from every thread that sends it requests; none from the thread it runs on).', (s) => s.hops);
  histogram('shardstalk_shard_fsync_seconds', 'Write-ahead log fdatasync durations, per shard (-b).', (s) => s.fsyncs);
}
