// What the main thread does with a shard's next reply to a workq request (the beanstalk kinds
// are below 32, see ../beanstalk/kinds.ts; the hub hands every kind from K_WQ_FIRST on to the
// workq router).

export const K_WQ_FIRST = 40;
export const K_WQ_ADD = 40; //        add, schedule, run: wake a leaser when the job is ready
// 41, 42, 43: a lease's requests, which the routing layer sends (src/route/lease.ts).
export const K_WQ_DONE = 44; //       complete, fail
export const K_WQ_DELETE = 45; //     delete (in memory answered at once; with a log, when it is logged)
export const K_WQ_RESULT = 46; //     result: there now, or wait
export const K_WQ_WAKE = 47; //       a job got its result: fetch it for the connections waiting on it
export const K_WQ_RUN_END = 48; //    a run's wait timeout passed
export const K_WQ_LENS = 49; //       inspect queue(s)
export const K_WQ_INSPECT = 50; //    inspect job, inspect (scheduled-)jobs
export const K_WQ_ACK = 51; //       a reply nobody waits for (queue names, restores, deletes by the server itself)
