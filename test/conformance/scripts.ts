// Realistic multi-connection sessions. Each is run against beanstalkd and shardstalk and the
// transcripts must match (see sessions.test.ts). Sleeps are few, 1-1.5 s, and chosen so that
// truncated seconds (age, time-left) come out the same on both servers.

import type { Script, Step } from './runner.ts';

/** One command, one reply. */
const c = (conn: string, cmd: string): Step => ({ conn, cmd });
/** A put with its body; one reply. */
const put = (conn: string, body: string, pri = 0, delay = 0, ttr = 60): Step => ({
  conn,
  cmd: `put ${pri} ${delay} ${ttr} ${Buffer.byteLength(body, 'latin1')}`,
  body,
});
const send = (conn: string, data: string): Step => ({ conn, send: data });
const read = (conn: string, n = 1, timeoutMs?: number): Step =>
  timeoutMs === undefined ? { conn, read: n } : { conn, read: n, timeoutMs };
const nothing = (conn: string, ms = 100): Step => ({ conn, nothing: ms });
const close = (conn: string): Step => ({ conn, close: true });
const closed = (conn: string): Step => ({ conn, closed: true });
const sleep = (ms: number): Step => ({ sleep: ms });
/** `count` replies arrive on some of the listed (blocked) connections; record who got what. */
const gather = (count: number, ...conns: string[]): Step => ({ gather: conns, count });
/** `conn` sends a reserve that waits (nothing is ready for it). */
const waits = (conn: string): Step[] => [{ conn, waits: true }];

/** A snapshot of everything a monitoring client would look at. */
function snapshot(conn: string, tubes: string[] = []): Step[] {
  return [c(conn, 'stats'), c(conn, 'list-tubes'), ...tubes.map((t) => c(conn, `stats-tube ${t}`))];
}

/** Many tube names, so that with 4 shards they spread over all of them. */
const TUBES = ['emails', 'images', 'video', 'reports', 'billing', 'search', 'thumbs', 'audit', 'sms', 'push', 'etl', 'cache'];

