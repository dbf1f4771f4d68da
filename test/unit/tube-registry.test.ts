// TubeRegistry over the shared TubeTable: tubes made and freed at beanstalkd's moments (first
// reference; last of using, watching, jobs and pins gone), list-tubes in beanstalkd's Ms order, a
// freed id reused only after dropped(), this thread's Tube views (one per live id, made on first
// sight, dropped when freed), a second thread's registry on the same memory, a seeded run against
// a plain model, and, in a running server, the id given back only once the shard answered the drop.

import { afterEach, describe, expect, it } from 'vitest';
import { shardOf } from '../../src/route/hash.ts';
import { type Tube, type TubeCountField, TubeRegistry } from '../../src/route/tubes.ts';
import { TubeTable } from '../../src/route/tubetable.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';
import { mulberry32u32 } from '../support/prng.ts';

function registry(shards = 3): { reg: TubeRegistry; created: string[]; freed: string[] } {
  const reg = new TubeRegistry(TubeTable.create({ shards, initialTubes: 4 }));
  const created: string[] = [];
  const freed: string[] = [];
  reg.onCreate = (t) => created.push(t.name);
  reg.onFree = (t) => freed.push(t.name);
  return { reg, created, freed };
}

describe('TubeRegistry over TubeTable', () => {
  it('makes a tube on its first reference and frees it with its last, whichever count it is', () => {
    const { reg, created, freed } = registry();
    const t = reg.acquire('a', 'using');
    expect(created).toEqual(['a']);
    expect(t.name).toBe('a');
    expect(t.shard).toBe(shardOf('a', 3));
    expect(reg.acquire('a', 'watching')).toBe(t); // found: same view, nothing made
    expect(created).toEqual(['a']);
    reg.retain(t, 'jobs');
    expect(t.counts()).toEqual({ using: 1, watching: 1, jobs: 1, pinned: 0 });
    expect([t.using, t.watching, t.jobs, t.pinned]).toEqual([1, 1, 1, 0]);
    reg.release(t, 'using');
    reg.release(t, 'watching');
    expect(freed).toEqual([]); // a job still holds it (beanstalkd: the job's tube reference)
    expect(reg.find('a')).toBe(t);
    expect(reg.get(t.id)).toBe(t);
    reg.release(t, 'jobs');
    expect(freed).toEqual(['a']);
    expect(reg.find('a')).toBeUndefined();
    expect(reg.get(t.id)).toBeUndefined();
    expect(t.live).toBe(false);
    expect(t.counts()).toEqual({ using: 0, watching: 0, jobs: 0, pinned: 0 });
    expect(reg.count).toBe(0);
    expect(() => reg.release(t, 'jobs')).toThrow(/not live/);
  });

  it('a pinned tube (default, a move\'s) outlives its users', () => {
    const { reg, freed } = registry();
    const def = reg.acquire('default', 'pinned');
    const d2 = reg.acquire('default', 'using');
    expect(d2).toBe(def);
    reg.release(def, 'using');
    expect(freed).toEqual([]);
    expect(def.pinned).toBe(1);
    // Two moves pin the same tube; it is freed when the last lets go.
    const m = reg.acquire('m', 'pinned');
    reg.retain(m, 'pinned');
    reg.release(m, 'pinned');
    expect(freed).toEqual([]);
    reg.release(m, 'pinned');
    expect(freed).toEqual(['m']);
  });

  it('use and watch switching: beanstalkd order of making and freeing', () => {
    const { reg, created, freed } = registry();
    reg.acquire('default', 'pinned');
    // A connection: uses and watches default; `use a` makes a before default's using ends (no
    // free: default is pinned); `use b` makes b, then frees a.
    const def = reg.acquire('default', 'using');
    reg.retain(def, 'watching');
    let use = reg.acquire('a', 'using');
    reg.release(def, 'using');
    const old = use;
    use = reg.acquire('b', 'using');
    reg.release(old, 'using');
    expect(created).toEqual(['default', 'a', 'b']);
    expect(freed).toEqual(['a']);
    // `use b` again: the same tube, not freed in between.
    const again = reg.acquire('b', 'using');
    reg.release(use, 'using');
    expect(again).toBe(use);
    expect(freed).toEqual(['a']);
    expect(reg.names()).toEqual(['default', 'b']);
  });

  it('lists tubes in beanstalkd\'s Ms order: removal moves the last tube into the hole', () => {
    const { reg } = registry();
    const ts = ['a', 'b', 'c', 'd', 'e'].map((n) => reg.acquire(n, 'watching'));
    expect(reg.names()).toEqual(['a', 'b', 'c', 'd', 'e']);
    reg.release(ts[1]!, 'watching');
    expect(reg.names()).toEqual(['a', 'e', 'c', 'd']);
    expect(reg.list()).toEqual([ts[0], ts[4], ts[2], ts[3]]);
    reg.release(ts[0]!, 'watching');
    expect(reg.names()).toEqual(['d', 'e', 'c']);
    reg.acquire('f', 'jobs');
    expect(reg.names()).toEqual(['d', 'e', 'c', 'f']);
  });

  it('reuses a freed id only after dropped(), last dropped first', () => {
    const { reg } = registry();
    const a = reg.acquire('a', 'using');
    const b = reg.acquire('b', 'using');
    expect([a.id, b.id]).toEqual([0, 1]);
    reg.release(a, 'using');
    expect(reg.table.dropping).toBe(1);
    const c = reg.acquire('c', 'using');
    expect(c.id).toBe(2); // not 0: its shard has not seen the drop yet
    const a2 = reg.acquire('a', 'using'); // the same name again: a new tube, a new id
    expect(a2.id).toBe(3);
    expect(a2).not.toBe(a);
    reg.dropped(a.id);
    expect(reg.table.dropping).toBe(0);
    expect(() => reg.dropped(a.id)).toThrow(/not freed/);
    const d = reg.acquire('d', 'using');
    expect(d.id).toBe(0);
    expect(d.gen).toBe(a.gen + 1);
    expect(reg.get(0)).toBe(d);
    // The old view reads nothing of the new tube in its slot.
    expect(a.live).toBe(false);
    expect(a.using).toBe(0);
    expect(d.using).toBe(1);
    reg.release(b, 'using');
    reg.release(c, 'using');
    reg.dropped(b.id);
    reg.dropped(c.id);
    expect(reg.acquire('e', 'using').id).toBe(c.id);
    expect(reg.acquire('f', 'using').id).toBe(b.id);
    reg.table.invariants();
  });

  it('a second thread\'s registry on the same memory sees the same tubes and counts, with views of its own', () => {
    const { reg, created } = registry(2);
    const other = new TubeRegistry(TubeTable.attach(reg.shared));
    const otherCreated: string[] = [];
    other.onCreate = (t) => otherCreated.push(t.name);
    const a = reg.acquire('a', 'using');
    const oa = other.acquire('a', 'watching'); // found: the other thread does not make it again
    expect(otherCreated).toEqual([]);
    expect(oa).not.toBe(a);
    expect([oa.id, oa.gen, oa.name, oa.shard]).toEqual([a.id, a.gen, a.name, a.shard]);
    expect(a.counts()).toEqual({ using: 1, watching: 1, jobs: 0, pinned: 0 });
    const ob = other.acquire('b', 'jobs');
    expect(otherCreated).toEqual(['b']);
    expect(created).toEqual(['a']);
    const b = reg.get(ob.id)!; // first sight on this side: a view is made
    expect(b.name).toBe('b');
    expect(reg.get(ob.id)).toBe(b);
    expect(reg.names()).toEqual(['a', 'b']);
    expect(reg.list().map((t) => t.name)).toEqual(['a', 'b']);
    expect(reg.count).toBe(2);
    // Freed over there: this side's view is gone too.
    other.release(ob, 'jobs');
    expect(reg.get(ob.id)).toBeUndefined();
    expect(reg.find('b')).toBeUndefined();
    expect(b.live).toBe(false);
    // Per-thread state stays on each side's view.
    a.readyEpoch = 7;
    expect(oa.readyEpoch).toBe(0);
  });

  it('a registry attached before the table grew reaches the tubes made after', () => {
    const { reg } = registry(2); // 4 slots at first
    const other = new TubeRegistry(TubeTable.attach(reg.shared));
    expect(other.acquire('first', 'using').id).toBe(0);
    const made = Array.from({ length: 100 }, (_, i) => reg.acquire(`n${i}`, 'watching'));
    expect(reg.table.capacity).toBe(128);
    const last = made[99]!;
    const seen = other.get(last.id)!;
    expect(seen.name).toBe('n99');
    other.retain(seen, 'jobs');
    expect(last.counts()).toEqual({ using: 0, watching: 1, jobs: 1, pinned: 0 });
    reg.release(last, 'watching');
    other.release(seen, 'jobs');
    expect(reg.find('n99')).toBeUndefined();
    expect(other.get(last.id)).toBeUndefined();
    reg.table.invariants();
  });

  for (const seed of [7, 0xfeed]) {
    it(`seed ${seed}: follows a plain model (counts, order, makes, frees) with drops lagging`, () => {
      runModel(seed, 4000, 20, 4);
    });
  }
});

