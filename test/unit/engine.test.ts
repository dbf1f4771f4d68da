// Scenario tests of the shard engine against beanstalkd 1.12 behaviour. The randomized
// comparison against a reference model lives in engine-model.test.ts.

import { describe, expect, it } from 'vitest';
import { BURIED, DELAYED, Engine, READY, RESERVED, type TimerSink } from '../../workers/engine/engine.ts';

const T0 = 1_700_000_000_000;
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

/** Engine that checks its invariants after every call made through this wrapper. */
function checked(opts?: ConstructorParameters<typeof Engine>[0]): Engine {
  const e = new Engine(opts);
  return new Proxy(e, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== 'function' || prop === 'invariants') return v;
      return (...args: unknown[]) => {
        const r = (v as (...a: unknown[]) => unknown).apply(target, args);
        target.invariants();
        return r;
      };
    },
  });
}

function recorder(): TimerSink & { events: string[] } {
  const events: string[] = [];
  return {
    events,
    ready: (t) => void events.push(`ready ${t}`),
    timedOut: (id, conn, reserves) => void events.push(`timedOut ${id} ${conn} ${reserves}`),
  };
}

const jobStats = (e: Engine, id: number, now: number) => {
  const out = new Float64Array(13);
  expect(e.jobStats(id, now, out)).toBe(true);
  const [, tube, state, pri, age, delay, ttr, timeLeft, reserves, timeouts, releases, buries, kicks] = out;
  return { tube, state, pri, age, delay, ttr, timeLeft, reserves, timeouts, releases, buries, kicks };
};
const tubeStats = (e: Engine, tube: number, now: number) => {
  const out = new Float64Array(10);
  e.tubeStats(tube, now, out);
  const [urgent, ready, reserved, delayed, buried, totalJobs, cmdDelete, cmdPause, pause, pauseLeft] = out;
  return { urgent, ready, reserved, delayed, buried, totalJobs, cmdDelete, cmdPause, pause, pauseLeft };
};

describe('Engine: ready order and reservation', () => {
  it('reserves by (pri, id) across tubes, FIFO on equal pri', () => {
    const e = checked();
    e.put(0, 5, 10, 0, 60, enc('a'), T0);
    e.put(1, 3, 10, 0, 60, enc('b'), T0);
    e.put(1, 7, 2, 0, 60, enc('c'), T0);
    e.put(0, 9, 10, 0, 60, enc('d'), T0);
    expect(e.peekBest([0, 1], 2, T0)).toBe(7);
    expect(e.lastPri).toBe(2);
    expect(e.lastTube).toBe(1);
    expect([1, 2, 3, 4].map(() => e.reserveBest([0, 1], 2, 1, T0))).toEqual([7, 3, 5, 9]);
    expect(e.reserveBest([0, 1], 2, 1, T0)).toBe(0);
    expect(e.peekBest([0, 1], 2, T0)).toBe(0);
  });

  it('honours count and ignores unknown tubes', () => {
    const e = checked();
    e.put(2, 1, 0, 0, 1, enc(''), T0);
    expect(e.reserveBest(Int32Array.of(7, 2), 1, 1, T0)).toBe(0);
    expect(e.reserveBest(Int32Array.of(7, 2), 2, 1, T0)).toBe(1);
  });

  it('counts urgent jobs (pri < 1024) per tube and in totals', () => {
    const e = checked();
    e.put(0, 1, 1023, 0, 1, enc(''), T0);
    e.put(0, 2, 1024, 0, 1, enc(''), T0);
    e.put(0, 3, 0, 5, 1, enc(''), T0); // delayed: not counted
    expect(tubeStats(e, 0, T0)).toMatchObject({ urgent: 1, ready: 2, delayed: 1, totalJobs: 3 });
    const tot = new Float64Array(6);
    e.totals(tot);
    expect(Array.from(tot)).toEqual([1, 2, 0, 1, 0, 0]);
  });

  it('rejects duplicate ids without changing anything', () => {
    const e = checked();
    e.put(0, 1, 0, 0, 1, enc('x'), T0);
    expect(() => e.put(1, 1, 0, 0, 1, enc('y'), T0)).toThrow(/duplicate/);
    expect(e.size).toBe(1);
    expect(dec(e.body(1))).toBe('x');
  });

  it('sets the TTR deadline and stats on reserve', () => {
    const e = checked();
    e.put(3, 1, 7, 0, 30, enc('x'), T0);
    e.reserveBest([3], 1, 4, T0 + 2500);
    expect(e.state(1)).toBe(RESERVED);
    expect(jobStats(e, 1, T0 + 2500)).toMatchObject({ tube: 3, state: RESERVED, pri: 7, age: 2, ttr: 30, timeLeft: 29, reserves: 1 }); // beanstalkd truncates
    expect(jobStats(e, 1, T0 + 2500 + 29_999)).toMatchObject({ timeLeft: 0, age: 32 });
    expect(e.nextDeadline()).toBe(T0 + 32_500);
  });
});

