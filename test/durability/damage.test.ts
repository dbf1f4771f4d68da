// Damaged logs: a torn tail (the end of a shard's last segment, as an interrupted write leaves it)
// is cut and the start goes on with every whole record; damage anywhere else refuses the start
// with the file and byte offset, unless --binlog-skip-corrupt.

import * as fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect } from '../support/client.ts';
import {
  cleanedAfterEach, copyLog, expectStartFailure, jobOf, makeDir, putId, recordSpans, rng, spawnServer, stats,
  tubePerShard, walFiles,
} from './support.ts';

const { dirs } = cleanedAfterEach();
function track(d: string): string {
  dirs.push(d);
  return d;
}

interface Log {
  dir: string;
  /** Live jobs: id → body. */
  jobs: Map<number, string>;
}

async function withServer<T>(dir: string, shards: number, fn: (port: number) => Promise<T>, extra: {
  binlogSegmentBytes?: number; binlogSkipCorrupt?: boolean;
} = {}): Promise<T> {
  const s: RunningServer = await startServer({ port: 0, shards, logLevel: 'silent', binlogDir: dir, fsyncMs: 0, ...extra });
  try {
    return await fn(s.port);
  } finally {
    await s.close();
  }
}

/** Puts `count` jobs (round robin over one tube per shard), closes; the log stays in dir. */
async function writeLog(shards: number, count: number, bodyBytes: number, segmentBytes?: number): Promise<Log> {
  const dir = track(makeDir('damage'));
  const tubes = tubePerShard(shards, 'dmg');
  const jobs = new Map<number, string>();
  await withServer(dir, shards, async (port) => {
    const c = await connect(port);
    for (let i = 0; i < count; i++) {
      const tube = tubes[i % tubes.length];
      expect(await c.request(`use ${tube}`)).toBe(`USING ${tube}\r\n`);
      const body = `job ${i} in ${tube} `.padEnd(bodyBytes, String.fromCharCode(97 + (i % 26)));
      jobs.set(await putId(c, body), body);
    }
    await c.close();
  }, { binlogSegmentBytes: segmentBytes });
  return { dir, jobs };
}

/** Starts on dir and checks that exactly `present` are there, with their bodies. */
async function expectJobs(dir: string, shards: number, present: Map<number, string>, absent: number[],
  extra: { binlogSkipCorrupt?: boolean } = {}): Promise<void> {
  await withServer(dir, shards, async (port) => {
    const c = await connect(port);
    for (const [id, body] of present) {
      const r = await c.request(`peek ${id}`);
      expect(jobOf(r)?.body, `job ${id} after the start`).toBe(body);
    }
    for (const id of absent) expect(await c.request(`peek ${id}`), `job ${id} should be gone`).toBe('NOT_FOUND\r\n');
    const st = await stats(c);
    expect(Number(st['current-jobs-ready']) + Number(st['current-jobs-buried']) + Number(st['current-jobs-delayed']),
      'no job besides those').toBe(present.size);
    await c.close();
  }, extra);
}

function without<K, V>(m: Map<K, V>, ...keys: K[]): Map<K, V> {
  const out = new Map(m);
  for (const k of keys) out.delete(k);
  return out;
}

function flipByte(path: string, at: number): void {
  const fd = fs.openSync(path, 'r+');
  try {
    const b = Buffer.alloc(1);
    fs.readSync(fd, b, 0, 1, at);
    b[0] ^= 0x5a;
    fs.writeSync(fd, b, 0, 1, at);
  } finally {
    fs.closeSync(fd);
  }
}

function snapshot(dir: string): Map<string, string> {
  return new Map(walFiles(dir).map((f) => [f.name, fs.readFileSync(f.path).toString('base64')]));
}

