// The mesh of rings between connection threads (src/route/shards.ts): a shard applies the batches
// of all its rings in the order of the shared batch clock, so a request published before another
// one was even numbered is applied first, whichever ring the shard happens to read first. The
// sites here are ShardPools in one thread (each has its own rings, doorbell and pump), which lets
// the test publish from two sites before the shard's site reads anything: the order is provoked,
// not hoped for.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeMesh, ShardPool, type ReplyTarget } from '../../src/route/shards.ts';
import { recover } from '../../workers/wal/reader.ts';
import { E_RESERVED, OP_DELETE, OP_FAN_WAIT, OP_PEEK_BEST, OP_PEEK_READY, OP_PUT, OP_RESERVE_WAIT, peekStamp, R_JOB, R_NONE, R_OK, R_PARKED, replyKind, RESERVE_FOREVER } from '../../src/shared/records.ts';
import { waitUntil } from '../support/harness.ts';
import { Claims } from '../../src/shared/claims.ts';

const pools: ShardPool[] = [];
afterEach(async () => {
  for (const p of pools.splice(0)) await p.close();
});

function site(mesh: ReturnType<typeof makeMesh>, index: number, more: Partial<ConstructorParameters<typeof ShardPool>[0]> = {}): ShardPool {
  const pool = new ShardPool(
    { shards: mesh.shards, mesh: { mesh, site: index }, ...more },
    { event: () => {}, batchDone: () => {}, fatal: (_s, err) => { throw err; } },
  );
  pools.push(pool);
  return pool;
}

/** Every site of a 3-shard mesh sharing `claims`; `reserved` hears each E_RESERVED event, whichever site it goes to. */
function reservingSites(mesh: ReturnType<typeof makeMesh>, claims: Claims, reserved: (buf: Buffer, at: number) => void): ShardPool[] {
  return [0, 1, 2, 3].map((i) => {
    const pool = new ShardPool(
      { shards: 3, mesh: { mesh, site: i }, config: { claims: claims.shared } },
      {
        event: (_shard, buf, at) => {
          if (replyKind(buf, at) === E_RESERVED) reserved(buf, at);
        },
        batchDone: () => {},
        fatal: (_s, err) => {
          throw err;
        },
      },
    );
    pools.push(pool);
    return pool;
  });
}

/** A reply target that resolves with the reply's kind. */
function answer(): { target: ReplyTarget; kind: Promise<number> } {
  let resolve!: (k: number) => void;
  const kind = new Promise<number>((r) => (resolve = r));
  return { target: { onShardReply: (_s, _k, _q, buf, at) => resolve(replyKind(buf, at)) }, kind };
}

function put(pool: ShardPool, shard: number, tube: number, id: number, target: ReplyTarget): void {
  const w = pool.request(shard, 0, target, 0);
  w.header(OP_PUT, 4 + 1, 7, tube, 0, 0, id);
  w.u32(60);
  w.bytes(Buffer.from('x'), 0, 1);
}