describe('Engine: time', () => {
  it('delayed jobs become ready exactly at their deadline', () => {
    const e = checked();
    const sink = recorder();
    expect(e.put(0, 1, 0, 2, 1, enc(''), T0)).toBe(DELAYED);
    expect(e.put(0, 2, 0, 1, 1, enc(''), T0)).toBe(DELAYED);
    expect(e.peekDelayed(0)).toBe(2);
    expect(e.reserveBest([0], 1, 1, T0 + 5000)).toBe(0); // only tick() moves them
    expect(e.tick(T0 + 999, sink)).toBe(T0 + 1000);
    expect(sink.events).toEqual([]);
    expect(e.tick(T0 + 1000, sink)).toBe(T0 + 2000);
    expect(sink.events).toEqual(['ready 0']);
    expect(e.state(2)).toBe(READY);
    expect(e.tick(T0 + 2000, sink)).toBe(Infinity);
    expect(e.state(1)).toBe(READY);
    expect(jobStats(e, 1, T0 + 2000)).toMatchObject({ delay: 2, timeLeft: 0 });
  });

  it('times out reserved jobs: timedOut, then ready once the main thread expires them', () => {
    const e = checked();
    const sink = recorder();
    e.put(0, 1, 0, 0, 1, enc(''), T0);
    e.put(0, 2, 0, 0, 1, enc(''), T0);
    e.put(1, 3, 0, 0, 2, enc(''), T0);
    e.reserveBest([0], 1, 8, T0);
    e.reserveBest([0], 1, 9, T0);
    e.reserveBest([1], 1, 9, T0);
    e.tick(T0 + 999, sink);
    expect(sink.events).toEqual([]);
    expect(e.tick(T0 + 1000, sink)).toBe(T0 + 2000);
    expect(sink.events).toEqual(['timedOut 1 8 1', 'timedOut 2 9 1']);
    // Held by its connection until expire(): counted as timed out already.
    expect(jobStats(e, 1, T0 + 1500)).toMatchObject({ state: RESERVED, timeouts: 1, reserves: 1, timeLeft: 0 });
    const tot = new Float64Array(6);
    e.totals(tot);
    expect(tot[5]).toBe(2);
    expect(e.expire(1, 8, 1)).toBe(0);
    expect(jobStats(e, 1, T0 + 1500)).toMatchObject({ state: READY, timeouts: 1, reserves: 1 });
    // the other conn's jobs are still reserved (one expired), and its list intact
    expect(e.state(2)).toBe(RESERVED);
    expect(e.state(3)).toBe(RESERVED);
    expect(e.releaseConn(9, T0 + 1000)).toBe(2);
    expect([...new Set(Array.from(e.lastReleased, (id) => e.tubeOf(id)))].sort()).toEqual([0, 1]);
    expect(e.expire(2, 9, 1)).toBe(-1); // released with its connection first
  });

  it('touch restarts the TTR from now', () => {
    const e = checked();
    e.put(0, 1, 0, 0, 10, enc(''), T0);
    e.reserveBest([0], 1, 1, T0);
    expect(e.touch(1, 2, T0 + 5000)).toBe(false); // not the owner
    expect(e.touch(1, 1, T0 + 5000)).toBe(true);
    expect(e.nextDeadline()).toBe(T0 + 15_000);
    e.tick(T0 + 10_000, recorder());
    expect(e.state(1)).toBe(RESERVED);
    e.tick(T0 + 15_000, recorder());
    expect(e.state(1)).toBe(RESERVED); // expired, held until expire()
    expect(e.touch(1, 1, T0 + 15_000)).toBe(false); // its TTR is over
    expect(e.expire(1, 1, 1)).toBe(0);
    expect(e.state(1)).toBe(READY);
    expect(e.touch(1, 1, T0 + 15_000)).toBe(false); // no longer reserved
  });

  it('a job past its TTR still takes its holder\'s delete, release or bury sent before expire (#11)', () => {
    const e = checked();
    for (const id of [1, 2, 3]) e.put(0, id, 0, 0, 1, enc(''), T0);
    for (let i = 0; i < 3; i++) e.reserveBest([0], 1, 7, T0);
    const sink = recorder();
    e.tick(T0 + 5000, sink); // the requests were "on their way" far longer than any TTR
    expect(sink.events).toEqual(['timedOut 1 7 1', 'timedOut 2 7 1', 'timedOut 3 7 1']);
    expect(e.reserveBest([0], 1, 8, T0 + 5000)).toBe(0); // nobody else gets them meanwhile
    expect(e.deleteJob(1, 8)).toBe(-1); // nor deletes them
    expect(e.deleteJob(1, 7)).toBe(0);
    expect(e.release(2, 7, 0, 0, T0 + 5000)).toBe(READY);
    expect(e.bury(3, 7, 0)).toBe(true);
    // The expires that follow find nothing to do.
    expect([e.expire(1, 7, 1), e.expire(2, 7, 1), e.expire(3, 7, 1)]).toEqual([-1, -1, -1]);
    // A newer reservation of the same job is not ended by an older expiry.
    expect(e.reserveBest([0], 1, 7, T0 + 5000)).toBe(2);
    e.tick(T0 + 6000, sink);
    expect(e.expire(2, 7, 1)).toBe(-1);
    expect(e.state(2)).toBe(RESERVED);
    expect(e.expire(2, 7, 2)).toBe(0);
    expect(e.state(2)).toBe(READY);
  });

  it('release with delay waits now+delay and records the new delay and pri', () => {
    const e = checked();
    e.put(0, 1, 100, 0, 10, enc(''), T0);
    e.reserveBest([0], 1, 1, T0);
    expect(e.release(1, 2, 5, 0, T0)).toBe(-1); // not the owner
    expect(e.release(1, 1, 5, 3, T0 + 1000)).toBe(DELAYED);
    expect(jobStats(e, 1, T0 + 1000)).toMatchObject({ state: DELAYED, pri: 5, delay: 3, timeLeft: 2, releases: 1 }); // beanstalkd truncates
    expect(e.nextDeadline()).toBe(T0 + 4000);
    e.reserveBest([0], 1, 1, T0 + 4000);
    expect(e.state(1)).toBe(DELAYED);
    e.tick(T0 + 4000, recorder());
    expect(e.reserveBest([0], 1, 1, T0 + 4000)).toBe(1);
    expect(e.release(1, 1, 5, 0, T0 + 4000)).toBe(READY);
    expect(jobStats(e, 1, T0 + 4000)).toMatchObject({ delay: 0, releases: 2, reserves: 2 });
  });

  it('lets the sink call back into the engine, and reports the new deadline', () => {
    const e = checked();
    e.put(0, 1, 0, 1, 7, enc(''), T0);
    const next = e.tick(T0 + 1000, {
      ready: (t) => void e.reserveBest([t], 1, 3, T0 + 1000),
      timedOut: () => {},
    });
    expect(e.state(1)).toBe(RESERVED);
    expect(next).toBe(T0 + 8000);
  });
});

