// The worker side of tubetable-threads.test.ts: run as a worker (workerData.kind ===
// 'tubetable-worker') it attaches the shared TubeTable and hammers acquire / retain / release /
// dropped on a few names every thread uses and on names of its own, checking what it can see
// from one thread as it goes, then reports the references it still holds, every tube it freed
// and the name of every tube it made. As a reader (kind 'tubetable-reader') it reads names of
// random slots without the lock until told to stop, and reports which name it read for which
// (slot, generation): the test checks each against the name that tube was made with.

import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { TubeTable, type TubeCountField, type TubeTableShared } from '../../src/route/tubetable.ts';
import { mulberry32u32 } from '../support/prng.ts';

export interface TubeTableWorkerData {
  kind: 'tubetable-worker';
  shared: TubeTableShared;
  /** Int32 [0]: threads arrived (a start barrier, so they all run at once); [1]: readers, stop. */
  go: SharedArrayBuffer;
  threads: number;
  index: number;
  seed: number;
  ops: number;
  sharedNames: number;
  ownNames: number;
}

export interface HeldTube {
  name: string;
  id: number;
  gen: number;
  using: number;
  watching: number;
  jobs: number;
  pinned: number;
}

export interface TubeTableWorkerResult {
  held: HeldTube[];
  /** `${id}:${gen}` of every tube this thread freed. */
  freed: string[];
  created: number;
  sharedCreated: number;
  sharedFreed: number;
  reuses: number;
  staleReads: number;
  /** [`${id}:${gen}`, name] of every tube this thread made. */
  made: [string, string][];
}

export interface TubeTableReaderData {
  kind: 'tubetable-reader';
  shared: TubeTableShared;
  go: SharedArrayBuffer;
  threads: number;
  seed: number;
}

export interface TubeTableReaderResult {
  reads: number;
  /** [`${id}:${gen}`, name]: name(id) read between two gen(id) loads that both gave gen. */
  named: [string, string][];
  /** [id, gen before, gen after, name]: the same where the generation moved meanwhile. */
  spanned: [number, number, number, string][];
}

const FIELDS: readonly TubeCountField[] = ['using', 'watching', 'jobs', 'using', 'watching', 'jobs', 'pinned'];

export function sharedName(i: number): string {
  return `shared-${i}`;
}

/**
 * A thread's own name i in `epoch`: 14..200 bytes, its length moving with the epoch, so blocks
 * freed in one epoch are mostly of sizes the next does not ask for (name heap compactions).
 */
export function ownName(thread: number, i: number, epoch: number): string {
  return `own-${thread}-${i}-${'o'.repeat((i * 13 + epoch * 29) % 180)}`;
}

/** Whether `name` is whole: 'default', a shared name or some thread's own name. */
export function isKnownName(name: string): boolean {
  return name === 'default' || /^shared-\d+$/.test(name) || /^own-\d+-\d+-o*$/.test(name);
}

/** Own names move to other lengths every this many operations. */
const OPS_PER_EPOCH = 3000;

