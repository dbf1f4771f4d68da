import { describe, expect, it } from 'vitest';
import { C_BURIES, C_KICKS, C_RELEASES, C_RESERVES, C_TIMEOUTS, COUNTER_BYTES, Counters, INLINE_MAX } from '../../workers/engine/counters.ts';
import { COLUMN_BYTES_PER_SLOT, COLUMN_GROWTH, Engine, RESERVED, SHRINK_SLOTS_FACTOR } from '../../workers/engine/engine.ts';
import { SLOT_BYTES } from '../../workers/engine/bodystore.ts';
import { IDTABLE_GROWTH, IdTable } from '../../workers/engine/idtable.ts';

describe('Counters (16 bits a job, big counts in a side map)', () => {
  it('keeps each counter in its field up to INLINE_MAX, and counts past it exactly, each counter of each slot on its own', () => {
    expect(COUNTER_BYTES).toBe(2);
    expect(INLINE_MAX).toEqual([62, 2, 14, 2, 2]); // reserves, timeouts, releases, buries, kicks
    const c = new Counters();
    c.grow(4);
    for (const k of [C_RESERVES, C_TIMEOUTS, C_RELEASES, C_BURIES, C_KICKS]) {
      for (let i = 0; i < INLINE_MAX[k]; i++) c.inc(2, k);
      expect(c.get(2, k)).toBe(INLINE_MAX[k]);
    }
    expect(c.overflowed).toBe(0); // all still in the slot's 16 bits
    for (const k of [C_RESERVES, C_TIMEOUTS, C_RELEASES, C_BURIES, C_KICKS]) {
      for (let i = 0; i < 1000; i++) c.inc(2, k);
      expect(c.get(2, k)).toBe(INLINE_MAX[k] + 1000);
    }
    expect(c.overflowed).toBe(5);
    c.inc(3, C_RESERVES);
    expect(c.get(3, C_RESERVES)).toBe(1);
    expect(c.get(3, C_KICKS)).toBe(0);
    expect(c.get(1, C_RELEASES)).toBe(0);
  });

  it('set and clear move values in and out of the side map', () => {
    const c = new Counters();
    c.grow(2);
    c.set(1, C_TIMEOUTS, 4294967295);
    c.set(1, C_BURIES, 2);
    c.set(1, C_KICKS, 1);
    expect(c.get(1, C_TIMEOUTS)).toBe(4294967295);
    expect(c.get(1, C_BURIES)).toBe(2);
    expect(c.get(1, C_KICKS)).toBe(1);
    c.inc(1, C_TIMEOUTS); // 32-bit unsigned, as beanstalkd's: wraps
    expect(c.get(1, C_TIMEOUTS)).toBe(0);
    c.set(1, C_TIMEOUTS, 2);
    expect(c.overflowed).toBe(0);
    expect([c.get(1, C_TIMEOUTS), c.get(1, C_BURIES), c.get(1, C_KICKS)]).toEqual([2, 2, 1]);
    c.set(1, C_RELEASES, 300);
    c.set(1, C_RESERVES, 70);
    c.clear(1);
    expect(c.overflowed).toBe(0);
    for (let k = 0; k < 5; k++) expect(c.get(1, k)).toBe(0);
  });

  it('survive a grow', () => {
    const c = new Counters();
    c.grow(1);
    c.set(0, C_RELEASES, 9);
    c.set(0, C_KICKS, 70000);
    c.grow(1024);
    expect(c.get(0, C_RELEASES)).toBe(9);
    expect(c.get(0, C_KICKS)).toBe(70000);
    expect(c.bytes).toBe(1024 * COUNTER_BYTES);
  });

  it('an engine job reserved and released 300 times reports 300, and a reused slot starts at 0', () => {
    const e = new Engine({ initialSlots: 16 });
    const body = new Uint8Array([1, 2, 3]);
    e.put(1, 1, 10, 0, 60, body, 0);
    for (let i = 0; i < 300; i++) {
      expect(e.reserveBest([1], 1, 7, 0)).toBe(1);
      expect(e.release(1, 7, 10, 0, 0)).toBeGreaterThan(0);
    }
    expect(e.reserveBest([1], 1, 7, 0)).toBe(1);
    const out = new Float64Array(14);
    expect(e.jobStats(1, 0, out)).toBe(true);
    expect(out[2]).toBe(RESERVED);
    expect(out[8]).toBe(301); // reserves
    expect(out[10]).toBe(300); // releases
    expect(e.deleteJob(1, 7)).toBe(1);
    e.put(1, 2, 10, 0, 60, body, 0); // takes the freed slot
    expect(e.jobStats(2, 0, out)).toBe(true);
    expect([out[8], out[9], out[10], out[11], out[12]]).toEqual([0, 0, 0, 0, 0]);
    e.invariants();
  });
});

