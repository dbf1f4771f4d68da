// use, watch, ignore, list-tubes, list-tube-used, list-tubes-watched; tube names; when tubes
// appear and vanish, and the order list-tubes reports them in.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fixture, putCmd, sharedFixture, statsWhen, yamlListReply } from '../support/harness.ts';
import { targets } from '../support/servers.ts';

/** Every character beanstalkd allows in a tube name. */
const NAME_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()';

/** Names that must be rejected with BAD_FORMAT (by use, watch, ignore, stats-tube). */
const BAD_NAMES = [
  '-leading-hyphen',
  '-',
  'a'.repeat(201),
  'sp ace',
  'bang!',
  'star*',
  'hash#',
  'colon:',
  'comma,',
  'at@',
  'tilde~',
  'quote"',
  'back\\slash',
  'brace{',
  'caf\xe9',
  'tab\tname',
  'eq=',
];

describe.each(targets())('$name: tube names', (target) => {
  it('all allowed characters, single characters, and 200 characters are fine', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask(`use ${NAME_CHARS}`, `USING ${NAME_CHARS}\r\n`);
    for (const name of ['a', '0', '_', '(', ')', '$', '.', ';', '/', '+', 'a-', 'x-y', '..', '123']) {
      await c.ask(`use ${name}`, `USING ${name}\r\n`);
      await c.ask(`watch ${name}`, 'WATCHING 2\r\n');
      await c.ask(`ignore ${name}`, 'WATCHING 1\r\n');
    }
    const long = 'n'.repeat(200);
    await c.ask(`use ${long}`, `USING ${long}\r\n`);
    await c.ask(`watch ${long}`, 'WATCHING 2\r\n');
    await c.send(putCmd('x'));
    await c.expect('INSERTED 1\r\n');
    expect(await c.request(`stats-tube ${long}`)).toMatch(new RegExp(`^OK \\d+\\r\\n---\\nname: ${long}\\n`));
    await c.ask(`pause-tube ${long} 0`, 'PAUSED\r\n');
    await c.ask(`ignore ${long}`, 'WATCHING 1\r\n');
  });

  it('extra spaces around the name are BAD_FORMAT (except for pause-tube)', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    for (const verb of ['use', 'watch', 'ignore', 'stats-tube']) {
      await c.ask(`${verb}  default`, 'BAD_FORMAT\r\n');
      await c.ask(`${verb} default `, 'BAD_FORMAT\r\n');
      await c.ask(`${verb} `, 'BAD_FORMAT\r\n');
    }
    // pause-tube skips spaces before the name, and the name may even follow the verb directly:
    // beanstalkd quirk, "pause-tubedefault 0" pauses "default".
    await c.ask('pause-tube   default 0', 'PAUSED\r\n');
    await c.ask('pause-tubedefault 0', 'PAUSED\r\n');
    await c.ask('pause-tube default  0', 'PAUSED\r\n');
    await c.ask('pause-tube default 0 ', 'BAD_FORMAT\r\n');
    expect(await c.request('stats-tube default')).toMatch(/\ncmd-pause-tube: 3\n/);
  });
});

describe.each(targets())('$name: bad tube names', (target) => {
  const f = sharedFixture(target, { beforeAll, afterAll, afterEach });

  it.for(BAD_NAMES)('%j is BAD_FORMAT for use, watch, ignore, stats-tube, pause-tube', async (name) => {
    const c = await f.conn();
    await c.ask(`use ${name}`, 'BAD_FORMAT\r\n');
    await c.ask(`watch ${name}`, 'BAD_FORMAT\r\n');
    await c.ask(`ignore ${name}`, 'BAD_FORMAT\r\n');
    await c.ask(`stats-tube ${name}`, 'BAD_FORMAT\r\n');
    await c.ask(`pause-tube ${name} 0`, 'BAD_FORMAT\r\n');
    await c.ask('list-tube-used', 'USING default\r\n');
    await c.ask('list-tubes', yamlListReply(['default']));
  });

});