function run(data: TubeTableWorkerData): TubeTableWorkerResult {
  const table = TubeTable.attach(data.shared);
  const rand = mulberry32u32(data.seed);
  const fail = (msg: string): never => {
    throw new Error(`thread ${data.index}: ${msg}`);
  };
  const held = new Map<string, HeldTube>();
  const refs: { name: string; field: TubeCountField }[] = [];
  const freed: string[] = [];
  const freedSet = new Set<string>();
  const pending: { id: number; due: number }[] = [];
  const pendingIds = new Set<number>();
  const lastGen = new Map<number, number>();
  let created = 0;
  let sharedCreated = 0;
  let sharedFreed = 0;
  let reuses = 0;
  let staleReads = 0;
  const made: [string, string][] = [];

  const go = new Int32Array(data.go);
  Atomics.add(go, 0, 1);
  while (Atomics.load(go, 0) < data.threads) Atomics.wait(go, 0, Atomics.load(go, 0), 1);

  for (let op = 0; op < data.ops; op++) {
    while (pending.length > 0 && pending[0]!.due <= op) {
      const { id } = pending.shift()!;
      pendingIds.delete(id);
      table.dropped(id);
    }
    // Hover around a few references each, so shared tubes often reach zero and are made again.
    const r = refs.length === 0 ? 0 : refs.length > 5 ? 60 : rand() % 100;
    if (r < 50) {
      const isShared = rand() % 2 === 0;
      const name = isShared
        ? sharedName(rand() % data.sharedNames)
        : ownName(data.index, rand() % data.ownNames, Math.floor(op / OPS_PER_EPOCH));
      const field = FIELDS[rand() % FIELDS.length]!;
      const id = table.acquire(name, field);
      const wasCreated = table.created;
      const gen = table.gen(id); // stable: this thread holds a reference now
      const mine = held.get(name);
      if (mine !== undefined) {
        if (mine.id !== id || mine.gen !== gen) fail(`${name} held as ${mine.id}:${mine.gen}, acquired ${id}:${gen}`);
        if (wasCreated) fail(`${name} held, yet acquire created it`);
      } else {
        if (freedSet.has(`${id}:${gen}`)) fail(`acquire of ${name} revived freed tube ${id}:${gen}`);
        if (!isShared && !wasCreated) fail(`own tube ${name} found though this thread held none of it`);
        const h: HeldTube = { name, id, gen, using: 0, watching: 0, jobs: 0, pinned: 0 };
        held.set(name, h);
      }
      if (pendingIds.has(id)) fail(`id ${id} reused before dropped()`);
      const before = lastGen.get(id);
      if (before !== undefined) {
        if (gen < before) fail(`slot ${id}: generation went back from ${before} to ${gen}`);
        if (wasCreated && gen === before) fail(`slot ${id} reused with the same generation ${gen}`);
        if (wasCreated) reuses++;
      }
      lastGen.set(id, gen);
      if (wasCreated) {
        made.push([`${id}:${gen}`, name]);
        created++;
        if (isShared) sharedCreated++;
      }
      if (table.name(id) !== name) fail(`name(${id}) is ${table.name(id)}, not ${name}`);
      held.get(name)![field]++;
      refs.push({ name, field });
    } else if (r < 54) {
      // retain: another count on a tube this thread holds, without a lookup.
      const ref = refs[rand() % refs.length]!;
      const h = held.get(ref.name)!;
      const field = FIELDS[rand() % FIELDS.length]!;
      table.retain(h.id, field);
      h[field]++;
      refs.push({ name: ref.name, field });
    } else {
      const k = rand() % refs.length;
      const ref = refs[k]!;
      refs[k] = refs[refs.length - 1]!;
      refs.pop();
      const h = held.get(ref.name)!;
      h[ref.field]--;
      const none = h.using + h.watching + h.jobs + h.pinned === 0;
      const didFree = table.release(h.id, ref.field);
      if (none) held.delete(ref.name);
      if (didFree) {
        if (!none) fail(`release of ${ref.name}.${ref.field} freed it while this thread holds more`);
        const key = `${h.id}:${h.gen}`;
        freed.push(key);
        freedSet.add(key);
        if (table.isLive(h.id, h.gen)) fail(`${key} freed but still live`);
        if (ref.name.startsWith('shared-')) sharedFreed++;
        pending.push({ id: h.id, due: op + (rand() % 8) });
        pendingIds.add(h.id);
      } else if (none && !ref.name.startsWith('shared-')) {
        fail(`last release of own tube ${ref.name} did not free it`);
      }
    }
    if (op % 4 === 0) {
      // A stale id's name: gone (undefined) or some tube's whole name, never a torn mix of two.
      const id = rand() % table.capacity;
      let name: string | undefined;
      try {
        name = table.name(id);
      } catch (err) {
        if (!(err instanceof RangeError)) throw err; // an id above the high-water mark
      }
      if (name !== undefined && !isKnownName(name)) fail(`name(${id}) is ${JSON.stringify(name)}, no tube's name`);
      staleReads++;
    }
    if (op % 2000 === 1999) {
      table.invariants(false);
      const ids = table.list();
      if (new Set(ids).size !== ids.length) fail('list() holds an id twice');
      const live = new Set(ids);
      for (const h of held.values()) {
        if (!live.has(h.id)) fail(`held tube ${h.name} (${h.id}) missing from list()`);
      }
    }
  }
  for (const { id } of pending) table.dropped(id);
  return { held: [...held.values()], freed, created, sharedCreated, sharedFreed, reuses, staleReads, made };
}

function read(data: TubeTableReaderData): TubeTableReaderResult {
  const table = TubeTable.attach(data.shared);
  const rand = mulberry32u32(data.seed);
  const go = new Int32Array(data.go);
  Atomics.add(go, 0, 1);
  while (Atomics.load(go, 0) < data.threads) Atomics.wait(go, 0, Atomics.load(go, 0), 1);
  const named = new Map<string, string>();
  const spanned: [number, number, number, string][] = [];
  let reads = 0;
  while (Atomics.load(go, 1) === 0) {
    const hwm = table.highWater;
    if (hwm === 0) continue;
    const id = rand() % hwm;
    const before = table.gen(id);
    const name = table.name(id);
    const after = table.gen(id);
    reads++;
    if (name === undefined) continue;
    if (before === after) {
      const key = `${id}:${before}`;
      const seen = named.get(key);
      if (seen !== undefined && seen !== name) throw new Error(`reader: tube ${key} read as ${seen}, then as ${name}`);
      named.set(key, name);
    } else if (spanned.length < 10_000) {
      spanned.push([id, before, after, name]);
    }
  }
  return { reads, named: [...named], spanned };
}

const kind = isMainThread ? undefined : (workerData as { kind?: unknown } | null)?.kind;
if (kind === 'tubetable-worker') parentPort!.postMessage(run(workerData as TubeTableWorkerData));
if (kind === 'tubetable-reader') parentPort!.postMessage(read(workerData as TubeTableReaderData));
