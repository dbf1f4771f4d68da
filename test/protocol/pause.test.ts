// pause-tube: replies, argument parsing, what a paused tube does to reserve, and expiry.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fixture, parseYamlDict, putCmd, sharedFixture, sleep } from '../support/harness.ts';
import { targets } from '../support/servers.ts';

describe.each(targets())('$name: pause-tube', (target) => {
  it('PAUSED for an existing tube, NOT_FOUND otherwise; stats-tube shows it', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('pause-tube nosuch 10', 'NOT_FOUND\r\n');
    await c.ask('pause-tube default 100', 'PAUSED\r\n');
    const s = Object.fromEntries(parseYamlDict(await c.request('stats-tube default')));
    expect(s.pause).toBe('100');
    // pause-time-left is truncated from nanoseconds: a 100 s pause just set reads 99
    expect(s['pause-time-left']).toBe('99');
    expect(s['cmd-pause-tube']).toBe('1');
    await c.ask('pause-tube default 4294967295', 'PAUSED\r\n');
    expect(await c.request('stats-tube default')).toMatch(/\ncmd-pause-tube: 2\npause: 4294967295\n/);
    // the NOT_FOUND one is counted globally too
    expect(await c.request('stats')).toMatch(/\ncmd-pause-tube: 3\n/);
  });

  it('an invalid name is counted as a pause-tube command before it is rejected', async (ctx) => {
    // beanstalkd quirk: pause-tube validates the name after incrementing cmd-pause-tube.
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('pause-tube -bad 1', 'BAD_FORMAT\r\n');
    await c.ask(`pause-tube ${'x'.repeat(201)} 1`, 'BAD_FORMAT\r\n');
    // but a name that stops at a bad character fails while reading the delay: not counted
    await c.ask('pause-tube bad! 1', 'BAD_FORMAT\r\n');
    expect(await c.request('stats')).toMatch(/\ncmd-pause-tube: 2\n/);
  });

  it('a paused tube is skipped by reserve; other watched tubes are served', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('use p', 'USING p\r\n');
    await c.send(putCmd('urgent-in-paused', 0));
    await c.expect('INSERTED 1\r\n');
    await c.ask('use q', 'USING q\r\n');
    await c.send(putCmd('lazy-in-q', 1000));
    await c.expect('INSERTED 2\r\n');
    await c.ask('watch p', 'WATCHING 2\r\n');
    await c.ask('watch q', 'WATCHING 3\r\n');
    await c.ask('pause-tube p 100', 'PAUSED\r\n');
    await c.ask('reserve-with-timeout 0', 'RESERVED 2 9\r\nlazy-in-q\r\n');
    await c.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n');
    // peek and reserve-job ignore the pause
    await c.ask('use p', 'USING p\r\n');
    await c.ask('peek-ready', 'FOUND 1 16\r\nurgent-in-paused\r\n');
    await c.ask('reserve-job 1', 'RESERVED 1 16\r\nurgent-in-paused\r\n');
    // puts into a paused tube still work
    await c.send(putCmd('more'));
    await c.expect('INSERTED 3\r\n');
    const s = Object.fromEntries(parseYamlDict(await c.request('stats-tube p')));
    expect(s['current-jobs-ready']).toBe('1');
  });

  it('pause-tube 0 does not hold reserves back', async (ctx) => {
    // beanstalkd turns 0 into a pause of one nanosecond, over before the next reserve.
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('x'));
    await c.expect('INSERTED 1\r\n');
    await c.ask('pause-tube default 0', 'PAUSED\r\n');
    await c.ask('reserve-with-timeout 0', 'RESERVED 1 1\r\nx\r\n');
    expect(await c.request('stats-tube default')).toMatch(/\npause: 0\npause-time-left: 0\n/);
  });
});

describe.each(targets())('$name: pause-tube argument errors', (target) => {
  const f = sharedFixture(target, { beforeAll, afterAll, afterEach });

  it.for([
    'pause-tube default',
    'pause-tube default ',
    'pause-tube default x',
    'pause-tube default -1',
    'pause-tube default +1',
    'pause-tube default 1x',
    'pause-tube default 1 1',
    'pause-tube default 4294967296',
    'pause-tube default 18446744073709551616',
    'pause-tube 5',
    'pause-tube  ',
  ])('%j is BAD_FORMAT', async (line) => {
    const c = await f.conn();
    await c.ask(line, 'BAD_FORMAT\r\n');
    await c.ask('pause-tube default 0', 'PAUSED\r\n');
  });
});

describe.each(targets())('$name: pause-tube expiry', (target) => {
  it.concurrent('a waiting reserve gets the job when the pause ends', async (ctx) => {
    const f = await fixture(target, ctx);
    const [p, w] = await f.conns(2);
    await p!.send(putCmd('after-pause'));
    await p!.expect('INSERTED 1\r\n');
    const t0 = Date.now();
    await p!.ask('pause-tube default 1', 'PAUSED\r\n');
    await w!.send('reserve\r\n');
    await w!.expectNothing(600);
    await w!.expect('RESERVED 1 11\r\nafter-pause\r\n', 2000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    const s = Object.fromEntries(parseYamlDict(await p!.request('stats-tube default')));
    // beanstalkd clears the pause when it ends: stats-tube no longer shows the old length
    expect(s.pause).toBe('0');
    expect(s['pause-time-left']).toBe('0');
  });

  it.concurrent('reserve-with-timeout outlasting the pause gets the job; a shorter one times out', async (ctx) => {
    const f = await fixture(target, ctx);
    const [p, a] = await f.conns(2);
    await p!.send(putCmd('j'));
    await p!.expect('INSERTED 1\r\n');
    await p!.ask('pause-tube default 2', 'PAUSED\r\n');
    await a!.ask('reserve-with-timeout 1', 'TIMED_OUT\r\n', 2000);
    await a!.ask('reserve-with-timeout 3', 'RESERVED 1 1\r\nj\r\n', 3000);
  });

  it.concurrent('pause-time-left counts down', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('pause-tube default 10', 'PAUSED\r\n');
    await sleep(1100);
    const s = Object.fromEntries(parseYamlDict(await c.request('stats-tube default')));
    expect(s.pause).toBe('10');
    expect(s['pause-time-left']).toBe('8');
  });
});