describe('torn tails', () => {
  it('a cut anywhere inside the last record drops that record only', async () => {
    const log = await writeLog(1, 8, 300);
    const [last] = walFiles(log.dir).slice(-1);
    const spans = recordSpans(last.path);
    const tail = spans.at(-1)!;
    const lastId = [...log.jobs.keys()].at(-1)!;
    expect(tail.id).toBe(lastId);
    const cuts = [tail.start + 1, tail.start + 4, tail.start + 8, tail.start + 9, tail.start + 17, tail.start + 60, tail.end - 1];
    for (const cut of cuts) {
      const dir = track(copyLog(log.dir, 'torn'));
      fs.truncateSync(walFiles(dir).at(-1)!.path, cut);
      await expectJobs(dir, 3, without(log.jobs, lastId), [lastId]);
    }
  });

  it('garbage after the last record is cut; every job stays', async () => {
    const log = await writeLog(2, 10, 200);
    const r = rng(622);
    const tails: Buffer[] = [
      Buffer.from([0]),
      Buffer.from([60, 0, 0, 0, 1, 2, 3, 4, 1, 9]), // a record header promising more than is there
      Buffer.alloc(4096), // zeros, as a preallocated block
      Buffer.from(Array.from({ length: 333 }, () => Math.floor(r() * 256))),
      Buffer.from(Array.from({ length: 7 }, () => Math.floor(r() * 256))),
    ];
    for (const garbage of tails) {
      const dir = track(copyLog(log.dir, 'garbage'));
      // Both shards' last segments get it.
      for (const f of walFiles(dir)) fs.appendFileSync(f.path, garbage);
      await expectJobs(dir, 2, log.jobs, []);
    }
  });

  it('torn tails on every shard at once, with several segments per shard, into another shard count', async () => {
    const log = await writeLog(3, 30, 700, 4096);
    const files = walFiles(log.dir);
    expect(files.length, 'several segments').toBeGreaterThan(3);
    const dir = track(copyLog(log.dir, 'torn3'));
    const lost: number[] = [];
    for (let shard = 0; shard < 3; shard++) {
      const last = walFiles(dir).filter((f) => f.shard === shard).at(-1)!;
      const tail = recordSpans(last.path).at(-1)!;
      lost.push(tail.id);
      fs.truncateSync(last.path, tail.start + 1 + shard * 13);
    }
    await expectJobs(dir, 2, without(log.jobs, ...lost), lost);
  });

  it('a torn DELETE or UPDATE (the change was never acknowledged) leaves the job as it was', async () => {
    const dir = track(makeDir('torn-update'));
    let ids: number[] = [];
    await withServer(dir, 1, async (port) => {
      const c = await connect(port);
      ids = [await putId(c, 'one'), await putId(c, 'two')];
      expect(await c.request(`delete ${ids[0]}`)).toBe('DELETED\r\n');
      await c.close();
    });
    const delDir = track(copyLog(dir, 'torn-del'));
    const f = walFiles(delDir).at(-1)!;
    const tail = recordSpans(f.path).at(-1)!;
    expect(tail.type).toBe(3); // DELETE
    fs.truncateSync(f.path, tail.end - 1);
    await expectJobs(delDir, 1, new Map([[ids[0], 'one'], [ids[1], 'two']]), []);

    // An UPDATE (bury) torn: the job is ready again, not buried.
    const upDir = track(makeDir('torn-bury'));
    await withServer(upDir, 1, async (port) => {
      const c = await connect(port);
      const id = await putId(c, 'to bury');
      expect(jobOf(await c.request('reserve'))?.id).toBe(id);
      expect(await c.request(`bury ${id} 0`)).toBe('BURIED\r\n');
      await c.close();
    });
    const g = walFiles(upDir).at(-1)!;
    const utail = recordSpans(g.path).at(-1)!;
    expect(utail.type).toBe(2); // UPDATE
    fs.truncateSync(g.path, utail.start + 30);
    await withServer(upDir, 1, async (port) => {
      const c = await connect(port);
      const st = await stats(c);
      expect([st['current-jobs-ready'], st['current-jobs-buried']]).toEqual(['1', '0']);
      await c.close();
    });
  });
});

