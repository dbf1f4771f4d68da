// The main thread's registry of tubes: names, which shard owns each, who uses and watches them,
// which connections wait on them. The jobs themselves live on the shards; the registry only
// counts them so a tube disappears exactly when beanstalkd's would (no user, no watcher, no job).

import type { FanAttempt, FanQueue } from './fanin.ts';
import { shardOf } from './hash.ts';

/**
 * beanstalkd's multiset (its `Ms`): append at the end, removal moves the last item into the hole, and
 * `take` walks a cursor. list-tubes, list-tubes-watched and the order in which waiting
 * connections get jobs all follow from these rules, so we keep them exactly.
 */
export class Multiset<T> {
  readonly items: T[] = [];
  private last = 0;

  get len(): number {
    return this.items.length;
  }

  append(item: T): void {
    this.items.push(item);
  }

  private deleteAt(i: number): void {
    const lastItem = this.items.pop() as T;
    if (i < this.items.length) this.items[i] = lastItem;
  }

  remove(item: T): boolean {
    const i = this.items.indexOf(item);
    if (i === -1) return false;
    this.deleteAt(i);
    return true;
  }

  contains(item: T): boolean {
    return this.items.indexOf(item) !== -1;
  }

  /** beanstalkd's ms_clear: removes item 0 until empty (so the last item moves to the front each time). */
  clear(onRemove: (item: T) => void): void {
    while (this.items.length > 0) {
      const item = this.items[0];
      this.deleteAt(0);
      onRemove(item);
    }
    this.last = 0;
  }

  take(): T | undefined {
    if (this.items.length === 0) return undefined;
    this.last = this.last % this.items.length;
    const item = this.items[this.last];
    this.deleteAt(this.last);
    this.last++;
    return item;
  }
}

export class Tube implements FanQueue {
  readonly name: string;
  readonly id: number;
  readonly shard: number;
  using = 0;
  watching = 0;
  /** Live jobs in the tube: +1 when a put is sent, -1 when a delete succeeds. */
  jobs = 0;
  /** Reserves blocked waiting on this tube (beanstalkd's waiting_conns). */
  readonly waiting = new Multiset<FanAttempt<FanQueue>>();
  /** When the tube last signalled it may have ready jobs (the fan-in's epoch). */
  readyEpoch = 0;
  /** The default tube is never freed (beanstalkd holds a reference to it for ever). */
  pinned = false;
  /** ReadyCounts' lower bound of its reservable ready jobs, valid under countEpoch. */
  readyCount = 0;
  countEpoch = 0;
  /** The end of its last pause (ms), as the main thread sent it. */
  pausedUntilMs = 0;
  /** Reserves in flight on it that hold no ReadyCounts count of it. */
  blindReserves = 0;

  constructor(name: string, id: number, shard: number) {
    this.name = name;
    this.id = id;
    this.shard = shard;
  }

  get unreferenced(): boolean {
    return !this.pinned && this.using === 0 && this.watching === 0 && this.jobs === 0;
  }
}

export class TubeRegistry {
  readonly shards: number;
  /** All tubes in beanstalkd's order (list-tubes). */
  readonly all = new Multiset<Tube>();
  private readonly byName = new Map<string, Tube>();
  private readonly byId: (Tube | undefined)[] = [];
  private readonly freeIds: number[] = [];
  /** Called when a tube is freed, so its shard can forget it (stats, pause). */
  onFree: (t: Tube) => void = () => {};
  /** Called when a tube is made, so its shard learns its name. */
  onCreate: (t: Tube) => void = () => {};

  constructor(shards: number) {
    this.shards = shards;
  }

  find(name: string): Tube | undefined {
    return this.byName.get(name);
  }

  get(id: number): Tube | undefined {
    return this.byId[id];
  }

  findOrMake(name: string): Tube {
    let t = this.byName.get(name);
    if (t !== undefined) return t;
    const id = this.freeIds.length > 0 ? (this.freeIds.pop() as number) : this.byId.length;
    t = new Tube(name, id, shardOf(name, this.shards));
    this.byId[id] = t;
    this.byName.set(name, t);
    this.all.append(t);
    this.onCreate(t);
    return t;
  }

  /** Frees the tube if nothing refers to it any more. */
  release(t: Tube): void {
    if (!t.unreferenced || this.byId[t.id] !== t) return;
    this.all.remove(t);
    this.byName.delete(t.name);
    this.byId[t.id] = undefined;
    this.onFree(t);
    // The id is reused only after the shard has seen the drop: rings are FIFO, so any later
    // request naming this id reaches the shard after the drop.
    this.freeIds.push(t.id);
  }

  get count(): number {
    return this.all.len;
  }
}
