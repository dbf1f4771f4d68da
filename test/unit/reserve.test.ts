// beanstalk's reserve through the fan-in (src/route/reserve.ts) against a fake shard pool: which
// requests it sends and the bound of a multi-shard reserve.

import { describe, expect, it } from 'vitest';
import { FanAttempt, type FanEnd, groupByShard } from '../../src/route/fanin.ts';
import { K_RESERVE_PEEK, K_RESERVE_TAKE, K_RESERVE_TAKE_BOUNDED, Reserves, type ReserveClient } from '../../src/route/reserve.ts';
import { type Tube, TubeRegistry } from '../../src/route/tubes.ts';
import { HEADER_BYTES, OP_PEEK_BEST, OP_RESERVE, OP_RESERVE_BOUNDED, R_BEST, R_JOB, R_NONE, RecordWriter } from '../../src/shared/records.ts';
import type { ShardPool } from '../../src/route/shards.ts';

interface Sent {
  shard: number;
  kind: number;
  w: RecordWriter;
}

class Client implements ReserveClient {
  readonly connId = 7;
  closed = false;
  cannotWait = false;
  answered = '';
  soonMs(): number {
    return Infinity;
  }
  onNone(end: FanEnd): void {
    this.answered = end;
  }
  onReserved(buf: Buffer, at: number): void {
    this.answered = `job ${buf.readDoubleLE(at + 24)}`;
  }
}

/** Tubes named by shard: tubesOn[shard] = names; the registry hashes names, so tubes are found by trying names. */
function setup(shards: number, perShard: number[]) {
  const sent: Sent[] = [];
  const pool = {
    request(shard: number, kind: number): RecordWriter {
      const w = new RecordWriter(256);
      sent.push({ shard, kind, w });
      return w;
    },
  } as unknown as ShardPool;
  const registry = new TubeRegistry(shards);
  const reserves = new Reserves(pool, null, () => {});
  // Tubes with the wanted number on each shard, in shard order.
  const tubes: Tube[] = [];
  for (let shard = 0; shard < shards; shard++) {
    let made = 0;
    for (let i = 0; made < perShard[shard]; i++) {
      const t = registry.acquire(`t${i}`, 'watching');
      if (t.shard === shard && !tubes.includes(t)) {
        tubes.push(t);
        made++;
      }
    }
  }
  const client = new Client();
  const a = new FanAttempt<Tube>(client);
  a.over(groupByShard(tubes));
  const reply = (shard: number, kind: number, rk: number, pri = 0, id = 0): void => {
    const w = new RecordWriter(64);
    w.header(rk, rk === R_JOB ? 8 : 0, 0, 0, pri, 0, id);
    if (rk === R_JOB) w.f64(0);
    reserves.reply(shard, kind, a, w.buf, 0, 0);
  };
  return { reserves, a, client, tubes, sent, reply };
}

const op = (w: RecordWriter) => w.buf[4];
const b = (w: RecordWriter) => w.buf.readUInt32LE(16);
const id = (w: RecordWriter) => w.buf.readDoubleLE(24);
const tubesOf = (w: RecordWriter) => {
  const n = w.buf.readUInt32LE(12);
  return Array.from({ length: n }, (_, i) => w.buf.readUInt32LE(HEADER_BYTES + i * 4));
};

describe('reserve across shards', () => {
  it('asks the best shard to reserve under the best of the others as a bound', () => {
    const { reserves, a, tubes, sent, reply, client } = setup(3, [2, 1, 2]);
    reserves.fan.begin(a, 0);
    expect(sent.map((x) => [x.shard, x.kind, op(x.w)])).toEqual([
      [0, K_RESERVE_PEEK, OP_PEEK_BEST], [1, K_RESERVE_PEEK, OP_PEEK_BEST], [2, K_RESERVE_PEEK, OP_PEEK_BEST],
    ]);
    reply(0, K_RESERVE_PEEK, R_BEST, 50, 20); // second best
    reply(1, K_RESERVE_PEEK, R_BEST, 10, 30); // best
    reply(2, K_RESERVE_PEEK, R_BEST, 50, 25); // same pri as shard 0, later id
    const last = sent[sent.length - 1];
    expect([last.shard, last.kind, op(last.w)]).toEqual([1, K_RESERVE_TAKE_BOUNDED, OP_RESERVE_BOUNDED]);
    expect([b(last.w), id(last.w)]).toEqual([50, 20]);
    expect(tubesOf(last.w)).toEqual([tubes[2].id]);
    reply(1, K_RESERVE_TAKE_BOUNDED, R_JOB, 10, 30);
    expect(client.answered).toBe('job 30');
    reserves.fan.invariants([a]);
  });

  it('the first answer can be the best: the bound is then the best of the later ones', () => {
    const { reserves, a, tubes, sent, reply } = setup(2, [1, 1]);
    reserves.fan.begin(a, 0);
    reply(0, K_RESERVE_PEEK, R_BEST, 1, 9);
    reply(1, K_RESERVE_PEEK, R_BEST, 2, 3);
    const last = sent[sent.length - 1];
    expect([last.shard, b(last.w), id(last.w)]).toEqual([0, 2, 3]);
    expect(tubesOf(last.w)).toEqual([tubes[0].id]);
  });

  it('only one shard has a candidate: no bound (a plain reserve there); none there means none', () => {
    const { reserves, a, sent, reply, client } = setup(2, [1, 1]);
    reserves.fan.begin(a, 0);
    reply(0, K_RESERVE_PEEK, R_NONE);
    reply(1, K_RESERVE_PEEK, R_BEST, 5, 8);
    const last = sent[sent.length - 1];
    expect([last.shard, last.kind, op(last.w)]).toEqual([1, K_RESERVE_TAKE, OP_RESERVE]);
    reply(1, K_RESERVE_TAKE, R_NONE);
    expect(client.answered).toBe('timeout');
    reserves.fan.invariants([a]);
  });

  it('a bounded reserve that loses its race starts over', () => {
    const { reserves, a, sent, reply } = setup(2, [1, 1]);
    reserves.fan.begin(a, 0);
    reply(0, K_RESERVE_PEEK, R_BEST, 6, 2);
    reply(1, K_RESERVE_PEEK, R_BEST, 5, 8);
    const before = sent.length;
    reply(1, K_RESERVE_TAKE_BOUNDED, R_NONE);
    expect(sent.slice(before).map((x) => [x.shard, op(x.w)])).toEqual([[0, OP_PEEK_BEST], [1, OP_PEEK_BEST]]);
  });
});