describe('corruption in the middle of the log', () => {
  it('a flipped byte in a segment that is not the last: the start fails naming file and offset; with skip it starts', async () => {
    const log = await writeLog(1, 12, 1000, 4096);
    const files = walFiles(log.dir);
    expect(files.length).toBeGreaterThanOrEqual(3);
    const victim = files[1];
    const spans = recordSpans(victim.path);
    expect(spans.length).toBeGreaterThanOrEqual(2);
    const bad = spans[1]; // a FULL record with whole records before and after it
    flipByte(victim.path, bad.start + 40); // inside the body: the checksum no longer matches
    const before = snapshot(log.dir);

    await expect(startServer({ port: 0, shards: 1, logLevel: 'silent', binlogDir: log.dir, fsyncMs: 0 }))
      .rejects.toThrow(`${victim.path} at byte ${bad.start}`);
    expect(snapshot(log.dir), 'a refused start changes no file').toEqual(before);

    // The command line says the same and exits non-zero.
    const failed = await expectStartFailure({ dir: log.dir, shards: 1 });
    expect(failed.code).not.toBe(0);
    expect(failed.stderr).toContain(victim.path);
    expect(failed.stderr).toContain(`at byte ${bad.start}`);
    expect(failed.stderr).toContain('--binlog-skip-corrupt');
    expect(snapshot(log.dir)).toEqual(before);

    // With skip: everything but the damaged record's job.
    await expectJobs(log.dir, 2, without(log.jobs, bad.id), [bad.id], { binlogSkipCorrupt: true });
  });

  it('damage followed by whole records in the last segment is corruption, not a torn tail', async () => {
    const log = await writeLog(1, 6, 100);
    const [f] = walFiles(log.dir);
    const spans = recordSpans(f.path);
    const bad = spans[2];
    flipByte(f.path, bad.start + 2); // the length field
    await expect(startServer({ port: 0, shards: 1, logLevel: 'silent', binlogDir: log.dir, fsyncMs: 0 }))
      .rejects.toThrow(`${f.path} at byte ${bad.start}`);
    const child = await spawnServer({ dir: log.dir, shards: 2, skipCorrupt: true });
    try {
      const c = await connect(child.port);
      for (const [id, body] of log.jobs) {
        const r = await c.request(`peek ${id}`);
        if (id === bad.id) expect(r).toBe('NOT_FOUND\r\n');
        else expect(jobOf(r)?.body).toBe(body);
      }
      c.destroy();
    } finally {
      await child.stop();
    }
  });
});

// Regression (fixed in 3379816). The scan that tells a torn tail from corruption ("a bad record
// with no valid record after it") also looked inside the torn record's own body, which is client
// data: a body holding the bytes of a record (here a DELETE of another job) turned an ordinary torn
// write into "corruption". The start was refused, and --binlog-skip-corrupt replayed the client's
// bytes as a log record (deleting another job).
describe('torn tail of a job whose body looks like a log record', () => {
  it('is still a torn tail: the start succeeds and no other job is touched', async () => {
    const dir = track(makeDir('torn-embedded'));
    const { crc32 } = await import('node:zlib');
    let keep = 0;
    let torn = 0;
    await withServer(dir, 1, async (port) => {
      const c = await connect(port);
      keep = await putId(c, 'an acknowledged job');
      // The bytes of a valid DELETE record of job `keep`: u32 length 9, u32 crc, u8 type 3, f64 id.
      const rec = Buffer.alloc(17);
      rec.writeUInt32LE(9, 0);
      rec.writeUInt8(3, 8);
      rec.writeDoubleLE(keep, 9);
      rec.writeUInt32LE(crc32(rec.subarray(8)), 4);
      const body = Buffer.concat([Buffer.from('payload:'), rec, Buffer.from(':end')]).toString('latin1');
      torn = await putId(c, body);
      await c.close();
    });
    const f = walFiles(dir).at(-1)!;
    const tail = recordSpans(f.path).at(-1)!;
    expect(tail.id).toBe(torn);
    fs.truncateSync(f.path, tail.end - 2); // the write of the last job was cut short
    await expectJobs(dir, 1, new Map([[keep, 'an acknowledged job']]), [torn]);
  });
});