describe('mesh: a shard applies the batches of all its rings in clock order', () => {
  // Shard 2 runs on site 2; it reads its rings in site order (0, 1, 3), so a batch from site 0
  // would be read before one from site 1 if the clock did not order them.
  it('a put published by site 1, then a delete of that job published by site 0: the put goes first', async () => {
    const mesh = makeMesh(3);
    const sites = [0, 1, 2, 3].map((i) => site(mesh, i));
    const put1 = answer();
    put(sites[1], 2, 5, 1, put1.target);
    sites[1].flush(); // published, numbered first
    const del = answer();
    sites[0].request(2, 0, del.target, 0).header(OP_DELETE, 0, 8, 0, 0, 0, 1);
    sites[0].flush(); // published after, numbered after: site 2 has not read anything yet
    expect(await put1.kind).toBe(R_OK);
    expect(await del.kind).toBe(R_OK); // NOT_FOUND (R_NONE) had the delete gone first
  });

  it('a put published by another site, then a delete from the shard\'s own site: the published put goes first', async () => {
    const mesh = makeMesh(3);
    const sites = [0, 1, 2, 3].map((i) => site(mesh, i));
    const put1 = answer();
    put(sites[1], 2, 5, 1, put1.target);
    sites[1].flush();
    const del = answer();
    sites[2].request(2, 0, del.target, 0).header(OP_DELETE, 0, 8, 0, 0, 0, 1);
    sites[2].flush(); // applied here at once: what other sites published is applied before it
    expect(await del.kind).toBe(R_OK);
    expect(await put1.kind).toBe(R_OK);
  });

  it.each([0, 4096])('many rounds from three sites interleaved: every delete finds the job a put published just before it (rings of %i bytes, 0: the default)', async (ringBytes) => {
    // 4 KiB rings hold a fraction of the rounds' requests and replies: both sides must wait for
    // room and go on (the replies' side on its retry timer), and order still follows publication.
    const mesh = ringBytes === 0 ? makeMesh(3) : makeMesh(3, ringBytes);
    const sites = [0, 1, 2, 3].map((i) => site(mesh, i));
    const kinds: Promise<number>[] = [];
    for (let round = 0; round < 200; round++) {
      // The put from a site read late (3 = main), the delete from one read early (0).
      const p = answer();
      put(sites[3], 2, 1 + (round % 4), 1000 + round, p.target);
      sites[3].flush();
      // A client learns of a request only once it is published (the router holds replies until
      // then): the delete is sent after that.
      while (sites[3].unpublished()) {
        await new Promise((r) => setTimeout(r, 1));
        sites[3].flush();
      }
      const d = answer();
      sites[0].request(2, 0, d.target, 0).header(OP_DELETE, 0, 9, 0, 0, 0, 1000 + round);
      sites[0].flush();
      kinds.push(p.kind, d.kind);
    }
    const got = await Promise.all(kinds);
    expect(got.filter((k) => k !== R_OK)).toEqual([]);
    // And the shard is empty: every put was deleted after it.
    const peek = answer();
    sites[1].request(2, 0, peek.target, 0).header(OP_PEEK_READY, 0, 10, 1, 0, 0, 0);
    sites[1].flush();
    expect(await peek.kind).toBe(R_NONE);
  });
});

/** Whether `kind` has settled within a few turns of the event loop (the sites' pumps run meanwhile). */
async function settled(kind: Promise<number>): Promise<boolean> {
  let done = false;
  void kind.then(() => (done = true));
  for (let i = 0; i < 20 && !done; i++) await new Promise((r) => setTimeout(r, 1));
  return done;
}

describe('mesh: one order over every site\'s segments (src/shared/sequence.ts)', () => {
  // holdPart stops a site between taking a segment's number and writing its part: exactly the
  // moment at which a shard that looked only at its rings would apply a later segment first.

  it.each([
    ['another site', 0],
    ['the shard\'s own site (applied there, with no ring)', 2],
  ])('a delete numbered after a put whose part is still being written waits for it: from %s', async (_name, from) => {
    const mesh = makeMesh(3);
    const sites = [0, 1, 2, 3].map((i) => site(mesh, i));
    sites[1].holdPart(2, true);
    const p = answer();
    put(sites[1], 2, 5, 1, p.target);
    sites[1].flush(); // numbered, not written
    const d = answer();
    sites[from].request(2, 0, d.target, 0).header(OP_DELETE, 0, 8, 0, 0, 0, 1);
    sites[from].flush(); // numbered after it, and written
    expect(await settled(d.kind)).toBe(false); // the shard waits for the lower number
    sites[1].holdPart(2, false);
    expect(await p.kind).toBe(R_OK);
    expect(await d.kind).toBe(R_OK); // NOT_FOUND (R_NONE) had the delete gone first
  });

  it.each([
    ['in one segment (no step between them)', false, [R_JOB, R_JOB]],
    ['each a step (readyStep cuts before the second)', true, [R_JOB, R_NONE]],
  ])('questions to two shards in one flush see one cut of another site\'s two puts, %s', async (_name, steps, want) => {
    const mesh = makeMesh(3);
    const sites = [0, 1, 2, 3].map((i) => site(mesh, i));
    // Site 1 puts job 1 in tube 5 on shard 0 and job 2 in tube 6 on shard 2; the part for shard 0
    // is held, so shard 2 could apply its put at once.
    sites[1].holdPart(0, true);
    const p1 = answer();
    const p2 = answer();
    if (steps) sites[1].readyStep(0);
    put(sites[1], 0, 5, 1, p1.target);
    if (steps) sites[1].readyStep(2);
    put(sites[1], 2, 6, 2, p2.target);
    sites[1].flush();
    // The main thread asks both shards in one flush (as a reserve over both tubes does).
    const q0 = answer();
    const q2 = answer();
    sites[3].request(0, 0, q0.target, 0).header(OP_PEEK_READY, 0, 10, 5, 0, 0, 0);
    sites[3].request(2, 0, q2.target, 0).header(OP_PEEK_READY, 0, 10, 6, 0, 0, 0);
    sites[3].flush();
    await settled(q2.kind);
    sites[1].holdPart(0, false);
    expect(await p1.kind).toBe(R_OK);
    expect(await p2.kind).toBe(R_OK);
    // A prefix of site 1's order: both puts, or the first alone (never the second without the first).
    expect([await q0.kind, await q2.kind]).toEqual(want);
  });
});

