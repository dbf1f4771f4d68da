// TubeTable on one thread: the same seeded acquire/release sequence against a model registry
// kept in plain objects (the TubeRegistry that ran before the table: ids, list-tubes order,
// shards, counts, who creates and who frees), generations and two-phase id reuse, 200-byte names,
// 50,000 tubes, the name heap (block sizes, reuse under other names, compaction, its limit), and
// invariants() catching damage.

import { describe, expect, it } from 'vitest';
import { shardOf } from '../../src/route/hash.ts';
import { Multiset } from '../../src/shared/multiset.ts';
import {
  NAME_BLOCK_MAX_BYTES,
  NAME_GRANULE_BYTES,
  NAME_HEAP_BYTES_PER_TUBE,
  NAME_HEAP_INITIAL_BYTES,
  TubeTable,
  TUBE_NAME_MAX_BYTES,
  type TubeCountField,
  type TubeTableShared,
} from '../../src/route/tubetable.ts';
import { mulberry32u32 } from '../support/prng.ts';

const FIELDS: readonly TubeCountField[] = ['using', 'watching', 'jobs'];

/** A tube of the model: its counts as plain fields. */
class ModelTube {
  readonly name: string;
  readonly id: number;
  readonly shard: number;
  using = 0;
  watching = 0;
  jobs = 0;
  pinned = false;

  constructor(name: string, id: number, shard: number) {
    this.name = name;
    this.id = id;
    this.shard = shard;
  }

  get unreferenced(): boolean {
    return !this.pinned && this.using === 0 && this.watching === 0 && this.jobs === 0;
  }
}

/**
 * The model: the registry as it was in plain objects on one thread (beanstalkd's rules: a tube
 * made on first use, freed when nothing refers to it, list-tubes order by Ms rules), with a freed
 * id reusable at once, last freed first.
 */
class ModelRegistry {
  readonly shards: number;
  readonly all = new Multiset<ModelTube>();
  private readonly byName = new Map<string, ModelTube>();
  private readonly byId: (ModelTube | undefined)[] = [];
  private readonly freeIds: number[] = [];
  onFree: (t: ModelTube) => void = () => {};
  onCreate: (t: ModelTube) => void = () => {};

  constructor(shards: number) {
    this.shards = shards;
  }

  find(name: string): ModelTube | undefined {
    return this.byName.get(name);
  }

  findOrMake(name: string): ModelTube {
    let t = this.byName.get(name);
    if (t !== undefined) return t;
    const id = this.freeIds.length > 0 ? (this.freeIds.pop() as number) : this.byId.length;
    t = new ModelTube(name, id, shardOf(name, this.shards));
    this.byId[id] = t;
    this.byName.set(name, t);
    this.all.append(t);
    this.onCreate(t);
    return t;
  }

  release(t: ModelTube): void {
    if (!t.unreferenced || this.byId[t.id] !== t) return;
    this.all.remove(t);
    this.byName.delete(t.name);
    this.byId[t.id] = undefined;
    this.onFree(t);
    this.freeIds.push(t.id);
  }

  get count(): number {
    return this.all.len;
  }
}

/** One reference a client holds: which name, which count. */
interface Ref {
  name: string;
  field: TubeCountField;
}

/**
 * Drives ModelRegistry and TubeTable through the same random acquire/release sequence. With
 * `dropLag` 0 the table's dropped() follows each free at once, so ids must match ModelRegistry's
 * (which reuses an id right away, last freed first); with a lag, ids differ but names, order and
 * counts must not.
 */
