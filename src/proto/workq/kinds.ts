// What a workq connection does with a shard's reply to one of its requests (the routing layer's
// own requests carry their own kinds: src/route/lease.ts, src/route/workq.ts).

export const K_WQ_ADD = 40; //        add, schedule (with a log): answered once logged; wakes a leaser when the job is ready
export const K_WQ_DONE = 44; //       complete, fail
export const K_WQ_DELETE = 45; //     delete (in memory answered at once; with a log, when it is logged)
export const K_WQ_RESULT = 46; //     result: there now, or wait
export const K_WQ_LENS = 49; //       inspect queue(s)
export const K_WQ_INSPECT = 50; //    inspect job, inspect (scheduled-)jobs
