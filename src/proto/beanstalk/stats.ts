// YAML bodies of stats-job and stats-tube, key for key as beanstalkd 1.12 prints them.
// (The server-wide `stats` document is made by the hub, which holds those counters.)

import type { Tube } from '../../route/tubes.ts';

const STATE_NAMES = ['invalid', 'ready', 'reserved', 'delayed', 'buried'];

/** nums at `off`: [id, tube, state, pri, age, delay, ttr, time-left, reserves, timeouts, releases, buries, kicks, file] */
export function formatJobStats(buf: Buffer, off: number, tubeName: string): string {
  const n = (i: number): number => buf.readDoubleLE(off + i * 8);
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

/** nums at `off`: [urgent, ready, reserved, delayed, buried, total-jobs, cmd-delete, cmd-pause-tube, pause, pause-time-left] */
export function formatTubeStats(t: Tube, buf: Buffer, off: number): string {
  const n = (i: number): number => buf.readDoubleLE(off + i * 8);
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