function runModel(seed: number, steps: number, names: number, shards: number, dropLag: number, nameOf = (k: number) => `t${k}`): void {
  const rand = mulberry32u32(seed);
  const reg = new ModelRegistry(shards);
  const created: string[] = [];
  const freed: string[] = [];
  reg.onCreate = (t) => created.push(t.name);
  reg.onFree = (t) => freed.push(t.name);
  const table = TubeTable.create({ shards, initialTubes: 4 });
  const tableCreated: string[] = [];
  const tableFreed: string[] = [];
  const pendingDrops: number[] = [];
  const idOf = new Map<string, number>(); // table ids of the live tubes, by name
  const genOf = new Map<number, number>(); // last generation seen per slot

  const pin = (name: string) => {
    reg.findOrMake(name).pinned = true;
    const id = table.acquire(name, 'pinned');
    if (table.created) tableCreated.push(name);
    idOf.set(name, id);
    genOf.set(id, table.gen(id));
  };
  pin('default');

  const held: Ref[] = [];
  for (let step = 0; step < steps; step++) {
    const op = rand() % 100;
    if (op < 52 || held.length === 0) {
      const name = nameOf(rand() % names);
      const field = FIELDS[rand() % 3]!;
      const t = reg.findOrMake(name);
      t[field]++;
      const id = table.acquire(name, field);
      if (table.created) {
        tableCreated.push(name);
        const before = genOf.get(id) ?? 0;
        expect(table.gen(id), `step ${step}: a created tube gets a new generation`).toBe(before + 1);
        genOf.set(id, table.gen(id));
      } else {
        expect(idOf.get(name), `step ${step}: ${name} found, same id`).toBe(id);
      }
      idOf.set(name, id);
      if (dropLag === 0) expect(id, `step ${step}: id of ${name}`).toBe(t.id);
      held.push({ name, field });
    } else {
      const k = rand() % held.length;
      const ref = held[k]!;
      held[k] = held[held.length - 1]!;
      held.pop();
      const t = reg.find(ref.name) as ModelTube;
      t[ref.field]--;
      const freedBefore = freed.length;
      reg.release(t);
      const id = idOf.get(ref.name)!;
      const gen = table.gen(id);
      const didFree = table.release(id, ref.field);
      expect(didFree, `step ${step}: release of ${ref.name}.${ref.field} frees as ModelRegistry does`).toBe(
        freed.length > freedBefore,
      );
      if (didFree) {
        tableFreed.push(ref.name);
        idOf.delete(ref.name);
        expect(table.isLive(id, gen)).toBe(false);
        expect(table.find(ref.name)).toBe(-1);
        expect(table.name(id)).toBeUndefined();
        pendingDrops.push(id);
      }
    }
    while (pendingDrops.length > dropLag) table.dropped(pendingDrops.shift()!);

    // The same tubes in the same list-tubes order, with the same shards and counts.
    expect(table.listNames(), `step ${step}: list-tubes order`).toEqual(reg.all.items.map((t) => t.name));
    const ids = table.list();
    expect(ids.length).toBe(reg.count);
    expect(table.count).toBe(reg.count);
    for (let p = 0; p < ids.length; p++) {
      const t = reg.all.items[p]!;
      const id = ids[p]!;
      if (dropLag === 0) expect(id).toBe(t.id);
      expect(table.name(id)).toBe(t.name);
      expect(table.find(t.name)).toBe(id);
      expect(table.shard(id)).toBe(t.shard);
      expect(table.counts(id)).toEqual({ using: t.using, watching: t.watching, jobs: t.jobs, pinned: t.pinned ? 1 : 0 });
    }
    if (step % 97 === 0) table.invariants();
  }
  expect(tableCreated).toEqual(created);
  expect(tableFreed).toEqual(freed);
  expect(table.dropping).toBe(pendingDrops.length);
  table.invariants();
}

describe('TubeTable against the model registry (one thread)', () => {
  for (const seed of [1, 2, 0xbeef]) {
    it(`seed ${seed}: same ids, order, shards, counts, creations and frees (drops at once)`, () => {
      runModel(seed, 3000, 24, 4, 0);
    });
    it(`seed ${seed}: same names, order and counts with drops lagging`, () => {
      runModel(seed, 3000, 24, 3, 5);
    });
  }

  // Names of every block size, so freed blocks are reused by other names (and compacted).
  const mixedName = (k: number) => `m${k}-${'x'.repeat((k * 37) % (TUBE_NAME_MAX_BYTES - 4))}`;
  for (const seed of [3, 4]) {
    it(`seed ${seed}: the same with names of 3..200 bytes (name blocks of every size reused)`, () => {
      runModel(seed, 3000, 24, 3, seed === 3 ? 0 : 5, mixedName);
    });
  }

  it('keeps beanstalkd order: removal moves the last tube into the hole', () => {
    const table = TubeTable.create({ shards: 1 });
    const ids = ['a', 'b', 'c', 'd', 'e'].map((n) => table.acquire(n, 'watching'));
    expect(table.release(ids[1]!, 'watching')).toBe(true); // b: e moves into its place
    expect(table.listNames()).toEqual(['a', 'e', 'c', 'd']);
    expect(table.release(ids[4]!, 'watching')).toBe(true); // e: d moves
    expect(table.listNames()).toEqual(['a', 'd', 'c']);
    table.acquire('f', 'using');
    expect(table.listNames()).toEqual(['a', 'd', 'c', 'f']);
    expect(table.release(ids[3]!, 'watching')).toBe(true); // d: f moves
    expect(table.listNames()).toEqual(['a', 'f', 'c']);
    table.invariants();
  });
});

