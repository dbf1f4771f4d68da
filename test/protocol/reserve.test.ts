// The reserve family: reserve, reserve-with-timeout, reserve-job; ordering across tubes and
// waiting connections; DEADLINE_SOON and TTR expiry. Time-based cases are few, use 1-2 s, and
// run concurrently.

import { describe, expect, it } from 'vitest';
import { fixture, putCmd, sleep, statsWhen } from '../support/harness.ts';
import { targets } from '../support/servers.ts';

/**
 * Tube names for cross-tube tests. Many names, so that with 4 shards they almost surely land
 * on different shards whatever the hash (12 names all on one of 4 shards: 4^-11).
 */
const MANY_TUBES = Array.from({ length: 12 }, (_, i) => `tube-${String.fromCharCode(97 + i)}${i * 7}`);

describe.each(targets())('$name: reserve', (target) => {
  it('most urgent first; FIFO within a priority', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    const jobs: Array<[number, string]> = [[5, 'a'], [1, 'b'], [5, 'c'], [0, 'd'], [4294967295, 'e'], [1, 'f']];
    for (const [pri, body] of jobs) {
      await c.send(putCmd(body, pri));
      await c.readReply();
    }
    // ids: a1 b2 c3 d4 e5 f6 -> order by (pri, id): d4 b2 f6 a1 c3 e5
    for (const [id, body] of [[4, 'd'], [2, 'b'], [6, 'f'], [1, 'a'], [3, 'c'], [5, 'e']] as const) {
      await c.ask('reserve', `RESERVED ${id} 1\r\n${body}\r\n`);
    }
    await c.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n');
  });

  it('pipelined put / reserve / delete on one connection: replies in order, each reserve sees only what came before it', async (ctx) => {
    // shardstalk sends a reserve that is certain to find a job without holding back the
    // commands after it; what it answers must not change.
    const f = await fixture(target, ctx);
    const c = await f.conn();
    let script = '';
    for (let i = 0; i < 20; i++) script += putCmd(`j${i}`, 20 - i);
    for (let i = 0; i < 20; i++) script += 'reserve-with-timeout 0\r\n' + putCmd(`k${i}`, 0);
    script += 'reserve-with-timeout 0\r\n'.repeat(25);
    await c.send(script);
    for (let i = 1; i <= 20; i++) expect(await c.readReply()).toBe(`INSERTED ${i}\r\n`);
    // Each reserve takes the most urgent job put before it: the k job just before, else the
    // least urgent-numbered j (j19 has pri 1).
    const got: string[] = [];
    for (let i = 0; i < 20; i++) {
      got.push((await c.readReply()).split('\r\n')[1]);
      expect(await c.readReply()).toBe(`INSERTED ${21 + i}\r\n`);
    }
    expect(got).toEqual(['j19', ...Array.from({ length: 19 }, (_, i) => `k${i}`)]);
    const rest: string[] = [];
    for (let i = 0; i < 25; i++) rest.push((await c.readReply()).split('\r\n')[0].split(' ')[0] === 'RESERVED' ? 'job' : 'none');
    expect(rest).toEqual([...Array(20).fill('job'), ...Array(5).fill('none')]);
  });

  it('a wake-up a multi-tube reserve did not use reaches the next reserve waiting on that tube', async (ctx) => {
    // a waits on wq and wr, b on wq alone; one write puts a job in wq, then a more urgent one in
    // wr. beanstalkd hands the wq job to a at its put (a waited first), and b waits on. If a
    // takes the wr job instead (shardstalk may, when both puts are applied before a's turn), the
    // wq job is b's: it must not stay ready beside b's waiting reserve.
    const f = await fixture(target, ctx);
    const [a, b, p] = [await f.conn(), await f.conn(), await f.conn()];
    await a.ask('watch wq', 'WATCHING 2\r\n');
    await a.ask('watch wr', 'WATCHING 3\r\n');
    await a.ask('ignore default', 'WATCHING 2\r\n');
    await b.ask('watch wq', 'WATCHING 2\r\n');
    await b.ask('ignore default', 'WATCHING 1\r\n');
    await a.send('reserve-with-timeout 10\r\n');
    await statsWhen(p, 'a waits', (st) => st['current-waiting'] === '1', ['current-waiting']);
    await b.send('reserve-with-timeout 2\r\n');
    await statsWhen(p, 'a and b wait', (st) => st['current-waiting'] === '2', ['current-waiting']);
    await p.send('use wq\r\n' + putCmd('low', 10) + 'use wr\r\n' + putCmd('high', 1));
    expect([await p.readReply(), await p.readReply(), await p.readReply(), await p.readReply()]).toEqual([
      'USING wq\r\n', 'INSERTED 1\r\n', 'USING wr\r\n', 'INSERTED 2\r\n',
    ]);
    const gotA = await a.readReply();
    if (gotA === 'RESERVED 2 4\r\nhigh\r\n') expect(await b.readReply(4000)).toBe('RESERVED 1 3\r\nlow\r\n');
    else {
      expect(gotA).toBe('RESERVED 1 3\r\nlow\r\n');
      expect(await b.readReply(4000)).toBe('TIMED_OUT\r\n');
    }
  });

  it('a reserve that must wait holds back the put after it (TIMED_OUT, then INSERTED)', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('reserve-with-timeout 1\r\n' + putCmd('late') + 'reserve-with-timeout 0\r\n');
    expect(await c.readReply(4000)).toBe('TIMED_OUT\r\n');
    expect(await c.readReply()).toBe('INSERTED 1\r\n');
    expect(await c.readReply()).toBe('RESERVED 1 4\r\nlate\r\n');
  });

  it('puts pipelined behind a waiting reserve are read after its answer: their ids, and a failed one\'s, come after the put that ended it', async (ctx) => {
    // shardstalk sends them on to the shard, which keeps them behind the reserve and numbers
    // them when it applies them; beanstalkd reads them only once the reserve is answered.
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await a.send('reserve\r\n' + putCmd('y') + 'put 0 0 10 1\r\nzXY' + putCmd('w') + 'reserve-with-timeout 0\r\n');
    await a.expectNothing(100);
    await b.send(putCmd('x'));
    await b.expect('INSERTED 1\r\n');
    await a.expect('RESERVED 1 1\r\nx\r\n');
    await a.expect('INSERTED 2\r\n');
    await a.expect('EXPECTED_CRLF\r\n'); // uses up id 3
    await a.expect('INSERTED 4\r\n');
    await a.expect('RESERVED 2 1\r\ny\r\n');
    await b.send(putCmd('v'));
    await b.expect('INSERTED 5\r\n');
  });

  it('takes the globally most urgent job across many watched tubes', async (ctx) => {
    const f = await fixture(target, ctx);
    const p = await f.conn();
    const w = await f.conn();
    // Priorities chosen so the urgent order jumps between tubes, with ties across tubes.
    const expected: Array<{ id: number; pri: number; body: string }> = [];
    let id = 0;
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < MANY_TUBES.length; i++) {
        const tube = MANY_TUBES[i]!;
        await p.ask(`use ${tube}`, `USING ${tube}\r\n`);
        const pri = ((i * 5) % 7) * 10 + round; // several tubes share a priority
        const body = `${tube}/${round}`;
        await p.send(putCmd(body, pri));
        await p.expect(`INSERTED ${++id}\r\n`);
        expected.push({ id, pri, body });
      }
    }
    for (const tube of MANY_TUBES) await w.request(`watch ${tube}`);
    await w.ask('ignore default', `WATCHING ${MANY_TUBES.length}\r\n`);
    expected.sort((a, b) => a.pri - b.pri || a.id - b.id);
    for (const j of expected) {
      await w.ask('reserve-with-timeout 0', `RESERVED ${j.id} ${j.body.length}\r\n${j.body}\r\n`);
    }
    await w.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n');
  });

  it('ignores jobs in tubes it does not watch', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('use other', 'USING other\r\n');
    await c.send(putCmd('x'));
    await c.expect('INSERTED 1\r\n');
    await c.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n');
    await c.ask('watch other', 'WATCHING 2\r\n');
    await c.ask('reserve-with-timeout 0', 'RESERVED 1 1\r\nx\r\n');
  });

  it('a blocked reserve is woken by a put on another connection', async (ctx) => {
    const f = await fixture(target, ctx);
    const [w, p] = await f.conns(2);
    await w!.send('reserve\r\n');
    await w!.expectNothing(100);
    await p!.send(putCmd('wake', 7));
    await p!.expect('INSERTED 1\r\n');
    await w!.expect('RESERVED 1 4\r\nwake\r\n');
  });

  it('a blocked reserve watching several tubes is woken by a put to any of them', async (ctx) => {
    const f = await fixture(target, ctx);
    const [w, p] = await f.conns(2);
    for (const t of MANY_TUBES) await w!.request(`watch ${t}`);
    await w!.send('reserve\r\n');
    await w!.expectNothing(50);
    const t = MANY_TUBES[7]!;
    await p!.ask(`use ${t}`, `USING ${t}\r\n`);
    await p!.send(putCmd('hi'));
    await p!.expect('INSERTED 1\r\n');
    await w!.expect('RESERVED 1 2\r\nhi\r\n');
  });

  it('a blocked reserve is woken by a release, a kick and a kick-job on other connections', async (ctx) => {
    const f = await fixture(target, ctx);
    const [w, o] = await f.conns(2);
    await o!.send(putCmd('r'));
    await o!.expect('INSERTED 1\r\n');
    await o!.ask('reserve', 'RESERVED 1 1\r\nr\r\n');
    await w!.send('reserve\r\n');
    await w!.expectNothing(50);
    await o!.ask('release 1 0 0', 'RELEASED\r\n');
    await w!.expect('RESERVED 1 1\r\nr\r\n');
    await w!.ask('bury 1 0', 'BURIED\r\n');
    await w!.send('reserve\r\n');
    await w!.expectNothing(50);
    await o!.ask('kick 1', 'KICKED 1\r\n');
    await w!.expect('RESERVED 1 1\r\nr\r\n');
    await w!.ask('bury 1 0', 'BURIED\r\n');
    await w!.send('reserve\r\n');
    await w!.expectNothing(50);
    await o!.ask('kick-job 1', 'KICKED\r\n');
    await w!.expect('RESERVED 1 1\r\nr\r\n');
  });

  it('a blocked reserve is woken when a reserving connection closes and its job is released', async (ctx) => {
    const f = await fixture(target, ctx);
    const [w, o] = await f.conns(2);
    await o!.send(putCmd('z'));
    await o!.expect('INSERTED 1\r\n');
    await o!.ask('reserve', 'RESERVED 1 1\r\nz\r\n');
    await w!.send('reserve\r\n');
    await w!.expectNothing(50);
    await o!.close();
    await w!.expect('RESERVED 1 1\r\nz\r\n');
  });

  it('waiting reserves are served in beanstalkd order (not plain FIFO)', async (ctx) => {
    // beanstalkd keeps a tube's waiting connections in an array; taking one moves the LAST
    // waiter into the taken slot and a cursor moves on. With waiters A B C D the puts go to
    // A, B, D, C. Asserted as observed on beanstalkd 1.12.
    const f = await fixture(target, ctx);
    const [a, b, c, d, p] = await f.conns(5);
    const waiters = { a: a!, b: b!, c: c!, d: d! };
    // Make the arrival order certain: each reserve is waiting before the next is sent (the
    // server's own count says so, however slow the machine).
    let waiting = 0;
    for (const w of Object.values(waiters)) {
      await w.send('reserve\r\n');
      waiting++;
      for (let tries = 0; !(await p!.request('stats')).includes(`\ncurrent-waiting: ${waiting}\n`); tries++) {
        expect(tries, 'the reserve never started waiting').toBeLessThan(500);
        await sleep(5);
      }
    }
    const order: string[] = [];
    for (let i = 1; i <= 4; i++) {
      await p!.send(putCmd(`j${i}`));
      await p!.expect(`INSERTED ${i}\r\n`);
      // Exactly one waiter gets the job; wait until it has its reply.
      let got = false;
      for (let tries = 0; !got; tries++) {
        expect(tries, `nobody got job ${i}`).toBeLessThan(500);
        await sleep(5);
        for (const [name, w] of Object.entries(waiters)) {
          if (w.buffered.length > 0) {
            const reply = await w.readReply();
            order.push(`${name}:${reply.split('\r\n')[0]}`);
            got = true;
          }
        }
      }
    }
    expect(order).toEqual(['a:RESERVED 1 2', 'b:RESERVED 2 2', 'd:RESERVED 3 2', 'c:RESERVED 4 2']);
  });

  it('waiters on different tubes each get the job of their own tube', async (ctx) => {
    const f = await fixture(target, ctx);
    const [p, ...ws] = await f.conns(1 + 6);
    const names = MANY_TUBES.slice(0, 6);
    for (let i = 0; i < 6; i++) {
      await ws[i]!.ask(`watch ${names[i]}`, 'WATCHING 2\r\n');
      await ws[i]!.ask('ignore default', 'WATCHING 1\r\n');
      await ws[i]!.send('reserve\r\n');
    }
    await statsWhen(p!, 'all six reserves wait', (s) => s['current-waiting'] === '6', ['current-waiting']);
    for (let i = 5; i >= 0; i--) {
      await p!.ask(`use ${names[i]}`, `USING ${names[i]}\r\n`);
      await p!.send(putCmd(names[i]!));
      await p!.expect(`INSERTED ${6 - i}\r\n`);
    }
    for (let i = 0; i < 6; i++) {
      await ws[i]!.expect(`RESERVED ${6 - i} ${names[i]!.length}\r\n${names[i]}\r\n`);
    }
  });

  it('reserve-with-timeout 0 answers at once', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n', 500);
    await c.send(putCmd('x'));
    await c.expect('INSERTED 1\r\n');
    await c.ask('reserve-with-timeout 0', 'RESERVED 1 1\r\nx\r\n', 500);
  });

  it('reserve-with-timeout argument parsing (strtol: lenient, odd)', async (ctx) => {
    // beanstalkd reads the timeout with strtol into an int and checks only errno, so:
    // junk or nothing is 0; trailing junk is ignored; a sign is allowed; values that overflow
    // a long are BAD_FORMAT but values that only overflow an int wrap (2^32 -> 0).
    const f = await fixture(target, ctx);
    const c = await f.conn();
    for (const arg of ['x', '', '+0', '-0', '0 junk', '0x10', '4294967296', '  0']) {
      await c.ask(`reserve-with-timeout ${arg}`, 'TIMED_OUT\r\n', 500);
    }
    await c.ask('reserve-with-timeout 99999999999999999999', 'BAD_FORMAT\r\n');
    await c.ask('reserve-with-timeout -99999999999999999999', 'BAD_FORMAT\r\n');
    await c.ask('list-tube-used', 'USING default\r\n');
  });

  it('reserve-with-timeout with a negative timeout waits like reserve', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b, p] = await f.conns(3);
    await a!.send('reserve-with-timeout -1\r\n');
    // a waits first (with connections served on several threads, two commands sent at once by
    // two connections may reach the shard in either order, as they may reach beanstalkd).
    await statsWhen(p!, 'a waits', (st) => st['current-waiting'] === '1', ['current-waiting']);
    // 2^31 wraps to a negative int: also waits forever
    await b!.send('reserve-with-timeout 2147483648\r\n');
    await a!.expectNothing(1300);
    await b!.expectNothing(0);
    await p!.send(putCmd('1') + putCmd('2'));
    await p!.expect('INSERTED 1\r\nINSERTED 2\r\n');
    await a!.expect('RESERVED 1 1\r\n1\r\n');
    await b!.expect('RESERVED 2 1\r\n2\r\n');
  });

  it('reserve-job takes a ready, delayed or buried job by id', async (ctx) => {
    // reserve-job is in beanstalkd 1.12 though not in the protocol text we were given.
    const f = await fixture(target, ctx);
    const [c, o] = await f.conns(2);
    await c.send(putCmd('ready') + putCmd('delayed', 0, 100) + putCmd('buried'));
    await c.expect('INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n');
    await c.ask('reserve-job 3', 'RESERVED 3 6\r\nburied\r\n');
    await c.ask('bury 3 9', 'BURIED\r\n');
    await c.ask('reserve-job 2', 'RESERVED 2 7\r\ndelayed\r\n');
    await c.ask('reserve-job 3', 'RESERVED 3 6\r\nburied\r\n');
    await c.ask('reserve-job 1', 'RESERVED 1 5\r\nready\r\n');
    // already reserved (by this or another connection): NOT_FOUND
    await c.ask('reserve-job 1', 'NOT_FOUND\r\n');
    await o!.ask('reserve-job 2', 'NOT_FOUND\r\n');
    await c.ask('reserve-job 4', 'NOT_FOUND\r\n');
    await c.ask('reserve-job 0', 'NOT_FOUND\r\n');
    await c.ask('reserve-job x', 'BAD_FORMAT\r\n');
    await c.ask('reserve-job 1 ', 'BAD_FORMAT\r\n');
    await c.ask('reserve-job -1', 'BAD_FORMAT\r\n');
    await c.ask('reserve-job 18446744073709551616', 'BAD_FORMAT\r\n');
    const s = await c.request('stats-job 3');
    expect(s).toMatch(/\nstate: reserved\n/);
    expect(s).toMatch(/\nreserves: 2\n/);
    const stats = await c.request('stats');
    // reserve-job is not counted under cmd-reserve
    expect(stats).toMatch(/\ncmd-reserve: 0\n/);
    expect(stats).toMatch(/\ncurrent-jobs-reserved: 3\n/);
    expect(stats).toMatch(/\ncurrent-workers: 1\n/);
    await c.ask('delete 1', 'DELETED\r\n');
  });

  it('reserve-job from a tube the connection does not watch', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('use elsewhere', 'USING elsewhere\r\n');
    await c.send(putCmd('e'));
    await c.expect('INSERTED 1\r\n');
    await c.ask('reserve-job 1', 'RESERVED 1 1\r\ne\r\n');
    expect(await c.request('stats-job 1')).toMatch(/\ntube: elsewhere\nstate: reserved\n/);
  });

  it('a reserve from a half-closed connection answers TIMED_OUT', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('reserve\r\n');
    await c.expectNothing(50);
    c.socket.end(); // half-close: we can still read
    await c.expect('TIMED_OUT\r\n');
    expect(await c.isClosed()).toBe(true);
  });
});