describe('engine memory per slot', () => {
  it('holds a job in COLUMN_BYTES_PER_SLOT + SLOT_BYTES bytes of columns, 4 of id table cells, and no log column until a log is used', () => {
    const e = new Engine({ initialSlots: 1024 });
    const body = new Uint8Array(100);
    for (let id = 1; id <= 3000; id++) e.put(1, id, 0, 0, 60, body, 0);
    const m = e.memoryStats();
    expect(COLUMN_GROWTH).toBe(1.5);
    expect(m.slots).toBe(3456); // 1024 x 1.5^3: at most a third of the slots empty (doubling: 4096)
    expect(COLUMN_BYTES_PER_SLOT).toBeLessThanOrEqual(29); // 33 with a link column beside pos (a READY job needs neither it nor a record), 35 with a 4-byte tube id, 38 with a byte per counter, 42 with 4-byte TTR and delay, 50 with four link columns, 62 with 8-byte ids and times; 85 with 4-byte counters, an owner column and the log column
    expect(m.columnBytes).toBe(m.slots * (COLUMN_BYTES_PER_SLOT + SLOT_BYTES)); // no fileSeq column in memory mode
    expect(m.idTableBytes).toBeLessThanOrEqual(Math.ceil((3000 / 0.75) * IDTABLE_GROWTH) * 4); // a cell is 4 bytes, load <= 0.75
    expect(m.idTableBytes).toBe(IdTable.cellsFor(m.slots) * 4); // laid out with the columns, for the slots
    e.setFile(5, 3); // the first log segment number allocates the column
    expect(e.fileOf(5)).toBe(3);
    expect(e.fileOf(6)).toBe(0);
    expect(e.memoryStats().columnBytes).toBe(m.slots * (COLUMN_BYTES_PER_SLOT + SLOT_BYTES + 4));
    for (let id = 3001; id <= 5000; id++) e.put(1, id, 0, 0, 60, body, 0); // grows with the rest
    expect(e.fileOf(5)).toBe(3);
    expect(e.memoryStats().columnBytes).toBe(5184 * (COLUMN_BYTES_PER_SLOT + SLOT_BYTES + 4));
    e.invariants();
  });
});

describe('reservations (timer place, owner, connection list) in records apart from the job columns', () => {
  it('take as many records as jobs reserved at once, reused, and drop back when the engine empties', () => {
    const e = new Engine({ initialSlots: 64 });
    const body = new Uint8Array(10);
    const empty = e.memoryStats().recordBytes;
    for (let id = 1; id <= 3000; id++) e.put(1, id, 0, 0, 60, body, 0);
    for (let i = 0; i < 1000; i++) expect(e.reserveBest([1], 1, 1 + (i % 3), 0)).toBe(i + 1);
    e.invariants();
    const held = e.memoryStats().recordBytes;
    expect(held).toBeGreaterThanOrEqual(1000 * 16); // owner, list links, timer heap place
    expect(held).toBeLessThanOrEqual(2 * 1000 * 16);
    expect(e.releaseConn(2, 0)).toBe(333);
    for (let i = 0; i < 333; i++) expect(e.reserveBest([1], 1, 4, 0)).toBeGreaterThan(0); // the freed records again
    expect(e.memoryStats().recordBytes).toBe(held);
    e.invariants();
    for (const c of [1, 3, 4]) e.releaseConn(c, 0);
    for (let id = 1; id <= 3000; id++) expect(e.deleteJob(id, 0)).toBe(1);
    expect(e.memoryStats().recordBytes).toBe(empty);
    e.invariants();
  });
});

