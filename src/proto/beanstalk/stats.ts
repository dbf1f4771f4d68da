// YAML bodies of stats, stats-job and stats-tube, key for key as beanstalkd 1.12 prints them; the
// keys and values of stats and stats-tube also as data (StatsEntry), for /metrics.

import os from 'node:os';
import type { Tube } from '../../route/tubes.ts';
import {
  payloadF64, TOTALS_BINLOG_CURRENT, TOTALS_BINLOG_MIGRATED, TOTALS_BINLOG_OLDEST, TOTALS_BINLOG_WRITTEN, TOTALS_BURIED,
  TOTALS_DELAYED, TOTALS_JOB_TIMEOUTS, TOTALS_READY, TOTALS_RESERVED, TOTALS_URGENT, TUBE_BURIED, TUBE_CMD_DELETE,
  TUBE_CMD_PAUSE, TUBE_DELAYED, TUBE_PAUSE, TUBE_PAUSE_LEFT, TUBE_READY, TUBE_RESERVED, TUBE_TOTAL_JOBS, TUBE_URGENT, TUBE_WAITING,
} from '../../shared/records.ts';
import { VERSION } from '../../version.ts';
import { STATS_CMD_KEYS } from './commands.ts';
import type { BeanstalkServer } from './server.ts';

const STATE_NAMES = ['invalid', 'ready', 'reserved', 'delayed', 'buried'];

/** Where the job's tube is in a stats-job reply's numbers. */
export const JOB_STATS_TUBE = 1;

/** The R_NUMS reply at `at`: [id, tube, state, pri, age, delay, ttr, time-left, reserves, timeouts, releases, buries, kicks, file] */
export function formatJobStats(buf: Buffer, at: number, tubeName: string): string {
  const n = (i: number): number => payloadF64(buf, at, i);
  return (
    '---\n' +
    `id: ${n(0)}\n` +
    `tube: ${tubeName}\n` +
    `state: ${STATE_NAMES[n(2)] ?? 'invalid'}\n` +
    `pri: ${n(3)}\n` +
    `age: ${n(4)}\n` +
    `delay: ${n(5)}\n` +
    `ttr: ${n(6)}\n` +
    `time-left: ${n(7)}\n` +
    `file: ${n(13)}\n` +
    `reserves: ${n(8)}\n` +
    `timeouts: ${n(9)}\n` +
    `releases: ${n(10)}\n` +
    `buries: ${n(11)}\n` +
    `kicks: ${n(12)}\n`
  );
}

/**
 * One key of a `stats` or `stats-tube` reply: the text beanstalkd prints for it and, when it is a
 * number, that number (`draining` counts as 1 / 0). The YAML replies and the HTTP /metrics
 * (src/ops/) are both made from these, so the two cannot disagree.
 */
export interface StatsEntry {
  readonly key: string;
  readonly text: string;
  readonly value: number | null;
}

const num = (key: string, value: number): StatsEntry => ({ key, text: String(value), value });
const str = (key: string, text: string): StatsEntry => ({ key, text, value: null });

function yaml(entries: readonly StatsEntry[]): string {
  let s = '---\n';
  for (const e of entries) s += `${e.key}: ${e.text}\n`;
  return s;
}

/**
 * stats-tube's keys, from the tube's shard's OP_STATS_TUBE reply at `at` (its jobs, and the
 * reserves waiting on it: in the shard, and over several shards, which tell the shard) and the
 * tube table's counts (every thread's).
 */
export function tubeStatsEntries(t: Tube, buf: Buffer, at: number): StatsEntry[] {
  const n = (i: number): number => payloadF64(buf, at, i);
  const c = t.counts();
  return [
    str('name', t.name),
    num('current-jobs-urgent', n(TUBE_URGENT)),
    num('current-jobs-ready', n(TUBE_READY)),
    num('current-jobs-reserved', n(TUBE_RESERVED)),
    num('current-jobs-delayed', n(TUBE_DELAYED)),
    num('current-jobs-buried', n(TUBE_BURIED)),
    num('total-jobs', n(TUBE_TOTAL_JOBS)),
    num('current-using', c.using),
    num('current-watching', c.watching),
    num('current-waiting', n(TUBE_WAITING)),
    num('cmd-delete', n(TUBE_CMD_DELETE)),
    num('cmd-pause-tube', n(TUBE_CMD_PAUSE)),
    num('pause', n(TUBE_PAUSE)),
    num('pause-time-left', n(TUBE_PAUSE_LEFT)),
  ];
}

