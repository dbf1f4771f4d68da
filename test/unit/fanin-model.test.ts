// Seeded model test of the cross-shard fan-in (src/route/fanin.ts) against a fake shard pool:
// requests wait in per-shard FIFOs and are applied, and their answers delivered, in random
// interleavings with puts and with other clients' attempts, so peeks go stale, bounded takes lose
// their race and start over, and wake-ups race attempts still asking shards.
//
// Checked after every step: FanIn.invariants(). Checked on every answer, against what one shard
// holding every queue would do:
//  - a job taken comes before every job that was ready in the attempt's queues from its start to
//    its answer (one shard would have given that job instead);
//  - an attempt that may not wait ends empty only if no job was ready in its queues throughout;
//  - no job is taken twice (the fake shard removes what it hands out).
// At quiescence (every request applied and answered; now and then, and at the end): no attempt waits on a queue holding a job
// (no lost wake-up).
// Sequentially (one operation at a time, to quiescence), 1 and 4 shards give the same answers.
//
// Reproduce a failure with SEED=<seed> npx vitest run test/unit/fanin-model.test.ts

import { describe, expect, it } from 'vitest';
import {
  FanAttempt, type FanClient, type FanEnd, FanIn, type FanQueue, type FanShards, groupByShard, WaitFifo,
} from '../../src/route/fanin.ts';
import { mulberry32 } from '../support/prng.ts';

interface Job {
  readonly k1: number;
  readonly k2: number;
  readonly id: number;
  readonly q: number;
}

class Q implements FanQueue {
  readonly index: number;
  readonly shard: number;
  readyEpoch = 0;
  readonly waiting = new WaitFifo<FanAttempt<FanQueue>>();
  constructor(index: number, shard: number) {
    this.index = index;
    this.shard = shard;
  }
}

const before = (a: Job, b: Job): boolean => a.k1 !== b.k1 ? a.k1 < b.k1 : a.k2 !== b.k2 ? a.k2 < b.k2 : a.id < b.id;

class Client implements FanClient {
  closed = false;
  cannotWait = false;
  readonly attempt: FanAttempt<Q>;
  /** Jobs in its queues when the current attempt began. */
  startJobs = new Set<Job>();
  answers: (Job | FanEnd)[] = [];
  constructor() {
    this.attempt = new FanAttempt<Q>(this);
  }
  soonMs(): number {
    return Infinity;
  }
  onNone(end: FanEnd): void {
    this.answers.push(end);
    this.onAnswer?.(end);
  }
  onAnswer: ((x: Job | FanEnd) => void) | null = null;
}

type Req =
  | { kind: 'peek'; a: FanAttempt<Q>; queues: readonly Q[] }
  | { kind: 'take'; a: FanAttempt<Q>; queues: readonly Q[]; bound: Job | null }
  | { kind: 'put'; job: Job };
type Rep =
  | { kind: 'peek'; a: FanAttempt<Q>; best: Job | null }
  | { kind: 'take'; a: FanAttempt<Q>; got: Job | null }
  | { kind: 'put'; job: Job };

interface Options {
  shards: number;
  queues: number;
  clients: number;
  steps: number;
  sequential: boolean;
}