describe('Engine: bury, kick, reserve-job, delete', () => {
  it('buries FIFO; kick takes buried (oldest first) before delayed', () => {
    const e = checked();
    for (let id = 1; id <= 4; id++) e.put(0, id, 0, 0, 10, enc(''), T0);
    e.put(0, 5, 0, 9, 10, enc(''), T0);
    e.put(0, 6, 0, 3, 10, enc(''), T0);
    for (const id of [3, 1, 2]) {
      expect(e.reserveJob(id, 1, T0)).toBe(true);
      expect(e.bury(id, 1, 50)).toBe(true);
    }
    expect(e.bury(4, 1, 0)).toBe(false); // not reserved
    expect(e.peekBuried(0)).toBe(3);
    expect(jobStats(e, 3, T0)).toMatchObject({ state: BURIED, pri: 50, buries: 1 });
    expect(e.kick(0, 2, T0)).toBe(2);
    expect([e.state(3), e.state(1), e.state(2)]).toEqual([READY, READY, BURIED]);
    expect(e.kick(0, 10, T0)).toBe(1); // only buried ones while any exist
    expect(e.state(6)).toBe(DELAYED);
    expect(e.kick(0, 1, T0)).toBe(1); // now delayed, soonest first, deadline ignored
    expect(jobStats(e, 6, T0)).toMatchObject({ state: READY, kicks: 1 });
    expect(e.kick(0, 0, T0)).toBe(0);
    expect(e.kick(42, 5, T0)).toBe(0);
  });

  it('kick-job moves only buried or delayed jobs', () => {
    const e = checked();
    e.put(0, 1, 0, 100, 10, enc(''), T0);
    e.put(0, 2, 0, 0, 10, enc(''), T0);
    expect(e.kickJob(2, T0)).toBe(false);
    expect(e.kickJob(1, T0)).toBe(true);
    expect(e.nextDeadline()).toBe(Infinity); // left the timer heap
    e.reserveJob(1, 1, T0);
    expect(e.kickJob(1, T0)).toBe(false);
    e.bury(1, 1, 0);
    expect(e.kickJob(1, T0)).toBe(true);
    expect(jobStats(e, 1, T0).kicks).toBe(2);
    expect(e.kickJob(99, T0)).toBe(false);
  });

  it('treats id 0 (and other non-ids) as absent everywhere', () => {
    const e = checked();
    e.put(0, 1, 0, 0, 10, enc('x'), T0);
    for (const id of [0, -1, NaN]) {
      expect(e.state(id)).toBe(0);
      expect(e.deleteJob(id, 0)).toBe(-1);
      expect(e.reserveJob(id, 1, T0)).toBe(false);
      expect(e.kickJob(id, T0)).toBe(false);
      expect(e.jobStats(id, T0, new Float64Array(13))).toBe(false);
    }
    expect(e.size).toBe(1);
  });

  it('reserve-job takes a job out of the delay heap, and refuses reserved jobs', () => {
    const e = checked();
    e.put(0, 1, 0, 5, 2, enc(''), T0);
    expect(e.reserveJob(1, 1, T0)).toBe(true);
    expect(e.peekDelayed(0)).toBe(0);
    expect(e.reserveJob(1, 2, T0)).toBe(false);
    expect(e.nextDeadline()).toBe(T0 + 2000); // TTR, not the old delay
    expect(jobStats(e, 1, T0)).toMatchObject({ state: RESERVED, reserves: 1, delay: 5 });
  });

  it('deletes reserved jobs only for the owner, other states for anyone; counts cmd-delete', () => {
    const e = checked();
    e.put(0, 1, 0, 0, 2, enc('x'), T0);
    e.put(0, 2, 0, 5, 2, enc('y'), T0);
    e.reserveBest([0], 1, 1, T0);
    expect(e.deleteJob(1, 2)).toBe(-1);
    expect(e.deleteJob(1, 1)).toBe(0);
    expect(e.deleteJob(1, 1)).toBe(-1);
    expect(e.deleteJob(2, 7)).toBe(0);
    expect(e.state(1)).toBe(0);
    expect(e.tubeOf(1)).toBe(-1);
    expect(e.body(1).length).toBe(0);
    expect(e.nextDeadline()).toBe(Infinity);
    expect(tubeStats(e, 0, T0)).toMatchObject({ cmdDelete: 2, ready: 0, reserved: 0, delayed: 0, totalJobs: 2 });
  });

  it('releaseConn returns every job of that conn to ready without counting', () => {
    const e = checked();
    for (let id = 1; id <= 5; id++) e.put(id % 2, id, 0, 0, 10, enc(''), T0);
    e.reserveBest([0, 1], 2, 1, T0);
    e.reserveBest([0, 1], 2, 2, T0);
    e.reserveBest([0, 1], 2, 1, T0);
    e.reserveBest([0, 1], 2, 1, T0);
    expect(e.releaseConn(1, T0)).toBe(3);
    expect([...new Set(Array.from(e.lastReleased, (id) => e.tubeOf(id)))].sort()).toEqual([0, 1]);
    expect(jobStats(e, 1, T0)).toMatchObject({ state: READY, reserves: 1, releases: 0, timeouts: 0 });
    expect(e.state(2)).toBe(RESERVED);
    expect(e.releaseConn(1, T0)).toBe(0);
    expect(e.lastReleased.length).toBe(0);
  });

  it("a connection's entry in the reserved lists outlives its last job, and goes at releaseConn", () => {
    const e = checked();
    for (let id = 1; id <= 3; id++) e.put(0, id, 0, 0, 10, enc(''), T0);
    expect(e.reserveBest([0], 1, 4, T0)).toBe(1);
    expect(e.deleteJob(1, 4)).toBe(0);
    expect(e.connEntries).toBe(1); // kept while the connection lives (no rehash per job)
    expect(e.reserveBest([0], 1, 4, T0)).toBe(2);
    expect(e.reserveBest([0], 1, 5, T0)).toBe(3);
    expect(e.connEntries).toBe(2);
    expect(e.releaseConn(4, T0)).toBe(1);
    expect(e.releaseConn(5, T0)).toBe(1);
    expect(e.connEntries).toBe(0);
  });
});