export function formatTubeStats(t: Tube, buf: Buffer, at: number): string {
  return yaml(tubeStatsEntries(t, buf, at));
}

/** The OP_TOTALS figures that add up over shards. */
const TOTALS_ADDED = [
  TOTALS_URGENT, TOTALS_READY, TOTALS_RESERVED, TOTALS_DELAYED, TOTALS_BURIED, TOTALS_JOB_TIMEOUTS,
  TOTALS_BINLOG_WRITTEN, TOTALS_BINLOG_MIGRATED,
];

/**
 * Adds one shard's OP_TOTALS reply at `at` into `sums` (TOTALS_FIELDS numbers, zeroed before the
 * first shard): job counts and counters add up; of the log indexes, the oldest of any shard's
 * files and the newest of any shard's.
 */
export function addShardTotals(sums: Float64Array, buf: Buffer, at: number): void {
  const n = (i: number): number => payloadF64(buf, at, i);
  for (const i of TOTALS_ADDED) sums[i] += n(i);
  const oldest = n(TOTALS_BINLOG_OLDEST);
  if (oldest > 0 && (sums[TOTALS_BINLOG_OLDEST] === 0 || oldest < sums[TOTALS_BINLOG_OLDEST])) sums[TOTALS_BINLOG_OLDEST] = oldest;
  const current = n(TOTALS_BINLOG_CURRENT);
  if (current > sums[TOTALS_BINLOG_CURRENT]) sums[TOTALS_BINLOG_CURRENT] = current;
}

/** stats' keys, in beanstalkd's order: `sums` is every shard's OP_TOTALS (addShardTotals), the rest
 *  is read now: the counters added up over every thread's row (ServerCounters), the tube table. */
export function serverStatsEntries(server: BeanstalkServer, sums: Float64Array): StatsEntry[] {
  const router = server.router;
  const ru = process.resourceUsage();
  const secs = (key: string, us: number): StatsEntry => ({ key, text: `${Math.floor(us / 1e6)}.${String(us % 1e6).padStart(6, '0')}`, value: us / 1e6 });
  const e: StatsEntry[] = [
    num('current-jobs-urgent', sums[TOTALS_URGENT]),
    num('current-jobs-ready', sums[TOTALS_READY]),
    num('current-jobs-reserved', sums[TOTALS_RESERVED]),
    num('current-jobs-delayed', sums[TOTALS_DELAYED]),
    num('current-jobs-buried', sums[TOTALS_BURIED]),
  ];
  for (const [key, cmd] of STATS_CMD_KEYS) e.push(num(key, server.cmdCount(cmd)));
  const oldest = sums[TOTALS_BINLOG_OLDEST];
  e.push(
    num('job-timeouts', sums[TOTALS_JOB_TIMEOUTS]),
    num('total-jobs', server.totalJobs),
    num('max-job-size', router.config.jobSizeMax),
    num('current-tubes', router.tubes.count),
    num('current-connections', server.connections),
    num('current-producers', server.producers),
    num('current-workers', server.workers),
    num('current-waiting', server.waiting),
    num('total-connections', server.totalConnections),
    num('pid', process.pid),
    str('version', `"${VERSION}"`),
    secs('rusage-utime', ru.userCPUTime),
    secs('rusage-stime', ru.systemCPUTime),
    num('uptime', Math.floor((Date.now() - server.startedMs) / 1000)),
    // No shard has a file yet (a fresh directory): like beanstalkd's first binlog, index 1.
    num('binlog-oldest-index', oldest > 0 ? oldest : sums[TOTALS_BINLOG_CURRENT] > 0 ? 1 : 0),
    num('binlog-current-index', sums[TOTALS_BINLOG_CURRENT]),
    num('binlog-records-migrated', sums[TOTALS_BINLOG_MIGRATED]),
    num('binlog-records-written', sums[TOTALS_BINLOG_WRITTEN]),
    num('binlog-max-size', router.config.wal?.segmentBytesMax ?? 10485760),
    draining(server.draining),
    str('id', server.instanceId),
    str('hostname', os.hostname()),
    str('os', os.version()),
    str('platform', os.machine()),
  );
  return e;
}

function draining(on: boolean): StatsEntry {
  return { key: 'draining', text: on ? 'true' : 'false', value: on ? 1 : 0 };
}

export function formatServerStats(server: BeanstalkServer, sums: Float64Array): string {
  return yaml(serverStatsEntries(server, sums));
}
