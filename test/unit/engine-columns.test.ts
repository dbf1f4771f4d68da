import { describe, expect, it } from 'vitest';
import { OFFSET_LEAD, OFFSET_MAX, OffsetColumn, U16_WIDE, U16Column, WIDE } from '../../workers/engine/columns.ts';
import { Engine, RESERVED } from '../../workers/engine/engine.ts';

function column(slots: number, live: (s: number) => boolean = () => true): OffsetColumn {
  const c = new OffsetColumn(live);
  c.adopt(new Int32Array(slots));
  return c;
}

describe('OffsetColumn (u32 offsets from a base, a side map for the rest)', () => {
  it('keeps values around the first one in 4 bytes, and others whole in the side map', () => {
    const c = column(8);
    const t0 = 1_700_000_000_123;
    c.set(0, t0);
    c.set(1, t0 - OFFSET_LEAD + OFFSET_MAX); // the window's last value
    c.set(2, t0 - OFFSET_LEAD); // its first
    c.set(3, t0 + 0.5); // not an integer
    c.set(4, t0 - OFFSET_LEAD - 1); // before the window
    c.set(5, 2 ** 53 - 1); // far ahead: never moves the window
    expect([0, 1, 2, 3, 4, 5].map((s) => c.get(s))).toEqual([t0, t0 - OFFSET_LEAD + OFFSET_MAX, t0 - OFFSET_LEAD, t0 + 0.5, t0 - OFFSET_LEAD - 1, 2 ** 53 - 1]);
    expect([0, 1, 2].map((s) => c.cells[s] !== WIDE)).toEqual([true, true, true]);
    expect(c.wide.size).toBe(3);
    c.set(3, t0 + 1); // back in the window: the side entry goes
    c.clear(4);
    expect(c.wide.size).toBe(1);
    expect(c.rebases).toBe(0);
  });

  it('moves its window forward for a value just past it, re-encoding live slots and leaving the rest', () => {
    const live = new Set([0, 1, 2]);
    const c = column(4, (s) => live.has(s));
    c.set(0, 1000);
    const last = 1000 - OFFSET_LEAD + OFFSET_MAX;
    c.set(1, last); // fits
    expect(c.rebases).toBe(0);
    c.set(2, last + 101); // just past the end: the window moves
    expect(c.rebases).toBe(1);
    expect(c.base).toBe(last + 101 - OFFSET_LEAD);
    expect([0, 1, 2].map((s) => c.get(s))).toEqual([1000, last, last + 101]);
    expect(c.cells[0]).toBe(WIDE); // left behind: kept whole
    expect(c.cells[1]).not.toBe(WIDE);
    expect(c.wide.size).toBe(1);
  });

  it('moves its window at most once per a quarter of its length in sets (amortized O(1))', () => {
    const c = column(64, (s) => s <= 40);
    c.set(0, 0);
    // Every value just past the window [-LEAD, end]: each would move it.
    const end = OFFSET_MAX - OFFSET_LEAD;
    for (let i = 1; i <= 40; i++) c.set(i, end + i);
    // It moved once, at the 16th set (64 / 4), to the value then set - LEAD; then all fit.
    expect(c.rebases).toBe(1);
    expect(c.base).toBe(end + 15 - OFFSET_LEAD);
    for (let i = 1; i <= 40; i++) expect(c.get(i)).toBe(end + i);
    expect(c.get(0)).toBe(0);
    expect(c.wide.size).toBe(1); // slot 0, left behind
  });

  it('a test with the limit removed moves on every set (the bound above can fail)', () => {
    const c = column(1); // a quarter of 1 slot is 0 sets: always allowed
    c.set(0, 0);
    const step = OFFSET_MAX - OFFSET_LEAD + 10; // 9 past the end of the window the last set left
    for (let i = 1; i <= 5; i++) c.set(0, i * step);
    expect(c.rebases).toBe(5);
    expect(c.get(0)).toBe(5 * step);
    expect(c.wide.size).toBe(0);
  });
});