describe('Engine: pause and tubes', () => {
  it('paused tubes are skipped by reservations only', () => {
    const e = checked();
    const sink = recorder();
    e.put(0, 1, 0, 0, 10, enc(''), T0);
    e.put(1, 2, 5, 0, 10, enc(''), T0);
    e.pauseTube(0, 3, T0);
    expect(tubeStats(e, 0, T0 + 500)).toMatchObject({ cmdPause: 1, pause: 3, pauseLeft: 2 });
    expect(e.isPaused(0, T0 + 500)).toBe(true);
    expect(e.reserveBest([0, 1], 2, 1, T0 + 500)).toBe(2);
    expect(e.reserveIfReady(1, 1, T0 + 500)).toBe(false);
    expect(e.peekReady(0)).toBe(1);
    expect(e.nextDeadline()).toBe(T0 + 3000);
    // the pause has ended: reservations see it at once, tick() reports the tube
    expect(tubeStats(e, 0, T0 + 3000)).toMatchObject({ pause: 0, pauseLeft: 0 });
    expect(e.peekBest([0], 1, T0 + 3000)).toBe(1);
    e.tick(T0 + 3000, sink);
    expect(sink.events).toEqual(['ready 0']);
    expect(e.nextDeadline()).toBe(T0 + 10_500); // job 2's TTR
  });

  it('jobs maturing in a paused tube are not reported until the pause ends', () => {
    const e = checked();
    const sink = recorder();
    e.put(0, 1, 0, 1, 10, enc(''), T0);
    e.pauseTube(0, 5, T0);
    e.tick(T0 + 1000, sink);
    expect(e.state(1)).toBe(READY);
    expect(sink.events).toEqual([]);
    e.tick(T0 + 5000, sink);
    expect(sink.events).toEqual(['ready 0']);
  });

  it('pause 0 ends at once (beanstalkd: 1 ns)', () => {
    const e = checked();
    e.put(0, 1, 0, 0, 10, enc(''), T0);
    e.pauseTube(0, 100, T0);
    e.pauseTube(0, 0, T0 + 1);
    expect(tubeStats(e, 0, T0 + 1)).toMatchObject({ cmdPause: 2, pause: 0, pauseLeft: 0 });
    expect(e.nextDeadline()).toBe(T0 + 1);
    const sink = recorder();
    e.tick(T0 + 1, sink);
    expect(sink.events).toEqual(['ready 0']);
    expect(e.reserveIfReady(1, 1, T0 + 1)).toBe(true);
  });

  it('dropTube forgets an empty tube only', () => {
    const e = checked();
    e.put(0, 1, 0, 0, 10, enc(''), T0);
    e.pauseTube(0, 60, T0);
    expect(e.dropTube(0)).toBe(false);
    e.deleteJob(1, 0);
    expect(e.dropTube(0)).toBe(true);
    expect(tubeStats(e, 0, T0)).toEqual({ urgent: 0, ready: 0, reserved: 0, delayed: 0, buried: 0, totalJobs: 0, cmdDelete: 0, cmdPause: 0, pause: 0, pauseLeft: 0 });
    expect(e.nextDeadline()).toBe(Infinity);
    e.put(0, 2, 0, 0, 10, enc(''), T0);
    expect(e.reserveBest([0], 1, 1, T0)).toBe(2); // no longer paused
    expect(tubeStats(e, 0, T0).totalJobs).toBe(1);
  });
});