const FIELDS: readonly TubeCountField[] = ['using', 'watching', 'jobs', 'pinned'];

/** The model: counts per name, the list by Ms rules (append; removal moves the last into the hole). */
function runModel(seed: number, steps: number, names: number, lag: number): void {
  const rand = mulberry32u32(seed);
  const { reg, created, freed } = registry(5);
  const counts = new Map<string, Record<TubeCountField, number>>();
  const order: string[] = [];
  const mCreated: string[] = [];
  const mFreed: string[] = [];
  const held: { name: string; field: TubeCountField; t: Tube }[] = [];
  const drops: number[] = [];
  const dropping = new Set<number>();
  for (let step = 0; step < steps; step++) {
    if (rand() % 100 < 52 || held.length === 0) {
      const name = `t${rand() % names}`;
      const field = FIELDS[rand() % 4]!;
      let c = counts.get(name);
      if (c === undefined) {
        c = { using: 0, watching: 0, jobs: 0, pinned: 0 };
        counts.set(name, c);
        order.push(name);
        mCreated.push(name);
      }
      c[field]++;
      const t = reg.acquire(name, field);
      expect(dropping.has(t.id), `step ${step}: ${name} got id ${t.id}, not yet dropped`).toBe(false);
      held.push({ name, field, t });
    } else {
      const k = rand() % held.length;
      const h = held[k]!;
      held[k] = held[held.length - 1]!;
      held.pop();
      const c = counts.get(h.name)!;
      c[h.field]--;
      if (c.using + c.watching + c.jobs + c.pinned === 0) {
        counts.delete(h.name);
        const i = order.indexOf(h.name);
        const last = order.pop()!;
        if (i < order.length) order[i] = last;
        mFreed.push(h.name);
      }
      const before = freed.length;
      reg.release(h.t, h.field);
      if (freed.length > before) {
        drops.push(h.t.id);
        dropping.add(h.t.id);
      }
    }
    while (drops.length > lag) {
      const id = drops.shift()!;
      dropping.delete(id);
      reg.dropped(id);
    }
    expect(reg.names(), `step ${step}`).toEqual(order);
    const list = reg.list();
    for (let i = 0; i < list.length; i++) {
      const t = list[i]!;
      expect(t.counts(), `step ${step}: ${t.name}`).toEqual(counts.get(t.name));
      expect(reg.find(t.name)).toBe(t);
      expect(reg.get(t.id)).toBe(t);
    }
    expect(mCreated).toEqual(created);
    expect(mFreed).toEqual(freed);
  }
  reg.table.invariants();
}

