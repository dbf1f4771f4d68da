// delete, release, bury, touch, kick, kick-job: state changes, ownership, and argument errors.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '../support/client.ts';
import { fixture, putCmd, putForId, sharedFixture } from '../support/harness.ts';
import { targets } from '../support/servers.ts';

/** Put `n` jobs "j1".."jn" with the given delay; expects ids from `firstId`. */
async function putJobs(c: Client, n: number, firstId = 1, delay = 0, pri = 0): Promise<void> {
  let want = '';
  let send = '';
  for (let i = 0; i < n; i++) {
    send += putCmd(`j${firstId + i}`, pri, delay);
    want += `INSERTED ${firstId + i}\r\n`;
  }
  await c.send(send);
  await c.expect(want);
}

async function stateOf(c: Client, id: number): Promise<string> {
  const m = /\nstate: (\w+)\n/.exec(await c.request(`stats-job ${id}`));
  return m ? m[1]! : 'gone';
}

/** Argument errors shared by every "<verb> <id>" command. */
const BAD_ID_ARGS = ['x', '-1', '+1', '1 ', '1x', '1 2', '18446744073709551616', '0x1', ''];

describe.each(targets())('$name: delete', (target) => {
  it('deletes ready, delayed, buried and own reserved jobs', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await putJobs(c, 3);
    await putJobs(c, 1, 4, 100);
    await c.ask('reserve', 'RESERVED 1 2\r\nj1\r\n');
    await c.ask('reserve', 'RESERVED 2 2\r\nj2\r\n');
    await c.ask('bury 2 0', 'BURIED\r\n');
    for (const id of [1, 2, 3, 4]) await c.ask(`delete ${id}`, 'DELETED\r\n');
    for (const id of [1, 2, 3, 4]) await c.ask(`delete ${id}`, 'NOT_FOUND\r\n');
    const s = await c.request('stats');
    expect(s).toMatch(/\ncurrent-jobs-ready: 0\ncurrent-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\n/);
    // NOT_FOUND deletes count as delete commands too
    expect(s).toMatch(/\ncmd-delete: 8\n/);
  });

  it("cannot delete another connection's reserved job", async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await putJobs(a!, 1);
    await a!.ask('reserve', 'RESERVED 1 2\r\nj1\r\n');
    await b!.ask('delete 1', 'NOT_FOUND\r\n');
    await a!.ask('delete 1', 'DELETED\r\n');
  });

  it('ids: 0, the u64 maximum and leading zeros/spaces', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await putJobs(c, 2);
    await c.ask('delete 0', 'NOT_FOUND\r\n');
    await c.ask('delete 18446744073709551615', 'NOT_FOUND\r\n');
    await c.ask('delete 0001', 'DELETED\r\n');
    await c.ask('delete    2', 'DELETED\r\n');
  });

});

// Argument tables: one shared server each; the rows learn their job id from INSERTED.
const hooks = { beforeAll, afterAll, afterEach };

