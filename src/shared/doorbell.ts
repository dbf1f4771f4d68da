// Doorbell: a wake-up signal between two threads that costs nothing while the other side is busy.
//
// One doorbell per direction and per sleeper: the shard worker sleeps on the bell that the main
// thread rings after writing to the worker's inbound ring, and the main thread sleeps (without
// blocking its event loop) on the bell the worker rings after writing replies. Exactly one thread
// may sleep on a given bell; any number of threads may ring it.
//
// Shared state (Int32 slots over a SAB, piscina/thread-stream style):
//   kSeq         bumped by every ring(); the sleeper waits on this slot's value.
//   kSleepingOn  the "sleeping" flag: the kSeq value the sleeper announced it will sleep on.
//                Any value kSeq has already moved past means "not sleeping" (seq values recur
//                only after 2^32 rings, and then the cost is one spurious notify).
//
// Protocol (why there is no lost wake-up):
//   sleeper:  seq = prepareWait()        // L0: load seq = s; S1: store sleepingOn = s
//             if (work is visible) { cancelWait(); handle it }   // L2: re-check the ring
//             else wait(seq, ms) / await waitAsync(seq)           // sleeps only while kSeq === s
//   ringer:   publish work (ring write) // W: Atomics.store of the ring's head
//             ring()                    // A: old = add(seq, 1); L3: notify iff sleepingOn === old
// All of these are sequentially consistent atomics, so they have one total order. Suppose the
// sleeper missed the work at L2: then L0 < L2 < W < A, so some ring's add comes after L0; take
// the first one, A1, whose `old` is s. If A1 < S1, then A1 is also before the wait, whose value
// check sees kSeq !== s and returns 'not-equal' at once. If A1 > S1, its L3 reads sleepingOn === s
// and notifies; the notify either finds the sleeper queued, or comes before it queued, in which
// case A1 came before the wait's value check and the wait returns 'not-equal'. Either way the
// sleeper cannot sleep past published work.
//
// Cost: ring() on a busy peer is one Atomics.add plus one load, and no notify (no futex lock, no
// syscall). During one sleep only the first ring() notifies: later ones see kSeq moved past the
// announced value (MEASURED.md: a notify per record caps a ring at 4-7M records/s; one per batch
// gives 22-28M/s). A notify from a ring that raced with the end of one sleep can wake the next
// sleep spuriously; the sleeper re-checks its ring after every return anyway, so that costs a loop.
//
// Why not a 0/1 flag that ring() clears with compareExchange (to notify once per sleep)? That
// loses wake-ups: a ring whose add preceded the sleeper's load of seq can clear the flag of the
// sleeper's *next* announcement and notify before the sleeper has queued; the ring that carries
// the new work then sees the flag clear and stays silent. The stress test in
// test/unit/doorbell.test.ts caught exactly that. Comparing against the announced seq ties each
// notify to the one add that moved seq off the value the sleeper waits on.

export const kSeq = 0;
/** On its own 64-byte cache line: the sleeper writes it, ringers only read it. */
export const kSleepingOn = 16;
export const DOORBELL_BYTES = 128;

export type DoorbellWaitResult = 'ok' | 'not-equal' | 'timed-out';

export class Doorbell {
  readonly sab: SharedArrayBuffer;
  private readonly state: Int32Array;

  private constructor(sab: SharedArrayBuffer) {
    if (sab.byteLength !== DOORBELL_BYTES) {
      throw new RangeError(`Doorbell: expected a SAB of ${DOORBELL_BYTES} bytes, got ${sab.byteLength}`);
    }
    this.sab = sab;
    this.state = new Int32Array(sab);
  }

  static create(): Doorbell {
    const bell = new Doorbell(new SharedArrayBuffer(DOORBELL_BYTES));
    bell.markAwake(); // sleepingOn = -1: nobody sleeps on seq 0 yet
    return bell;
  }

  static attach(sab: SharedArrayBuffer): Doorbell {
    return new Doorbell(sab);
  }

  /** Ringer: signal new work (or freed room). Notifies only the first ring of an announced sleep. */
  ring(): void {
    const state = this.state;
    const old = Atomics.add(state, kSeq, 1);
    if (Atomics.load(state, kSleepingOn) === old) Atomics.notify(state, kSeq, 1);
  }

  /**
   * Sleeper, step 1: announce the intention to sleep and return the sequence token. The caller
   * MUST re-check its ring after this call and before wait()/waitAsync(); if it finds work it
   * should call cancelWait() (not required for correctness, it saves the ringer a notify).
   */
  prepareWait(): number {
    const seq = Atomics.load(this.state, kSeq);
    Atomics.store(this.state, kSleepingOn, seq);
    return seq;
  }

  /** Sleeper: found work after prepareWait(); stop announcing sleep. */
  cancelWait(): void {
    this.markAwake();
  }

  /**
   * Sleeper, step 2 (worker threads; blocks the calling thread): sleep until the bell rings or
   * `timeoutMs` passes (Infinity for no limit). Returns 'not-equal' at once if the bell rang
   * since prepareWait() returned `seq`, 'ok' when woken, 'timed-out' on timeout. Spurious 'ok'
   * is possible; re-check the ring after any return.
   */
  wait(seq: number, timeoutMs: number): DoorbellWaitResult {
    const result = Atomics.wait(this.state, kSeq, seq, timeoutMs);
    this.markAwake();
    return result;
  }

  /**
   * Sleeper, step 2 (main thread; does not block the event loop): resolves when the bell rings
   * after prepareWait() returned `seq`, at once (on a later microtask) if it already did. There
   * is no timeout, on purpose (MEASURED.md): to stop waiting, ring the bell yourself.
   * Note that a pending waitAsync does not by itself keep Node's event loop alive.
   */
  waitAsync(seq: number): Promise<void> {
    const waiting = Atomics.waitAsync(this.state, kSeq, seq);
    if (!waiting.async) {
      this.markAwake();
      return Promise.resolve();
    }
    return waiting.value.then(() => {
      this.markAwake();
    });
  }

  /** Withdraw the announcement: a value seq has already passed, so no ring() will match it. */
  private markAwake(): void {
    Atomics.store(this.state, kSleepingOn, (Atomics.load(this.state, kSeq) - 1) | 0);
  }

  /** Current sequence value, for tests and diagnostics. */
  seq(): number {
    return Atomics.load(this.state, kSeq);
  }
}
