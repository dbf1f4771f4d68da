// WAL space accounting and compaction, as a seeded simulation: an in-test job table stands in for
// the engine (put / reserve / release / bury / kick / delete, each logged the way the shard loop
// will log it), compaction migrates the candidate segment's live jobs, dead segments are removed
// after each commit. Whatever the mix — long-lived buried jobs among many short ones (beanstalkd
// issues #599 / #622), jobs re-released with a delay over and over, big bodies, a backlog that
// drains — the files stay within 4 x live bytes + 3 segments, the Wal's live counts match the
// table exactly, a replay of the directory reproduces the table, and (with syncing modes) a
// replay of only what was synced — a crash — reproduces the table as of the last sync: no
// segment is removed before what supersedes it is durable. Seeds are printed on failure;
// WAL_SEED=n reruns one.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { FaultIo } from '../../workers/wal/faultio.ts';
import { nodeIo, type WalIo } from '../../workers/wal/io.ts';
import {
  fullRecordBytes, STATE_BURIED, STATE_DELAYED, STATE_READY, STATE_RESERVED,
} from '../../workers/wal/record.ts';
import { recover, type RecoveredJob } from '../../workers/wal/reader.ts';
import type { SyncMode } from '../../workers/wal/segment.ts';
import { Wal } from '../../workers/wal/wal.ts';
import { mulberry32 } from '../support/prng.ts';

let dir: string;
let crashDir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), 'wal-space-'));
  crashDir = fs.mkdtempSync(join(os.tmpdir(), 'wal-crash-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(crashDir, { recursive: true, force: true });
});


/** What replay must reproduce (the engine's view of a job), plus fullSeq (the engine's column). */
type Job = Omit<RecoveredJob, 'body'> & { body: Uint8Array; fullSeq: number };

interface Profile {
  name: string;
  batches: number;
  /** Puts per batch: 0..putsMax. */
  putsMax: number;
  /** Lifetime in batches of an ordinary job: 1..lifeMax. */
  lifeMax: number;
  /** Fraction of puts that are buried and live to the end. */
  longFraction: number;
  /** Jobs kept delayed and re-released (UPDATE) every batch, for the whole run. */
  rereleased: number;
  /** Random state changes per batch: 0..updatesMax. */
  updatesMax: number;
  bodyMin: number;
  bodyMax: number;
  /** Fraction of 64 KiB bodies. */
  bigFraction: number;
  /** Backlog profile: put this many at the start, let them drain, then refill. */
  backlog: number;
}

const base: Profile = {
  name: '', batches: 1200, putsMax: 4, lifeMax: 10, longFraction: 0, rereleased: 0, updatesMax: 2,
  bodyMin: 20, bodyMax: 400, bigFraction: 0, backlog: 0,
};
const profiles: Profile[] = [
  { ...base, name: 'long-lived buried jobs among many short ones', longFraction: 0.01 },
  { ...base, name: 'delayed jobs re-released over and over', putsMax: 1, lifeMax: 3, rereleased: 25, updatesMax: 0 },
  { ...base, name: 'random mix with 64 KiB bodies', putsMax: 6, lifeMax: 300, longFraction: 0.002, updatesMax: 5, bigFraction: 0.02 },
  { ...base, name: 'a backlog that drains and refills', putsMax: 0, lifeMax: 1, backlog: 1500, updatesMax: 3, bodyMax: 100 },
];
const SEGMENT_BYTES = 16 * 1024;
const modes: Array<[string, SyncMode]> = [['never', 'never'], ['everyMs 20', { everyMs: 20 }], ['always', 'always']];

/** Files in d with their sizes. */
function sizes(d: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const f of fs.readdirSync(d)) m.set(f, fs.statSync(join(d, f)).size);
  return m;
}

/** The real file system, except that syncs cost nothing: what a sync makes durable is modelled. */
const noSyncIo: WalIo = { ...nodeIo, fdatasyncSync: () => {}, fsyncSync: () => {} };

function comparable(jobs: Map<number, Job | RecoveredJob>): Map<number, Omit<RecoveredJob, 'body'> & { body: string }> {
  const out = new Map<number, Omit<RecoveredJob, 'body'> & { body: string }>();
  for (const [id, j] of jobs) {
    out.set(id, {
      id: j.id, tube: j.tube, pri: j.pri, delaySec: j.delaySec, ttrSec: j.ttrSec, state: j.state,
      deadlineMs: j.deadlineMs, createdMs: j.createdMs, reserves: j.reserves, timeouts: j.timeouts,
      releases: j.releases, buries: j.buries, kicks: j.kicks, body: Buffer.from(j.body).toString('base64'),
    });
  }
  return out;
}