describe('side records (delayed and buried jobs) in the same record array', () => {
  it('take as many records as jobs delayed or buried at once, none for ready jobs, reused, and drop back when the engine empties', () => {
    const e = new Engine({ initialSlots: 64 });
    const body = new Uint8Array(10);
    const empty = e.memoryStats().recordBytes;
    for (let id = 1; id <= 3000; id++) e.put(1, id, 0, 0, 60, body, 0);
    expect(e.memoryStats().recordBytes).toBe(empty); // ready jobs hold none
    for (let id = 3001; id <= 3600; id++) e.put(1, id, 0, 100, 60, body, 0);
    for (let id = 1; id <= 400; id++) {
      expect(e.reserveJob(id, 1, 0)).toBe(true);
      expect(e.bury(id, 1, 0)).toBe(true);
    }
    e.invariants();
    const held = e.memoryStats().recordBytes;
    expect(held).toBeGreaterThanOrEqual(1000 * 8); // two places, or two links
    expect(held).toBeLessThanOrEqual(2 * 1000 * 8);
    expect(e.kick(1, 400, 0)).toBe(400);
    for (let id = 4001; id <= 4400; id++) e.put(1, id, 0, 100, 60, body, 0); // the freed records again
    expect(e.memoryStats().recordBytes).toBe(held);
    e.invariants();
    for (const id of [...Array.from({ length: 3600 }, (_, i) => i + 1), ...Array.from({ length: 400 }, (_, i) => 4001 + i)]) expect(e.deleteJob(id, 0)).toBe(1);
    expect(e.memoryStats().recordBytes).toBe(empty);
    e.invariants();
  });
});

describe('Engine memory after a burst drains', () => {
  it('lays its columns out again at their first size when the last job goes, and keeps working', () => {
    const e = new Engine({ initialSlots: 64, chunkSize: 64 * 1024 });
    const first = e.memoryStats();
    const body = new Uint8Array(300).fill(1);
    const n = 64 * SHRINK_SLOTS_FACTOR * 4;
    for (let id = 1; id <= n; id++) e.put(id % 3, id, 0, 0, 60, body, 1000);
    const peak = e.memoryStats();
    expect(peak.slots).toBeGreaterThan(64 * SHRINK_SLOTS_FACTOR);
    // Most go: nothing shrinks while any job is held.
    for (let id = 2; id <= n; id++) expect(e.deleteJob(id, 0)).toBeGreaterThanOrEqual(0);
    expect(e.memoryStats().slots).toBe(peak.slots);
    e.invariants();
    expect(e.deleteJob(1, 0)).toBe(1);
    const after = e.memoryStats();
    expect(after.slots).toBe(first.slots);
    expect(after.columnBytes).toBe(first.columnBytes);
    expect(after.bodyHeldBytes).toBeLessThanOrEqual(2 * 64 * 1024); // the current chunk and a spare, at their least
    e.invariants();
    // Ids, reservations and counters start clean in the new columns.
    expect(e.put(0, n + 1, 5, 0, 60, body, 1000)).toBe(1);
    expect(e.reserveBest([0], 1, 9, 1000)).toBe(n + 1);
    expect(e.state(1)).toBe(0);
    e.invariants();
  });

  it("lets go of a burst's ordered id lists (a kick, delays ending together, a close) at the next call", () => {
    const e = new Engine();
    const n = 10_000;
    const body = new Uint8Array(1);
    for (let id = 1; id <= 3 * n; id++) e.put(0, id, 0, id <= n ? 0 : 1, 60, body, 1000);
    // A close giving back n jobs, n delays ending in one tick, a kick of n buried jobs.
    for (let i = 0; i < n; i++) e.reserveBest([0], 1, 7, 1000);
    expect(e.releaseConn(7, 1000)).toBe(n);
    e.tick(1000 + 2000, { ready: () => {}, timedOut: () => {} });
    expect(e.lastTicked.length).toBe(2 * n);
    for (let i = 0; i < n; i++) e.bury(e.reserveBest([0], 1, 8, 3000), 8, 0);
    expect(e.kick(0, n, 3000)).toBe(n);
    expect(e.memoryStats().orderListBytes).toBeGreaterThan(3 * n * 8);
    // The next small call of each keeps a list of ORDER_BUF_KEEP entries at most.
    expect(e.kick(0, 1, 3000)).toBe(0);
    e.tick(4000, { ready: () => {}, timedOut: () => {} });
    expect(e.releaseConn(99, 4000)).toBe(0);
    expect(e.memoryStats().orderListBytes).toBeLessThanOrEqual(3 * 4096 * 8);
    e.invariants();
  });
});