describe.each(targets())('$name: reserve timing (TTR, DEADLINE_SOON, timeouts)', (target) => {
  it.concurrent('reserve-with-timeout 1 times out after about a second', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    const t0 = Date.now();
    await c.send('reserve-with-timeout 1\r\n');
    await c.expectNothing(700);
    await c.expect('TIMED_OUT\r\n', 2000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    // trailing junk after the number is ignored: "1x" is 1
    const t1 = Date.now();
    await c.ask('reserve-with-timeout 1x', 'TIMED_OUT\r\n', 2500);
    expect(Date.now() - t1).toBeGreaterThanOrEqual(900);
  });

  it.concurrent('reserve-with-timeout 2 is answered by a job that arrives in time', async (ctx) => {
    const f = await fixture(target, ctx);
    const [c, p] = await f.conns(2);
    await c.send('reserve-with-timeout 2\r\n');
    await statsWhen(p!, 'the reserve waits', (s) => s['current-waiting'] === '1', ['current-waiting']);
    await sleep(300); // deliberate: the job arrives well into the timeout
    await p!.send(putCmd('late'));
    await p!.expect('INSERTED 1\r\n');
    await c!.expect('RESERVED 1 4\r\nlate\r\n');
  });

  it.concurrent('a delayed put becomes ready after its delay and wakes a waiting reserve', async (ctx) => {
    const f = await fixture(target, ctx);
    const [w, p] = await f.conns(2);
    const t0 = Date.now();
    await p!.send(putCmd('later', 0, 1) + putCmd('much-later', 0, 100));
    await p!.expect('INSERTED 1\r\nINSERTED 2\r\n');
    expect(await p!.request('stats-job 1')).toMatch(/\nstate: delayed\n/);
    await w!.send('reserve\r\n');
    // The job is due a second after its put, itself after t0: nothing until t0 + 600 ms (what
    // came before may have taken part of that on a loaded machine).
    await w!.expectNothing(Math.max(0, 600 - (Date.now() - t0)));
    await w!.expect('RESERVED 1 5\r\nlater\r\n', 2000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(await p!.request('stats-job 2')).toMatch(/\nstate: delayed\n/);
  });

  it.concurrent('release with a delay comes back after the delay', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('again'));
    await c.expect('INSERTED 1\r\n');
    await c.ask('reserve', 'RESERVED 1 5\r\nagain\r\n');
    await c.ask('release 1 9 1', 'RELEASED\r\n');
    await c.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n');
    await c.ask('peek-delayed', 'FOUND 1 5\r\nagain\r\n');
    await c.ask('reserve-with-timeout 2', 'RESERVED 1 5\r\nagain\r\n', 3000);
    expect(await c.request('stats-job 1')).toMatch(/\npri: 9\nage: \d+\ndelay: 1\n/);
  });

  it.concurrent('TTR expiry puts the job back to ready; the old holder can no longer touch it', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await a!.send(putCmd('ttr', 0, 0, 1));
    await a!.expect('INSERTED 1\r\n');
    // The TTR runs from the reserve, itself after t0.
    const t0 = Date.now();
    await a!.ask('reserve', 'RESERVED 1 3\r\nttr\r\n');
    await b!.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n');
    // b waits; the job comes back after ~1 s and b gets it
    await b!.send('reserve\r\n');
    await b!.expectNothing(Math.max(0, 600 - (Date.now() - t0))); // not released early
    try {
      await b!.expect('RESERVED 1 3\r\nttr\r\n', 2500);
    } catch (err) {
      // beanstalkd 1.12 race: on a busy machine it sometimes loses the timer of a connection
      // that holds a job and is otherwise idle; the job then stays "reserved" with a negative
      // time-left until that connection sends anything. Only the reference gets this poke;
      // shardstalk must release on time.
      if (!target.reference) throw err;
      console.warn(`beanstalkd missed a TTR expiry (known 1.12 race); poking the holder: ${(err as Error).message}`);
      await a!.ask('list-tube-used', 'USING default\r\n');
      await b!.expect('RESERVED 1 3\r\nttr\r\n', 1000);
    }
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    await a!.ask('delete 1', 'NOT_FOUND\r\n');
    await a!.ask('touch 1', 'NOT_FOUND\r\n');
    await a!.ask('release 1 0 0', 'NOT_FOUND\r\n');
    const s = await b!.request('stats-job 1');
    expect(s).toMatch(/\nstate: reserved\n/);
    expect(s).toMatch(/\nreserves: 2\ntimeouts: 1\nreleases: 0\n/);
    expect(await b!.request('stats')).toMatch(/\njob-timeouts: 1\n/);
    await b!.ask('delete 1', 'DELETED\r\n');
  });

  it.concurrent('DEADLINE_SOON: a reserve inside the last second of a reserved job', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    // ttr 1: the job is in its safety margin from the start
    await c.send(putCmd('soon', 0, 0, 1));
    await c.expect('INSERTED 1\r\n');
    await c.ask('reserve', 'RESERVED 1 4\r\nsoon\r\n');
    await c.ask('reserve', 'DEADLINE_SOON\r\n', 500);
    await c.ask('reserve-with-timeout 5', 'DEADLINE_SOON\r\n', 500);
    // ...unless a job is ready right now: then it is simply reserved
    await c.send(putCmd('other'));
    await c.expect('INSERTED 2\r\n');
    await c.ask('reserve', 'RESERVED 2 5\r\nother\r\n', 500);
    await c.ask('delete 2', 'DELETED\r\n');
    // touch restarts the TTR but with ttr 1 the job is still inside the margin
    await c.ask('touch 1', 'TOUCHED\r\n');
    await c.ask('reserve', 'DEADLINE_SOON\r\n', 500);
    expect(await c.request('stats')).toMatch(/\ncmd-reserve: 4\ncmd-reserve-with-timeout: 1\n/);
    await c.ask('delete 1', 'DELETED\r\n');
  });

  it.concurrent('DEADLINE_SOON answers a waiting (pipelined) reserve; queued commands then run', async (ctx) => {
    // The exchange from beanstalk-deadline-soon.txt with ttr 2: reserve, reserve (waits),
    // delete (queued behind the waiting reserve). ~1 s later the margin is reached.
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('tweet', 0, 0, 2));
    await c.expect('INSERTED 1\r\n');
    const t0 = Date.now();
    await c.send('reserve\r\nreserve\r\ndelete 1\r\n');
    await c.expect('RESERVED 1 5\r\ntweet\r\n');
    await c.expectNothing(Math.max(0, 500 - (Date.now() - t0))); // the margin is reached ~1 s after t0
    await c.expect('DEADLINE_SOON\r\nDELETED\r\n', 2000);
    const elapsed = Date.now() - t0;
    expect(elapsed).toBeGreaterThanOrEqual(800);
    expect(elapsed).toBeLessThan(1900);
    await c.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n');
  });

  it.concurrent('DEADLINE_SOON answers a waiting reserve-with-timeout before its own timeout', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('x', 0, 0, 2));
    await c.expect('INSERTED 1\r\n');
    const t0 = Date.now();
    await c.ask('reserve', 'RESERVED 1 1\r\nx\r\n');
    await c.send('reserve-with-timeout 10\r\n');
    await c.expectNothing(Math.max(0, 500 - (Date.now() - t0))); // the margin is reached ~1 s after t0
    await c.expect('DEADLINE_SOON\r\n', 2000);
    await c.ask('touch 1', 'TOUCHED\r\n');
    await c.ask('delete 1', 'DELETED\r\n');
  });
});
