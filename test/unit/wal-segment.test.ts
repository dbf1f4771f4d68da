// WAL writing: one writeSync per batch (group commit), rotation by size, the three sync modes
// against an injected clock, and write/sync/open errors surfacing as WalWriteError with the
// writer still working once the fault clears.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { FaultIo } from '../../workers/wal/faultio.ts';
import { DELETE_BYTES, fullRecordBytes, STATE_READY } from '../../workers/wal/record.ts';
import { listSegments, recover, replay } from '../../workers/wal/reader.ts';
import { parseSegmentName, segmentName, WalWriteError, type SyncMode } from '../../workers/wal/segment.ts';
import { Wal } from '../../workers/wal/wal.ts';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), 'wal-segment-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const BODY = new Uint8Array(100).fill(0x61);
const REC = fullRecordBytes(4, BODY.length); // tube 'tube'

function open(sync: SyncMode, io: FaultIo, segmentBytesMax = 1 << 20, shard = 0, generation = 1): Wal {
  return new Wal({ dir, shard, generation, sync, io, segmentBytesMax });
}

function put(wal: Wal, id: number): number {
  return wal.appendFull(id, 'tube', 1, 0, 60, STATE_READY, 0, 1000, 0, 0, 0, 0, 0, BODY, 0, BODY.length);
}

function ids(): number[] {
  const out: number[] = [];
  replay(dir, (r) => out.push(r.id));
  return out;
}

describe('segment names', () => {
  it('are zero-padded so they sort, and parse back', () => {
    expect(segmentName(3, 1, 42)).toBe('g00000003-s0001-0000000042.wal');
    expect(parseSegmentName('g00000003-s0001-0000000042.wal')).toEqual({ generation: 3, shard: 1, seq: 42 });
    expect(parseSegmentName('lock')).toBeNull();
    expect(parseSegmentName('g1-s1-1.wal.tmp')).toBeNull();
  });
});