describe('Engine: a job\'s record follows its state', () => {
  // Only pos is a column: a RESERVED job's timer place is in its reservation, a DELAYED job's
  // heap places and a BURIED job's FIFO links in a side record, and pos names that record. Each
  // step checks what a state reads (stats-job's time-left, timeouts, peeks, the timer heap's
  // deadline, touch, the buried FIFO), with neighbours in every state so records are reused and a
  // record number read as a heap place (or the other way) lands on some other job.
  const scenario = (e: Engine) => {
    const sink = recorder();
    const b = enc('x');
    for (let id = 1; id <= 4; id++) e.put(0, id, 10, 0, 5, b, T0); // READY neighbours
    e.put(0, 20, 10, 50, 5, b, T0); // DELAYED neighbour, ready at T0 + 50 s
    e.put(0, 21, 10, 0, 5, b, T0);
    expect(e.reserveJob(21, 9, T0)).toBe(true);
    expect(e.bury(21, 9, 10)).toBe(true); // BURIED neighbour
    e.put(0, 22, 10, 0, 30, b, T0);
    expect(e.reserveJob(22, 9, T0)).toBe(true); // RESERVED neighbour, TTR end T0 + 30 s
    e.put(0, 23, 10, 0, 100, b, T0);
    expect(e.reserveJob(23, 1, T0)).toBe(true); // held by the same connection, TTR end T0 + 100 s

    // READY -> RESERVED
    e.put(0, 5, 1, 0, 7, b, T0);
    expect(e.reserveBest([0], 1, 1, T0)).toBe(5);
    expect(jobStats(e, 5, T0 + 1000)).toMatchObject({ state: RESERVED, ttr: 7, timeLeft: 5, reserves: 1 });
    expect(e.nextDeadline()).toBe(T0 + 7000);
    expect(e.heldDeadline(1)).toBe(T0 + 7000);
    expect(e.touch(5, 1, T0 + 2000)).toBe(true); // TTR from T0 + 2 s
    expect(e.nextDeadline()).toBe(T0 + 9000);
    expect(jobStats(e, 5, T0 + 2000)).toMatchObject({ timeLeft: 6 });

    // RESERVED -> DELAYED (release with delay)
    expect(e.release(5, 1, 1, 3, T0 + 3000)).toBe(DELAYED);
    expect(jobStats(e, 5, T0 + 3000)).toMatchObject({ state: DELAYED, delay: 3, timeLeft: 2, releases: 1 });
    expect(e.peekDelayed(0)).toBe(5); // before job 20 (T0 + 50 s)
    expect(e.nextDeadline()).toBe(T0 + 6000);
    expect(e.heldDeadline(1)).toBe(T0 + 100_000); // 23 still held

    // DELAYED -> READY (kick; buried 21 is not in the way of kick-job)
    expect(e.kickJob(5, T0 + 4000)).toBe(true);
    expect(jobStats(e, 5, T0 + 4000)).toMatchObject({ state: READY, timeLeft: 0, kicks: 1 });
    expect(e.peekDelayed(0)).toBe(20);
    expect(e.nextDeadline()).toBe(T0 + 30_000); // 22's TTR end: 5 left the timer heap

    // READY -> RESERVED -> BURIED: appended after 21
    expect(e.reserveJob(5, 1, T0 + 4000)).toBe(true);
    expect(e.bury(5, 1, 2)).toBe(true);
    expect(jobStats(e, 5, T0 + 4000)).toMatchObject({ state: BURIED, pri: 2, timeLeft: 0, buries: 1, reserves: 2 });
    expect(e.peekBuried(0)).toBe(21);
    expect(e.touch(5, 1, T0 + 4000)).toBe(false);
    expect(e.listJobs(0, BURIED, 0, 0, 10)).toBe(false);
    expect([...e.lastListed]).toEqual([21, 5]);
    expect(e.nextDeadline()).toBe(T0 + 30_000);

    // BURIED -> READY (kick takes 21 first, then 5)
    expect(e.kick(0, 1, T0 + 4000)).toBe(1);
    expect(e.state(21)).toBe(READY);
    expect(e.peekBuried(0)).toBe(5);
    expect(e.kick(0, 1, T0 + 4000)).toBe(1);
    expect(jobStats(e, 5, T0 + 4000)).toMatchObject({ state: READY, kicks: 2, timeLeft: 0 });
    expect(e.peekBuried(0)).toBe(0);

    // READY -> RESERVED -> TTR over -> READY (timeouts)
    expect(e.reserveBest([0], 1, 1, T0 + 5000)).toBe(5); // pri 2, the best
    expect(e.tick(T0 + 11_999, sink)).toBe(T0 + 12_000);
    expect(sink.events).toEqual([]);
    expect(e.tick(T0 + 12_000, sink)).toBe(T0 + 30_000);
    expect(sink.events).toEqual(['timedOut 5 1 3']);
    expect(e.touch(5, 1, T0 + 12_000)).toBe(false); // expired: no timer place
    expect(jobStats(e, 5, T0 + 12_000)).toMatchObject({ state: RESERVED, timeouts: 1, reserves: 3, timeLeft: 0 });
    expect(e.expire(5, 1, 3)).toBe(0);
    expect(jobStats(e, 5, T0 + 12_000)).toMatchObject({ state: READY, timeouts: 1, releases: 1, buries: 1, kicks: 2 });

    // The neighbours kept theirs.
    expect(jobStats(e, 22, T0 + 12_000)).toMatchObject({ state: RESERVED, timeLeft: 17 });
    expect(jobStats(e, 20, T0 + 12_000)).toMatchObject({ state: DELAYED, timeLeft: 37 });
    expect(e.tick(T0 + 30_000, sink)).toBe(T0 + 50_000);
    expect(sink.events).toEqual(['timedOut 5 1 3', 'timedOut 22 9 1']);
    expect(e.tick(T0 + 50_000, sink)).toBe(T0 + 100_000);
    expect(e.state(20)).toBe(READY);
    expect(e.expire(22, 9, 1)).toBe(0);
    expect(jobStats(e, 23, T0 + 50_000)).toMatchObject({ state: RESERVED, timeLeft: 49, timeouts: 0 });
    expect(e.releaseConn(1, T0 + 50_000)).toBe(1);
    expect(e.nextDeadline()).toBe(Infinity);
    for (const id of [1, 2, 3, 4, 5, 20, 21, 22, 23]) expect(e.deleteJob(id, 0)).toBe(0);
    expect(e.size).toBe(0);
  };

  it('through ready, reserved, delayed, kicked, buried, kicked and timed out', () => scenario(new Engine()));
  it('the same with the invariants checked after every call', () => scenario(checked()));
});

