// beanstalkd's multiset (its `Ms`), kept exactly because list-tubes, list-tubes-watched and the
// order in which waiting connections get jobs all follow from its rules. Used by the main thread's
// tube registry and by each shard's waiting reserves (workers/waits.ts).

/**
 * beanstalkd's multiset (its `Ms`): append at the end, removal moves the last item into the hole, and
 * `take` walks a cursor. list-tubes, list-tubes-watched and the order in which waiting
 * connections get jobs all follow from these rules, so we keep them exactly.
 */
export class Multiset<T> {
  readonly items: T[];
  private last = 0;

  /** Empty, or holding `first` (an array of its exact size: a connection's watch list starts with one tube). */
  constructor(first?: T) {
    this.items = first === undefined ? [] : [first];
  }

  get len(): number {
    return this.items.length;
  }

  append(item: T): void {
    this.items.push(item);
  }

  /**
   * Appends `item` ahead of the trailing items that `later(other, item)` says arrived after it
   * should have: where beanstalkd's append would have put it, had it come in its turn (the items
   * behind it shift up one place, as they would have been appended after it; the take cursor
   * stays). `later` takes both, so that a caller passes one function for every call, not a
   * closure per item.
   */
  appendInOrder(item: T, later: (other: T, item: T) => boolean): void {
    const items = this.items;
    let i = items.length;
    while (i > 0 && later(items[i - 1], item)) i--;
    if (i === items.length) items.push(item);
    else items.splice(i, 0, item);
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

  /**
   * An item appended to this set while it was empty and taken at once (beanstalkd's reserve that a
   * ready job answers: the connection joins the job's tube's waiting set, and process_queue takes
   * it from there): the set stays empty, and its cursor is where that take leaves it.
   */
  passedThrough(): void {
    this.last = 1;
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