interface SimStats {
  maxDisk: number;
  migrated: number;
  written: number;
  crashChecks: number;
  replayChecks: number;
  worstExcess: number;
}

function simulate(p: Profile, sync: SyncMode, seed: number): SimStats {
  const rng = mulberry32(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));
  const io = new FaultIo(noSyncIo);
  const pathOfFd = new Map<number, string>();
  const synced = new Map<string, number>(); // file -> bytes known durable
  const openSync = io.openSync.bind(io);
  io.openSync = (path, flags, mode) => {
    const fd = openSync(path, flags, mode);
    pathOfFd.set(fd, path);
    return fd;
  };
  const wal = new Wal({ dir, shard: 0, generation: 1, sync, io, segmentBytesMax: SEGMENT_BYTES });

  const table = new Map<number, Job>();
  const ids: number[] = []; // live ids, for random picks
  const idx = new Map<number, number>();
  const deathAt = new Map<number, number>(); // id -> batch it gets deleted (absent: lives on)
  const sticky: number[] = []; // re-released every batch
  let nextId = 1;
  let now = 1_700_000_000_000;
  let batch = 0;

  // Crash model: what was synced. The table as of the last synced write is what a crash keeps.
  let wroteThisCommit = false;
  let lastWriteSnap = new Map<number, Job>();
  let durableSnap = new Map<number, Job>();
  io.onWrite = () => {
    wroteThisCommit = true;
  };
  io.onDatasync = (fd) => {
    const path = pathOfFd.get(fd)!;
    synced.set(path, fs.fstatSync(fd).size);
    // The data sync covers every write so far: this commit's (the table now) or the last one's.
    durableSnap = wroteThisCommit ? new Map(table) : lastWriteSnap;
  };

  const set = (j: Job) => table.set(j.id, j);
  const bodyOf = (): Uint8Array => {
    const n = rng() < p.bigFraction ? 65536 : int(p.bodyMin, p.bodyMax);
    const b = new Uint8Array(n);
    const v = int(0, 255);
    for (let i = 0; i < n; i += 97) b[i] = (v + i) & 255;
    b[0] = 13;
    if (n > 2) b[n - 1] = 10;
    return b;
  };
  const put = (life: number | null, buried: boolean) => {
    const id = nextId++;
    const body = bodyOf();
    const delayed = !buried && rng() < 0.2;
    const j: Job = {
      id, tube: `tube-${int(0, 5)}`, pri: int(0, 2000), delaySec: delayed ? int(1, 30) : 0, ttrSec: int(1, 120),
      state: buried ? STATE_BURIED : delayed ? STATE_DELAYED : STATE_READY, deadlineMs: delayed ? now + 5000 : 0,
      createdMs: now, reserves: buried ? 1 : 0, timeouts: 0, releases: 0, buries: buried ? 1 : 0, kicks: 0, body,
      fullSeq: 0,
    };
    j.fullSeq = wal.appendFull(j.id, j.tube, j.pri, j.delaySec, j.ttrSec, j.state, j.deadlineMs, j.createdMs,
      j.reserves, j.timeouts, j.releases, j.buries, j.kicks, j.body, 0, j.body.length);
    set(j);
    idx.set(id, ids.length);
    ids.push(id);
    if (life !== null) deathAt.set(id, batch + life);
    return id;
  };
  const update = (j: Job, change: Partial<Job>) => {
    const n: Job = { ...j, ...change };
    wal.appendUpdate(n.id, n.fullSeq, n.state, n.pri, n.delaySec, n.deadlineMs, n.reserves, n.timeouts,
      n.releases, n.buries, n.kicks);
    set(n);
  };
  const randomChange = (j: Job) => {
    switch (j.state) {
      case STATE_READY:
      case STATE_DELAYED:
        return update(j, { state: STATE_RESERVED, reserves: j.reserves + 1, deadlineMs: now + j.ttrSec * 1000 });
      case STATE_RESERVED: {
        const r = rng();
        if (r < 0.4) return update(j, { state: STATE_BURIED, buries: j.buries + 1, pri: int(0, 99) });
        if (r < 0.8) {
          const d = int(0, 3);
          return update(j, {
            state: d > 0 ? STATE_DELAYED : STATE_READY, delaySec: d, deadlineMs: d > 0 ? now + d * 1000 : 0,
            releases: j.releases + 1, pri: int(0, 99),
          });
        }
        return update(j, { state: STATE_READY, timeouts: j.timeouts + 1, deadlineMs: 0 });
      }
      default:
        return update(j, { state: STATE_READY, kicks: j.kicks + 1, deadlineMs: 0 });
    }
  };
  const del = (id: number) => {
    const j = table.get(id)!;
    wal.appendDelete(id, j.fullSeq, fullRecordBytes(j.tube.length, j.body.length));
    table.delete(id);
    deathAt.delete(id);
    const i = idx.get(id)!;
    const last = ids.pop()!;
    if (last !== id) {
      ids[i] = last;
      idx.set(last, i);
    }
    idx.delete(id);
  };

  const stats: SimStats = { maxDisk: 0, migrated: 0, written: 0, crashChecks: 0, replayChecks: 0, worstExcess: -Infinity };
  let maxBatchBytes = 0; // the largest batch written so far
  let bytesBefore = 0; // the log's bytes before this batch's records
  const check = (what: string) => {
    // Exact accounting: the Wal's live FULL bytes are the table's.
    let live = 0;
    for (const j of table.values()) live += fullRecordBytes(j.tube.length, j.body.length);
    expect(wal.liveBytes, `${what}: live bytes`).toBe(live);
    expect(wal.liveRecords, `${what}: live records`).toBe(table.size);
    let disk = 0;
    for (const n of sizes(dir).values()) disk += n;
    stats.maxDisk = Math.max(stats.maxDisk, disk);
    // A segment ends after the batch that takes it to SEGMENT_BYTES, so it holds at most that
    // plus one batch (workers/wal/segment.ts); a batch with a 64 KiB body makes such a segment.
    const slack = 3 * (SEGMENT_BYTES + maxBatchBytes);
    stats.worstExcess = Math.max(stats.worstExcess, disk - (4 * live + slack));
    expect(disk, `${what}: ${disk} bytes on disk for ${live} live bytes in ${wal.segmentCount} segments`)
      .toBeLessThanOrEqual(4 * live + slack);
  };
  const replayCheck = (what: string) => {
    const r = recover(dir, { onWarning: (w) => expect.fail(`${what}: ${w.message}`) });
    expect(comparable(r.jobs), `${what}: replay`).toEqual(comparable(table));
    stats.replayChecks++;
  };
  const crashCheck = (what: string) => {
    // Only the synced prefix of each file survives (a file never synced: nothing of it).
    fs.rmSync(crashDir, { recursive: true, force: true });
    fs.mkdirSync(crashDir);
    for (const [name] of sizes(dir)) {
      const keep = synced.get(join(dir, name)) ?? 0;
      const bytes = fs.readFileSync(join(dir, name)).subarray(0, keep);
      fs.writeFileSync(join(crashDir, name), bytes);
    }
    const r = recover(crashDir, { onWarning: (w) => expect.fail(`${what}: ${w.message}`) });
    expect(comparable(r.jobs), `${what}: replay of the synced bytes`).toEqual(comparable(durableSnap));
    stats.crashChecks++;
  };

  for (let i = 0; i < p.rereleased; i++) {
    const id = put(null, false);
    sticky.push(id);
  }
  for (let i = 0; i < p.backlog; i++) put(int(1, 600), false);

  for (batch = 1; batch <= p.batches; batch++) {
    // Requests.
    const puts = p.backlog > 0 && batch === 700 ? 800 : int(0, p.putsMax);
    for (let i = 0; i < puts; i++) {
      const long = rng() < p.longFraction;
      put(long ? null : p.backlog > 0 ? int(1, 400) : int(1, p.lifeMax), long);
    }
    for (const id of sticky) {
      const j = table.get(id)!;
      const d = int(1, 60);
      update(j, { state: STATE_DELAYED, delaySec: d, deadlineMs: now + d * 1000, releases: j.releases + 1, reserves: j.reserves + 1 });
    }
    const updates = int(0, p.updatesMax);
    for (let i = 0; i < updates && ids.length > 0; i++) {
      const id = ids[int(0, ids.length - 1)];
      if (!sticky.includes(id)) randomChange(table.get(id)!);
    }
    for (const [id, at] of deathAt) if (at <= batch) del(id);

    // Compaction: the candidate's live jobs, all of them or a few (it stays the candidate).
    const c = wal.compactionCandidate();
    if (c >= 0) {
      let budget = rng() < 0.5 ? Infinity : int(1, 8);
      for (const j of table.values()) {
        if (budget <= 0) break;
        if (j.fullSeq !== c) continue;
        const seq = wal.migrate(c, j.id, j.tube, j.pri, j.delaySec, j.ttrSec, j.state, j.deadlineMs, j.createdMs,
          j.reserves, j.timeouts, j.releases, j.buries, j.kicks, j.body, 0, j.body.length);
        set({ ...j, fullSeq: seq });
        budget--;
      }
    }

    // Commit, then reclaim.
    wroteThisCommit = false;
    wal.commit(now);
    maxBatchBytes = Math.max(maxBatchBytes, wal.bytes - bytesBefore);
    if (wroteThisCommit) lastWriteSnap = new Map(table);
    now += int(1, 10);
    wal.syncIfDue(now);
    wal.removeDeadSegments();
    bytesBefore = wal.bytes;

    const what = `batch ${batch}`;
    check(what);
    if (batch % 100 === 0 || batch === p.batches) {
      replayCheck(what);
      if (sync !== 'never') crashCheck(what);
    }
  }
  stats.migrated = wal.recordsMigrated;
  stats.written = wal.recordsWritten;
  wal.close();
  replayCheck('after close');
  return stats;
}

