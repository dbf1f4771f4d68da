// The reserve coordinator's multi-shard path against a fake shard pool: the shard with the best
// candidate is asked to reserve under a bound equal to the best candidate of the other shards.

import { describe, expect, it } from 'vitest';
import { Coordinator } from '../../src/route/coordinator.ts';
import { ReadyCounts } from '../../src/route/readycount.ts';
import { Tube } from '../../src/route/tubes.ts';
import { K_PEEK_BEST, K_RESERVE, K_RESERVE_IF_READY } from '../../src/proto/beanstalk/kinds.ts';
import { HEADER_BYTES, OP_PEEK_BEST, OP_RESERVE_BOUNDED, R_BEST, R_NONE, RecordWriter } from '../../src/shared/records.ts';

interface Sent {
  shard: number;
  kind: number;
  w: RecordWriter;
}

function setup(shardTubes: number[][], watched: Tube<never>[] = []) {
  const sent: Sent[] = [];
  const hub = {
    pool: {
      request(shard: number, kind: number): RecordWriter {
        const w = new RecordWriter(256);
        sent.push({ shard, kind, w });
        return w;
      },
    },
    tubes: { get: () => undefined },
    readyCounts: new ReadyCounts(shardTubes.length),
    waitingCount: 0,
    flushSoon() {},
  };
  const shards = shardTubes.map((_, i) => i).filter((i) => shardTubes[i].length > 0);
  const s = {
    connId: 7,
    closed: false,
    watch: { items: watched },
    blindTubes: [] as unknown[],
    tubesByShard: () => ({ shards, tubes: shardTubes }),
    reserveTimeoutSec: 0,
    halfClosed: false,
    reserveAnswered(word: Buffer | null) {
      this.answered = word === null ? 'job' : word.toString();
    },
    answered: '',
    deadlineSoon: () => false,
    soonestDeadline: () => Infinity,
  } as Record<string, unknown>;
  const coord = new Coordinator(hub as never);
  const reply = (shard: number, kind: number, rk: number, pri = 0, id = 0): void => {
    const w = new RecordWriter(64);
    w.header(rk, 0, 0, 0, pri, 0, id);
    coord.reply(shard, kind, s as never, w.buf, 0);
  };
  return { coord, s, sent, reply, counts: hub.readyCounts };
}

const op = (w: RecordWriter) => w.buf[4];
const b = (w: RecordWriter) => w.buf.readUInt32LE(16);
const id = (w: RecordWriter) => w.buf.readDoubleLE(24);
const tubesOf = (w: RecordWriter) => {
  const n = w.buf.readUInt32LE(12);
  return Array.from({ length: n }, (_, i) => w.buf.readUInt32LE(HEADER_BYTES + i * 4));
};

describe('Coordinator across shards', () => {
  it('asks the best shard to reserve under the best of the others as a bound', () => {
    const { coord, s, sent, reply } = setup([[1, 2], [3], [4, 5]]);
    coord.attempt(s as never, false);
    expect(sent.map((x) => [x.shard, x.kind, op(x.w)])).toEqual([
      [0, K_PEEK_BEST, OP_PEEK_BEST], [1, K_PEEK_BEST, OP_PEEK_BEST], [2, K_PEEK_BEST, OP_PEEK_BEST],
    ]);
    reply(0, K_PEEK_BEST, R_BEST, 50, 20); // second best
    reply(1, K_PEEK_BEST, R_BEST, 10, 30); // best
    reply(2, K_PEEK_BEST, R_BEST, 50, 25); // same pri as shard 0, later id
    const last = sent[sent.length - 1];
    expect([last.shard, last.kind, op(last.w)]).toEqual([1, K_RESERVE_IF_READY, OP_RESERVE_BOUNDED]);
    expect([b(last.w), id(last.w)]).toEqual([50, 20]);
    expect(tubesOf(last.w)).toEqual([3]);
  });

  it('the first answer can be the best: the bound is then the best of the later ones', () => {
    const { coord, s, sent, reply } = setup([[1], [2]]);
    coord.attempt(s as never, false);
    reply(0, K_PEEK_BEST, R_BEST, 1, 9);
    reply(1, K_PEEK_BEST, R_BEST, 2, 3);
    const last = sent[sent.length - 1];
    expect([last.shard, b(last.w), id(last.w)]).toEqual([0, 2, 3]);
    expect(tubesOf(last.w)).toEqual([1]);
  });

  it('only one shard has a candidate: no bound (id 0); a refused reserve starts over', () => {
    const { coord, s, sent, reply } = setup([[1], [2]]);
    coord.attempt(s as never, false);
    reply(0, K_PEEK_BEST, R_NONE);
    reply(1, K_PEEK_BEST, R_BEST, 5, 8);
    const last = sent[sent.length - 1];
    expect([last.shard, id(last.w)]).toEqual([1, 0]);
    const before = sent.length;
    reply(1, K_RESERVE_IF_READY, R_NONE);
    // Asked every shard again.
    expect(sent.slice(before).map((x) => [x.shard, op(x.w)])).toEqual([[0, OP_PEEK_BEST], [1, OP_PEEK_BEST]]);
  });

  it('a retry after a lost bounded reserve is a taker of its own: a put counted meanwhile is taken from the count (#11)', () => {
    // Tubes a (shard 0) and b (shard 1), both counts 0. The reserve's first bounded reserve, on
    // b, loses; meanwhile a put to a counts 1; the retry reserves on a and takes that very job.
    const a = new Tube<never>('a', 1, 0);
    const bt = new Tube<never>('b', 2, 1);
    const { coord, s, sent, reply, counts } = setup([[1], [2]], [a, bt]);
    coord.attempt(s as never, false);
    reply(0, K_PEEK_BEST, R_NONE);
    reply(1, K_PEEK_BEST, R_BEST, 5, 8);
    expect(bt.blindReserves).toBe(1); // the bounded reserve on shard 1 is a blind taker of b
    expect(a.blindReserves).toBe(0); // and of nothing on shard 0
    counts.add(a, 1); // a put to a is sent
    reply(1, K_RESERVE_IF_READY, R_NONE); // lost: start over
    expect(bt.blindReserves).toBe(0);
    reply(0, K_PEEK_BEST, R_BEST, 0, 9);
    reply(1, K_PEEK_BEST, R_NONE);
    const last = sent[sent.length - 1];
    expect([last.shard, op(last.w)]).toEqual([0, OP_RESERVE_BOUNDED]);
    // The bounded reserve on shard 0 may take the put's job: the count must not still say 1.
    expect(counts.of(a)).toBe(0);
    expect(a.blindReserves).toBe(0);
  });

  it('a blind taker stays blind until its answer, so a late addition meanwhile is discounted', () => {
    const a = new Tube<never>('a', 1, 0);
    const { coord, s, reply, counts } = setup([[1]], [a]);
    coord.attempt(s as never, false); // one shard: a reserve at once, blind on a (count 0)
    expect(a.blindReserves).toBe(1);
    counts.addLate(a, 1); // a release answered meanwhile: the reserve may have taken it
    expect(counts.of(a)).toBe(0);
    reply(0, K_RESERVE, R_NONE);
    expect(a.blindReserves).toBe(0);
  });
});
