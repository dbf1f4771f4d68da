// Claims on reserves that wait in several shards at once.
//
// A reserve whose watched tubes live on several shards waits in each of those shards, in each
// tube's waiting set, as beanstalkd keeps one waiting set per tube (workers/waits.ts). Whichever
// shard first has a job for it takes it; the others must not. So each such wait has a word in
// shared memory holding its ticket: a shard that picks the waiter claims it by swapping the
// ticket for 0 (Atomics.compareExchange), and only the one whose swap succeeds reserves a job
// for it. The connection's own thread ends a wait (timeout, DEADLINE_SOON, close) the same way,
// so a wait ends exactly once, by construction, whichever threads race for it.
//
// Every successful claim moves an epoch word, and writes the slot it claimed into a log of the
// last CLAIM_LOG claims, tagged with that epoch. A shard that still lists a waiter some other
// thread claimed drops it before it next changes its waiting sets (ShardWaits.purge): so those
// sets change in the order beanstalkd's would, a claimed waiter leaving before anyone joins. The
// log tells it which slots to look at: a claim elsewhere costs it one lookup, not a look at every
// waiter it lists (28 µs with 1,000 of them, measured), unless it fell a whole log behind.
//
// Slots belong to connections (one wait at a time each), taken from a shared counter and given
// back to the thread's own free list when the connection closes. The buffer grows (a growable
// SharedArrayBuffer: every thread's view follows) up to CLAIM_SLOTS_MAX.

/** Claims.claimedAt: the claim has moved the epoch but not written its slot yet. */
export const NOT_LOGGED_YET = -1;
/** Claims.claimedAt: a later claim has written over it (the reader fell CLAIM_LOG behind). */
export const LOGGED_OVER = -2;

/** The most connections that can have a slot at once (a reserve over several shards needs one). */
export const CLAIM_SLOTS_MAX = 1 << 22;
/** Slots the buffer starts with (it grows by doubling). */
const CLAIM_SLOTS_FIRST = 1024;
// Words before the slots: the epoch, the next fresh slot, the capacity in slots; then padding
// to a cache line.
const EPOCH = 0;
const FRESH = 1;
const CAPACITY = 2;
const HEAD = 16;
/** Claims the log keeps (a power of two): a shard more than this many behind looks at every waiter. */
export const CLAIM_LOG = 4096;

export interface ClaimsShared {
  readonly words: SharedArrayBuffer;
  /** The log: CLAIM_LOG pairs [slot, epoch + 1 of the claim that wrote it]. */
  readonly log: SharedArrayBuffer;
}

export class Claims {
  readonly shared: ClaimsShared;
  private readonly words: Int32Array;
  private readonly log: Int32Array;
  /** Slots this thread's connections gave back. */
  private readonly free: number[] = [];

  private constructor(shared: ClaimsShared) {
    this.shared = shared;
    this.words = new Int32Array(shared.words); // length-tracking: follows every grow
    this.log = new Int32Array(shared.log);
  }

  static create(): Claims {
    const words = new SharedArrayBuffer((HEAD + CLAIM_SLOTS_FIRST) * 4, { maxByteLength: (HEAD + CLAIM_SLOTS_MAX) * 4 });
    const c = new Claims({ words, log: new SharedArrayBuffer(CLAIM_LOG * 8) });
    c.words[FRESH] = HEAD;
    c.words[CAPACITY] = CLAIM_SLOTS_FIRST;
    return c;
  }

  static attach(shared: ClaimsShared): Claims {
    return new Claims(shared);
  }

  /** A slot for a connection (give it back with release). Throws past CLAIM_SLOTS_MAX. */
  slot(): number {
    const reused = this.free.pop();
    if (reused !== undefined) return reused;
    const slot = Atomics.add(this.words, FRESH, 1);
    if (slot - HEAD >= CLAIM_SLOTS_MAX) throw new RangeError(`more than ${CLAIM_SLOTS_MAX} connections waiting over several shards`);
    this.ensure(slot);
    return slot;
  }

  /** The connection that had `slot` has closed: this thread reuses it (any old ticket in it is dead). */
  release(slot: number): void {
    Atomics.store(this.words, slot, 0);
    this.free.push(slot);
  }

  /** A new wait in `slot` (whose last one has ended): its ticket. */
  open(slot: number): number {
    // Tickets are unique per thread, and a slot is only ever reused by the thread that gave it
    // back: a waiting-set entry left from an earlier wait never matches a later one.
    const ticket = this.nextTicket;
    this.nextTicket = ticket === 0x7fff_ffff ? 1 : ticket + 1;
    Atomics.store(this.words, slot, ticket);
    return ticket;
  }

  private nextTicket = 1;

  /** Ends the wait `ticket` in `slot` if nobody has: true for exactly one caller. */
  claim(slot: number, ticket: number): boolean {
    return this.claimAt(slot, ticket) !== null;
  }

  /**
   * claim, returning the epoch this claim moved on from, or null if it lost. (Not -1 for lost:
   * the epoch word wraps, and -1 is an epoch too once 2^32 claims have been made.)
   */
  claimAt(slot: number, ticket: number): number | null {
    if (Atomics.compareExchange(this.words, slot, ticket, 0) !== ticket) return null;
    const e = Atomics.add(this.words, EPOCH, 1);
    const i = (e & (CLAIM_LOG - 1)) * 2;
    Atomics.store(this.log, i, slot);
    Atomics.store(this.log, i + 1, (e + 1) | 0);
    return e;
  }

  /**
   * The slot the claim at epoch `e` claimed; NOT_LOGGED_YET if that claim has not written it yet
   * (it moved the epoch a moment ago), LOGGED_OVER if a later claim has written over it.
   */
  claimedAt(e: number): number {
    const i = (e & (CLAIM_LOG - 1)) * 2;
    const want = (e + 1) | 0;
    const tag = Atomics.load(this.log, i + 1);
    if (tag !== want) return ((tag - want) | 0) < 0 ? NOT_LOGGED_YET : LOGGED_OVER;
    const slot = Atomics.load(this.log, i);
    return Atomics.load(this.log, i + 1) === want ? slot : LOGGED_OVER;
  }

  /** Whether the wait `ticket` in `slot` is still open. */
  isOpen(slot: number, ticket: number): boolean {
    return Atomics.load(this.words, slot) === ticket;
  }

  /** Moves with every claim: a waiting set listing a claimed waiter is stale only after it moved. */
  get epoch(): number {
    return Atomics.load(this.words, EPOCH);
  }

  /** Grows the buffer until `slot` is in it (any thread may; the capacity word says how far). */
  private ensure(slot: number): void {
    const sab = this.shared.words;
    while (slot >= this.words.length) {
      const cap = Atomics.load(this.words, CAPACITY);
      const want = Math.min(cap * 2, CLAIM_SLOTS_MAX);
      if (Atomics.compareExchange(this.words, CAPACITY, cap, want) === cap) {
        try {
          sab.grow((HEAD + want) * 4);
        } catch {
          // Another thread grew it further first.
        }
      }
    }
  }
}