const envSeed = process.env.WAL_SEED ? Number(process.env.WAL_SEED) : null;

describe('wal space accounting (seeded simulation)', () => {
  for (const p of profiles) {
    for (const [modeName, sync] of modes) {
      if (modeName === 'always' && p !== profiles[0]) continue; // like everyMs, slower: once is enough
      it(`${p.name}, sync ${modeName}`, () => {
        const seeds = envSeed !== null ? [envSeed] : [1, (Date.now() ^ (Math.random() * 2 ** 31)) >>> 0];
        for (const seed of seeds) {
          fs.rmSync(dir, { recursive: true, force: true });
          fs.mkdirSync(dir);
          let stats: SimStats;
          try {
            stats = simulate(p, sync, seed);
          } catch (e) {
            (e as Error).message = `WAL_SEED=${seed} (${p.name}, sync ${modeName}): ${(e as Error).message}`;
            throw e;
          }
          if (process.env.WAL_SIM_STATS) console.log(p.name, modeName, seed, stats);
          expect(stats.replayChecks).toBeGreaterThan(10);
          if (sync !== 'never') expect(stats.crashChecks).toBeGreaterThan(10);
          if (p.longFraction > 0 || p.rereleased > 0 || p.backlog > 0) expect(stats.migrated, `seed ${seed}`).toBeGreaterThan(0);
        }
      });
    }
  }
});

