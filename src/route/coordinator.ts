// Reserve across shards: hands out the ready job with the smallest (pri, id) among every watched,
// unpaused tube, wherever those tubes live — the job one beanstalkd would choose.
//
// - All watched tubes on one shard (the common case): one request, the shard picks and reserves.
// - Several shards: ask each for its best candidate (peek); the shard with the best one then
//   reserves its best job at that moment if it still comes before every other shard's candidate
//   (a bound), whichever job that is, so many reserves racing for the same top job do not all
//   start over; if it no longer does, start over.
// - Nothing ready: the connection waits on each watched tube (beanstalkd's waiting_conns) until
//   a job becomes ready there, its timeout passes, or one of its reserved jobs nears its TTR end
//   (DEADLINE_SOON).
//
// A wake-up can race with a reserve that is still asking shards; every "tube got a ready job"
// stamps the tube with a new epoch, and an attempt that found nothing retries when one of its
// watched tubes was stamped after it started, so no wake-up is lost.

import type { Hub } from '../hub.ts';
import { REPLY_DEADLINE_SOON, REPLY_TIMED_OUT } from '../proto/beanstalk/replies.ts';
import { DEADLINE_SOON_MS, type Session } from '../proto/beanstalk/session.ts';
import { K_PEEK_BEST, K_RESERVE, K_RESERVE_IF_READY } from '../proto/beanstalk/kinds.ts';
import { OP_PEEK_BEST, OP_RESERVE, OP_RESERVE_BOUNDED, R_BEST, R_JOB } from '../shared/records.ts';
import type { Tube } from './tubes.ts';

export class Coordinator {
  private readonly hub: Hub;
  private epoch = 0;

  constructor(hub: Hub) {
    this.hub = hub;
  }

  /** Try to reserve a job for `s` (a fresh reserve, or a waiter that was woken). */
  attempt(s: Session, fromWait: boolean): void {
    s.attempting = true;
    s.attemptFromWait = fromWait;
    s.attemptEpoch = this.epoch;
    const { shards, tubes } = s.tubesByShard();
    if (shards.length === 1) {
      this.take(s, shards[0], K_RESERVE, OP_RESERVE, 0, 0);
      return;
    }
    s.gatherLeft = shards.length;
    s.bestId = 0;
    s.bestShard = -1;
    s.boundId = 0;
    for (const shard of shards) {
      const list = tubes[shard];
      const w = this.hub.pool.request(shard, K_PEEK_BEST, s, 0);
      w.header(OP_PEEK_BEST, list.length * 4, s.connId, list.length, 0, 0, 0);
      for (const t of list) w.u32(t);
    }
  }

  /**
   * Sends the request that reserves for `s` on `shard` (a reserve, or a bounded reserve under
   * (pri, id)): a taker of each watched tube of that shard, as ReadyCounts' rule 2 says, until
   * its answer is read (settle).
   */
  private take(s: Session, shard: number, kind: number, op: number, pri: number, id: number): void {
    const counts = this.hub.readyCounts;
    for (const t of s.watch.items) {
      if (t.shard === shard && counts.taker(t)) s.blindTubes.push(t);
    }
    const list = s.tubesByShard().tubes[shard];
    const w = this.hub.pool.request(shard, kind, s, 0);
    w.header(op, list.length * 4, s.connId, list.length, pri, 0, id);
    for (const t of list) w.u32(t);
  }

  /** Replies to K_RESERVE, K_PEEK_BEST and K_RESERVE_IF_READY. */
  reply(shard: number, kind: number, s: Session, buf: Buffer, at: number): void {
    const rk = buf[at + 4];
    if (kind === K_PEEK_BEST) {
      if (rk === R_BEST) {
        const id = buf.readDoubleLE(at + 24);
        const pri = buf.readUInt32LE(at + 16);
        if (s.bestId === 0 || pri < s.bestPri || (pri === s.bestPri && id < s.bestId)) {
          // The old best becomes the bound the new one must beat.
          if (s.bestId !== 0) {
            s.boundId = s.bestId;
            s.boundPri = s.bestPri;
          }
          s.bestId = id;
          s.bestPri = pri;
          s.bestShard = shard;
        } else if (s.boundId === 0 || pri < s.boundPri || (pri === s.boundPri && id < s.boundId)) {
          s.boundId = id;
          s.boundPri = pri;
        }
      }
      if (--s.gatherLeft > 0) return;
      if (s.closed) {
        s.attempting = false;
        return;
      }
      if (s.bestId === 0) {
        this.none(s);
        return;
      }
      this.take(s, s.bestShard, K_RESERVE_IF_READY, OP_RESERVE_BOUNDED, s.boundPri, s.boundId);
      return;
    }
    // K_RESERVE or K_RESERVE_IF_READY: the taking request is answered.
    this.settle(s);
    if (rk === R_JOB) {
      s.attempting = false;
      // A job reserved for a connection that has gone is given back by the release request
      // its close queued behind this one.
      if (s.closed) return;
      s.reserved(s.reserveSeq, buf, at);
      s.reserveAnswered(null);
      const more = buf.readUInt32LE(at + 16) !== 0;
      if (more) {
        const t = this.hub.tubes.get(buf.readUInt32LE(at + 12));
        if (t !== undefined) this.tubeReady(t);
      }
      return;
    }
    if (kind === K_RESERVE_IF_READY && !s.closed) {
      // That shard's best no longer beats the others (taken meanwhile): ask again. The next
      // taking request is a taker of its own (ReadyCounts' rule 2).
      this.attempt(s, s.attemptFromWait);
      return;
    }
    this.none(s);
  }

