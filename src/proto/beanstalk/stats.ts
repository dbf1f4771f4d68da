// YAML bodies of stats, stats-job and stats-tube, key for key as beanstalkd 1.12 prints them.

import os from 'node:os';
import type { Tube } from '../../route/tubes.ts';
import { payloadF64 } from '../../shared/records.ts';
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

/** The R_NUMS reply at `at`: [urgent, ready, reserved, delayed, buried, total-jobs, cmd-delete, cmd-pause-tube, pause, pause-time-left] */
export function formatTubeStats(t: Tube, buf: Buffer, at: number): string {
  const n = (i: number): number => payloadF64(buf, at, i);
  return (
    '---\n' +
    `name: ${t.name}\n` +
    `current-jobs-urgent: ${n(0)}\n` +
    `current-jobs-ready: ${n(1)}\n` +
    `current-jobs-reserved: ${n(2)}\n` +
    `current-jobs-delayed: ${n(3)}\n` +
    `current-jobs-buried: ${n(4)}\n` +
    `total-jobs: ${n(5)}\n` +
    `current-using: ${t.using}\n` +
    `current-watching: ${t.watching}\n` +
    `current-waiting: ${t.waiting.len}\n` +
    `cmd-delete: ${n(6)}\n` +
    `cmd-pause-tube: ${n(7)}\n` +
    `pause: ${n(8)}\n` +
    `pause-time-left: ${n(9)}\n`
  );
}

/** sums: [urgent, ready, reserved, delayed, buried, job-timeouts] summed over every shard, then
 *  the log's [oldest index (smallest), current index (largest), records written, records migrated]. */
export function formatServerStats(server: BeanstalkServer, sums: Float64Array): string {
  const router = server.router;
  const ru = process.resourceUsage();
  const secs = (us: number): string => `${Math.floor(us / 1e6)}.${String(us % 1e6).padStart(6, '0')}`;
  let s = '---\n';
  s += `current-jobs-urgent: ${sums[0]}\n`;
  s += `current-jobs-ready: ${sums[1]}\n`;
  s += `current-jobs-reserved: ${sums[2]}\n`;
  s += `current-jobs-delayed: ${sums[3]}\n`;
  s += `current-jobs-buried: ${sums[4]}\n`;
  for (const [key, cmd] of STATS_CMD_KEYS) s += `${key}: ${server.cmdCounts[cmd]}\n`;
  s += `job-timeouts: ${sums[5]}\n`;
  s += `total-jobs: ${server.totalJobs}\n`;
  s += `max-job-size: ${router.config.jobSizeMax}\n`;
  s += `current-tubes: ${router.tubes.count}\n`;
  s += `current-connections: ${server.sessions.size}\n`;
  s += `current-producers: ${server.producers}\n`;
  s += `current-workers: ${server.workers}\n`;
  s += `current-waiting: ${router.waitingCount}\n`;
  s += `total-connections: ${server.totalConnections}\n`;
  s += `pid: ${process.pid}\n`;
  s += `version: "${VERSION}"\n`;
  s += `rusage-utime: ${secs(ru.userCPUTime)}\n`;
  s += `rusage-stime: ${secs(ru.systemCPUTime)}\n`;
  s += `uptime: ${Math.floor((Date.now() - server.startedMs) / 1000)}\n`;
  // No shard has a file yet (a fresh directory): like beanstalkd's first binlog, index 1.
  s += `binlog-oldest-index: ${sums[6] > 0 ? sums[6] : sums[7] > 0 ? 1 : 0}\n`;
  s += `binlog-current-index: ${sums[7]}\n`;
  s += `binlog-records-migrated: ${sums[9]}\n`;
  s += `binlog-records-written: ${sums[8]}\n`;
  s += `binlog-max-size: ${router.config.wal?.segmentBytesMax ?? 10485760}\n`;
  s += `draining: ${server.draining ? 'true' : 'false'}\n`;
  s += `id: ${server.instanceId}\n`;
  s += `hostname: ${os.hostname()}\n`;
  s += `os: ${os.version()}\n`;
  s += `platform: ${os.machine()}\n`;
  return s;
}