describe.each(targets())('$name: use / watch / ignore', (target) => {
  it('a new connection uses and watches "default"', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('list-tube-used', 'USING default\r\n');
    await c.ask('list-tubes-watched', yamlListReply(['default']));
    await c.ask('list-tubes', yamlListReply(['default']));
  });

  it('watch adds once; ignore removes; the last watched tube cannot be ignored', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('watch a', 'WATCHING 2\r\n');
    await c.ask('watch a', 'WATCHING 2\r\n');
    await c.ask('watch b', 'WATCHING 3\r\n');
    await c.ask('list-tubes-watched', yamlListReply(['default', 'a', 'b']));
    await c.ask('ignore nosuch', 'WATCHING 3\r\n'); // not watched: no error
    await c.ask('ignore default', 'WATCHING 2\r\n');
    await c.ask('ignore a', 'WATCHING 1\r\n');
    await c.ask('ignore b', 'NOT_IGNORED\r\n');
    await c.ask('ignore other', 'WATCHING 1\r\n'); // not watched: fine even with one left
    await c.ask('list-tubes-watched', yamlListReply(['b']));
    // ignoring a tube does not create it
    await c.ask('list-tubes', yamlListReply(['default', 'b']));
    const s = await c.request('stats');
    expect(s).toMatch(/\ncmd-watch: 3\ncmd-ignore: 5\n/);
  });

  it('ignore moves the last watched tube into the gap (beanstalkd order)', async (ctx) => {
    // beanstalkd removes from its arrays by moving the last element into the hole, so the
    // watch list (and list-tubes) order changes on removal. Asserted as observed.
    const f = await fixture(target, ctx);
    const c = await f.conn();
    for (const t of ['a', 'b', 'c', 'd']) await c.request(`watch ${t}`);
    await c.ask('ignore a', 'WATCHING 4\r\n');
    await c.ask('list-tubes-watched', yamlListReply(['default', 'd', 'b', 'c']));
    await c.ask('watch e', 'WATCHING 5\r\n');
    await c.ask('ignore default', 'WATCHING 4\r\n');
    await c.ask('list-tubes-watched', yamlListReply(['e', 'd', 'b', 'c']));
  });

  it('use switches the tube for put, peek and kick; use of the same tube again is fine', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('use u1', 'USING u1\r\n');
    await c.ask('use u1', 'USING u1\r\n');
    await c.ask('list-tube-used', 'USING u1\r\n');
    await c.send(putCmd('in-u1'));
    await c.expect('INSERTED 1\r\n');
    expect(await c.request('stats-job 1')).toMatch(/\ntube: u1\n/);
    await c.ask('reserve-with-timeout 0', 'TIMED_OUT\r\n'); // still watching default only
    expect(await c.request('stats')).toMatch(/\ncmd-use: 2\n/);
  });
});

