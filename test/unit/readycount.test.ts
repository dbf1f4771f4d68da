import { describe, expect, it } from 'vitest';
import { ReadyCounts } from '../../src/route/readycount.ts';
import { Tube } from '../../src/route/tubes.ts';

describe('ReadyCounts', () => {
  it('counts and takes; a reserve takes only what is there', () => {
    const c = new ReadyCounts(2);
    const t = new Tube('a', 1, 0);
    expect(c.of(t)).toBe(0);
    expect(c.take(t)).toBe(false);
    c.add(t, 2);
    expect([c.take(t), c.take(t), c.take(t)]).toEqual([true, true, false]);
    expect(c.of(t)).toBe(0);
  });

  it('a late addition counts less the blind reserves in flight on the tube', () => {
    const c = new ReadyCounts(1);
    const t = new Tube('a', 1, 0);
    t.blindReserves = 2;
    c.addLate(t, 1);
    expect(c.of(t)).toBe(0);
    c.addLate(t, 5);
    expect(c.of(t)).toBe(3);
    c.add(t, 1); // a put: exact whatever is in flight
    expect(c.of(t)).toBe(4);
  });

  it('an any-taker of a shard forgets its tubes only', () => {
    const c = new ReadyCounts(2);
    const a = new Tube('a', 1, 0);
    const b = new Tube('b', 2, 1);
    c.add(a, 3);
    c.add(b, 3);
    c.anyTaker(0);
    expect(c.of(a)).toBe(0);
    expect(c.of(b)).toBe(3);
    c.add(a, 1);
    expect(c.of(a)).toBe(1);
  });

  it('a late addition counts nothing while an any-taker of its shard is in flight', () => {
    const c = new ReadyCounts(2);
    const a = new Tube('a', 1, 0);
    const b = new Tube('b', 2, 1);
    // kick 1 on a is sent; then a delete of the job it kicks, by a connection not holding it.
    c.anyTaker(0);
    c.addLate(a, 1); // the kick's answer: the delete, read after it, may have taken that job
    expect(c.of(a)).toBe(0);
    c.addLate(b, 1); // another shard: not concerned
    expect(c.of(b)).toBe(1);
    c.anyTakerDone(0);
    c.addLate(a, 1);
    expect(c.of(a)).toBe(1);
  });

  it('a paused tube is certain again from the instant its pause ends (the shard judges by the same instant)', () => {
    const c = new ReadyCounts(1);
    const t = new Tube('a', 1, 0);
    c.add(t, 1);
    expect(c.certain(t, 1000)).toBe(true);
    t.pausedUntilMs = 5000;
    expect(c.certain(t, 4999)).toBe(false);
    expect(c.certain(t, 5000)).toBe(true);
  });

  it('a taker takes from the count, or is blind while the count is 0 until its answer', () => {
    const c = new ReadyCounts(1);
    const t = new Tube('a', 1, 0);
    c.add(t, 1);
    expect(c.taker(t)).toBe(false); // counted
    expect([c.of(t), t.blindReserves]).toEqual([0, 0]);
    expect(c.taker(t)).toBe(true); // blind
    expect(t.blindReserves).toBe(1);
    c.addLate(t, 1); // the blind taker may have taken that job
    expect(c.of(t)).toBe(0);
    c.untake(t);
    c.addLate(t, 1);
    expect(c.of(t)).toBe(1);
  });
});