describe('TubeTable: references, generations, two-phase reuse', () => {
  it('a tube lives while any count is held; pinned keeps it without users', () => {
    const table = TubeTable.create({ shards: 2 });
    const id = table.acquire('x', 'using');
    expect(table.created).toBe(true);
    expect(table.acquire('x', 'watching')).toBe(id);
    expect(table.created).toBe(false);
    table.retain(id, 'jobs');
    expect(table.counts(id)).toEqual({ using: 1, watching: 1, jobs: 1, pinned: 0 });
    expect(table.release(id, 'using')).toBe(false);
    expect(table.release(id, 'jobs')).toBe(false);
    table.retain(id, 'pinned');
    expect(table.release(id, 'watching')).toBe(false);
    expect(table.find('x')).toBe(id);
    table.invariants();
    expect(table.release(id, 'pinned')).toBe(true);
    expect(table.find('x')).toBe(-1);
    expect(table.count).toBe(0);
    expect(() => table.release(id, 'pinned')).toThrow(/not live/);
    expect(() => table.retain(id, 'using')).toThrow(/not held/);
    table.invariants();
  });

  it('refuses a release of a count nobody holds', () => {
    const table = TubeTable.create({ shards: 1 });
    const id = table.acquire('x', 'using');
    expect(() => table.release(id, 'jobs')).toThrow(/no jobs/);
    expect(table.counts(id).jobs).toBe(0);
    expect(() => table.release(99, 'jobs')).toThrow(RangeError);
    table.invariants();
  });

  it('a freed id is neither findable nor reused until dropped(); then reused with a new generation', () => {
    const table = TubeTable.create({ shards: 1 });
    const a = table.acquire('a', 'using');
    const b = table.acquire('b', 'using');
    const genA = table.gen(a);
    expect(genA).toBe(1);
    expect(table.release(a, 'using')).toBe(true);
    expect(table.dropping).toBe(1);
    expect(table.find('a')).toBe(-1);
    expect(() => table.dropped(b)).toThrow(/not freed/);
    // Acquiring 'a' again while the old id is dropping makes a fresh tube in a fresh slot.
    const a2 = table.acquire('a', 'using');
    expect(table.created).toBe(true);
    expect(a2).not.toBe(a);
    expect(a2).not.toBe(b);
    const c = table.acquire('c', 'using');
    expect(c).not.toBe(a);
    table.invariants();
    table.dropped(a);
    expect(() => table.dropped(a)).toThrow(/not freed/);
    expect(table.dropping).toBe(0);
    const d = table.acquire('d', 'watching');
    expect(d).toBe(a); // reused now
    expect(table.gen(d)).toBe(genA + 1);
    expect(table.isLive(a, genA)).toBe(false);
    expect(table.isLive(d, genA + 1)).toBe(true);
    expect(table.name(d)).toBe('d');
    table.invariants();
  });

  it('the last freed id is reused first (as ModelRegistry)', () => {
    const table = TubeTable.create({ shards: 1 });
    const ids = ['a', 'b', 'c'].map((n) => table.acquire(n, 'using'));
    for (const id of ids) {
      expect(table.release(id, 'using')).toBe(true);
      table.dropped(id);
    }
    expect(table.acquire('x', 'using')).toBe(ids[2]);
    expect(table.acquire('y', 'using')).toBe(ids[1]);
    expect(table.acquire('z', 'using')).toBe(ids[0]);
    expect(table.acquire('w', 'using')).toBe(3);
    table.invariants();
  });
});