export const SCRIPTS: Script[] = [
  {
    name: 'producer and worker on one tube',
    steps: [
      c('p', 'use emails'),
      ...[1, 2, 3, 4, 5].map((i) => put('p', `{"to":"user${i}@example.com"}`, 100)),
      c('w', 'watch emails'),
      c('w', 'ignore default'),
      ...[1, 2, 3, 4, 5].flatMap((i) => [c('w', 'reserve'), c('w', `delete ${i}`)]),
      c('w', 'reserve-with-timeout 0'),
      ...snapshot('m', ['emails']),
    ],
  },
  {
    name: 'several producers, one worker watching every tube, priorities across tubes',
    steps: [
      ...TUBES.flatMap((t, i) => [
        c(`p${i % 3}`, `use ${t}`),
        put(`p${i % 3}`, `${t}-a`, (i * 37) % 5),
        put(`p${i % 3}`, `${t}-b`, (i * 11) % 5),
      ]),
      ...TUBES.map((t) => c('w', `watch ${t}`)),
      c('w', 'list-tubes-watched'),
      ...Array.from({ length: 24 }, () => c('w', 'reserve-with-timeout 0')),
      c('w', 'reserve-with-timeout 0'),
      ...snapshot('m', TUBES.slice(0, 4)),
      ...Array.from({ length: 24 }, (_, i) => c('w', `delete ${i + 1}`)),
      ...snapshot('m'),
    ],
  },
  {
    name: 'bury and kick cycles',
    steps: [
      c('p', 'use flaky'),
      ...[1, 2, 3, 4].map((i) => put('p', `job-${i}`, 10 - i)),
      c('w', 'watch flaky'),
      ...[4, 3, 2, 1].flatMap((id) => [c('w', 'reserve'), c('w', `bury ${id} ${id * 100}`)]),
      c('p', 'peek-buried'),
      ...snapshot('m', ['flaky']),
      c('p', 'kick 2'),
      c('p', 'peek-buried'),
      c('p', 'peek-ready'),
      c('w', 'reserve'),
      c('w', 'bury 4 1'),
      c('p', 'kick-job 2'),
      c('p', 'kick 100'),
      c('p', 'kick 100'),
      c('w', 'stats-job 4'),
      c('w', 'stats-job 1'),
      // ready now: 4, 2, 1 (w still holds 3)
      ...[1, 2, 3].map(() => c('w', 'reserve')),
      ...[1, 2, 3, 4].map((id) => c('w', `delete ${id}`)),
      ...snapshot('m', ['flaky']),
    ],
  },
  {
    name: 'release with new priorities and delays, then kick the delayed',
    steps: [
      put('p', 'a', 5),
      put('p', 'b', 5),
      put('p', 'c', 5),
      c('w', 'reserve'),
      c('w', 'release 1 9 0'),
      c('w', 'reserve'),
      c('w', 'release 2 0 300'),
      c('w', 'reserve'),
      c('w', 'release 3 0 200'),
      c('p', 'peek-delayed'),
      c('p', 'peek-ready'),
      c('w', 'reserve'),
      c('w', 'release 1 1 0'),
      c('p', 'stats-job 2'),
      c('p', 'kick 1'),
      c('p', 'peek-delayed'),
      c('w', 'reserve'),
      c('w', 'reserve'),
      c('w', 'reserve-with-timeout 0'),
      c('w', 'stats-job 3'),
      ...snapshot('m', ['default']),
    ],
  },
  {
    name: 'pause-tube holds back one tube while another is served',
    steps: [
      c('p', 'use slow'),
      put('p', 'slow-job', 0),
      c('p', 'use fast'),
      put('p', 'fast-job', 1000),
      c('w', 'watch slow'),
      c('w', 'watch fast'),
      c('p', 'pause-tube slow 1'),
      c('m', 'stats-tube slow'),
      c('w', 'reserve'),
      c('w', 'delete 2'),
      send('w', 'reserve\r\n'),
      nothing('w', 300),
      read('w', 1, 2500),
      c('w', 'delete 1'),
      c('m', 'stats-tube slow'),
      c('m', 'stats'),
    ],
  },
  {
    name: 'list-tubes as tubes appear and vanish',
    steps: [
      c('a', 'list-tubes'),
      c('a', 'use alpha'),
      c('b', 'watch beta'),
      c('c', 'watch gamma'),
      c('c', 'use delta'),
      c('m', 'list-tubes'),
      put('c', 'keeps delta alive'),
      c('c', 'use default'),
      c('m', 'list-tubes'),
      c('b', 'ignore beta'),
      c('m', 'list-tubes'),
      send('a', 'quit\r\n'),
      closed('a'),
      c('m', 'list-tubes'),
      c('b', 'watch epsilon'),
      c('b', 'watch zeta'),
      c('m', 'list-tubes'),
      c('c', 'ignore gamma'),
      c('m', 'list-tubes'),
      c('m', 'delete 1'),
      c('m', 'list-tubes'),
      close('b'),
      c('m', 'list-tubes'),
      c('m', 'stats'),
    ],
  },
  {
    name: 'blocked reserves woken by puts on other connections',
    steps: [
      c('w1', 'watch images'),
      c('w1', 'ignore default'),
      c('w2', 'watch video'),
      c('w2', 'watch images'),
      c('w2', 'ignore default'),
      c('w3', 'watch thumbs'),
      send('w1', 'reserve\r\n'),
      send('w2', 'reserve\r\n'),
      send('w3', 'reserve\r\n'),
      nothing('w1', 50),
      c('m', 'stats-tube images'),
      c('m', 'stats'),
      c('p', 'use video'),
      put('p', 'v1'),
      read('w2'),
      c('p', 'use images'),
      put('p', 'i1'),
      read('w1'),
      put('p', 'i2'),
      nothing('w1', 50),
      nothing('w2', 0),
      c('p', 'use thumbs'),
      put('p', 't1'),
      read('w3'),
      put('p', 'to default'),
      nothing('w3', 50),
      c('m', 'stats'),
      c('w1', 'reserve-with-timeout 0'),
      c('w2', 'reserve-with-timeout 0'),
    ],
  },
  {
    name: 'four workers waiting on one tube are served in beanstalkd order',
    steps: [
      ...['a', 'b', 'c', 'd'].flatMap((w) => [send(w, 'reserve\r\n'), nothing(w, 20)]),
      put('p', 'first'),
      read('a'),
      put('p', 'second'),
      read('b'),
      put('p', 'third'),
      read('d'),
      put('p', 'fourth'),
      read('c'),
      // a second round with the cursor where the first left it
      ...['a', 'b', 'c'].flatMap((w) => [send(w, 'reserve\r\n'), nothing(w, 20)]),
      put('p', 'fifth'),
      read('b'),
      nothing('a', 30),
      nothing('c', 0),
      c('m', 'stats'),
    ],
  },
  {
    name: 'TTR expiry hands a job to another worker',
    steps: [
      put('p', 'slow work', 0, 0, 1),
      c('w1', 'reserve'),
      c('w1', 'stats-job 1'),
      c('w2', 'reserve-with-timeout 0'),
      sleep(1300),
      // beanstalkd 1.12 can lose the timer of an idle connection holding a job on a busy
      // machine; any command from that connection re-arms it. Harmless where the job already
      // timed out, and it keeps the reference transcript stable.
      c('w1', 'list-tube-used'),
      c('w2', 'reserve-with-timeout 0'),
      c('w1', 'delete 1'),
      c('w1', 'touch 1'),
      c('w2', 'stats-job 1'),
      c('m', 'stats'),
      c('w2', 'delete 1'),
    ],
  },
  {
    name: 'DEADLINE_SOON unblocks a pipelined reserve so the delete behind it runs',
    steps: [
      put('p', 'tweet', 0, 0, 2),
      send('w', 'reserve\r\nreserve\r\ndelete 1\r\n'),
      read('w'),
      nothing('w', 400),
      read('w', 2, 2500),
      c('w', 'reserve-with-timeout 0'),
      c('m', 'stats'),
    ],
  },
  {
    name: 'a delayed job becomes ready on time',
    steps: [
      c('p', 'use later'),
      put('p', 'in a second', 3, 1),
      put('p', 'much later', 2, 100),
      c('p', 'peek-delayed'),
      c('p', 'peek-ready'),
      c('m', 'stats-tube later'),
      c('w', 'watch later'),
      send('w', 'reserve\r\n'),
      nothing('w', 400),
      read('w', 1, 2500),
      // age 1: released no earlier than 1 s after its put (job 2's age would be racy: it was
      // put a moment later, by however long that round trip took)
      c('w', 'stats-job 1'),
      c('p', 'peek-delayed'),
      c('m', 'stats-tube later'),
      c('p', 'kick 5'),
      c('w', 'reserve'),
    ],
  },
  {
    name: 'binary bodies survive put, peek and reserve',
    server: { maxJobSize: 64 },
    steps: [
      put('p', '\0\r\n\0'),
      put('p', 'line1\r\nline2\r\n'),
      put('p', '\xff\xfe\r'),
      put('p', ''),
      put('p', 'x'.repeat(64)),
      put('p', 'y'.repeat(65)),
      c('p', 'peek 1'),
      c('p', 'peek 2'),
      c('p', 'peek-ready'),
      ...[1, 2, 3, 4, 5].map(() => c('w', 'reserve')),
      c('m', 'stats'),
    ],
  },
  {
    name: 'a misbehaving client does not disturb the others',
    server: { maxJobSize: 16 },
    steps: [
      c('good', 'use work'),
      put('good', 'ok-1'),
      send('bad', 'reservex\r\nput 1\r\nput 0 0 10 5 junk\r\nhello\r\n'),
      read('bad', 4),
      put('good', 'ok-2'),
      send('bad', 'x'.repeat(300) + '\r\n' + 'use ' + 'z'.repeat(201) + '\r\n'),
      read('bad', 2),
      send('bad', 'put 0 0 10 3\r\nabcXY'),
      read('bad'),
      send('bad', 'put 0 0 10 17\r\n' + 'q'.repeat(17) + '\r\n'),
      read('bad'),
      send('bad', 'peek\r\nstats-job\r\nkick x\r\nbury 1\r\n\0\r\n'),
      read('bad', 5),
      put('bad', 'fine now'),
      c('good', 'peek-ready'),
      c('w', 'watch work'),
      c('w', 'reserve'),
      c('w', 'reserve'),
      c('w', 'reserve-with-timeout 0'),
      c('m', 'stats'),
    ],
  },
  {
    name: 'closing a worker returns its jobs; quit too',
    steps: [
      ...['j1', 'j2', 'j3', 'j4'].map((b, i) => put('p', b, i)),
      c('w1', 'reserve'),
      c('w1', 'reserve'),
      c('w2', 'reserve'),
      ...snapshot('m'),
      close('w1'),
      c('m', 'stats'),
      c('w3', 'reserve'),
      c('w3', 'reserve'),
      send('w2', 'quit\r\n'),
      closed('w2'),
      c('w3', 'reserve'),
      c('w3', 'reserve'),
      c('w3', 'stats-job 1'),
      c('w3', 'stats-job 3'),
      ...snapshot('m'),
    ],
  },
  {
    name: 'touch keeps a reservation alive past its original TTR',
    steps: [
      put('p', 'long task', 0, 0, 2),
      c('w', 'reserve'),
      sleep(1000),
      c('w', 'touch 1'),
      sleep(1300),
      c('w', 'stats-job 1'),
      c('x', 'reserve-with-timeout 0'),
      c('w', 'delete 1'),
      c('m', 'stats'),
    ],
  },
  {
    name: 'reserve-job and kick-job across tubes',
    steps: [
      ...TUBES.slice(0, 6).flatMap((t, i) => [c('p', `use ${t}`), put('p', `${t}-job`, i, i % 2 === 0 ? 0 : 500)]),
      c('w', 'reserve-job 2'),
      c('w', 'reserve-job 1'),
      c('w', 'reserve-job 1'),
      c('w', 'bury 1 7'),
      c('w', 'bury 2 8'),
      c('p', 'kick-job 1'),
      c('p', 'kick-job 4'),
      c('p', 'kick-job 3'),
      c('w', 'reserve-with-timeout 0'),
      ...TUBES.slice(0, 6).map((t) => c('w', `watch ${t}`)),
      c('w', 'reserve-with-timeout 0'),
      c('w', 'reserve-with-timeout 0'),
      c('w', 'reserve-with-timeout 0'),
      ...snapshot('m', TUBES.slice(0, 6)),
    ],
  },
  {
    name: 'pipelined session in one write per client',
    steps: [
      send('a', 'use pipe\r\nput 1 0 60 3\r\none\r\nput 0 0 60 3\r\ntwo\r\nlist-tube-used\r\nwatch pipe\r\nreserve\r\nrelease 2 5 0\r\nreserve\r\ndelete 1\r\nstats-tube pipe\r\n'),
      read('a', 10),
      send('b', 'use pipe\r\nwatch pipe\r\nignore default\r\nreserve\r\nbury 2 0\r\nkick 1\r\nreserve\r\ndelete 2\r\nreserve-with-timeout 0\r\nlist-tubes\r\nstats\r\n'),
      read('b', 11),
    ],
  },
  {
    name: 'urgent jobs and stats counters',
    steps: [
      put('p', 'u1', 0),
      put('p', 'u2', 1023),
      put('p', 'n1', 1024),
      put('p', 'n2', 4294967295),
      put('p', 'd1', 0, 100),
      c('m', 'stats'),
      c('w', 'reserve'),
      c('m', 'stats'),
      c('w', 'release 1 2000 0'),
      c('m', 'stats-tube default'),
      c('w', 'reserve'),
      c('w', 'bury 2 0'),
      c('m', 'stats'),
      c('p', 'kick 10'),
      c('m', 'stats'),
    ],
  },
  {
    name: 'workers with overlapping watch sets, blocked, served as jobs arrive',
    steps: [
      ...([['w1', 'ta', 'tb'], ['w2', 'tb', 'tc'], ['w3', 'ta', 'tc'], ['w4', 'ta', 'tb', 'tc']] as const).flatMap(([w, ...ts]) => [
        ...ts.map((t) => c(w, `watch ${t}`)),
        c(w, 'ignore default'),
      ]),
      ...['w1', 'w2', 'w3', 'w4'].flatMap((w) => [send(w, 'reserve\r\n'), nothing(w, 20)]),
      c('m', 'stats-tube tb'),
      // how many workers each put wakes (tb#3 finds everyone watching tb busy)
      ...(['tb', 'ta', 'tc', 'tb', 'ta'] as const).flatMap((t, i) => [
        c('p', `use ${t}`),
        put('p', `${t}#${i}`),
        gather([1, 1, 1, 0, 1][i]!, 'w1', 'w2', 'w3', 'w4'),
      ]),
      // everyone asks again (one job is still ready); then jobs arrive in another order.
      // The sleep(20) orders the waiters and stays a sleep: a script step cannot poll, and polling
      // stats here would change the transcript (cmd-stats / cmd-stats-tube in the closing stats
      // would count the polls, which differ from server to server).
      ...['w1', 'w2', 'w3', 'w4'].flatMap((w) => [send(w, 'reserve\r\n'), sleep(20)]),
      gather(1, 'w1', 'w2', 'w3', 'w4'),
      ...(['tc', 'tc', 'ta', 'tb', 'tb'] as const).flatMap((t, i) => [
        c('p', `use ${t}`),
        put('p', `${t}#${i + 5}`),
        gather([1, 1, 1, 0, 0][i]!, 'w1', 'w2', 'w3', 'w4'),
      ]),
      c('m', 'stats'),
    ],
  },
  {
    // beanstalkd gives a closing connection's jobs back one at a time, in the order it reserved
    // them, each to the next waiter (enqueue_reserved_jobs: enqueue_job runs process_queue); and
    // every reserve, even one a ready job answers at once, passes through the tube's waiting set
    // (its take cursor moves): so who gets which job depends on both.
    name: "a closing worker's jobs go back in the order it reserved them, one waiter each",
    steps: [
      c('p', 'use back'),
      c('a', 'watch back'),
      ...[10, 5, 1].flatMap((pri, i) => [put('p', `job-${i + 1}`, pri), c('a', 'reserve')]),
      ...['w1', 'w2', 'w3'].flatMap((w) => [c(w, 'watch back'), send(w, 'reserve\r\n'), nothing(w, 20)]),
      close('a'),
      gather(3, 'w1', 'w2', 'w3'),
      c('m', 'stats-tube back'),
    ],
  },
  {
    // The reserve answered at once passed through the tube's waiting set (cursor 1): of the two
    // workers then waiting, the second is served first.
    name: 'a reserve answered at once decides which of the next waiters a put wakes',
    steps: [
      c('p', 'use turn'),
      c('a', 'watch turn'),
      put('p', 'first'),
      c('a', 'reserve'),
      ...['w1', 'w2'].flatMap((w) => [c(w, 'watch turn'), send(w, 'reserve\r\n'), nothing(w, 20)]),
      put('p', 'second'),
      gather(1, 'w1', 'w2'),
      put('p', 'third'),
      gather(1, 'w1', 'w2'),
    ],
  },
  {
    // Two delays that end together (put in one write): beanstalkd hands the jobs out in the order
    // the delays end, each to the next waiter, not the more urgent one first.
    name: 'jobs whose delays end together go to waiting workers in the order the delays end',
    steps: [
      c('p', 'use later'),
      // (w1 waits over one shard, w2 over two of 4: `later` and `default`.)
      c('w1', 'watch later'),
      c('w1', 'ignore default'),
      send('w1', 'reserve\r\n'),
      nothing('w1', 20),
      c('w2', 'watch later'),
      send('w2', 'reserve\r\n'),
      nothing('w2', 20),
      send('p', 'put 10 1 60 5\r\nfirst\r\nput 5 1 60 6\r\nsecond\r\n'),
      read('p', 2),
      gather(2, 'w1', 'w2'),
    ],
  },
  {
    name: 'kick gives the kicked jobs to waiting workers one at a time, in the order it kicks them',
    steps: [
      c('p', 'use kicked'),
      c('b', 'watch kicked'),
      ...[7, 3, 9, 1].map((pri, i) => put('p', `job-${i + 1}`, pri)),
      ...[4, 2, 1, 3].flatMap((id) => [c('b', 'reserve'), c('b', `bury ${id} ${id}`)]),
      ...['w1', 'w2', 'w3'].flatMap((w) => [c(w, 'watch kicked'), send(w, 'reserve\r\n'), nothing(w, 20)]),
      c('p', 'kick 4'),
      gather(3, 'w1', 'w2', 'w3'),
      c('p', 'peek-ready'),
      c('m', 'stats-tube kicked'),
    ],
  },
  {
    // `left`, `right` and `default` are on three different shards of 4: wa waits over three
    // shards, wb over one; each tube's waiting set serves them in beanstalkd's order.
    name: 'a worker waiting on tubes of several shards takes its turn beside one waiting on one tube',
    steps: [
      c('p', 'use left'),
      c('wa', 'watch left'),
      c('wa', 'watch right'),
      c('wb', 'watch left'),
      c('wb', 'ignore default'),
      ...waits('wa'),
      ...waits('wb'),
      put('p', 'first'),
      gather(1, 'wa', 'wb'),
      put('p', 'second'),
      gather(1, 'wa', 'wb'),
      // Now the other way round: wb waits first.
      ...waits('wb'),
      ...waits('wa'),
      put('p', 'third'),
      gather(1, 'wa', 'wb'),
      // A job of `right` stays ready beside wb (it does not watch `right`); one of `left` is its.
      c('p', 'use right'),
      put('p', 'fourth'),
      nothing('wb', 20),
      c('p', 'use left'),
      put('p', 'fifth'),
      gather(1, 'wa', 'wb'),
      c('m', 'stats-tube left'),
      c('m', 'stats-tube right'),
    ],
  },
  {
    // w1 held jobs of ta, tb, tc (shards 2, 3, 0 of 4), most urgent first; w2 waits over ta, tb
    // and default, w3 over tc, tb and default (each over three shards). The jobs go back in the
    // order w1 reserved them, each to the next worker waiting on its tube.
    name: "a closing worker's jobs go to the workers waiting for them",
    steps: [
      ...(['ta', 'tb', 'tc'] as const).flatMap((t, i) => [c('p', `use ${t}`), put('p', `${t}-job`, 10 - i)]),
      ...['ta', 'tb', 'tc'].map((t) => c('w1', `watch ${t}`)),
      c('w1', 'reserve'),
      c('w1', 'reserve'),
      c('w1', 'reserve'),
      c('w2', 'watch ta'),
      c('w2', 'watch tb'),
      c('w3', 'watch tc'),
      c('w3', 'watch tb'),
      ...waits('w2'),
      ...waits('w3'),
      close('w1'),
      gather(2, 'w2', 'w3'),
      c('m', 'stats'),
      c('m', 'peek-ready'),
      c('m', 'use ta'),
      c('m', 'peek-ready'),
    ],
  },
  {
    // The closing worker held jobs of `left`, `right`, `left` (shards 0, 1, 0 of 4): they go back
    // in that order, each to the next worker waiting on its tube (wa over three shards, wb over one).
    name: "a closing worker's jobs on several shards go back in the order it reserved them",
    steps: [
      ...(['left', 'right', 'left'] as const).flatMap((t, i) => [c('p', `use ${t}`), put('p', `job-${i + 1}`, 10 - i)]),
      ...['left', 'right'].map((t) => c('w', `watch ${t}`)),
      c('w', 'reserve'),
      c('w', 'reserve'),
      c('w', 'reserve'),
      c('wa', 'watch left'),
      c('wa', 'watch right'),
      c('wb', 'watch left'),
      c('wb', 'ignore default'),
      ...waits('wa'),
      ...waits('wb'),
      close('w'),
      gather(2, 'wa', 'wb'),
      c('m', 'use right'),
      c('m', 'peek-ready'),
      c('m', 'stats'),
    ],
  },
  {
    // The closing worker held jobs of `left`, `left`, `right` (shards 0, 0, 1 of 4): each goes to
    // the next worker waiting on its tube, in the order it reserved them; wa and wc wait over two
    // shards (their tube's and `default`'s), wb over one.
    name: "a closing worker's jobs on several shards go to the workers waiting for them",
    steps: [
      ...(['left', 'left', 'right'] as const).flatMap((t, i) => [c('p', `use ${t}`), put('p', `job-${i + 1}`, i + 1)]),
      c('w', 'watch left'),
      c('w', 'watch right'),
      c('w', 'reserve'),
      c('w', 'reserve'),
      c('w', 'reserve'),
      c('wa', 'watch left'),
      c('wb', 'watch left'),
      c('wb', 'ignore default'),
      c('wc', 'watch right'),
      ...waits('wa'),
      ...waits('wb'),
      ...waits('wc'),
      close('w'),
      gather(3, 'wa', 'wb', 'wc'),
      c('m', 'stats'),
    ],
  },
  {
    name: 'DEADLINE_SOON for a worker waiting on many tubes while holding a job from one of them',
    steps: [
      ...TUBES.map((t) => c('w', `watch ${t}`)),
      c('p', `use ${TUBES[5]}`),
      put('p', 'held', 0, 0, 2),
      c('w', 'reserve'),
      send('w', 'reserve\r\n'),
      nothing('w', 400),
      read('w', 1, 2500),
      c('w', 'touch 1'),
      c('p', `use ${TUBES[9]}`),
      put('p', 'next'),
      c('w', 'reserve'),
      c('w', 'delete 1'),
      c('w', 'delete 2'),
      c('m', 'stats'),
    ],
  },
];
