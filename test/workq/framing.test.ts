// workq over real sockets: framing. Pipelined commands answered in order (across shards and
// behind blocking commands), a malformed line in the middle of a pipeline, commands split into
// single bytes, the 1 MiB payload / result limit, the line limit, and a bare LF.

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  addCmd, completeCmd, E_PRIORITY, E_PSIZE, E_RSIZE, E_TOO_LONG, E_TTL, E_UNKNOWN, failCmd, inspectQueueReply,
  leaseReply, namesOnShards, NOT_FOUND, OK, queueBlock, resultReply, scheduleCmd, SHARD_COUNTS, sleep, TIMEOUT,
  uuid, uuids, wqFixture, wqTime,
} from '../support/workq.ts';

const MIB = 1048576;

/** `n` bytes of random data with CR, LF and text that looks like commands sprinkled in. */
function payloadOf(n: number): Buffer {
  const b = randomBytes(n);
  const noise = Buffer.from('\r\ninspect server\r\ndelete x\r\n', 'latin1');
  for (let at = 0; at + noise.length <= n; at += 100_003) noise.copy(b, at);
  return b;
}

describe.each(SHARD_COUNTS)('workq, %i shard(s): pipelining', (shards) => {
  it('many commands in one write are answered in order', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [a, b, d] = uuids(3);
    const text =
      addCmd(a!, 'p', 60000, 60000, 'A') +
      addCmd(b!, 'p', 60000, 60000, 'B', { priority: 5 }) +
      'inspect queue p\r\n' +
      'lease p 0\r\n' +
      completeCmd(b!, 'rb') +
      `result ${b} 0\r\n` +
      'lease p 0\r\n' +
      failCmd(a!, 'ra') +
      `result ${a} 1000\r\n` +
      'lease p 0\r\n' +
      `delete ${a}\r\n` +
      `inspect job ${a}\r\n` +
      completeCmd(d!, 'x') +
      'inspect queue p\r\n';
    await c.send(text);
    await c.expect(
      OK + OK + inspectQueueReply('p', 2, 0) +
        leaseReply(b!, 'p', 60000, 'B') + OK + resultReply(b!, true, 'rb') +
        leaseReply(a!, 'p', 60000, 'A') + OK + resultReply(a!, false, 'ra') +
        TIMEOUT + OK + NOT_FOUND + NOT_FOUND + inspectQueueReply('p', 0, 0),
    );
  });

  it('commands to queues on different shards, pipelined, are answered in order', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const names = namesOnShards('pl', 4, shards);
    let text = '';
    let want = '';
    const ids: string[][] = names.map(() => []);
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < names.length; i++) {
        const id = uuid();
        ids[i]!.push(id);
        text += addCmd(id, names[i]!, 60000, 60000, `${i}/${round}`);
        want += OK;
        text += `inspect queue ${names[(i + round) % 4]}\r\n`;
        // The queue count after this add: queues before i in this round have round+1 jobs.
        const q = (i + round) % 4;
        want += inspectQueueReply(names[q]!, q <= i ? round + 1 : round, 0);
      }
    }
    for (let round = 0; round < 5; round++) {
      for (let i = 3; i >= 0; i--) {
        text += `lease ${names[i]} 0\r\n`;
        want += leaseReply(ids[i]![round]!, names[i]!, 60000, `${i}/${round}`);
        text += `inspect job ${ids[(i + 1) % 4]![round]}\r\n`;
        want += '*'; // placeholder: checked by parsing below
      }
    }
    text += 'inspect queues 0 10\r\n';
    want += `+OK 4\r\n${names.slice().sort().map((n) => queueBlock(n, 0, 0)).join('')}`;
    await c.send(text);
    // Read reply by reply, so the inspect job replies (with their created time) can be matched loosely.
    const parts = want.split('*');
    let first = true;
    for (const part of parts) {
      if (!first) {
        const r = await c.readReply();
        expect(r).toMatch(/^\+OK 1\r\n[0-9a-f-]{36} 12\r\nname pl\d+\r\n/);
      }
      first = false;
      await c.expect(part);
    }
  });

  it('a malformed line in the middle of a pipeline gets its error; the rest runs', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [a, b, d] = uuids(3);
    const text =
      addCmd(a!, 'm', 60000, 60000, 'A') +
      'this is not a command\r\n' +
      `add ${b} m 10 0 1\r\nb\r\n` + // TTL 0
      addCmd(d!, 'm', 60000, 60000, 'D', { priority: 1 }) +
      `add ${b} m 10 100 1 -priority=x\r\nb\r\n` +
      'lease m 0\r\n' +
      '\r\n' +
      'lease m 0\r\n' +
      'lease m 0\r\n';
    await c.send(text);
    await c.expect(
      OK + E_UNKNOWN + E_TTL + OK + E_PRIORITY + leaseReply(d!, 'm', 60000, 'D') + E_UNKNOWN + leaseReply(a!, 'm', 60000, 'A') + TIMEOUT,
    );
    await c.ask(`inspect job ${b}`, NOT_FOUND);
  });

  it('commands behind a blocked lease wait for it and are answered after it', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [w, p] = await f.conns(2);
    const id = uuid();
    await w!.send('lease bq 5000\r\ninspect queue bq\r\nlease bq 0\r\n');
    await w!.expectNothing(150);
    await p!.want(addCmd(id, 'bq', 60000, 60000, 'x'), OK);
    await w!.expect(leaseReply(id, 'bq', 60000, 'x') + inspectQueueReply('bq', 0, 0) + TIMEOUT);
  });

  it('commands behind a blocked result wait for it', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [w, p] = await f.conns(2);
    const [id, other] = uuids(2);
    await p!.want(addCmd(id, 'rq', 60000, 60000, 'x'), OK);
    await w!.send(`result ${id} 5000\r\n` + addCmd(other!, 'rq', 60000, 60000, 'y') + 'inspect queue rq\r\n');
    await w!.expectNothing(150);
    await p!.ask(`inspect job ${other}`, NOT_FOUND);
    await p!.want(completeCmd(id, 'r'), OK);
    await w!.expect(resultReply(id, true, 'r') + OK + inspectQueueReply('rq', 1, 0));
  });

  it('a pipeline that times out keeps order: -TIMEOUT, then the next reply', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.send(`lease tq 200\r\n${addCmd(id, 'tq', 60000, 60000, 'x')}lease tq 200\r\n`);
    await c.expect(TIMEOUT + OK + leaseReply(id, 'tq', 60000, 'x'), 200 + 3000);
  });

  it('commands sent one byte at a time', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    const text = addCmd(id, 'bytes', 60000, 60000, 'a\r\nb') + 'lease bytes 0\r\n' + completeCmd(id, 'r\r\n') + `result ${id} 0\r\n`;
    for (const ch of text) {
      await c.send(ch);
      if (ch === '\n') await sleep(2);
    }
    await c.expect(OK + leaseReply(id, 'bytes', 60000, 'a\r\nb') + OK + resultReply(id, true, 'r\r\n'));
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): size limits', (shards) => {
  it('a payload of exactly 1 MiB is stored, leased and inspected byte for byte; so is a 1 MiB result', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    const payload = payloadOf(MIB);
    await c.send(Buffer.concat([Buffer.from(`add ${id} big 60000 60000 ${MIB}\r\n`), payload, Buffer.from('\r\n')]));
    await c.expect(OK, 10_000);
    const job = await c.inspectJob(id);
    expect(job?.payloadSize).toBe(MIB);
    expect(Buffer.from(job!.payload, 'latin1').equals(payload)).toBe(true);
    await c.send('lease big 0\r\n');
    await c.expect(Buffer.concat([Buffer.from(`+OK 1\r\n${id} big 60000 ${MIB}\r\n`), payload, Buffer.from('\r\n')]), 10_000);
    const result = payloadOf(MIB);
    await c.send(Buffer.concat([Buffer.from(`complete ${id} ${MIB}\r\n`), result, Buffer.from('\r\n')]));
    await c.expect(OK, 10_000);
    await c.send(`result ${id} 0\r\n`);
    await c.expect(Buffer.concat([Buffer.from(`+OK 1\r\n${id} 1 ${MIB}\r\n`), result, Buffer.from('\r\n')]), 10_000);
  });

  it('a 1 MiB run payload and a 1 MiB fail result', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const id = uuid();
    const payload = payloadOf(MIB);
    const result = payloadOf(MIB);
    await r!.send(Buffer.concat([Buffer.from(`run ${id} bigrun 60000 10000 ${MIB}\r\n`), payload, Buffer.from('\r\n')]));
    await w!.send('lease bigrun 5000\r\n');
    await w!.expect(Buffer.concat([Buffer.from(`+OK 1\r\n${id} bigrun 60000 ${MIB}\r\n`), payload, Buffer.from('\r\n')]), 10_000);
    await w!.send(Buffer.concat([Buffer.from(`fail ${id} ${MIB}\r\n`), result, Buffer.from('\r\n')]));
    await w!.expect(OK, 10_000);
    await r!.expect(Buffer.concat([Buffer.from(`+OK 1\r\n${id} 0 ${MIB}\r\n`), result, Buffer.from('\r\n')]), 10_000);
  });

  it('1 MiB + 1 is refused for add, schedule, run, complete and fail; the connection goes on', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const over = payloadOf(MIB + 1);
    const id = uuid();
    const heads: Array<[string, string]> = [
      [`add ${id} over 60000 60000 ${MIB + 1}`, E_PSIZE],
      [`schedule ${id} over 60000 60000 ${wqTime(Date.now() + 60000)} ${MIB + 1}`, E_PSIZE],
      [`run ${id} over 60000 1000 ${MIB + 1}`, E_PSIZE],
      [`complete ${id} ${MIB + 1}`, E_PSIZE], // the server says "payload" for complete
      [`fail ${id} ${MIB + 1}`, E_RSIZE],
    ];
    for (const [head, err] of heads) {
      await c.send(Buffer.concat([Buffer.from(`${head}\r\n`), over, Buffer.from(`\r\ninspect job ${id}\r\n`)]));
      await c.expect(err + NOT_FOUND, 10_000);
    }
    // Still fine for normal work, and nothing of the refused commands happened.
    await c.want(addCmd(id, 'over', 60000, 60000, 'small'), OK);
    await c.ask('inspect queue over', inspectQueueReply('over', 1, 0));
    await c.ask('lease over 0', leaseReply(id, 'over', 60000, 'small'));
    expect(c.serverClosed).toBe(false);
  });

  it('a refused 1 MiB + 1 add in the middle of a pipeline', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [a, b, x] = uuids(3);
    await c.send(Buffer.concat([
      Buffer.from(addCmd(a!, 'mid', 60000, 60000, 'A')),
      Buffer.from(`add ${x} mid 60000 60000 ${MIB + 1}\r\n`),
      payloadOf(MIB + 1),
      Buffer.from('\r\n'),
      Buffer.from(addCmd(b!, 'mid', 60000, 60000, 'B')),
      Buffer.from('lease mid 0\r\nlease mid 0\r\nlease mid 0\r\n'),
    ]));
    await c.expect(OK + E_PSIZE + OK + leaseReply(a!, 'mid', 60000, 'A') + leaseReply(b!, 'mid', 60000, 'B') + TIMEOUT, 10_000);
    await c.ask(`inspect job ${x}`, NOT_FOUND);
  });

  it('a command line of 10000 bytes is fine; a longer one gets "Command too long" and the connection goes on', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const leaseLine = (len: number): string => {
      // "lease n n n ... 0\r\n", padded with one name of the right length at the end.
      let s = 'lease';
      while (len - (s.length + 4) > 256) s += ' ' + 'n'.repeat(200);
      const rest = len - (s.length + 1 + 4);
      s += ' ' + 'm'.repeat(rest);
      s += ' 0\r\n';
      expect(s.length).toBe(len);
      return s;
    };
    await c.want(leaseLine(10000), TIMEOUT);
    await c.want(leaseLine(10001) + 'inspect queue n\r\n', E_TOO_LONG + NOT_FOUND);
    await c.want(`${'x'.repeat(50000)}\r\ninspect queue ${'n'.repeat(200)}\r\n`, E_TOO_LONG + inspectQueueReply('n'.repeat(200), 0, 0));
  });

  it('a line ending in a bare LF drops the connection without a reply (as the server does)', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    await c.send('inspect queue nothing\r\ninspect server\n');
    await c.expect(NOT_FOUND);
    expect(await c.isClosed(3000)).toBe(true);
    // The server is fine for others.
    const d = await f.conn();
    await d.ask('inspect queue nothing', NOT_FOUND);
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): schedule framing', (shards) => {
  it('schedule times with a fraction of a second are accepted', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(scheduleCmd(id, 'frac', 1000, 60000, '2090-05-06T07:08:09.123456789Z', 'x'), OK);
    expect(await c.inspectJob(id)).toMatchObject({ time: '2090-05-06T07:08:09Z' });
  });
});