  /** The taking request in flight for `s` is answered: it is no longer a blind taker. */
  private settle(s: Session): void {
    const counts = this.hub.readyCounts;
    for (const t of s.blindTubes) counts.untake(t);
    s.blindTubes.length = 0;
  }

  /** Nothing ready for `s` right now. */
  private none(s: Session): void {
    s.attempting = false;
    if (s.closed) return;
    for (const t of s.watch.items) {
      if (t.readyEpoch > s.attemptEpoch) {
        // A job became ready in a watched tube while we were asking: it may be ours.
        this.attempt(s, s.attemptFromWait);
        return;
      }
    }
    const now = Date.now();
    if (s.attemptFromWait) {
      this.wait(s);
      if (s.timerDue) {
        s.timerDue = false;
        this.timer(s);
      }
      return;
    }
    if (s.deadlineSoon(now)) {
      s.reserveAnswered(REPLY_DEADLINE_SOON);
      return;
    }
    if (s.reserveTimeoutSec === 0 || s.halfClosed) {
      s.reserveAnswered(REPLY_TIMED_OUT);
      return;
    }
    s.waitStartMs = now;
    this.wait(s);
  }

  private wait(s: Session): void {
    s.waiting = true;
    for (const t of s.watch.items) t.waiting.append(s);
    this.hub.waitingCount++;
    this.arm(s);
  }

  /** Stop waiting (woken, timed out, or closed). */
  unwait(s: Session): void {
    if (!s.waiting) return;
    s.waiting = false;
    for (const t of s.watch.items) t.waiting.remove(s);
    this.hub.waitingCount--;
    if (s.waitTimer !== null) {
      clearTimeout(s.waitTimer);
      s.waitTimer = null;
    }
  }

  /** The wait ends at the reserve's timeout or DEADLINE_SOON_MS before the soonest TTR deadline. */
  arm(s: Session): void {
    if (s.waitTimer !== null) {
      clearTimeout(s.waitTimer);
      s.waitTimer = null;
    }
    let at = s.soonestDeadline() - DEADLINE_SOON_MS;
    if (s.reserveTimeoutSec >= 0) at = Math.min(at, s.waitStartMs + s.reserveTimeoutSec * 1000);
    if (at === Infinity) return;
    s.waitTimer = setTimeout(() => {
      s.waitTimer = null;
      this.timer(s);
    }, Math.max(0, at - Date.now()));
  }

  private timer(s: Session): void {
    if (s.closed) return;
    if (s.attempting) {
      s.timerDue = true; // decide when the attempt in flight comes back empty
      return;
    }
    if (!s.waiting) return;
    const now = Date.now();
    if (s.deadlineSoon(now)) {
      this.unwait(s);
      s.reserveAnswered(REPLY_DEADLINE_SOON);
    } else if (s.reserveTimeoutSec >= 0 && now >= s.waitStartMs + s.reserveTimeoutSec * 1000) {
      this.unwait(s);
      s.reserveAnswered(REPLY_TIMED_OUT);
    } else {
      this.arm(s);
    }
    this.hub.flushSoon();
  }

  /**
   * Tube `t` may have gained ready jobs: wake one connection waiting on it. The epoch moves even
   * when nobody waits yet: a reserve still asking shards must learn it may have missed this job.
   */
  tubeReady(t: Tube<Session>): void {
    t.readyEpoch = ++this.epoch;
    const s = t.waiting.take();
    if (s === undefined) return;
    // take() removed it from this tube; unwait removes it from the others.
    this.unwait(s);
    this.attempt(s, true);
  }
}
