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
export const K_ACK = 17; // a reply nobody waits for (tube drops)
export const K_RELEASE_CONN = 18;
export const K_SYNC = 19; // a shard made its log durable (start-up)
export const K_RESERVE_CERTAIN = 20; // a reserve certain to find a job, sent without holding the parser
export const K_DELETE_UNHELD = 21; // a delete of a job the connection does not hold: may take a ready job (ReadyCounts rule 3)