describe.each(targets())('$name: argument errors', (target) => {
  const f = sharedFixture(target, hooks);

  it.for(BAD_ID_ARGS)('delete %j is BAD_FORMAT', async (arg) => {
    const c = await f.conn();
    const id = await putForId(c, 'x');
    await c.ask(`delete ${arg}`, 'BAD_FORMAT\r\n');
    await c.ask(`delete ${id}`, 'DELETED\r\n');
  });

  it.for([
    ['release {id}', 'BAD_FORMAT'],
    ['release {id} 0', 'BAD_FORMAT'],
    ['release {id} 0 ', 'BAD_FORMAT'],
    ['release {id} 0 0 ', 'BAD_FORMAT'],
    ['release {id} 0 0 0', 'BAD_FORMAT'],
    ['release x 0 0', 'BAD_FORMAT'],
    ['release {id} -1 0', 'BAD_FORMAT'],
    ['release {id} 0 -1', 'BAD_FORMAT'],
    ['release {id} 4294967296 0', 'BAD_FORMAT'],
    ['release {id} 0 4294967296', 'BAD_FORMAT'],
    ['release 18446744073709551616 0 0', 'BAD_FORMAT'],
    ['release  {id}  0  0', 'RELEASED'],
  ] as const)('%j -> %s', async ([line, reply]) => {
    const c = await f.conn();
    const id = await putForId(c, 'x');
    await c.ask(`reserve-job ${id}`, 'RESERVED ' + id + ' 1\r\nx\r\n');
    await c.ask(line.replace('{id}', String(id)), `${reply}\r\n`);
    await c.ask(`delete ${id}`, 'DELETED\r\n');
  });

  it.for([
    ['bury {id}', 'BAD_FORMAT'],
    ['bury {id} ', 'BAD_FORMAT'],
    ['bury {id} 0 ', 'BAD_FORMAT'],
    ['bury {id} 0 0', 'BAD_FORMAT'],
    ['bury x 0', 'BAD_FORMAT'],
    ['bury {id} x', 'BAD_FORMAT'],
    ['bury {id} -1', 'BAD_FORMAT'],
    ['bury {id} 4294967296', 'BAD_FORMAT'],
    ['bury  {id}  4294967295', 'BURIED'],
  ] as const)('%j -> %s', async ([line, reply]) => {
    const c = await f.conn();
    const id = await putForId(c, 'x');
    await c.ask(`reserve-job ${id}`, 'RESERVED ' + id + ' 1\r\nx\r\n');
    await c.ask(line.replace('{id}', String(id)), `${reply}\r\n`);
    await c.ask(`delete ${id}`, 'DELETED\r\n');
  });


  it.for(BAD_ID_ARGS)('touch %j is BAD_FORMAT', async (arg) => {
    const c = await f.conn();
    const id = await putForId(c, 'x');
    await c.ask(`reserve-job ${id}`, 'RESERVED ' + id + ' 1\r\nx\r\n');
    await c.ask(`touch ${arg}`, 'BAD_FORMAT\r\n');
    await c.ask(`touch ${id}`, 'TOUCHED\r\n');
    await c.ask(`delete ${id}`, 'DELETED\r\n');
  });

  it.for(BAD_ID_ARGS)('kick-job %j is BAD_FORMAT', async (arg) => {
    const c = await f.conn();
    await c.ask(`kick-job ${arg}`, 'BAD_FORMAT\r\n');
    await c.ask('kick-job 18446744073709551615', 'NOT_FOUND\r\n');
  });
});

describe.each(targets())('$name: release', (target) => {
  it('release puts the job back with a new priority, or delays it', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await putJobs(c, 2, 1, 0, 10);
    await c.ask('reserve', 'RESERVED 1 2\r\nj1\r\n');
    await c.ask('release 1 20 0', 'RELEASED\r\n');
    // now j2 (pri 10) comes before j1 (pri 20)
    await c.ask('reserve', 'RESERVED 2 2\r\nj2\r\n');
    await c.ask('release 2 4294967295 100', 'RELEASED\r\n');
    let s = await c.request('stats-job 2');
    // beanstalkd keeps deadlines in nanoseconds and truncates: a deadline just set N seconds
    // ahead always reads N-1.
    expect(s).toMatch(/\nstate: delayed\npri: 4294967295\nage: \d+\ndelay: 100\nttr: 60\ntime-left: 99\n/);
    expect(s).toMatch(/\nreserves: 1\ntimeouts: 0\nreleases: 1\nburies: 0\nkicks: 0\n/);
    await c.ask('reserve', 'RESERVED 1 2\r\nj1\r\n');
    s = await c.request('stats-job 1');
    expect(s).toMatch(/\npri: 20\n/);
    expect(s).toMatch(/\nreserves: 2\ntimeouts: 0\nreleases: 1\n/);
    // release with the maximum delay is accepted
    await c.ask('release 1 0 4294967295', 'RELEASED\r\n');
    expect(await c.request('stats-job 1')).toMatch(/\nstate: delayed\n(.*\n)*delay: 4294967295\n/);
    expect(await c.request('stats')).toMatch(/\ncmd-release: 3\n/);
  });

  it('only the reserving connection can release, and only reserved jobs', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await putJobs(a!, 2);
    await a!.ask('release 1 0 0', 'NOT_FOUND\r\n'); // ready
    await a!.ask('reserve', 'RESERVED 1 2\r\nj1\r\n');
    await b!.ask('release 1 0 0', 'NOT_FOUND\r\n');
    await a!.ask('release 99 0 0', 'NOT_FOUND\r\n');
    await a!.ask('release 1 0 0', 'RELEASED\r\n');
    await a!.ask('release 1 0 0', 'NOT_FOUND\r\n');
  });

});