describe('wal segment removal rules (deterministic)', () => {
  // segmentBytesMax 1: every batch that writes ends its segment, so batch k is segment k.
  const body = new Uint8Array(50).fill(7);
  const FULL_BYTES = fullRecordBytes(1, body.length);
  const open = (sync: SyncMode = 'never') => new Wal({ dir, shard: 0, generation: 1, sync, segmentBytesMax: 1 });
  const put = (wal: Wal, id: number) =>
    wal.appendFull(id, 't', 1, 0, 60, STATE_READY, 0, 5, 0, 0, 0, 0, 0, body, 0, body.length);
  const move = (wal: Wal, from: number, id: number) =>
    wal.migrate(from, id, 't', 1, 0, 60, STATE_BURIED, 0, 5, 1, 0, 0, 1, 0, body, 0, body.length);
  const live = () => [...recover(dir).jobs.keys()].sort((a, b) => a - b);
  const files = () => fs.readdirSync(dir).sort();
  const name = (seq: number) => `g00000001-s0000-${String(seq).padStart(10, '0')}.wal`;

  it('removes segments of short-lived jobs behind a long-lived one, without compaction', () => {
    const wal = open();
    put(wal, 1); // the long-lived job: segment 1
    wal.commit(0);
    for (let k = 0; k < 5; k++) { // each short job lives and dies within its own segment
      const seq = put(wal, 10 + k);
      wal.appendUpdate(10 + k, seq, STATE_BURIED, 1, 0, 0, 1, 0, 0, 1, 0);
      wal.appendDelete(10 + k, seq, FULL_BYTES);
      wal.commit(0);
    }
    expect(wal.removeDeadSegments()).toBe(5);
    expect(files()).toEqual([name(1)]);
    expect(wal.oldestIndex).toBe(1);
    expect(wal.currentIndex).toBe(7);
    expect(live()).toEqual([1]);
  });

  it('keeps a segment whose UPDATE or DELETE refers to a FULL record still kept', () => {
    const wal = open();
    put(wal, 1);
    put(wal, 2);
    wal.commit(0); // segment 1
    wal.appendUpdate(1, 1, STATE_BURIED, 1, 0, 0, 1, 0, 0, 1, 0);
    wal.commit(0); // segment 2: job 1's state lives here
    wal.appendDelete(2, 1, FULL_BYTES);
    wal.commit(0); // segment 3: removing it would resurrect job 2
    expect(wal.removeDeadSegments()).toBe(0);
    expect(files()).toEqual([name(1), name(2), name(3)]);
    expect(recover(dir).jobs.get(1)?.state).toBe(STATE_BURIED);
    expect(live()).toEqual([1]);
    // Job 1 moves on: segment 1 empties, and with it everything that referred to it.
    expect(move(wal, 1, 1)).toBe(4);
    wal.commit(0);
    expect(wal.recordsMigrated).toBe(1);
    expect(wal.removeDeadSegments()).toBe(3);
    expect(files()).toEqual([name(4)]);
    expect(live()).toEqual([1]);
    expect(recover(dir).jobs.get(1)?.state).toBe(STATE_BURIED);
  });

  it('does not resurrect a migrated job from the copy it was migrated from', () => {
    const wal = open();
    put(wal, 1);
    put(wal, 2);
    wal.commit(0); // segment 1: jobs 1, 2
    move(wal, 1, 1);
    wal.commit(0); // segment 2: job 1 again (segment 1 still holds job 2)
    wal.appendDelete(1, 2, FULL_BYTES);
    wal.commit(0); // segment 3: job 1 deleted; segment 2 holds nothing live
    wal.removeDeadSegments();
    expect(live()).toEqual([2]);
    expect(files()).toContain(name(2)); // segment 1 still has job 1's first FULL record
  });

  it('removes a migrated-from segment only once the migrated records are synced', () => {
    const wal = open({ everyMs: 100 });
    put(wal, 1);
    wal.commit(1000); // synced at once (first write)
    move(wal, 1, 1);
    wal.commit(1010); // written, not synced
    expect(wal.removeDeadSegments()).toBe(0);
    expect(wal.dueMs()).toBe(1100);
    wal.syncIfDue(1100);
    expect(wal.removeDeadSegments()).toBe(1);
    expect(files()).toEqual([name(2)]);
    wal.close();
  });

  it('names a compaction candidate only past max(2 x live bytes, 3 segments): the oldest live segment', () => {
    const wal = new Wal({ dir, shard: 0, generation: 1, sync: 'never', segmentBytesMax: 2 * FULL_BYTES });
    put(wal, 1); // segment 1, pinned by job 1
    put(wal, 2);
    wal.commit(0);
    let id = 100;
    while (wal.compactionCandidate() < 0) {
      expect(id, 'no candidate after 100 batches').toBeLessThan(200);
      const seq = put(wal, id);
      wal.appendUpdate(1, 1, STATE_BURIED, 1, 0, 0, 1, 0, 0, 1, 0); // keeps pinning on segment 1
      wal.appendDelete(id, seq, FULL_BYTES);
      id++;
      wal.commit(0);
      wal.removeDeadSegments();
      expect(wal.bytes).toBeLessThanOrEqual(3 * 2 * FULL_BYTES + FULL_BYTES + 54 + 17);
    }
    expect(wal.compactionCandidate()).toBe(1);
    expect(wal.bytes).toBeGreaterThan(Math.max(2 * wal.liveBytes, 3 * wal.segmentBytesMax));
    move(wal, 1, 1);
    move(wal, 1, 2);
    expect(wal.compactionCandidate()).toBe(-1); // segment 1 is on its way out
    wal.commit(0);
    expect(wal.removeDeadSegments()).toBeGreaterThan(1);
    expect(wal.oldestIndex).toBe(wal.currentIndex - 1);
    expect(live()).toEqual([1, 2]);
  });
});
