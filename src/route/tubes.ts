// The tube registry as one thread sees it: names, which shard owns each, who uses and watches
// them. What every thread shares (name <-> id, shard, the counts that decide a tube's life,
// list-tubes order, id reuse) lives in a TubeTable (./tubetable.ts, SharedArrayBuffer memory;
// `shared` hands it to another thread); this thread keeps a Tube object per live tube it has
// seen, for its name and shard. The jobs themselves live on the shards; the table only counts
// them so a tube disappears exactly when beanstalkd's would (no user, no watcher, no job, no pin).

import { NO_WAITERS, type FanAttempt, type FanQueue, type WaitList } from './fanin.ts';
import { Multiset } from '../shared/multiset.ts';
import { TubeTable, type TubeCountField, type TubeCounts, type TubeTableShared } from './tubetable.ts';

export { Multiset };
export type { TubeCountField, TubeCounts };

/** This thread's view of live tube `id` (its generation `gen` in the table). */
export class Tube implements FanQueue {
  readonly name: string;
  readonly id: number;
  readonly shard: number;
  /** The slot's generation when this tube was made (TubeTable.gen): tells a reused id. */
  readonly gen: number;
  /** None: a reserve over several shards waits in the shards (Reserves.park), not here. */
  readonly waiting: WaitList<FanAttempt<FanQueue>> = NO_WAITERS;
  /** When the tube last signalled it may have ready jobs (the fan-in's epoch; never, for a tube: see `waiting`). */
  readyEpoch = 0;
  private readonly table: TubeTable;

  constructor(table: TubeTable, id: number, gen: number, name: string, shard: number) {
    this.table = table;
    this.id = id;
    this.gen = gen;
    this.name = name;
    this.shard = shard;
  }

  /** Connections using it (every thread's), read from the table; 0 once the tube is freed. */
  get using(): number {
    return this.count('using');
  }

  /** Connections watching it (every thread's). */
  get watching(): number {
    return this.count('watching');
  }

  /** Live jobs in it: +1 when a put is sent, -1 when a delete succeeds. */
  get jobs(): number {
    return this.count('jobs');
  }

  /** Pins: the default tube's (beanstalkd holds it for ever), and one per move running on it. */
  get pinned(): number {
    return this.count('pinned');
  }

  /** Whether the table still holds this tube (freed: false, and its counts read 0). */
  get live(): boolean {
    return this.table.isLive(this.id, this.gen);
  }

  /** Its four counts, read from the table one after another; all 0 once the tube is freed. */
  counts(): TubeCounts {
    // A freed tube's counts are all 0 in its slot until the id is reused (a new generation).
    return this.table.gen(this.id) === this.gen ? this.table.counts(this.id) : { using: 0, watching: 0, jobs: 0, pinned: 0 };
  }

  private count(field: TubeCountField): number {
    return this.counts()[field];
  }
}

export class TubeRegistry {
  /** The shared table (TubeTable.attach(registry.shared) on another thread). */
  readonly table: TubeTable;
  readonly shards: number;
  /** This thread's views of live tubes, by id. */
  private readonly byId: (Tube | undefined)[] = [];
  /** Called when this thread made a tube, so its shard learns its name. */
  onCreate: (t: Tube) => void = () => {};
  /**
   * Called when this thread freed a tube, so its shard forgets it (stats, pause); once the shard
   * has done so, call dropped(t.id): only then may the id be reused.
   */
  onFree: (t: Tube) => void = () => {};

  /** `table`: the shared table, or a shard count to make one (tests). */
  constructor(table: TubeTable | number) {
    this.table = typeof table === 'number' ? TubeTable.create({ shards: table }) : table;
    this.shards = this.table.shards;
  }

  /** The table's memory, for another thread to attach to. */
  get shared(): TubeTableShared {
    return this.table.shared;
  }

  /** Live tube `name`, or undefined. Takes no reference. */
  find(name: string): Tube | undefined {
    const id = this.table.find(name);
    return id < 0 ? undefined : this.view(id);
  }

  /** Live tube `id`, or undefined. */
  get(id: number): Tube | undefined {
    const t = this.byId[id];
    if (t !== undefined && this.table.isLive(id, t.gen)) return t;
    return id >= 0 && id < this.table.highWater ? this.view(id) : undefined;
  }

  /** Takes a `field` reference to tube `name`, making the tube if there is none (onCreate). */
  acquire(name: string, field: TubeCountField): Tube {
    const id = this.table.acquire(name, field);
    if (!this.table.created) return this.view(id) as Tube;
    const t = new Tube(this.table, id, this.table.gen(id), name, this.table.shard(id));
    this.byId[id] = t;
    this.onCreate(t);
    return t;
  }

  /** Takes one more `field` reference to `t`, which the caller already holds a reference to. */
  retain(t: Tube, field: TubeCountField): void {
    this.table.retain(t.id, field);
  }

  /** Gives back a `field` reference to `t`; frees the tube if that was its last (onFree). */
  release(t: Tube, field: TubeCountField): void {
    if (!this.table.release(t.id, field)) return;
    if (this.byId[t.id] === t) this.byId[t.id] = undefined;
    this.onFree(t);
  }

  /** The shard has processed the drop of freed tube `id`: the id may be reused. */
  dropped(id: number): void {
    this.table.dropped(id);
  }

  /** Live tubes in beanstalkd's order (list-tubes). */
  list(): Tube[] {
    const out: Tube[] = [];
    for (const id of this.table.list()) {
      const t = this.view(id);
      if (t !== undefined) out.push(t);
    }
    return out;
  }

  /** Live tubes' names in list-tubes order (one consistent snapshot). */
  names(): string[] {
    return this.table.listNames();
  }

  /** Live tubes. */
  get count(): number {
    return this.table.count;
  }

  /** This thread's view of tube `id` if it is live: the one it has, or a new one (made elsewhere). */
  private view(id: number): Tube | undefined {
    const gen = this.table.gen(id);
    const had = this.byId[id];
    if (had !== undefined && had.gen === gen && this.table.isLive(id, gen)) return had;
    const name = this.table.name(id);
    if (name === undefined || this.table.gen(id) !== gen) {
      if (had !== undefined) this.byId[id] = undefined;
      return undefined;
    }
    const t = new Tube(this.table, id, gen, name, this.table.shard(id));
    this.byId[id] = t;
    return t;
  }
}
