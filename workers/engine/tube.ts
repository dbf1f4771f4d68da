// Per-tube state inside one shard's engine. One small object per tube (never per job): the two
// heaps of slots, the head/tail of the buried list (linked through the engine's columns),
// counters and the pause.

import type { IndexHeap } from './heap.ts';

export class Tube {
  readonly id: number;
  idx = -1; // its number in the engine (the job column's 2-byte tube), while the engine holds it
  readonly ready: IndexHeap; // READY jobs by (pri, id)
  readonly delay: IndexHeap; // DELAYED jobs by (deadline, id)
  buriedHead = -1; // oldest buried slot (kicked first)
  buriedTail = -1;
  buried = 0;
  urgent = 0; // ready jobs with pri < URGENT_PRI
  reserved = 0;
  totalJobs = 0;
  cmdDelete = 0;
  cmdPause = 0;
  // beanstalkd keeps `pause` set until something notices the deadline passed; so do we.
  paused = false;
  pauseSec = 0;
  unpauseAt = 0; // ms
  inPausedList = false;
  signalSeq = 0; // last tick that reported this tube ready (one report per tick)

  constructor(id: number, ready: IndexHeap, delay: IndexHeap) {
    this.id = id;
    this.ready = ready;
    this.delay = delay;
  }

  /** Jobs of this tube in any state. */
  get jobs(): number {
    return this.ready.size + this.delay.size + this.buried + this.reserved;
  }

  /** Whether reservations must skip this tube at `nowMs`; clears a pause that has ended. */
  pausedAt(nowMs: number): boolean {
    if (this.paused && this.unpauseAt <= nowMs) this.paused = false;
    return this.paused;
  }
}
