// Connection lifetime: quit, closing with reserved jobs, closing mid-command, and drain mode.
//
// No test sleeps to let the server catch up: each waits until `stats` shows the state it needs
// (the connection gone, the reserve waiting, the put line read), however slow the machine.

import { describe, expect, it } from 'vitest';
import { fixture, parseYamlDict, putCmd, statsWhen } from '../support/harness.ts';
import { targets } from '../support/servers.ts';

describe.each(targets())('$name: quit and close', (target) => {
  it('quit closes the connection; commands after it are not answered', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('list-tube-used\r\nquit\r\nlist-tube-used\r\n');
    await c.expect('USING default\r\n');
    expect(await c.isClosed()).toBe(true);
  });

  it('quit returns reserved jobs to ready at once, keeping their priority', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await a!.send(putCmd('one', 3) + putCmd('two', 4));
    await a!.expect('INSERTED 1\r\nINSERTED 2\r\n');
    await a!.ask('reserve', 'RESERVED 1 3\r\none\r\n');
    await a!.ask('reserve', 'RESERVED 2 3\r\ntwo\r\n');
    await b!.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n');
    await a!.send('quit\r\n');
    expect(await a!.isClosed()).toBe(true);
    // The jobs are back in ready (well within their 60 s TTR) once the server has handled the close.
    await statsWhen(b!, 'the quit connection is gone', (s) => s['current-connections'] === '1', ['current-connections']);
    await b!.ask('reserve-with-timeout 0', 'RESERVED 1 3\r\none\r\n');
    await b!.ask('reserve-with-timeout 0', 'RESERVED 2 3\r\ntwo\r\n');
    const s = Object.fromEntries(parseYamlDict(await b!.request('stats-job 1')));
    // going back on close is neither a release nor a timeout
    expect(s).toMatchObject({ reserves: '2', releases: '0', timeouts: '0', pri: '3' });
  });

  it('closing the socket releases reserved jobs to a waiting reserve', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await a!.send(putCmd('x'));
    await a!.expect('INSERTED 1\r\n');
    await a!.ask('reserve', 'RESERVED 1 1\r\nx\r\n');
    await b!.send('reserve\r\n');
    // b must be waiting when a goes (else this would only show a ready job being reserved).
    await statsWhen(a!, 'b waits in reserve', (s) => s['current-waiting'] === '1', ['current-waiting']);
    // Not a wait: a's job is still reserved, so nothing may have reached b.
    await b!.expectNothing(50);
    a!.destroy();
    await b!.expect('RESERVED 1 1\r\nx\r\n');
  });

  it('closing while waiting in reserve leaves no waiter behind', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b, p] = await f.conns(3);
    await a!.send('reserve\r\n');
    await statsWhen(p!, 'a waits in reserve', (s) => s['current-waiting'] === '1', ['current-waiting']);
    await b!.send('reserve\r\n');
    await statsWhen(p!, 'a and b wait in reserve', (s) => s['current-waiting'] === '2', ['current-waiting']);
    await a!.close();
    // Once the server has let a go (2 connections left), a's waiter must be gone with it.
    const s = await statsWhen(
      p!, 'the server has handled the close', (st) => Number(st['current-connections']) <= 2, ['current-connections'],
    );
    expect(s['current-connections']).toBe('2');
    expect(s['current-waiting']).toBe('1');
    await p!.send(putCmd('for-b'));
    await p!.expect('INSERTED 1\r\n');
    await b!.expect('RESERVED 1 5\r\nfor-b\r\n');
  });

  it('a put whose body never completes still uses up a job id', async (ctx) => {
    // beanstalkd creates the job (taking the next id) when it has the command line, then
    // frees it if the connection closes before the body is complete.
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await a!.send('put 0 0 10 5\r\nhel');
    // The put line has been read (counted) before a goes, so its job exists.
    await statsWhen(b!, 'the put line is read', (s) => s['cmd-put'] === '1', ['cmd-put']);
    await a!.close();
    await statsWhen(b!, 'a is gone', (s) => s['current-connections'] === '1', ['current-connections']);
    await b!.send(putCmd('b'));
    await b!.expect('INSERTED 2\r\n');
    const s = Object.fromEntries(parseYamlDict(await b!.request('stats')));
    expect(s).toMatchObject({ 'total-jobs': '1', 'cmd-put': '2', 'current-jobs-ready': '1' });
  });

  it('many connections open and close; counts follow', async (ctx) => {
    const f = await fixture(target, ctx);
    const cs = await f.conns(20);
    for (const c of cs.slice(0, 15)) await c.close();
    // Wait until the server has handled 15 closes (or more: then the count is wrong, and fails below).
    const s = await statsWhen(
      cs[19]!, '15 connections closed', (st) => Number(st['current-connections']) <= 5, ['current-connections'],
    );
    expect(s['current-connections']).toBe('5');
    expect(s['total-connections']).toBe('20');
  });
});

describe.each(targets())('$name: drain mode', (target) => {
  it('put answers DRAINING (after reading the body); everything else still works', async (ctx) => {
    const f = await fixture(target, ctx);
    const [c, w] = await f.conns(2);
    await c.send(putCmd('before'));
    await c.expect('INSERTED 1\r\n');
    await w!.send('reserve\r\n');
    await w!.expect('RESERVED 1 6\r\nbefore\r\n');
    await f.server.drain();
    await c.send(putCmd('during'));
    await c.expect('DRAINING\r\n');
    // the body was consumed: the connection is in sync
    await c.send(putCmd('again') + 'list-tube-used\r\n');
    await c.expect('DRAINING\r\nUSING default\r\n');
    // a bad trailer and a too-big body are reported as such, before drain mode is considered
    await c.send('put 0 0 10 1\r\nxYZ');
    await c.expect('EXPECTED_CRLF\r\n');
    await c.send(putCmd('x'.repeat(65536)));
    await c.expect('JOB_TOO_BIG\r\n');
    await c.ask('put 0 0 10', 'BAD_FORMAT\r\n');
    // workers carry on
    await w!.ask('delete 1', 'DELETED\r\n');
    await w!.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n');
    await w!.ask('use other', 'USING other\r\n');
    const s = Object.fromEntries(parseYamlDict(await c.request('stats')));
    expect(s.draining).toBe('true');
    expect(s['total-jobs']).toBe('1');
    expect(s['cmd-put']).toBe('5');
    expect(s['current-jobs-ready']).toBe('0');
  });

  it('drain mode applies to connections opened later, too', async (ctx) => {
    const f = await fixture(target, ctx);
    await f.server.drain();
    const c = await f.conn();
    await c.send(putCmd('x'));
    await c.expect('DRAINING\r\n');
    expect(await c.request('stats')).toMatch(/\ndraining: true\n/);
  });
});