// In a server: the shard's answer to the drop gives the id back.
const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

describe('the Router\'s registry in a running server', () => {
  for (const shards of [1, 3]) {
    it(`${shards} shard(s): a freed tube's id comes back once its shard answered the drop`, async () => {
      const s = await startServer({ port: 0, shards, logLevel: 'silent', workq: null });
      servers.push(s);
      const tubes = s.router.tubes;
      expect(TubeTable.attach(tubes.shared).count).toBe(1); // default, pinned
      const c = await connect(s.port);
      clients.push(c);
      expect(await c.request('watch foo')).toBe('WATCHING 2\r\n');
      const foo = tubes.find('foo')!;
      expect(foo.watching).toBe(1);
      expect(await c.request('use foo')).toBe('USING foo\r\n');
      expect(foo.using).toBe(1);
      expect(await c.request('put 0 0 10 1\r\nx')).toMatch(/^INSERTED \d+\r\n$/);
      expect(foo.jobs).toBe(1);
      expect(await c.request('use default')).toBe('USING default\r\n');
      const reserved = await c.request('reserve-with-timeout 0');
      const job = /^RESERVED (\d+) 1\r\nx\r\n$/.exec(reserved)?.[1];
      expect(job, reserved).toBeDefined();
      expect(await c.request('ignore foo')).toBe('WATCHING 1\r\n');
      expect(tubes.find('foo')).toBe(foo); // its job holds it
      expect(foo.counts()).toEqual({ using: 0, watching: 0, jobs: 1, pinned: 0 });
      expect(await c.request(`delete ${job}`)).toBe('DELETED\r\n');
      await waitUntil('the tube is freed and its id given back', () => tubes.find('foo') === undefined && tubes.table.dropping === 0);
      expect(tubes.names()).toEqual(['default']);
      expect(await c.request('watch bar')).toBe('WATCHING 2\r\n');
      expect(tubes.find('bar')!.id).toBe(foo.id); // reused after the drop
      expect(await c.request('stats-tube bar')).toMatch(/current-watching: 1\n/);
    });
  }
});
