// A lower bound, kept on the main thread, of the reservable ready jobs of each tube.
//
// It lets a reserve that is certain to find a job go to its shard without holding the
// connection's later commands back: a pipelined put / reserve / delete cycle then keeps several
// reserves in flight per connection instead of one per shard round trip. The reserve still
// reaches the shard in command order, after everything the connection sent before it and before
// everything it sends after, so what it takes is what beanstalkd would give it; only when a
// reserve could find nothing (and would have to wait, holding the connection) must the later
// commands wait for its answer.
//
// The count must never be above the truth at the moment a reserve sent now reaches the shard:
//  + a put with no delay, when it is sent (it reaches the shard before any later request);
//  + a release to READY, a kick, a kick-job: when the shard says so, less one for every reserve
//    in flight on that tube that held no count of it (a "blind" reserve, sent while the count
//    was 0: it may have taken one of those jobs before the main thread heard of them);
//  - every reserve takes one from each watched tube that has some, for good: it takes a job
//    from one of them, and giving the others back could count a job a blind reserve took;
//  - a command that may take a ready job the main thread cannot place (delete or reserve-job of
//    a job this connection does not hold) resets every tube of that shard to zero (an epoch);
//  ready jobs it hears of only roughly (a delay's end, a connection's jobs released on close) or
//  that may be deleted unseen (a TTR expiry: the holder may be deleting the job as it expires)
//  are not counted: under-counting only means less of this shortcut.
// A paused tube offers nothing (a margin covers the shard applying the unpause a little later).

import type { Tube } from './tubes.ts';

type Counted = Pick<Tube, 'shard' | 'readyCount' | 'countEpoch' | 'pausedUntilMs' | 'blindReserves'>;

/** How long after a pause's end the main thread still treats the tube as paused. */
export const UNPAUSE_MARGIN_MS = 1000;

export class ReadyCounts {
  private readonly epochs: Int32Array;

  constructor(shards: number) {
    this.epochs = new Int32Array(shards);
  }

  /** The lower bound for tube `t` (0 after a reset of its shard). */
  of(t: Counted): number {
    if (t.countEpoch !== this.epochs[t.shard]) {
      t.countEpoch = this.epochs[t.shard];
      t.readyCount = 0;
    }
    return t.readyCount;
  }

  /** `n` jobs of `t` are ready before any reserve sent from now on reaches the shard (a put). */
  add(t: Counted, n: number): void {
    this.of(t);
    t.readyCount += n;
  }

  /** The shard made `n` jobs of `t` ready a while ago (its reply to a release, kick, kick-job). */
  addLate(t: Counted, n: number): void {
    this.of(t);
    if (n > t.blindReserves) t.readyCount += n - t.blindReserves;
  }

  /** Takes one from `t` if it has one. */
  take(t: Counted): boolean {
    if (this.of(t) === 0) return false;
    t.readyCount--;
    return true;
  }

  /** A ready job of some tube of `shard` may be gone: forget every count there. */
  reset(shard: number): void {
    this.epochs[shard]++;
  }

  /** Whether a reserve on `t` alone is certain to find a job. */
  certain(t: Counted, nowMs: number): boolean {
    return nowMs >= t.pausedUntilMs + UNPAUSE_MARGIN_MS && this.of(t) > 0;
  }
}