describe.each(targets())('$name: bury', (target) => {
  it('bury moves a reserved job to the buried list with a new priority', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await putJobs(a!, 3);
    await a!.ask('bury 1 0', 'NOT_FOUND\r\n'); // ready, not reserved
    await a!.ask('reserve', 'RESERVED 1 2\r\nj1\r\n');
    await b!.ask('bury 1 0', 'NOT_FOUND\r\n'); // not b's
    await a!.ask('bury 1 77', 'BURIED\r\n');
    await a!.ask('bury 1 77', 'NOT_FOUND\r\n');
    const s = await a!.request('stats-job 1');
    expect(s).toMatch(/\nstate: buried\npri: 77\n/);
    expect(s).toMatch(/\nreserves: 1\ntimeouts: 0\nreleases: 0\nburies: 1\nkicks: 0\n/);
    const st = await a!.request('stats');
    expect(st).toMatch(/\ncurrent-jobs-buried: 1\n/);
    expect(st).toMatch(/\ncmd-bury: 4\n/);
  });

  it('buried jobs are kept in bury order (FIFO), whatever their priority', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await putJobs(c, 3);
    for (const id of [1, 2, 3]) await c.ask('reserve', `RESERVED ${id} 2\r\nj${id}\r\n`);
    await c.ask('bury 2 5', 'BURIED\r\n');
    await c.ask('bury 3 0', 'BURIED\r\n');
    await c.ask('bury 1 9', 'BURIED\r\n');
    await c.ask('peek-buried', 'FOUND 2 2\r\nj2\r\n');
    await c.ask('kick 1', 'KICKED 1\r\n');
    await c.ask('peek-buried', 'FOUND 3 2\r\nj3\r\n');
    await c.ask('kick 1', 'KICKED 1\r\n');
    await c.ask('peek-buried', 'FOUND 1 2\r\nj1\r\n');
  });

});

describe.each(targets())('$name: touch', (target) => {
  it('touch works only on jobs reserved by this connection', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await putJobs(a!, 1);
    await a!.ask('touch 1', 'NOT_FOUND\r\n');
    await a!.ask('reserve', 'RESERVED 1 2\r\nj1\r\n');
    await a!.ask('touch 1', 'TOUCHED\r\n');
    await b!.ask('touch 1', 'NOT_FOUND\r\n');
    await a!.ask('touch 2', 'NOT_FOUND\r\n');
    expect(await a!.request('stats-job 1')).toMatch(/\nstate: reserved\n(.*\n)*time-left: 59\n/); // ttr 60, truncated
    expect(await a!.request('stats')).toMatch(/\ncmd-touch: 4\n/);
  });

});