describe('TubeTable: names and size', () => {
  it('stores 200-byte names of every beanstalkd name character, and refuses longer or empty ones', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/;.$_()-';
    const table = TubeTable.create({ shards: 5 });
    const names: string[] = [];
    for (let k = 0; k < alphabet.length; k++) {
      let s = '';
      for (let i = 0; i < TUBE_NAME_MAX_BYTES; i++) s += alphabet[(i * 7 + k) % alphabet.length];
      names.push(s);
    }
    // Names equal but for the last byte, and a prefix of another.
    names.push('a'.repeat(199) + 'b', 'a'.repeat(200), 'a'.repeat(199), 'a');
    const ids = names.map((n) => table.acquire(n, 'using'));
    expect(new Set(ids).size).toBe(names.length);
    for (let i = 0; i < names.length; i++) {
      expect(table.name(ids[i]!)).toBe(names[i]);
      expect(table.find(names[i]!)).toBe(ids[i]);
      expect(table.shard(ids[i]!)).toBe(shardOf(names[i]!, 5));
    }
    expect(table.listNames()).toEqual(names);
    expect(() => table.acquire('a'.repeat(201), 'using')).toThrow(RangeError);
    expect(() => table.acquire('', 'using')).toThrow(RangeError);
    expect(() => table.find('\u0100')).toThrow(RangeError);
    table.invariants();
  });

  it('holds 50,000 tubes, growing from a small start, and frees them all', () => {
    const N = 50_000;
    const table = TubeTable.create({ shards: 7, initialTubes: 16 });
    const other = TubeTable.attach(table.shared); // sees the growth without re-attaching
    const reg = new ModelRegistry(7);
    for (let i = 0; i < N; i++) {
      const name = `tube-${i}-${'x'.repeat(i % 150)}`;
      expect(table.acquire(name, 'watching')).toBe(i);
      reg.findOrMake(name).watching++;
    }
    expect(table.count).toBe(N);
    expect(table.capacity).toBe(65536);
    expect(table.shared.table.byteLength).toBe(256 + 65536 * 64); // header + 64-byte records
    table.invariants();
    for (const i of [0, 1, 4095, 4096, 33333, N - 1]) {
      const name = `tube-${i}-${'x'.repeat(i % 150)}`;
      expect(other.find(name)).toBe(i);
      expect(other.name(i)).toBe(name);
    }
    // Free every third tube in a scrambled order, then compare the order with ModelRegistry's.
    const rand = mulberry32u32(50_000);
    const order = Array.from({ length: N }, (_, i) => i).filter((i) => i % 3 === 0);
    for (let i = order.length - 1; i > 0; i--) {
      const j = rand() % (i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const id of order) {
      const name = table.name(id)!;
      expect(table.release(id, 'watching')).toBe(true);
      table.dropped(id);
      const t = reg.find(name)!;
      t.watching--;
      reg.release(t);
    }
    expect(table.listNames()).toEqual(reg.all.items.map((t) => t.name));
    other.invariants();
    for (const id of table.list()) expect(table.release(id, 'watching')).toBe(true);
    expect(table.count).toBe(0);
    expect(table.dropping).toBe(N - order.length);
    table.invariants();
  });

  it('says when it is full', () => {
    const table = TubeTable.create({ shards: 1, maxTubes: 8, initialTubes: 2 });
    for (let i = 0; i < 8; i++) table.acquire(`t${i}`, 'using');
    expect(() => table.acquire('t8', 'using')).toThrow(/full/);
    table.invariants();
    expect(table.release(3, 'using')).toBe(true);
    expect(() => table.acquire('t8', 'using')).toThrow(/full/); // id 3 is not dropped yet
    table.dropped(3);
    expect(table.acquire('t8', 'using')).toBe(3);
    table.invariants();
  });
});