describe('Engine: storage', () => {
  it('keeps bodies intact through slot reuse and body-store compaction', () => {
    const e = checked({ chunkSize: 512, initialSlots: 16 });
    const body = (id: number) => enc(`job-${id}-`.repeat(1 + (id % 7)));
    for (let id = 1; id <= 300; id++) e.put(id % 3, id, id % 5, 0, 10, body(id), T0);
    // Keep every 6th: old chunks drop below 1/4 live and get compacted.
    for (let id = 1; id <= 300; id++) if (id % 6 !== 0) e.deleteJob(id, 0);
    for (let id = 301; id <= 400; id++) e.put(id % 3, id, id % 5, 0, 10, body(id), T0); // reuses slots
    for (let id = 1; id <= 400; id++) if (e.state(id)) expect(dec(e.body(id))).toBe(dec(body(id)));
    expect(e.size).toBe(150);
    expect(e.memoryStats().bodyCompactions).toBeGreaterThan(0);
    e.put(0, 1000, 0, 0, 1, new Uint8Array(0), T0);
    expect(e.body(1000).length).toBe(0);
  });

  it('grows its columns far past the initial capacity', () => {
    const e = new Engine({ initialSlots: 16 });
    const n = 50_000;
    for (let id = 1; id <= n; id++) e.put(id & 7, id, id % 3, 0, 5, enc(String(id)), T0);
    e.invariants();
    const tubes = [0, 1, 2, 3, 4, 5, 6, 7];
    let last = -1;
    let lastPri = -1;
    for (let i = 0; i < n; i++) {
      const pri = (e.peekBest(tubes, 8, T0), e.lastPri);
      const id = e.reserveBest(tubes, 8, 1, T0);
      expect(pri > lastPri || (pri === lastPri && id > last)).toBe(true);
      [last, lastPri] = [id, pri];
      if (i % 997 === 0) expect(dec(e.body(id))).toBe(String(id));
    }
    e.invariants();
    expect(e.releaseConn(1, T0)).toBe(n);
    e.invariants();
  });
});