describe.each(targets())('$name: kick', (target) => {
  it('kicks buried jobs first (and only them), up to the bound', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await putJobs(c, 3);
    await putJobs(c, 2, 4, 100); // delayed 4, 5
    for (const id of [1, 2, 3]) {
      await c.ask('reserve', `RESERVED ${id} 2\r\nj${id}\r\n`);
      await c.ask(`bury ${id} 0`, 'BURIED\r\n');
    }
    await c.ask('kick 2', 'KICKED 2\r\n');
    expect([await stateOf(c, 1), await stateOf(c, 2), await stateOf(c, 3)]).toEqual(['ready', 'ready', 'buried']);
    // one buried left: a bound of 10 kicks just that one, not the delayed ones
    await c.ask('kick 10', 'KICKED 1\r\n');
    expect(await stateOf(c, 4)).toBe('delayed');
    // no buried jobs left: now delayed jobs are kicked
    await c.ask('kick 10', 'KICKED 2\r\n');
    expect([await stateOf(c, 4), await stateOf(c, 5)]).toEqual(['ready', 'ready']);
    await c.ask('kick 10', 'KICKED 0\r\n');
    await c.ask('kick 0', 'KICKED 0\r\n');
    const s = await c.request('stats-job 1');
    expect(s).toMatch(/\nburies: 1\nkicks: 1\n/);
    expect(await c.request('stats-job 4')).toMatch(/\nkicks: 1\n/);
    expect(await c.request('stats')).toMatch(/\ncmd-kick: 5\n/);
  });

  it('kicks delayed jobs soonest first', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('d300', 0, 300) + putCmd('d100', 0, 100) + putCmd('d200', 0, 200));
    await c.expect('INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n');
    await c.ask('kick 1', 'KICKED 1\r\n');
    expect([await stateOf(c, 1), await stateOf(c, 2), await stateOf(c, 3)]).toEqual(['delayed', 'ready', 'delayed']);
    await c.ask('kick 1', 'KICKED 1\r\n');
    expect(await stateOf(c, 3)).toBe('ready');
  });

  it('kick applies to the used tube only', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('use one', 'USING one\r\n');
    await c.send(putCmd('x', 0, 100));
    await c.expect('INSERTED 1\r\n');
    await c.ask('use two', 'USING two\r\n');
    await c.ask('kick 5', 'KICKED 0\r\n');
    await c.ask('use one', 'USING one\r\n');
    await c.ask('kick 5', 'KICKED 1\r\n');
  });

  it('kick argument parsing (strtoul: lenient, odd)', async (ctx) => {
    // beanstalkd reads the bound with strtoul into an unsigned int, checking only that some
    // digits were read and errno. So leading whitespace and a sign are accepted, trailing junk
    // is ignored, "-1" is a huge bound, and values above 2^32 wrap (2^32 -> 0).
    const f = await fixture(target, ctx);
    const c = await f.conn();
    const bury = async (n: number, first: number) => {
      await putJobs(c, n, first);
      for (let id = first; id < first + n; id++) {
        await c.ask(`reserve-job ${id}`, `RESERVED ${id} ${`j${id}`.length}\r\nj${id}\r\n`);
        await c.ask(`bury ${id} 0`, 'BURIED\r\n');
      }
    };
    await bury(6, 1);
    await c.ask('kick 4294967296', 'KICKED 0\r\n'); // wraps to 0
    await c.ask('kick 4294967297', 'KICKED 1\r\n'); // wraps to 1
    await c.ask('kick 1x', 'KICKED 1\r\n');
    await c.ask('kick +1', 'KICKED 1\r\n');
    await c.ask('kick  1', 'KICKED 1\r\n');
    await c.ask('kick -1', 'KICKED 2\r\n'); // -1 is ULONG_MAX: kicks everything
    await bury(3, 7);
    await c.ask('kick 18446744073709551615', 'KICKED 3\r\n');
    for (const arg of ['x', '', ' ', '18446744073709551616', '-18446744073709551616', 'x1']) {
      await c.ask(`kick ${arg}`, 'BAD_FORMAT\r\n');
    }
    await c.ask('kick 1', 'KICKED 0\r\n');
  });

  it('kick-job kicks one buried or delayed job in any tube', async (ctx) => {
    const f = await fixture(target, ctx);
    const [c, o] = await f.conns(2);
    await c.ask('use kj', 'USING kj\r\n');
    await putJobs(c, 2); // 1, 2 ready
    await putJobs(c, 1, 3, 100); // 3 delayed
    await c.ask('reserve-job 2', 'RESERVED 2 2\r\nj2\r\n');
    await c.ask('bury 2 0', 'BURIED\r\n');
    // o uses "default": kick-job does not care about the used tube
    await o!.ask('kick-job 1', 'NOT_FOUND\r\n'); // ready
    await o!.ask('kick-job 2', 'KICKED\r\n'); // buried
    await o!.ask('kick-job 3', 'KICKED\r\n'); // delayed
    await o!.ask('kick-job 3', 'NOT_FOUND\r\n');
    await o!.ask('kick-job 4', 'NOT_FOUND\r\n');
    await c.ask('reserve-job 3', 'RESERVED 3 2\r\nj3\r\n');
    await o!.ask('kick-job 3', 'NOT_FOUND\r\n'); // reserved
    expect(await c.request('stats-job 2')).toMatch(/\nstate: ready\n(.*\n)*kicks: 1\n/);
    // kick-job has no counter of its own and is not counted under cmd-kick
    expect(await c.request('stats')).toMatch(/\ncmd-kick: 0\n/);
  });

});