describe('TubeTable: the name heap', () => {
  it('keeps a name in whole 16-byte granules with a 4-byte header: "tube-12345" in 16 bytes, 200 bytes in 208', () => {
    expect(NAME_GRANULE_BYTES).toBe(16);
    expect(NAME_BLOCK_MAX_BYTES).toBe(208);
    expect(NAME_HEAP_BYTES_PER_TUBE).toBe(NAME_BLOCK_MAX_BYTES);
    const table = TubeTable.create({ shards: 1 });
    expect(table.shared.names.byteLength).toBe(NAME_HEAP_INITIAL_BYTES);
    expect(table.shared.names.maxByteLength).toBe((1 << 20) * NAME_HEAP_BYTES_PER_TUBE); // default maxTubes
    expect(TubeTable.create({ shards: 1, maxTubes: 3 }).shared.names.maxByteLength).toBe(4 * NAME_HEAP_BYTES_PER_TUBE);
    let used = 0;
    for (const [len, block] of [[10, 16], [12, 16], [13, 32], [28, 32], [29, 48], [200, 208], [1, 16]] as const) {
      table.acquire('n'.repeat(len - 1) + String(len % 10), 'using');
      used += block;
      expect(table.nameHeap.usedBytes, `a ${len}-byte name`).toBe(used);
    }
    table.invariants();
  });

  it('reuses a freed block for a new name of its size, and lowers the top when the last block goes', () => {
    const table = TubeTable.create({ shards: 1 });
    const a = table.acquire('a'.repeat(40), 'using'); // 48 bytes
    const b = table.acquire('b'.repeat(10), 'using'); // 16
    table.acquire('c'.repeat(40), 'using'); // 48
    expect(table.nameHeap).toMatchObject({ usedBytes: 112, freeBytes: 0 });
    expect(table.release(a, 'using')).toBe(true);
    expect(table.nameHeap).toMatchObject({ usedBytes: 112, freeBytes: 48 });
    // 'd...' takes a's block while a's slot is still dropping (its id is not reusable yet).
    const d = table.acquire('d'.repeat(35), 'using');
    expect(d).not.toBe(a);
    expect(table.nameHeap).toMatchObject({ usedBytes: 112, freeBytes: 0 });
    expect(table.name(d)).toBe('d'.repeat(35));
    expect(table.name(a)).toBeUndefined();
    table.dropped(a);
    const e = table.acquire('e', 'using'); // reuses slot a, new block at the top
    expect(e).toBe(a);
    expect(table.nameHeap.usedBytes).toBe(128);
    expect(table.release(e, 'using')).toBe(true); // the top block: the top comes down
    expect(table.nameHeap).toMatchObject({ usedBytes: 112, freeBytes: 0 });
    expect([b, d].map((id) => table.name(id))).toEqual(['b'.repeat(10), 'd'.repeat(35)]);
    table.invariants();
  });

  it('compactNames slides the names above a hole down, and does nothing without holes', () => {
    const table = TubeTable.create({ shards: 1 });
    const a = table.acquire('a'.repeat(40), 'using'); // 48 bytes
    const b = table.acquire('b'.repeat(10), 'using'); // 16
    const c = table.acquire('c'.repeat(40), 'using'); // 48
    expect(table.compactNames()).toBe(false);
    expect(table.nameHeap).toMatchObject({ compactions: 0, moved: 0 });
    expect(table.release(a, 'using')).toBe(true);
    expect(table.compactNames()).toBe(true);
    expect(table.nameHeap).toMatchObject({ usedBytes: 64, freeBytes: 0, compactions: 1, moved: 2 });
    expect([b, c].map((id) => table.name(id))).toEqual(['b'.repeat(10), 'c'.repeat(40)]);
    table.invariants();
  });

  it('mixed long and short names freed and made again under other names: every name read is its tube\'s', () => {
    const rand = mulberry32u32(0x5eed);
    const table = TubeTable.create({ shards: 4, initialTubes: 4 });
    const live = new Map<number, string>(); // id -> name
    const pending: number[] = [];
    let serial = 0;
    let liveBytes = 0;
    let peakLiveBytes = 0;
    for (let step = 0; step < 20_000; step++) {
      if (live.size < 20 || (live.size < 300 && rand() % 2 === 0)) {
        // Lengths drift with the step, so the sizes freed are not the sizes next wanted.
        const len = 1 + ((rand() % 60) + Math.floor(step / 500) * 37) % TUBE_NAME_MAX_BYTES;
        const name = `${serial++}-`.padEnd(len, String.fromCharCode(97 + (serial % 26))).slice(-len);
        if (table.find(name) >= 0) continue;
        const id = table.acquire(name, 'watching');
        expect(table.created).toBe(true);
        live.set(id, name);
        liveBytes += Math.ceil((4 + len) / 16) * 16;
        peakLiveBytes = Math.max(peakLiveBytes, liveBytes);
      } else {
        const ids = [...live.keys()];
        const id = ids[rand() % ids.length]!;
        const name = live.get(id)!;
        expect(table.release(id, 'watching')).toBe(true);
        live.delete(id);
        liveBytes -= Math.ceil((4 + name.length) / 16) * 16;
        pending.push(id);
        if (pending.length > 3) table.dropped(pending.shift()!);
      }
      if (step % 7 === 0) {
        for (const [id, name] of live) {
          expect(table.name(id), `step ${step}: tube ${id}`).toBe(name);
          expect(table.find(name)).toBe(id);
        }
        for (const id of pending) expect(table.name(id)).toBeUndefined();
      }
      if (step % 997 === 0) table.invariants();
    }
    table.invariants();
    const heap = table.nameHeap;
    expect(heap.compactions).toBeGreaterThan(0);
    // The heap holds about what the live names needed at most: never more than twice (plus the
    // block that asked) before a compaction, doubling when it grows.
    expect(heap.sizeBytes).toBeLessThanOrEqual(Math.max(NAME_HEAP_INITIAL_BYTES, 4 * (peakLiveBytes + NAME_BLOCK_MAX_BYTES)));
  });

  it('at maxTubes, names of every size in turn never fill the heap (compaction makes room)', () => {
    const maxTubes = 8;
    const table = TubeTable.create({ shards: 1, maxTubes, initialTubes: 2 });
    for (let size = 1; size <= NAME_BLOCK_MAX_BYTES / NAME_GRANULE_BYTES; size++) {
      const len = Math.min(TUBE_NAME_MAX_BYTES, size * NAME_GRANULE_BYTES - 4);
      // The first tube stays (so its block is not at the top when the others go).
      const ids = Array.from({ length: size === 1 ? maxTubes : maxTubes - 1 }, (_, i) =>
        table.acquire(`${size}.${i}.`.padEnd(len, 'z'), 'using'),
      );
      for (const [i, id] of ids.entries()) {
        expect(table.name(id)).toBe(`${size}.${i}.`.padEnd(len, 'z'));
        if (size === 1 && i === 0) continue;
        expect(table.release(id, 'using')).toBe(true);
        table.dropped(id);
      }
      table.invariants();
    }
    expect(table.shared.names.byteLength).toBeLessThanOrEqual(maxTubes * NAME_HEAP_BYTES_PER_TUBE);
    expect(table.nameHeap.compactions).toBeGreaterThan(0);
    // The tubes left (all but the first) with the longest names, then one too many.
    for (let i = 1; i < maxTubes; i++) table.acquire(`last ${i}`.padEnd(TUBE_NAME_MAX_BYTES, '!'), 'using');
    table.invariants();
    expect(() => table.acquire('one too many', 'using')).toThrow(/TubeTable: full/); // the table's limit, not the heap's
  });
});

