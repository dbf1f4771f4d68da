// What the main thread does with a shard's next reply: one code per request a session sends.

export const K_PUT = 1;
export const K_RESERVE_JOB = 5;
export const K_DELETE = 6;
export const K_RELEASE = 7;
export const K_BURY = 8;
export const K_TOUCH = 9;
export const K_KICK = 10;
export const K_KICK_JOB = 11;
export const K_PEEK = 12;
export const K_STATS_JOB = 13;
export const K_STATS_TUBE = 14;
export const K_TOTALS = 15;
export const K_PAUSE = 16;
export const K_RESERVE_WAIT = 20; // a reserve over tubes of one shard, which may wait there (workers/waits.ts)
export const K_PUT_NUMBERED = 21; // a put sent behind such a reserve: the shard gives it its id when it applies it
export const K_TAKE_ID = 22; //     a put that failed behind such a reserve uses up an id in the shard (OP_TAKE_ID)