describe('mesh: a step waits for the other shards while a reserve over several shards is parked', () => {
  /** Four sites over three shards, sharing claims; the jobs reserved for connection 7 (site 3's), in order. */
  async function parkedOverTwo(): Promise<{ sites: ShardPool[]; reserved: number[] }> {
    const mesh = makeMesh(3);
    const claims = Claims.create();
    const reserved: number[] = [];
    const sites = reservingSites(mesh, claims, (buf, at) => reserved.push(buf.readDoubleLE(at + 24)));
    // Connection 7 (served by site 3: 7 % 4) waits over tube 5 on shard 0 and tube 6 on shard 2.
    const slot = claims.slot();
    const ticket = claims.open(slot);
    const parks = [0, 2].map((shard) => {
      const a = answer();
      const w = sites[3].request(shard, 0, a.target, ticket);
      w.header(OP_FAN_WAIT, 4, 7, 1, 0, slot, ticket);
      w.u32(shard === 0 ? 5 : 6);
      return a.kind;
    });
    sites[3].flush();
    expect(await Promise.all(parks)).toEqual([R_OK, R_OK]);
    return { sites, reserved };
  }

  /** After both puts: job 1 went to the worker, job 2 is still ready in tube 6. */
  async function firstWon(sites: ShardPool[], reserved: number[], puts: Promise<number>[]): Promise<void> {
    expect(await Promise.all(puts)).toEqual([R_OK, R_OK]);
    await settled(new Promise<number>(() => {}));
    expect(reserved).toEqual([1]); // beanstalkd's pick: the first put; job 2 stays ready
    const q = answer();
    sites[3].request(2, 0, q.target, 0).header(OP_PEEK_READY, 0, 10, 6, 0, 0, 0);
    sites[3].flush();
    expect(await q.kind).toBe(R_JOB);
  }

  it('put to tube a (shard 0), then to tube b (shard 2): the worker waiting on both gets the a job even when shard 0 is late', async () => {
    const { sites, reserved } = await parkedOverTwo();
    // Shard 0's thread is busy elsewhere: site 1's put to tube 5 waits in its ring, and the put
    // to tube 6, numbered after it, reaches shard 2 at once.
    sites[0].holdApply(true);
    const p1 = answer();
    const p2 = answer();
    sites[1].readyStep(0);
    put(sites[1], 0, 5, 1, p1.target);
    sites[1].readyStep(2);
    put(sites[1], 2, 6, 2, p2.target);
    sites[1].flush();
    expect(await settled(p2.kind)).toBe(false); // shard 2 waits for shard 0
    expect(reserved).toEqual([]);
    expect(sites[2].frontierWaits).toBeGreaterThan(0);
    sites[0].holdApply(false);
    await firstWon(sites, reserved, [p1.kind, p2.kind]);
  });

  it('the same with shard 0 idle and its put still being written by another site: not taken for caught up', async () => {
    const { sites, reserved } = await parkedOverTwo();
    // Shard 0 is idle (it says so in shared memory) and its rings are empty, but site 1 has
    // numbered a put for it and not written it yet; site 0 (main's) put to shard 2 comes after.
    sites[1].holdPart(0, true);
    const p1 = answer();
    put(sites[1], 0, 5, 1, p1.target);
    sites[1].flush();
    const p2 = answer();
    put(sites[3], 2, 6, 2, p2.target);
    sites[3].flush();
    expect(await settled(p2.kind)).toBe(false); // shard 2 waits for shard 0
    expect(reserved).toEqual([]);
    sites[1].holdPart(0, false);
    await firstWon(sites, reserved, [p1.kind, p2.kind]);
  });
});

