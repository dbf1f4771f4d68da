// The server-wide job id counter, shared by every thread that serves connections.
//
// Job ids are one sequence across the whole server, as beanstalkd's are: the first job is 1, and
// each put (even one answered EXPECTED_CRLF or DRAINING) takes the next. With connections served on
// several threads, the counter is one 64-bit slot of a SharedArrayBuffer taken with Atomics.add, so
// the ids handed out are unique and leave no gaps, whichever threads take them; ids taken at the
// same time by different threads are ordered by whichever add came first.
//
// The slot holds the next id to hand out. It is a BigInt64 (ids go up to 2^53, past 32 bits);
// next() converts the one BigInt it gets back.

/** What another thread needs to attach: pass it in workerData or postMessage. */
export interface JobIdsShared {
  readonly counter: SharedArrayBuffer;
}

const COUNTER_BYTES = 64; // the slot on a cache line of its own
const MAX_ID = Number.MAX_SAFE_INTEGER;

export class JobIds {
  /** The shared state, for JobIds.attach() on another thread. */
  readonly shared: JobIdsShared;
  private readonly slot: BigInt64Array;

  /** A new counter whose first id is `first` (1, as beanstalkd's); with `shared`, see attach(). */
  constructor(first = 1, shared?: JobIdsShared) {
    if (shared === undefined) {
      checkId(first, 'first id');
      const counter = new SharedArrayBuffer(COUNTER_BYTES);
      this.slot = new BigInt64Array(counter, 0, 1);
      this.slot[0] = BigInt(first);
      this.shared = Object.freeze({ counter });
    } else {
      const { counter } = shared;
      if (!(counter instanceof SharedArrayBuffer) || counter.byteLength !== COUNTER_BYTES) {
        throw new TypeError('JobIds.attach: not a JobIds counter');
      }
      this.slot = new BigInt64Array(counter, 0, 1);
      this.shared = shared;
    }
  }

  /** This thread's handle on a counter made on another thread (from its `shared`). */
  static attach(shared: JobIdsShared): JobIds {
    return new JobIds(1, shared);
  }

  /** Takes the next id. */
  next(): number {
    const id = Number(Atomics.add(this.slot, 0, 1n));
    if (id > MAX_ID) throw new RangeError('JobIds: job ids ran past 2^53 - 1');
    return id;
  }

  /** The id next() would return now, without taking it. */
  peek(): number {
    return Number(Atomics.load(this.slot, 0));
  }

  /** Makes the next id at least `id` + 1 (jobs restored from the log keep their ids); never lowers it. */
  raiseTo(id: number): void {
    checkId(id, 'id');
    const want = BigInt(id) + 1n;
    let cur = Atomics.load(this.slot, 0);
    while (cur < want) {
      const seen = Atomics.compareExchange(this.slot, 0, cur, want);
      if (seen === cur) return;
      cur = seen;
    }
  }
}

function checkId(id: number, what: string): void {
  if (!(id > 0 && Number.isSafeInteger(id))) {
    throw new RangeError(`JobIds: ${what} must be a positive safe integer, got ${id}`);
  }
}