describe('engine with values outside the 4-byte windows', () => {
  it('reports ids up to 2^53, times from far apart and u32 delays and TTRs exactly', () => {
    const e = new Engine({ initialSlots: 16 });
    const body = new Uint8Array(3);
    const now = 1_700_000_000_000;
    const ids = [1, 2 ** 32 + 5, 2 ** 53 - 1, 7];
    e.put(1, ids[0], 10, 0, 60, body, now);
    e.put(1, ids[1], 10, 0, 60, body, now + 0.25);
    e.put(1, ids[2], 10, 4294967295, 4294967295, body, now - 40 * 86_400_000);
    e.put(1, ids[3], 2 ** 32 - 1, 0, 4294967295, body, now);
    e.invariants();
    const out = new Float64Array(14);
    const at = now + 3000;
    expect(e.jobStats(ids[1], at, out)).toBe(true);
    expect([out[0], out[4]]).toEqual([ids[1], 2]);
    expect(e.jobStats(ids[2], at, out)).toBe(true);
    expect([out[0], out[4], out[5], out[6], out[7]]).toEqual([ids[2], 40 * 86_400 + 3, 4294967295, 4294967295, 4294967295 - 40 * 86_400 - 4]);
    expect(e.deadlineOf(ids[2])).toBe(now - 40 * 86_400_000 + 4294967295 * 1000);
    // Ready order by (pri, id) across the wide and narrow ids.
    expect(e.reserveBest([1], 1, 3, at)).toBe(ids[0]);
    expect(e.reserveBest([1], 1, 3, at)).toBe(ids[1]);
    expect(e.reserveBest([1], 1, 3, at)).toBe(ids[3]);
    expect(e.state(ids[3])).toBe(RESERVED);
    expect(e.deadlineOf(ids[3])).toBe(at + 4294967295 * 1000);
    expect(e.kickJob(ids[2], at)).toBe(true);
    expect(e.reserveBest([1], 1, 3, at)).toBe(ids[2]);
    e.invariants();
    for (const id of ids) expect(e.deleteJob(id, 3)).toBe(1);
    e.invariants();
  });

  it('numbers buried jobs again when the bury stamps run out, keeping the kick order', () => {
    const e = new Engine({ initialSlots: 16 });
    const body = new Uint8Array(1);
    (e as unknown as { buryStamp: number }).buryStamp = OFFSET_MAX - 2;
    for (let id = 1; id <= 6; id++) {
      e.put(id % 2, id, 0, 0, 60, body, 0);
      expect(e.reserveBest([id % 2], 1, 1, 0)).toBe(id);
      expect(e.bury(id, 1, 0)).toBe(true);
    }
    e.invariants();
    expect((e as unknown as { buryStamp: number }).buryStamp).toBeLessThan(10);
    expect(e.kick(0, 10, 0)).toBe(3);
    expect(Array.from(e.lastKicked)).toEqual([2, 4, 6]);
    expect(e.listJobs(1, 4, 0, 0, 10)).toBe(false);
    expect(Array.from(e.lastListed)).toEqual([1, 3, 5]);
    expect(e.listJobs(1, 4, e.listKey(1), 1, 1)).toBe(true);
    expect(Array.from(e.lastListed)).toEqual([3]);
  });
});

describe('U16Column (2 bytes a slot, a side map from U16_WIDE up)', () => {
  it('keeps values below U16_WIDE in the cell and the rest whole, for the full u32 range', () => {
    const c = new U16Column();
    c.adopt(new Uint16Array(4));
    c.set(0, U16_WIDE - 1);
    c.set(1, U16_WIDE);
    c.set(2, 4294967295);
    expect([c.get(0), c.get(1), c.get(2)]).toEqual([U16_WIDE - 1, U16_WIDE, 4294967295]);
    expect(c.wide.size).toBe(2);
    c.set(1, 3); // back in the cell: the side entry goes
    c.clear(2);
    expect([c.get(1), c.get(2), c.wide.size]).toEqual([3, 0, 0]);
  });

  it('an engine job keeps a TTR and delay past 18 hours through release and stats', () => {
    const e = new Engine({ initialSlots: 16 });
    e.put(1, 1, 0, 0, 70_000, new Uint8Array(1), 0);
    expect(e.reserveBest([1], 1, 2, 0)).toBe(1);
    expect(e.deadlineOf(1)).toBe(70_000_000);
    expect(e.release(1, 2, 0, 100_000, 0)).toBe(3);
    const out = new Float64Array(14);
    expect(e.jobStats(1, 0, out)).toBe(true);
    expect([out[5], out[6]]).toEqual([100_000, 70_000]);
    e.invariants();
  });
});

describe('engine tube numbers (2 bytes a job)', () => {
  it('holds jobs in more tubes at once than a 2-byte number tells apart, and reuses dropped tubes\' numbers', () => {
    const e = new Engine({ initialSlots: 16 });
    const body = new Uint8Array(1);
    const n = U16_WIDE + 100; // the last 101 tubes' numbers are in the side map
    for (let t = 0; t < n; t++) e.put(1000 + t, t + 1, 0, 0, 60, body, 0);
    e.invariants();
    expect(e.tubeOf(n)).toBe(1000 + n - 1);
    expect(e.tubeOf(U16_WIDE)).toBe(1000 + U16_WIDE - 1);
    expect(e.reserveBest([1000 + n - 1], 1, 1, 0)).toBe(n);
    expect(e.listJobs(1000 + n - 1, RESERVED, 0, 0, 10)).toBe(false);
    expect(Array.from(e.lastListed)).toEqual([n]);
    expect(e.deleteJob(n, 1)).toBe(1000 + n - 1);
    expect(e.deleteJob(1, 0)).toBe(1000);
    expect(e.dropTube(1000)).toBe(true);
    e.put(5, n + 1, 0, 0, 60, body, 0); // takes tube 1000's number
    expect(e.tubeOf(n + 1)).toBe(5);
    e.invariants();
  });
});