describe('reserveBounded (the winning shard of a multi-shard reserve)', () => {
  it('reserves its best job only if it comes before the other shards\' best (pri, then id)', () => {
    const e = checked();
    e.put(0, 10, 5, 0, 60, enc('a'), T0);
    e.put(1, 11, 100, 0, 60, enc('b'), T0);
    // Bound (50, 3): job 10 (pri 5) comes first.
    expect(e.reserveBounded([0, 1], 2, 1, 50, 3, T0)).toBe(10);
    // Next best is 11 (pri 100): after the bound (50, 3), so nothing is reserved.
    expect(e.reserveBounded([0, 1], 2, 1, 50, 3, T0)).toBe(0);
    expect(jobStats(e, 11, T0).state).toBe(READY);
    // Same pri: the id decides.
    expect(e.reserveBounded([1], 1, 1, 100, 11, T0)).toBe(0);
    expect(e.reserveBounded([1], 1, 1, 100, 12, T0)).toBe(11);
  });

  it('without a bound it is reserveBest; with nothing ready it is 0', () => {
    const e = checked();
    expect(e.reserveBounded([0], 1, 1, 0, 0, T0)).toBe(0);
    e.put(0, 3, 4_000_000_000, 0, 60, enc('x'), T0);
    expect(e.reserveBounded([0], 1, 1, 0, 0, T0)).toBe(3);
    expect(jobStats(e, 3, T0).state).toBe(RESERVED);
  });
});