/** Runs one seeded scenario; returns every client's answers (by client) and what it covered. */
function run(seed: number, o: Options): { answers: (Job | FanEnd)[][]; lostRaces: number; taken: number } {
  const rand = mulberry32(seed);
  // Quiescing draws from its own stream, so sequential runs with 1 and 4 shards see the same operations.
  const sched = mulberry32(seed ^ 0x5bd1e995);
  const int = (n: number): number => Math.floor(rand() * n);
  const queues = Array.from({ length: o.queues }, (_, i) => new Q(i, o.shards === 1 ? 0 : i % o.shards));
  const held: Job[][] = Array.from({ length: o.queues }, () => []); // jobs per queue at the shard
  const requests: Req[][] = Array.from({ length: o.shards }, () => []);
  const replies: Rep[][] = Array.from({ length: o.shards }, () => []);
  let lostRaces = 0;
  let taken = 0;
  const takenIds = new Set<number>();

  const bestOf = (qs: readonly Q[]): Job | null => {
    let best: Job | null = null;
    for (const q of qs) for (const j of held[q.index]) if (best === null || before(j, best)) best = j;
    return best;
  };
  const shardsApi: FanShards<Q> = {
    peek: (a, shard, qs) => void requests[shard].push({ kind: 'peek', a, queues: qs }),
    take: (a, shard, qs, bounded) => {
      const bound = bounded ? { k1: a.bound.k1, k2: a.bound.k2, id: a.bound.id, q: -1 } : null;
      requests[shard].push({ kind: 'take', a, queues: qs, bound });
    },
    reply: () => {}, // replies are delivered straight to peeked / took below
  };
  const fan = new FanIn<Q>(shardsApi, () => {});

  const clients = Array.from({ length: o.clients }, () => new Client());
  const attempts = clients.map((c) => c.attempt);
  const check = (c: Client, x: Job | FanEnd): void => {
    const present = (j: Job): boolean => held[j.q].includes(j);
    const throughout = [...c.startJobs].filter(present);
    if (typeof x !== 'string') {
      for (const j of throughout) if (before(j, x)) throw new Error(`took ${x.id} (${x.k1},${x.k2}) although ${j.id} (${j.k1},${j.k2}) was ready throughout`);
    } else if (throughout.length > 0) {
      throw new Error(`ended '${x}' although job ${throughout[0].id} was ready throughout`);
    }
  };
  for (const c of clients) c.onAnswer = (x) => check(c, x);

  let nextId = 1;
  const put = (): void => {
    const q = queues[int(o.queues)];
    const job = { k1: int(4), k2: int(3), id: nextId++, q: q.index };
    requests[q.shard].push({ kind: 'put', job });
  };
  const begin = (c: Client): void => {
    // A random non-empty set of queues, grouped by shard.
    const qs = queues.filter(() => rand() < 0.4);
    if (qs.length === 0) qs.push(queues[int(o.queues)]);
    const a = c.attempt;
    a.over(groupByShard(qs));
    c.startJobs = new Set(qs.flatMap((q) => held[q.index]));
    c.cannotWait = rand() < 0.4; // as reserve-with-timeout 0
    fan.begin(a, c.cannotWait ? 0 : -1);
  };
  const apply = (shard: number): void => {
    const r = requests[shard].shift() as Req;
    if (r.kind === 'put') {
      held[r.job.q].push(r.job);
      replies[shard].push({ kind: 'put', job: r.job });
    } else if (r.kind === 'peek') {
      replies[shard].push({ kind: 'peek', a: r.a, best: bestOf(r.queues) });
    } else {
      let got = bestOf(r.queues);
      if (got !== null && r.bound !== null && !before(got, r.bound)) got = null;
      if (got !== null) {
        const list = held[got.q];
        list.splice(list.indexOf(got), 1);
        if (takenIds.has(got.id)) throw new Error(`job ${got.id} taken twice`);
        takenIds.add(got.id);
      }
      replies[shard].push({ kind: 'take', a: r.a, got });
    }
  };
  const deliver = (shard: number): void => {
    const r = replies[shard].shift() as Rep;
    if (r.kind === 'put') {
      fan.ready(queues[r.job.q]);
    } else if (r.kind === 'peek') {
      fan.peeked(r.a, shard, r.best?.k1 ?? 0, r.best?.k2 ?? 0, 0, r.best?.id ?? 0);
    } else {
      const wasBounded = r.a.bounded;
      if (fan.took(r.a, r.got !== null)) {
        taken++;
        const c = r.a.client as Client;
        c.answers.push(r.got as Job);
        check(c, r.got as Job);
      } else if (wasBounded && r.got === null) {
        lostRaces++;
      }
    }
  };
  const pending = (): boolean => requests.some((x) => x.length > 0) || replies.some((x) => x.length > 0);
  const quiesce = (): void => {
    while (pending()) {
      const s = Math.floor(sched() * o.shards);
      if (replies[s].length > 0 && sched() < 0.5) deliver(s);
      else if (requests[s].length > 0) apply(s);
      fan.invariants(attempts);
    }
    for (const c of clients) {
      const a = c.attempt;
      if (a.waiting) for (const q of a.queues) if (held[q.index].length > 0) throw new Error(`lost wake-up: waits on queue ${q.index} holding ${held[q.index].length}`);
    }
  };

  const step = (): void => {
    const x = rand();
    const idle = clients.filter((c) => !c.attempt.live);
    if (x < 0.3) put();
    else if (x < 0.5 && idle.length > 0) begin(idle[int(idle.length)]);
    else {
      const s = int(o.shards);
      if (replies[s].length > 0 && (requests[s].length === 0 || rand() < 0.5)) deliver(s);
      else if (requests[s].length > 0) apply(s);
    }
    fan.invariants(attempts);
    // Now and then everything settles, and wake-ups are checked there.
    if (o.sequential || sched() < 0.05) quiesce();
  };

  for (let i = 0; i < o.steps; i++) step();
  quiesce();
  return { answers: clients.map((c) => c.answers), lostRaces, taken };
}

const envSeed = process.env.SEED;
const base = envSeed !== undefined ? Number(envSeed) >>> 0 : (Math.random() * 2 ** 32) >>> 0;
const seeds = envSeed !== undefined ? [base] : [base, base + 1, base + 2, base + 3, base + 4, base + 5];

describe('fan-in vs a one-shard oracle', () => {
  for (const seed of seeds) {
    it(`concurrent interleavings, seed=${seed}`, () => {
      let lost = 0;
      let taken = 0;
      for (const shards of [1, 2, 4]) {
        try {
          const r = run(seed, { shards, queues: 6, clients: 6, steps: 6000, sequential: false });
          lost += r.lostRaces;
          taken += r.taken;
        } catch (e) {
          throw new Error(`seed=${seed} shards=${shards} (rerun: SEED=${seed} npx vitest run test/unit/fanin-model.test.ts): ${(e as Error).message}`);
        }
      }
      expect(taken, 'jobs taken').toBeGreaterThan(300);
      expect(lost, 'bounded takes that lost their race and started over').toBeGreaterThan(0);
    });
  }

  for (const seed of seeds.slice(0, 3)) {
    it(`one operation at a time, 4 shards answer as 1, seed=${seed}`, () => {
      const one = run(seed, { shards: 1, queues: 6, clients: 4, steps: 1500, sequential: true });
      const four = run(seed, { shards: 4, queues: 6, clients: 4, steps: 1500, sequential: true });
      const ids = (r: typeof one) => r.answers.map((xs) => xs.map((x) => (typeof x === 'string' ? x : x.id)));
      expect(ids(four)).toEqual(ids(one));
      expect(one.taken).toBeGreaterThan(100);
    });
  }
});