describe('group commit', () => {
  it('writes each batch with exactly one writeSync, and nothing for an empty batch', () => {
    const io = new FaultIo();
    const wal = open('never', io);
    let id = 1;
    for (let batch = 0; batch < 20; batch++) {
      for (let i = 0; i < 1 + (batch % 7); i++) put(wal, id++);
      expect(wal.pendingBytes).toBe((1 + (batch % 7)) * REC);
      expect(wal.commit(batch)).toBe((1 + (batch % 7)) * REC);
      expect(wal.pendingBytes).toBe(0);
      expect(wal.commit(batch)).toBe(0);
    }
    expect(io.counts.writeSync).toBe(20);
    expect(io.counts.openSync).toBe(1); // files are created by the first write
    expect(wal.recordsWritten).toBe(id - 1);
    wal.close();
    expect(ids()).toEqual(Array.from({ length: id - 1 }, (_, i) => i + 1));
  });

  it('creates no file until something is written', () => {
    const wal = open('always', new FaultIo());
    wal.commit(0);
    wal.close();
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});

describe('rotation', () => {
  it('moves to the next segment once one reaches segmentBytesMax; a batch never spans files', () => {
    const io = new FaultIo();
    const max = 4 * REC;
    const wal = open('never', io, max);
    let id = 1;
    const seqOf = new Map<number, number>();
    for (let batch = 0; batch < 30; batch++) {
      const n = 1 + (batch % 3);
      for (let i = 0; i < n; i++) {
        seqOf.set(id, put(wal, id));
        id++;
      }
      const seqBefore = wal.currentIndex;
      wal.commit(batch);
      const file = join(dir, segmentName(1, 0, seqBefore));
      const size = fs.statSync(file).size;
      // Over the limit by less than the batch that crossed it.
      expect(size).toBeLessThan(max + n * REC);
      if (size >= max) expect(wal.currentIndex).toBe(seqBefore + 1);
      else expect(wal.currentIndex).toBe(seqBefore);
    }
    wal.close();
    const segs = listSegments(dir);
    expect(segs.length).toBeGreaterThan(5);
    expect(segs.map((s) => s.seq)).toEqual(segs.map((_, i) => i + 1));
    // Each record is in the segment appendFull said.
    replay(dir, (r, seg) => expect(seg.seq).toBe(seqOf.get(r.id)));
    expect(ids()).toEqual(Array.from({ length: id - 1 }, (_, i) => i + 1));
    expect(wal.oldestIndex).toBe(1);
    expect(wal.segmentBytesMax).toBe(max);
  });

  it('syncs a segment before leaving it (everyMs), and a new segment\'s directory entry', () => {
    const io = new FaultIo();
    const wal = open({ everyMs: 1000 }, io, 2 * REC);
    put(wal, 1);
    wal.commit(0); // first write: sync due at once
    expect(io.counts.fdatasyncSync).toBe(1);
    expect(io.counts.fsyncSync).toBe(1); // the directory, for the new file
    put(wal, 2);
    wal.commit(1); // reaches the limit; not due
    expect(io.counts.fdatasyncSync).toBe(1);
    put(wal, 3);
    wal.commit(2); // goes to segment 2: segment 1 is synced first
    expect(io.counts.fdatasyncSync).toBe(2);
    expect(wal.currentIndex).toBe(2);
    wal.syncIfDue(1000);
    expect(io.counts.fdatasyncSync).toBe(3);
    expect(io.counts.fsyncSync).toBe(2);
    wal.close();
  });
});

describe('sync modes', () => {
  it("'always' syncs after every batch write", () => {
    const io = new FaultIo();
    const wal = open('always', io);
    for (let i = 1; i <= 10; i++) {
      put(wal, i);
      wal.commit(i);
      expect(io.counts.fdatasyncSync).toBe(i);
      expect(wal.dueMs()).toBe(Infinity);
    }
    wal.commit(11); // nothing pending: no write, no sync
    expect(io.counts.fdatasyncSync).toBe(10);
    expect(wal.syncCount).toBe(10);
    wal.close();
  });

  it("'never' never syncs", () => {
    const io = new FaultIo();
    const wal = open('never', io, 3 * REC);
    for (let i = 1; i <= 10; i++) {
      put(wal, i);
      wal.commit(i);
      expect(wal.dueMs()).toBe(Infinity);
    }
    wal.syncIfDue(1e12);
    wal.close();
    expect(io.counts.fdatasyncSync).toBe(0);
    expect(io.counts.fsyncSync).toBe(0);
  });

  it("'never' still syncs everything written on an explicit sync() (the start-up rewrite)", () => {
    const io = new FaultIo();
    const wal = open('never', io, 3 * REC);
    for (let i = 1; i <= 10; i++) {
      put(wal, i);
      wal.commit(i);
    }
    expect(wal.currentIndex).toBe(4);
    expect(io.counts.fdatasyncSync).toBe(0);
    wal.sync(11); // segments 1-3 (left unsynced) and the current one, then the directory
    expect(io.counts.fdatasyncSync).toBe(4);
    expect(io.counts.fsyncSync).toBe(1);
    wal.sync(12);
    expect(io.counts.fdatasyncSync).toBe(4);
    wal.close();
    expect(io.counts.fdatasyncSync).toBe(4);
  });

  it('{ everyMs } syncs at most every everyMs, and dueMs() says when the next is owed', () => {
    const io = new FaultIo();
    const wal = open({ everyMs: 50 }, io);
    let id = 1;
    const step = (t: number) => {
      put(wal, id++);
      wal.commit(t);
    };
    step(1000); // first write: nothing synced for ever, due now
    expect(io.counts.fdatasyncSync).toBe(1);
    expect(wal.dueMs()).toBe(Infinity);
    for (const t of [1010, 1020, 1049]) step(t);
    expect(io.counts.fdatasyncSync).toBe(1);
    expect(wal.dueMs()).toBe(1050);
    expect(wal.syncIfDue(1049)).toBe(false);
    expect(wal.syncIfDue(1050)).toBe(true);
    expect(io.counts.fdatasyncSync).toBe(2);
    expect(wal.dueMs()).toBe(Infinity);
    step(1060); // within 50 ms of the last sync
    expect(io.counts.fdatasyncSync).toBe(2);
    expect(wal.dueMs()).toBe(1100);
    step(1100); // a write at the due time syncs
    expect(io.counts.fdatasyncSync).toBe(3);
    // Over 10 s of writes every 7 ms: about one sync per 50 ms, never more.
    for (let t = 1107; t < 11_100; t += 7) {
      step(t);
      wal.syncIfDue(t + 3);
    }
    expect(io.counts.fdatasyncSync - 3).toBeGreaterThanOrEqual(10_000 / 56 - 2);
    expect(io.counts.fdatasyncSync - 3).toBeLessThanOrEqual(10_000 / 50 + 1);
    wal.close();
    expect(ids().length).toBe(id - 1);
  });
});

describe('write errors', () => {
  for (const code of ['ENOSPC', 'EIO']) {
    it(`a failed write (${code}, after a partial write) throws WalWriteError and is retried intact`, () => {
      const io = new FaultIo();
      const wal = open('always', io);
      put(wal, 1);
      wal.commit(0);
      put(wal, 2);
      put(wal, 3);
      io.fail('writeSync', code, 2, REC + 10); // part of the batch reaches the file each time
      let err: unknown;
      try {
        wal.commit(1);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(WalWriteError);
      expect(err).toMatchObject({ code, op: 'write' });
      expect((err as Error).message).toContain(code);
      expect(wal.pendingBytes).toBe(2 * REC);
      expect(fs.statSync(join(dir, segmentName(1, 0, 1))).size).toBe(REC); // the partial write was cut
      put(wal, 4); // work goes on meanwhile
      expect(() => wal.commit(2)).toThrow(WalWriteError);
      wal.commit(3); // the fault is over
      expect(wal.pendingBytes).toBe(0);
      wal.appendDelete(4, 1, REC);
      wal.commit(4);
      wal.close();
      expect(ids()).toEqual([1, 2, 3, 4, 4]);
      const r = recover(dir, { onWarning: (w) => expect.fail(w.message) });
      expect([...r.jobs.keys()]).toEqual([1, 2, 3]);
    });
  }

  it('a failed sync throws and is retried by the next commit, without writing twice', () => {
    const io = new FaultIo();
    const wal = open('always', io);
    put(wal, 1);
    io.fail('fdatasyncSync', 'EIO');
    expect(() => wal.commit(0)).toThrow(expect.objectContaining({ name: 'WalWriteError', code: 'EIO', op: 'sync' }));
    expect(wal.pendingBytes).toBe(0); // written, not yet durable
    expect(wal.dueMs()).toBeLessThanOrEqual(0);
    wal.commit(1);
    expect(io.counts.writeSync).toBe(1);
    expect(io.counts.fdatasyncSync).toBe(2);
    expect(wal.dueMs()).toBe(Infinity);
    wal.close();
    expect(ids()).toEqual([1]);
  });

  it('a failed open (EMFILE, ENOSPC) throws and the next commit creates the file', () => {
    const io = new FaultIo();
    const wal = open('never', io, 2 * REC);
    put(wal, 1);
    io.fail('openSync', 'EMFILE');
    expect(() => wal.commit(0)).toThrow(expect.objectContaining({ code: 'EMFILE', op: 'open' }));
    wal.commit(1);
    put(wal, 2);
    wal.commit(2); // rotation due
    put(wal, 3);
    io.fail('openSync', 'ENOSPC');
    expect(() => wal.commit(3)).toThrow(expect.objectContaining({ code: 'ENOSPC', op: 'open' }));
    expect(wal.currentIndex).toBe(2);
    wal.commit(4);
    wal.close();
    expect(ids()).toEqual([1, 2, 3]);
    expect(listSegments(dir).map((s) => s.seq)).toEqual([1, 2]);
  });

  it('refuses to reopen a generation that already has segments for the shard', () => {
    const wal = open('never', new FaultIo());
    put(wal, 1);
    wal.close();
    expect(() => open('never', new FaultIo())).toThrow(/already exists.*new generation/);
    open('never', new FaultIo(), 1 << 20, 1).close(); // another shard is fine
    open('never', new FaultIo(), 1 << 20, 0, 2).close(); // so is the next generation
  });

  it('close() commits what is pending', () => {
    const wal = open('always', new FaultIo());
    put(wal, 1);
    wal.appendDelete(1, 1, REC);
    wal.close();
    expect(ids()).toEqual([1, 1]);
    expect(fs.statSync(join(dir, segmentName(1, 0, 1))).size).toBe(REC + DELETE_BYTES);
  });
});