describe.each(targets())('$name: tube lifetime and list-tubes order', (target) => {
  it('tubes appear on use/watch and vanish when unused, unwatched and empty', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await a!.ask('use t1', 'USING t1\r\n');
    await a!.ask('list-tubes', yamlListReply(['default', 't1']));
    await b!.ask('watch t2', 'WATCHING 2\r\n');
    await a!.ask('list-tubes', yamlListReply(['default', 't1', 't2']));
    // stats-tube and pause-tube of a missing tube do not create it
    await a!.ask('stats-tube t3', 'NOT_FOUND\r\n');
    await a!.ask('pause-tube t3 1', 'NOT_FOUND\r\n');
    await a!.ask('list-tubes', yamlListReply(['default', 't1', 't2']));
    // a job keeps a tube alive after its users leave
    await a!.send(putCmd('keep'));
    await a!.expect('INSERTED 1\r\n');
    await a!.ask('use default', 'USING default\r\n');
    await a!.ask('list-tubes', yamlListReply(['default', 't1', 't2']));
    await b!.ask('ignore t2', 'WATCHING 1\r\n');
    await a!.ask('list-tubes', yamlListReply(['default', 't1']));
    await a!.ask('delete 1', 'DELETED\r\n');
    await a!.ask('list-tubes', yamlListReply(['default']));
    // "default" never vanishes
    await a!.ask('use x', 'USING x\r\n');
    await a!.ask('watch x', 'WATCHING 2\r\n');
    await a!.ask('ignore default', 'WATCHING 1\r\n');
    await b!.ask('use x', 'USING x\r\n');
    await b!.ask('watch x', 'WATCHING 2\r\n');
    await b!.ask('ignore default', 'WATCHING 1\r\n');
    await a!.ask('list-tubes', yamlListReply(['default', 'x']));
    expect(await a!.request('stats')).toMatch(/\ncurrent-tubes: 2\n/);
  });

  it('a closing connection releases its tubes', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await a!.ask('use gone-u', 'USING gone-u\r\n');
    await a!.ask('watch gone-w', 'WATCHING 2\r\n');
    await b!.ask('list-tubes', yamlListReply(['default', 'gone-u', 'gone-w']));
    await a!.close();
    await statsWhen(b!, 'the close is handled', (s) => s['current-connections'] === '1', ['current-connections']);
    await b!.ask('list-tubes', yamlListReply(['default']));
  });

  it('list-tubes order after a connection with several tubes closes', async (ctx) => {
    // beanstalkd lets go of the watched tubes last-watched first, then of the used tube; each
    // removal moves the last tube into the hole. Asserted as observed on beanstalkd 1.12.
    const f = await fixture(target, ctx);
    const [x, y] = await f.conns(2);
    for (const t of ['a', 'b', 'c']) await x!.request(`watch ${t}`);
    await x!.ask('use u', 'USING u\r\n');
    for (const t of ['d', 'e', 'f', 'g']) await y!.request(`watch ${t}`);
    await y!.ask('list-tubes', yamlListReply(['default', 'a', 'b', 'c', 'u', 'd', 'e', 'f', 'g']));
    await x!.close();
    await statsWhen(y!, 'the close is handled', (s) => s['current-connections'] === '1', ['current-connections']);
    await y!.ask('list-tubes', yamlListReply(['default', 'e', 'f', 'g', 'd']));
  });

  it('a tube holding a delayed, buried or reserved job stays; deleting the last job removes it', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    for (const t of ['td', 'tb', 'tr']) {
      await a!.ask(`use ${t}`, `USING ${t}\r\n`);
      await a!.send(putCmd(t, 0, t === 'td' ? 100 : 0));
      await a!.readReply();
    }
    await a!.ask('use default', 'USING default\r\n');
    await a!.ask('reserve-job 2', 'RESERVED 2 2\r\ntb\r\n');
    await a!.ask('bury 2 0', 'BURIED\r\n');
    await a!.ask('reserve-job 3', 'RESERVED 3 2\r\ntr\r\n');
    await b!.ask('list-tubes', yamlListReply(['default', 'td', 'tb', 'tr']));
    await a!.ask('delete 2', 'DELETED\r\n');
    // "tb" goes; the last tube ("tr") moves into its place
    await b!.ask('list-tubes', yamlListReply(['default', 'td', 'tr']));
    await a!.ask('release 3 0 0', 'RELEASED\r\n');
    await b!.ask('list-tubes', yamlListReply(['default', 'td', 'tr']));
    await a!.ask('delete 3', 'DELETED\r\n');
    await a!.ask('delete 1', 'DELETED\r\n');
    await b!.ask('list-tubes', yamlListReply(['default']));
  });

  it('list-tubes order: creation order, with the last tube moved into a removed slot', async (ctx) => {
    // beanstalkd keeps tubes in an array in creation order and removes by moving the last
    // tube into the hole. Asserted as observed on beanstalkd 1.12.
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    for (const t of ['t1', 't2', 't3', 't4', 't5']) await a!.request(`watch ${t}`);
    await b!.ask('list-tubes', yamlListReply(['default', 't1', 't2', 't3', 't4', 't5']));
    await a!.ask('ignore t2', 'WATCHING 5\r\n');
    await b!.ask('list-tubes', yamlListReply(['default', 't1', 't5', 't3', 't4']));
    await b!.ask('use t6', 'USING t6\r\n');
    await b!.ask('list-tubes', yamlListReply(['default', 't1', 't5', 't3', 't4', 't6']));
    await a!.ask('ignore t1', 'WATCHING 4\r\n');
    await b!.ask('list-tubes', yamlListReply(['default', 't6', 't5', 't3', 't4']));
    // t1 is created (appended) before b lets go of t6, so t1 then moves into t6's slot
    await b!.ask('use t1', 'USING t1\r\n');
    await b!.ask('list-tubes', yamlListReply(['default', 't1', 't5', 't3', 't4']));
  });
});

describe.each(targets())('$name: list commands', (target) => {
  it('exact YAML bodies', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('watch x(1)', 'WATCHING 2\r\n');
    await c.ask('list-tubes-watched', 'OK 21\r\n---\n- default\n- x(1)\n\r\n');
    await c.ask('list-tubes', 'OK 21\r\n---\n- default\n- x(1)\n\r\n');
    const s = await c.request('stats');
    expect(s).toMatch(/\ncmd-list-tubes: 1\ncmd-list-tube-used: 0\ncmd-list-tubes-watched: 1\n/);
  });
});
