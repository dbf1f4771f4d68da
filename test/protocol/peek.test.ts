// peek, peek-ready, peek-delayed, peek-buried.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fixture, putCmd, sharedFixture } from '../support/harness.ts';
import { targets } from '../support/servers.ts';

describe.each(targets())('$name: peek', (target) => {
  it('peek <id> finds a job in any state and any tube, without changing it', async (ctx) => {
    const f = await fixture(target, ctx);
    const [c, o] = await f.conns(2);
    await c.ask('use p', 'USING p\r\n');
    await c.send(putCmd('ready') + putCmd('delayed', 0, 100) + putCmd('reserved') + putCmd('buried'));
    await c.expect('INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n');
    await c.ask('reserve-job 3', 'RESERVED 3 8\r\nreserved\r\n');
    await c.ask('reserve-job 4', 'RESERVED 4 6\r\nburied\r\n');
    await c.ask('bury 4 0', 'BURIED\r\n');
    // o uses default and watches default: peek by id ignores both
    for (const [id, body] of [[1, 'ready'], [2, 'delayed'], [3, 'reserved'], [4, 'buried']] as const) {
      await o!.ask(`peek ${id}`, `FOUND ${id} ${body.length}\r\n${body}\r\n`);
    }
    await o!.ask('peek 5', 'NOT_FOUND\r\n');
    await o!.ask('peek 0', 'NOT_FOUND\r\n');
    await o!.ask('peek 18446744073709551615', 'NOT_FOUND\r\n');
    await o!.ask('peek 0003', 'FOUND 3 8\r\nreserved\r\n');
    await o!.ask('peek   1', 'FOUND 1 5\r\nready\r\n');
    const s = await c.request('stats-job 3');
    expect(s).toMatch(/\nstate: reserved\n/);
    expect(await c.request('stats')).toMatch(/\ncmd-peek: 9\n/);
  });


  it('peek-ready shows the most urgent ready job of the used tube', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('peek-ready', 'NOT_FOUND\r\n');
    await c.send(putCmd('low', 10) + putCmd('high', 1) + putCmd('high2', 1));
    await c.expect('INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n');
    await c.ask('peek-ready', 'FOUND 2 4\r\nhigh\r\n');
    await c.ask('peek-ready', 'FOUND 2 4\r\nhigh\r\n');
    await c.ask('reserve', 'RESERVED 2 4\r\nhigh\r\n');
    await c.ask('peek-ready', 'FOUND 3 5\r\nhigh2\r\n');
    // only the used tube counts, not the watched ones
    await c.ask('use other', 'USING other\r\n');
    await c.ask('peek-ready', 'NOT_FOUND\r\n');
    await c.ask('use default', 'USING default\r\n');
    await c.ask('peek-ready', 'FOUND 3 5\r\nhigh2\r\n');
    expect(await c.request('stats')).toMatch(/\ncmd-peek: 0\ncmd-peek-ready: 6\ncmd-peek-delayed: 0\ncmd-peek-buried: 0\n/);
  });

  it('peek-delayed shows the delayed job that is due first', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('peek-delayed', 'NOT_FOUND\r\n');
    await c.send(putCmd('d300', 0, 300) + putCmd('d100', 0, 100) + putCmd('d200', 0, 200) + putCmd('now'));
    await c.expect('INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n');
    await c.ask('peek-delayed', 'FOUND 2 4\r\nd100\r\n');
    await c.ask('delete 2', 'DELETED\r\n');
    await c.ask('peek-delayed', 'FOUND 3 4\r\nd200\r\n');
    await c.ask('use other', 'USING other\r\n');
    await c.ask('peek-delayed', 'NOT_FOUND\r\n');
  });

  it('peek-buried shows the oldest buried job of the used tube', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('peek-buried', 'NOT_FOUND\r\n');
    await c.send(putCmd('a', 5) + putCmd('b', 0));
    await c.expect('INSERTED 1\r\nINSERTED 2\r\n');
    await c.ask('reserve', 'RESERVED 2 1\r\nb\r\n');
    await c.ask('reserve', 'RESERVED 1 1\r\na\r\n');
    await c.ask('bury 1 0', 'BURIED\r\n');
    await c.ask('bury 2 0', 'BURIED\r\n');
    await c.ask('peek-buried', 'FOUND 1 1\r\na\r\n');
    await c.ask('use other', 'USING other\r\n');
    await c.ask('peek-buried', 'NOT_FOUND\r\n');
  });

  it('peek of a large body', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    const body = Array.from({ length: 60_000 }, (_, i) => String.fromCharCode(i % 256)).join('');
    await c.send(putCmd(body));
    await c.expect('INSERTED 1\r\n');
    await c.ask('peek 1', `FOUND 1 60000\r\n${body}\r\n`);
    await c.ask('peek-ready', `FOUND 1 60000\r\n${body}\r\n`);
    await c.ask('reserve', `RESERVED 1 60000\r\n${body}\r\n`);
  });
});

describe.each(targets())('$name: peek argument errors', (target) => {
  const f = sharedFixture(target, { beforeAll, afterAll, afterEach });

  it.for(['x', '-1', '+1', '1 ', '1x', '1 2', '18446744073709551616', ''])('peek %j is BAD_FORMAT', async (arg) => {
    const c = await f.conn();
    await c.ask(`peek ${arg}`, 'BAD_FORMAT\r\n');
    await c.ask('peek 1', 'NOT_FOUND\r\n');
  });
});
