// The order of steps that make jobs ready on different shards.
//
// A reserve whose watched tubes live on several shards waits in each of them (workers/waits.ts,
// src/shared/claims.ts), and the first shard to claim it gives it its job. beanstalkd applies
// commands one at a time: after `put` to tube a, then `put` to tube b (in one read, or one after
// the other's INSERTED, or by two clients one after the other), a worker waiting on both gets the
// `a` job. Shards run in parallel, so b's shard could get there first. Not here:
//
// - The thread that sends every request (the main thread, outside a mesh) numbers its request
//   stream to each shard by bytes: a request's position is how many bytes it had sent that shard
//   before it. Each shard publishes, in shared memory, how far it has applied that stream.
// - A step that may make a job ready (a put, a release, a kick, a closed connection's jobs going
//   back) is sent behind an OP_AFTER record naming, for every other shard that has not applied
//   all this thread sent it, how far that is (ShardPool.readyStep): earlier steps, and the parks
//   of reserves waiting over several shards (a park that finds a job ready ends its wait there,
//   by its claim, and the reserve starts over).
// - Before the step, the shard looks at OP_AFTER only if a reserve waiting over several shards is
//   parked in it (nothing else can tell two shards' steps apart). Then it waits until each named
//   shard has got that far: a claim made there goes first, as in beanstalkd.
// - Only while this thread has such a reserve waiting: one that parks later is behind the step in
//   every ring.
//
// Why no thread waits for ever: a step waits only for steps sent before it by the same thread, and
// a shard publishes how far it got before it waits itself, so the earliest step not yet applied
// never waits for anything. The sending thread never waits for a shard except when the shard that
// runs on it must (its requests are applied on it); then it keeps copying requests into the other
// shards' rings and replies out of them, so no shard waits on it meanwhile.
//
// Positions are free-running 32-bit counters compared with `| 0`: what is in flight to a shard
// stays far below 2^31 bytes (a ring and a backlog).

/** Int32 words per shard: its position, and how many threads wait on it; a cache line each. */
const STRIDE = 16;
const DONE = 0;
const WAITERS = 1;

export class StepOrder {
  readonly sab: SharedArrayBuffer;
  private readonly words: Int32Array;

  private constructor(sab: SharedArrayBuffer) {
    this.sab = sab;
    this.words = new Int32Array(sab);
  }

  static create(shards: number): StepOrder {
    return new StepOrder(new SharedArrayBuffer(shards * STRIDE * 4));
  }

  static attach(sab: SharedArrayBuffer): StepOrder {
    return new StepOrder(sab);
  }

  /** How far `shard` has applied its request stream. */
  done(shard: number): number {
    return Atomics.load(this.words, shard * STRIDE + DONE);
  }

  /** Whether `shard` has applied its stream up to `pos`. */
  reached(shard: number, pos: number): boolean {
    return ((Atomics.load(this.words, shard * STRIDE + DONE) - pos) | 0) >= 0;
  }

  /** `shard` has applied its stream up to `pos`: wakes whoever waits for it. */
  publish(shard: number, pos: number): void {
    const i = shard * STRIDE;
    if (Atomics.load(this.words, i + DONE) === pos) return;
    Atomics.store(this.words, i + DONE, pos);
    if (Atomics.load(this.words, i + WAITERS) !== 0) Atomics.notify(this.words, i + DONE);
  }

  /**
   * Blocks until `shard` has applied its stream up to `pos`, looking again at least every
   * `sliceMs`. `meanwhile` runs between looks (the sending thread moves requests and replies on
   * there, so the shard can get on); it returns false to give up (the server is stopping: the
   * shard waited for may have stopped first).
   */
  waitFor(shard: number, pos: number, meanwhile: () => boolean, sliceMs: number): void {
    const i = shard * STRIDE;
    if (this.reached(shard, pos)) return;
    Atomics.add(this.words, i + WAITERS, 1);
    try {
      for (;;) {
        const seen = Atomics.load(this.words, i + DONE);
        if (((seen - pos) | 0) >= 0) return;
        if (!meanwhile() || this.reached(shard, pos)) return;
        Atomics.wait(this.words, i + DONE, seen, sliceMs);
      }
    } finally {
      Atomics.sub(this.words, i + WAITERS, 1);
    }
  }
}