describe('mesh: a reserve over several shards keeps its place among the waiting ones', () => {
  // Connection 8 (served by site 0) reserves over tube 5 on shard 2 and tubes elsewhere: it asks
  // shard 2 first (OP_PEEK_BEST) and parks there only once every shard has answered. Connection 9
  // (site 1) reserves over tube 5 alone after that question and parks at once. beanstalkd would
  // have connection 8 first in tube 5's waiting set, since it read its reserve first.
  it.each([
    ['with the stamp its question got: it goes ahead, as beanstalkd has it', true, [8, 9]],
    ['without a stamp (a park that asked nothing first): where it arrives', false, [9, 8]],
  ])('%s', async (_, stamped, order) => {
    const mesh = makeMesh(3);
    const claims = Claims.create();
    const reservedTo: number[] = [];
    const sites = reservingSites(mesh, claims, (buf, at) => reservedTo.push(buf.readUInt32LE(at + 8)));
    let stampOf!: (n: number) => void;
    const stamp = new Promise<number>((r) => (stampOf = r));
    const peek = sites[0].request(2, 0, { onShardReply: (_s, _k, _q, buf, at) => stampOf(peekStamp(buf, at) as number) }, 0);
    peek.header(OP_PEEK_BEST, 4, 8, 1, 0, 0, 0);
    peek.u32(5);
    sites[0].flush();
    const questionStamp = await stamp;
    const parked = answer();
    const wait = sites[1].request(2, 0, parked.target, 0);
    wait.header(OP_RESERVE_WAIT, 4, 9, 1, 0, RESERVE_FOREVER, Infinity);
    wait.u32(5);
    sites[1].flush();
    expect(await parked.kind).toBe(R_PARKED);
    const slot = claims.slot();
    const ticket = claims.open(slot);
    const fan = answer();
    const park = sites[0].request(2, 0, fan.target, ticket);
    park.header(OP_FAN_WAIT, stamped ? 12 : 4, 8, 1, 0, slot, ticket);
    park.u32(5);
    if (stamped) park.f64(questionStamp);
    sites[0].flush();
    expect(await fan.kind).toBe(R_OK);
    for (const id of [1, 2]) {
      const p = answer();
      put(sites[3], 2, 5, id, p.target);
      sites[3].flush();
      expect(await p.kind).toBe(R_OK);
      await waitUntil(`job ${id} reserved`, () => reservedTo.length === id, () => String(reservedTo), 1000, 1);
    }
    expect(reservedTo).toEqual(order);
  });
});

describe('mesh: the log names a tube another thread made', () => {
  it('a put that arrives before the tube\'s name (OP_TUBE_NAME travels on the creating thread\'s ring) is logged with the name from the shared table', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-name-'));
    try {
      const mesh = makeMesh(2);
      const wal = { dir, generation: 1, sync: 'always' as const, segmentBytesMax: 1 << 20, idFloor: 0 };
      const names = (t: number): string | undefined => (t === 5 ? 'late' : undefined);
      const sites = [0, 1, 2].map((i) => site(mesh, i, { config: { wal }, tubeName: names }));
      const p = answer();
      put(sites[0], 1, 5, 1, p.target); // tube 5 lives on shard 1; nobody told shard 1 its name
      sites[0].flush();
      expect(await p.kind).toBe(R_OK);
      for (const s of pools.splice(0)) await s.close();
      const jobs = recover(dir).jobs;
      expect(jobs.get(1)?.tube).toBe('late');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