describe('TubeTable: attach and invariants', () => {
  it('attach refuses memory that is not a table', () => {
    const sab = (n: number) => new SharedArrayBuffer(n, { maxByteLength: n * 4 });
    const t = TubeTable.create({ shards: 3 });
    const bad: unknown[] = [
      new SharedArrayBuffer(256),
      { table: new SharedArrayBuffer(256), names: t.shared.names },
      { table: sab(256), names: sab(1024) }, // no magic
      { table: t.shared.table }, // no name heap
      { table: t.shared.table, names: new SharedArrayBuffer(1024) }, // not growable
      { table: t.shared.table, names: TubeTable.create({ shards: 3, maxTubes: 16 }).shared.names }, // another table's
    ];
    for (const b of bad) expect(() => TubeTable.attach(b as TubeTableShared)).toThrow(TypeError);
    expect(TubeTable.attach(t.shared).shards).toBe(3);
  });

  it('invariants() catches a damaged list, index, count, free stack or name heap', () => {
    // Int32 offsets: header 64 ints, records 16 ints; the heap's blocks from byte 0 in make order.
    const R = (id: number, field: number) => 64 + id * 16 + field;
    const damage: [string, (i32: Int32Array, names: Uint8Array) => void][] = [
      ['list entry', (i32) => (i32[R(1, 12)] = 0)], // list[1] = id 0: a duplicate
      ['bucket', (i32) => {
        for (let b = 0; b < 64; b++) i32[R(b, 13)] = 0; // the index forgets everything
      }],
      ['refs', (i32) => (i32[R(2, 3)] += 1)],
      ['count', (i32) => (i32[19] -= 1)],
      ['state', (i32) => (i32[R(0, 0)] = 2)],
      ['name', (i32, names) => (names[i32[R(1, 14)]! + 4] = 'a'.charCodeAt(0))],
      ['name block', (i32) => (i32[R(1, 14)] = i32[R(0, 14)]!)], // two tubes, one block
      ['block header', (i32, names) => (names[i32[R(2, 14)]!] = 9)], // says tube 8
      ['heap top', (i32) => (i32[25] += 16)],
      ['free bytes', (i32) => (i32[26] += 16)],
      ['free list', (i32) => (i32[32] = 0)], // d's freed block (one granule) is on no list
    ];
    for (const [what, hurt] of damage) {
      const table = TubeTable.create({ shards: 2 });
      for (const n of ['a', 'b', 'c', 'd', 'e']) table.acquire(n, 'using');
      expect(table.release(table.find('d'), 'using')).toBe(true);
      table.invariants();
      hurt(new Int32Array(table.shared.table), new Uint8Array(table.shared.names));
      expect(() => table.invariants(), what).toThrow(/TubeTable invariants/);
    }
  });
});
