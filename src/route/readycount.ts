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
// Why the count is never above the truth
// --------------------------------------
// Requests reach a shard in the order the main thread sends them, and the shard answers in the
// order it reads them. Let R(t) be the ready jobs of tube t once its shard has applied every
// request sent so far. The claim is count(t) <= R(t) at every moment; then a reserve sent now
// finds at least count(t) jobs. Picture each unit of the count as a token standing on a distinct
// ready job of t ("matched"); ready jobs without a token are "unmatched". Each rule keeps every
// token on a distinct ready job:
//
//  1. A put without delay, when sent: +1. Its job is new and ready before any later request.
//  2. A request that may take a ready job of t (any reserve whose tube list, sent to t's shard,
//     holds t), when sent: -1 if the count is above 0 (`take`); else it is a "blind" taker of t
//     (t.blindReserves) until its answer is read. A taker takes at most one job. If it takes a
//     token's job, the token removed is that one, or the one removed moves onto it; if it takes an
//     unmatched job, the removed token's job becomes unmatched. So a counted taker never lowers
//     the number of unmatched jobs; only a blind one can, by one.
//     This is per request sent: a multi-shard reserve that loses its bounded reserve and asks
//     again is a new taker each time (the retry of #11 took a job counted by a put while it
//     still counted as the first attempt's blind taker, and the count stayed 1 over nothing).
//  3. A delete or reserve-job of a job the connection does not hold may take a ready job the
//     main thread cannot place, of any tube of its shard: when it is sent, every count of that
//     shard drops to 0 (an epoch), and until its answer is read it is an "any-taker" of the
//     shard (`anyTaker` / `anyTakerDone`).
//  4. The shard says it made n jobs of t ready (a release, a kick, a kick-job): +n minus the
//     blind takers of t in flight (`addLate`), and nothing at all while an any-taker of t's
//     shard is in flight. Those n jobs were ready, unmatched, from the moment the request that
//     made them was sent. Since then only takers sent after that request can have taken them:
//     blind takers of t, by one each, and any-takers, by one each, of any of them. All of those
//     are still in flight: the shard read them after that request, so it answers them after it.
//     With no any-taker in flight, the tokens added earlier by other late additions stood on
//     other unmatched jobs (same argument, in the order the answers come), so n - blind
//     unmatched jobs remain for the new tokens. (Before 2026-11-26 an any-taker only reset the
//     counts when sent: a kick sent before `delete <the kicked job>` from another connection
//     added its token back when its answer came, over a job the delete had taken. A stress run
//     that stalls the shards' rings at random found it; the test "a late addition does not
//     count a job an unheld delete took" replays it.)
//  Jobs the shard readies on its own (a delay's end, a TTR's end, a connection's jobs released
//  when it closes) only add unmatched jobs; they are not counted (under-counting only means less
//  of this shortcut).
//
// A paused tube offers nothing. A pause's end is the instant the main thread computed when it
// sent the pause (the record carries it), and a reserve sent as certain carries the instant it
// was sent, so the shard judges the pause exactly as the main thread did.
//
// Should a reserve sent as certain find nothing all the same, it is not answered TIMED_OUT: the
// connection carries it on as any reserve (Session.certainMissed); the server counts and logs it.

import type { Tube } from './tubes.ts';

type Counted = Pick<Tube, 'shard' | 'readyCount' | 'countEpoch' | 'pausedUntilMs' | 'blindReserves'>;

export class ReadyCounts {
  private readonly epochs: Int32Array;
  /** Per shard: any-takers in flight (rule 3). */
  private readonly anyTakers: Int32Array;

  constructor(shards: number) {
    this.epochs = new Int32Array(shards);
    this.anyTakers = new Int32Array(shards);
  }

  /** The lower bound for tube `t` (0 after a reset of its shard). */
  of(t: Counted): number {
    if (t.countEpoch !== this.epochs[t.shard]) {
      t.countEpoch = this.epochs[t.shard];
      t.readyCount = 0;
    }
    return t.readyCount;
  }

  /** Rule 1: `n` jobs of `t` are ready before any request sent from now on reaches the shard. */
  add(t: Counted, n: number): void {
    this.of(t);
    t.readyCount += n;
  }

  /** Rule 4: the shard made `n` jobs of `t` ready (its reply to a release, kick, kick-job). */
  addLate(t: Counted, n: number): void {
    this.of(t);
    if (this.anyTakers[t.shard] > 0) return;
    if (n > t.blindReserves) t.readyCount += n - t.blindReserves;
  }

  /**
   * Rule 2, for a request that may take a ready job of `t`, as it is sent: takes one from the
   * count, or, if there is none, counts the request as a blind taker of `t` until `untake`.
   * Returns whether it was blind.
   */
  taker(t: Counted): boolean {
    if (this.take(t)) return false;
    t.blindReserves++;
    return true;
  }

  /** The answer to a blind taker of `t` has been read. */
  untake(t: Counted): void {
    t.blindReserves--;
  }

  /** Takes one from `t` if it has one (a taker whose count is known to be above 0). */
  take(t: Counted): boolean {
    if (this.of(t) === 0) return false;
    t.readyCount--;
    return true;
  }

  /** Rule 3: a request that may take a ready job of any tube of `shard` is being sent. */
  anyTaker(shard: number): void {
    this.epochs[shard]++;
    this.anyTakers[shard]++;
  }

  /** The answer to an any-taker of `shard` has been read. */
  anyTakerDone(shard: number): void {
    this.anyTakers[shard]--;
  }

  /** Whether a reserve on `t` alone, sent at `nowMs`, is certain to find a job. */
  certain(t: Counted, nowMs: number): boolean {
    return nowMs >= t.pausedUntilMs && this.of(t) > 0;
  }
}
