// workq over real sockets: a lease reply carries the job's TTR, as the spec and the workq server
// (0.2.0 on, commit b361010 "Add TTR to lease command reply") send it and go-workq reads it:
//   +OK 1\r\n<id> <name> <ttr> <payload-size>\r\n<payload>\r\n
// with the TTR in ms as given at add / schedule / run. Every case runs with 1 and 4 shards; with
// 4, names on different shards go through the lease fan-in (peek each shard, lease the best).
// The expected bytes are written out here, not built with a helper.

import { describe, it } from 'vitest';
import { completeCmd, namesOnShards, OK, runCmd, scheduleCmd, SHARD_COUNTS, TIMEOUT, uuid, uuids, wqFixture, wqTime } from '../support/workq.ts';

const lease = (id: string, name: string, ttr: number, payload: string): string =>
  `+OK 1\r\n${id} ${name} ${ttr} ${payload.length}\r\n${payload}\r\n`;

describe.each(SHARD_COUNTS)('workq, %i shard(s): lease reply carries the TTR', (shards) => {
  it('one name: <id> <name> <ttr> <payload-size>, the TTR as given at add', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [a, b, d, e] = uuids(4);
    // Each job is completed once leased, so no TTR end brings it back into the next lease.
    await c.want(`add ${a} lt 1234 60000 5\r\nhello\r\n`, OK);
    await c.ask('lease lt 0', `+OK 1\r\n${a} lt 1234 5\r\nhello\r\n`);
    await c.want(completeCmd(a!, ''), OK);
    // The smallest and the largest TTR, an empty payload, and leading zeros (read as a number).
    await c.want(`add ${b} lt 1 60000 0\r\n\r\n`, OK);
    await c.ask('lease lt 0', `+OK 1\r\n${b} lt 1 0\r\n\r\n`);
    await c.want(completeCmd(b!, ''), OK); // a TTR end requeued it by now, or not: either way it ends here
    await c.want(`add ${d} lt 86400000 60000 4\r\na\r\nb\r\n`, OK);
    await c.ask('lease lt 0', `+OK 1\r\n${d} lt 86400000 4\r\na\r\nb\r\n`);
    await c.want(`add ${e} lt 0500 60000 1\r\nx\r\n`, OK);
    await c.ask('lease lt 0', `+OK 1\r\n${e} lt 500 1\r\nx\r\n`);
    await c.want(completeCmd(e!, ''), OK);
    await c.ask('lease lt 0', TIMEOUT);
  });

  it('one name: each job its own TTR, whatever the lease order; again after a TTR requeue', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [slow, fast, short] = uuids(3);
    await c.want(`add ${short} q 150 60000 5 -priority=1\r\nshort\r\n`, OK);
    await c.want(`add ${slow} q 60000 60000 4 -priority=2\r\nslow\r\n`, OK);
    await c.want(`add ${fast} q 2500 60000 4 -priority=3\r\nfast\r\n`, OK);
    await c.ask('lease q 0', lease(fast!, 'q', 2500, 'fast'));
    await c.want(completeCmd(fast!, ''), OK);
    await c.ask('lease q 0', lease(slow!, 'q', 60000, 'slow'));
    await c.ask('lease q 0', lease(short!, 'q', 150, 'short'));
    // Requeued at its TTR end (150 ms), it is leased again with the same TTR.
    await c.ask('lease q 5000', lease(short!, 'q', 150, 'short'));
  });

  it('scheduled and run jobs carry their TTR too', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const [s, run] = uuids(2);
    await w!.want(scheduleCmd(s!, 'sr', 4321, 60000, wqTime(Date.now() - 1000), 'sched'), OK);
    await w!.ask('lease sr 2000', lease(s!, 'sr', 4321, 'sched'));
    await r!.send(runCmd(run!, 'sr', 7777, 10000, 'run'));
    await w!.ask('lease sr 5000', lease(run!, 'sr', 7777, 'run'));
    await w!.want(completeCmd(run!, ''), OK);
    await r!.expect(`+OK 1\r\n${run} 1 0\r\n\r\n`);
  });

  it('several names on different shards: each reply carries its own job\'s TTR', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const names = namesOnShards('lttr', 4, shards);
    const ids = uuids(4);
    // Priorities make the order known: names[3] first, then 2, 1, 0. TTRs differ per job.
    for (let i = 0; i < 4; i++) {
      await c.want(`add ${ids[i]} ${names[i]} ${60000 + 1111 * i} 60000 2 -priority=${i}\r\nj${i}\r\n`, OK);
    }
    for (let i = 3; i >= 0; i--) {
      await c.ask(`lease ${names.join(' ')} 0`, lease(ids[i]!, names[i]!, 60000 + 1111 * i, `j${i}`));
    }
    await c.ask(`lease ${names.join(' ')} 0`, TIMEOUT);
  });

  it('several names on different shards: a waiting lease woken by an add gets the TTR', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [w, p] = await f.conns(2);
    const names = namesOnShards('lttw', 4, shards);
    const id = uuid();
    await w!.send(`lease ${names.join(' ')} 5000\r\n`);
    await w!.expectNothing(100);
    await p!.want(`add ${id} ${names[2]} 3210 60000 4\r\nwake\r\n`, OK);
    await w!.expect(`+OK 1\r\n${id} ${names[2]} 3210 4\r\nwake\r\n`);
  });
});
