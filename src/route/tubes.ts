// The main thread's registry of tubes: names, which shard owns each, who uses and watches them,
// which connections wait on them. The jobs themselves live on the shards; the registry only
// counts them so a tube disappears exactly when beanstalkd's would (no user, no watcher, no job).

import type { FanAttempt, FanQueue } from './fanin.ts';
import { Multiset } from '../shared/multiset.ts';
import { shardOf } from './hash.ts';

export { Multiset };

export class Tube implements FanQueue {
  readonly name: string;
  readonly id: number;
  readonly shard: number;
  using = 0;
  watching = 0;
  /** Live jobs in the tube: +1 when a put is sent, -1 when a delete succeeds. */
  jobs = 0;
  /** Reserves over several shards blocked waiting on this tube (the fan-in's). */
  readonly waiting = new Multiset<FanAttempt<FanQueue>>();
  /** When the tube last signalled it may have ready jobs (the fan-in's epoch). */
  readyEpoch = 0;
  /** The default tube is never freed (beanstalkd holds a reference to it for ever). */
  pinned = false;
  /** Reserves waiting on it in its shard (workers/waits.ts), as the connections know them. */
  parked = 0;

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
