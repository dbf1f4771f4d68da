// Command-line framing: the 224-byte line limit, split and coalesced writes, NUL and stray CR/LF
// bytes, and beanstalkd's prefix matching that decides UNKNOWN_COMMAND vs BAD_FORMAT.
// After every bad input a good command is sent to check the connection is still usable.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fixture, putCmd, sharedFixture, sleep } from '../support/harness.ts';
import { targets } from '../support/servers.ts';

/** beanstalkd's LINE_BUF_SIZE: a command line, "\r\n" included, may be at most this long. */
const LINE_BYTES_MAX = 224;

/** `stats-job 000…0<id>\r\n` padded with leading zeros to exactly `total` bytes. */
function paddedStatsJob(id: number, total: number): string {
  const head = 'stats-job ';
  const digits = String(id);
  const zeros = total - head.length - digits.length - 2;
  if (zeros < 0) throw new Error('too short');
  return `${head}${'0'.repeat(zeros)}${digits}\r\n`;
}

describe.each(targets())('$name: command line length limit', (target) => {
  it(`a command line of exactly ${LINE_BYTES_MAX} bytes (CRLF included) is accepted`, async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('x'));
    await c.expect('INSERTED 1\r\n');
    const line = paddedStatsJob(1, LINE_BYTES_MAX);
    expect(line.length).toBe(LINE_BYTES_MAX);
    await c.send(line);
    expect(await c.readReply()).toMatch(/^OK \d+\r\n---\nid: 1\n/);
    // a put whose line is exactly at the limit reads its body normally
    const put = `put 0 0 10 ${'0'.repeat(LINE_BYTES_MAX - 'put 0 0 10 '.length - 3)}3\r\n`;
    expect(put.length).toBe(LINE_BYTES_MAX);
    await c.send(put + 'abc\r\n');
    await c.expect('INSERTED 2\r\n');
  });

  it(`a line of ${LINE_BYTES_MAX + 2} bytes gets BAD_FORMAT after its line end, then the connection works`, async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('x'));
    await c.expect('INSERTED 1\r\n');
    const line = paddedStatsJob(1, LINE_BYTES_MAX + 2);
    // No reply until the line end arrives.
    await c.send(line.slice(0, -2));
    await c.expectNothing(100);
    await c.send('\r\n');
    await c.expect('BAD_FORMAT\r\n');
    await c.ask('peek 1', 'FOUND 1 1\r\nx\r\n');
  });

  it(`one byte over the limit (${LINE_BYTES_MAX + 1} bytes): the CRLF straddles the buffer, so the NEXT line is eaten too`, async (ctx) => {
    // beanstalkd quirk: it fills a 224-byte buffer; with 225 bytes the "\r" is the 224th byte,
    // no "\r\n" is in the buffer, so it discards the buffer and skips to the next "\r\n" --
    // the lone "\n" does not count, so the following command line is swallowed and its line
    // end produces the single BAD_FORMAT.
    const f = await fixture(target, ctx);
    const c = await f.conn();
    const line = paddedStatsJob(1, LINE_BYTES_MAX + 1);
    await c.send(line + 'list-tube-used\r\n' + 'list-tube-used\r\n');
    await c.expect('BAD_FORMAT\r\nUSING default\r\n');
    await c.expectNothing(100);
    await c.ask('use after', 'USING after\r\n');
  });

  it(`the ${LINE_BYTES_MAX + 1}-byte case is the same when the line arrives in pieces`, async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    const line = paddedStatsJob(1, LINE_BYTES_MAX + 1);
    for (const piece of [line.slice(0, 100), line.slice(100, 223), line.slice(223, 224), line.slice(224)]) {
      await c.send(piece);
      await sleep(20);
    }
    await c.expectNothing(50);
    await c.send('list-tube-used\r\n');
    await c.expect('BAD_FORMAT\r\n');
    await c.ask('list-tube-used', 'USING default\r\n');
  });

  it('a very long line (10 kB) gets one BAD_FORMAT, sent at once or in pieces', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('x'.repeat(10_000) + '\r\nlist-tube-used\r\n');
    await c.expect('BAD_FORMAT\r\nUSING default\r\n');
    for (let i = 0; i < 10; i++) {
      await c.send('y'.repeat(997));
      await sleep(2);
    }
    await c.expectNothing(50);
    await c.send('\r\nuse t\r\n');
    await c.expect('BAD_FORMAT\r\nUSING t\r\n');
    await c.expectNothing(50);
  });

  it('a long put line is BAD_FORMAT and its body is then read as a command', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    const line = `put 0 0 10 ${'0'.repeat(300)}1\r\n`;
    await c.send(line + 'z\r\n');
    await c.expect('BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n');
    await c.send(putCmd('z'));
    await c.expect('INSERTED 1\r\n');
  });
});

describe.each(targets())('$name: split and coalesced writes', (target) => {
  const session = ['use split\r\n', putCmd('hello\r\nworld', 3), 'peek-ready\r\n', 'list-tube-used\r\n', 'stats-job 1\r\n'];
  const script = session.join('');

  it('replies are the same when the input is split into two writes at every byte', async (ctx) => {
    const f = await fixture(target, ctx);
    // reference: everything in one write. Each round uses a fresh connection and a new job id,
    // so ids (and the stats byte count, which depends on the id's digits) are normalised.
    const norm = (s: string) => s.replace(/INSERTED \d+/g, 'INSERTED N').replace(/FOUND \d+/g, 'FOUND N').replace(/id: \d+/, 'id: N').replace(/OK \d+/, 'OK n');
    const read5 = async (c: Awaited<ReturnType<typeof f.conn>>) => {
      let out = '';
      for (let i = 0; i < 5; i++) out += await c.readReply();
      return out;
    };
    const c0 = await f.conn();
    await c0.send(script);
    const whole = norm(await read5(c0));
    expect(whole).toMatch(/^USING split\r\nINSERTED N\r\nFOUND N 12\r\nhello\r\nworld\r\nUSING split\r\nOK n\r\n---\nid: N\n/);
    await c0.ask('delete 1', 'DELETED\r\n');
    for (let at = 1; at < script.length; at++) {
      const c = await f.conn();
      const id = at + 1;
      const s = script.replace('stats-job 1', `stats-job ${id}`);
      await c.send(s.slice(0, at));
      await sleep(1);
      await c.send(s.slice(at));
      const got = norm(await read5(c));
      if (got !== whole) throw new Error(`split at byte ${at}: got ${JSON.stringify(got)} want ${JSON.stringify(whole)}`);
      await c.ask(`delete ${id}`, 'DELETED\r\n');
      c.destroy();
    }
  });

  it('input sent one byte per write', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    for (const ch of script) {
      await c.send(ch);
      await new Promise((r) => setImmediate(r));
    }
    await c.expect('USING split\r\nINSERTED 1\r\nFOUND 1 12\r\nhello\r\nworld\r\nUSING split\r\n');
    expect(await c.readReply()).toMatch(/^OK \d+\r\n---\nid: 1\ntube: split\nstate: ready\npri: 3\n/);
  });

  it('many commands in one write are answered in order', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    let input = '';
    let want = '';
    for (let i = 1; i <= 200; i++) {
      input += putCmd(`job${i}`, 1000 - i);
      want += `INSERTED ${i}\r\n`;
    }
    for (let i = 200; i >= 1; i--) {
      input += 'reserve\r\n';
      want += `RESERVED ${i} ${`job${i}`.length}\r\njob${i}\r\n`;
      input += `delete ${i}\r\n`;
      want += 'DELETED\r\n';
    }
    input += 'reserve-with-timeout 0\r\n';
    want += 'TIMED_OUT\r\n';
    await c.send(input);
    await c.expect(want, 10_000);
  });

  it('commands from different connections interleaved byte by byte do not mix', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    const sa = 'use aaa\r\nlist-tube-used\r\n';
    const sb = 'use bbb\r\nlist-tube-used\r\n';
    for (let i = 0; i < sa.length; i++) {
      await a!.send(sa[i]!);
      await b!.send(sb[i]!);
    }
    await a!.expect('USING aaa\r\nUSING aaa\r\n');
    await b!.expect('USING bbb\r\nUSING bbb\r\n');
  });
});

describe.each(targets())('$name: odd bytes in command lines', (target) => {
  it('NUL in a command line is BAD_FORMAT', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('use fo\0o', 'BAD_FORMAT\r\n');
    await c.ask('list-tube-used\0', 'BAD_FORMAT\r\n');
    await c.ask('\0', 'BAD_FORMAT\r\n');
    // even where the command would otherwise be unknown
    await c.ask('bogus\0', 'BAD_FORMAT\r\n');
    await c.send('put 0 0 10 1\0\r\nx\r\n');
    await c.expect('BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n');
    await c.ask('list-tube-used', 'USING default\r\n');
  });

  it('a bare LF does not end a line', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('list-tube-used\n');
    await c.expectNothing(100);
    // "list-tube-used\n" is then the command, with trailing garbage
    await c.send('\r\n');
    await c.expect('BAD_FORMAT\r\n');
    await c.ask('list-tube-used', 'USING default\r\n');
  });

  it('a CR not followed by LF stalls the line until the 224-byte buffer overflows', async (ctx) => {
    // beanstalkd quirk: it looks only at the FIRST "\r" in the buffer; if that is not followed
    // by "\n" no line is found, even when a later "\r\n" is already there. The connection then
    // waits until 224 bytes have piled up, discards them, and answers BAD_FORMAT at the next
    // "\r\n". Everything sent in between is lost.
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('use a\rb\r\n');
    await c.expectNothing(100);
    await c.send('list-tube-used\r\n');
    await c.expectNothing(100);
    const sent = 'use a\rb\r\n'.length + 'list-tube-used\r\n'.length;
    await c.send('x'.repeat(LINE_BYTES_MAX - sent));
    await c.expectNothing(100);
    await c.send('y\r\nlist-tube-used\r\n');
    await c.expect('BAD_FORMAT\r\nUSING default\r\n');
  });

  it('an empty line is UNKNOWN_COMMAND', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('\r\n\r\n');
    await c.expect('UNKNOWN_COMMAND\r\nUNKNOWN_COMMAND\r\n');
    await c.ask('list-tube-used', 'USING default\r\n');
  });
});

// beanstalkd finds the command by prefix, in a fixed order, then checks the rest of the line.
// A line that matches no prefix is UNKNOWN_COMMAND; a line that matches a prefix but has the
// wrong rest is BAD_FORMAT. So "reservex" is BAD_FORMAT (prefix "reserve") while "peek" is
// UNKNOWN_COMMAND (the prefixes are "peek " and "peek-…").
const PREFIX_CASES: Array<[string, string]> = [
  ['reservex', 'BAD_FORMAT'],
  ['reserve ', 'BAD_FORMAT'],
  ['reserve-with-timeout', 'BAD_FORMAT'], // no space: matches "reserve", then too long
  ['reserve-job', 'BAD_FORMAT'], // likewise
  ['reserve-job ', 'BAD_FORMAT'],
  ['statsx', 'BAD_FORMAT'],
  ['stats ', 'BAD_FORMAT'],
  ['stats-tube', 'BAD_FORMAT'], // matches "stats"
  ['stats-tube ', 'BAD_FORMAT'],
  ['stats-job', 'BAD_FORMAT'],
  ['stats-job ', 'BAD_FORMAT'],
  ['stats-jobx', 'BAD_FORMAT'],
  ['stat', 'UNKNOWN_COMMAND'],
  ['peek', 'UNKNOWN_COMMAND'],
  ['peekx', 'UNKNOWN_COMMAND'],
  ['peek ', 'BAD_FORMAT'],
  ['peek x', 'BAD_FORMAT'],
  ['peek-ready ', 'BAD_FORMAT'],
  ['peek-readyx', 'BAD_FORMAT'],
  ['peek-delayedx', 'BAD_FORMAT'],
  ['peek-buried 1', 'BAD_FORMAT'],
  ['peek-read', 'UNKNOWN_COMMAND'],
  ['put', 'UNKNOWN_COMMAND'],
  ['putx', 'UNKNOWN_COMMAND'],
  ['delete', 'UNKNOWN_COMMAND'],
  ['delete ', 'BAD_FORMAT'],
  ['release', 'UNKNOWN_COMMAND'],
  ['release ', 'BAD_FORMAT'],
  ['bury', 'UNKNOWN_COMMAND'],
  ['bury ', 'BAD_FORMAT'],
  ['touch', 'UNKNOWN_COMMAND'],
  ['touch ', 'BAD_FORMAT'],
  ['kick', 'UNKNOWN_COMMAND'],
  ['kick ', 'BAD_FORMAT'],
  ['kick-job', 'UNKNOWN_COMMAND'],
  ['kick-job ', 'BAD_FORMAT'],
  ['use', 'UNKNOWN_COMMAND'],
  ['use ', 'BAD_FORMAT'],
  ['watch', 'UNKNOWN_COMMAND'],
  ['watch ', 'BAD_FORMAT'],
  ['ignore', 'UNKNOWN_COMMAND'],
  ['ignore ', 'BAD_FORMAT'],
  ['list-tubes ', 'BAD_FORMAT'],
  ['list-tubesx', 'BAD_FORMAT'],
  ['list-tube-usedx', 'BAD_FORMAT'],
  ['list-tubes-watchedx', 'BAD_FORMAT'],
  ['list-tube', 'UNKNOWN_COMMAND'],
  ['list', 'UNKNOWN_COMMAND'],
  ['pause-tube', 'BAD_FORMAT'], // the prefix has no space
  ['pause-tube ', 'BAD_FORMAT'],
  ['pause', 'UNKNOWN_COMMAND'],
  ['qui', 'UNKNOWN_COMMAND'],
  ['STATS', 'UNKNOWN_COMMAND'],
  ['Use foo', 'UNKNOWN_COMMAND'],
  [' stats', 'UNKNOWN_COMMAND'],
  ['\tstats', 'UNKNOWN_COMMAND'],
  ['hello world', 'UNKNOWN_COMMAND'],
];

describe.each(targets())('$name: UNKNOWN_COMMAND vs BAD_FORMAT', (target) => {
  // parse-only cases: one server for the whole table
  const f = sharedFixture(target, { beforeAll, afterAll, afterEach });

  it.for(PREFIX_CASES)('%j -> %s, and the connection keeps working', async ([line, reply]) => {
    const c = await f.conn();
    await c.ask(line, `${reply}\r\n`);
    await c.ask('list-tube-used', 'USING default\r\n');
  });

  it('all of them pipelined in one write', async () => {
    const c = await f.conn();
    await c.send(PREFIX_CASES.map(([l]) => `${l}\r\n`).join('') + 'list-tube-used\r\n');
    await c.expect(PREFIX_CASES.map(([, r]) => `${r}\r\n`).join('') + 'USING default\r\n');
  });

  it('"quit" is matched by prefix: "quitx" and "quit now" close the connection too', async () => {
    // beanstalkd quirk: quit has no trailing-garbage check.
    for (const line of ['quit', 'quitx', 'quit now', 'quit-tube foo']) {
      const c = await f.conn();
      await c.send(`${line}\r\nlist-tube-used\r\n`);
      expect(await c.isClosed(2000)).toBe(true);
    }
    const c = await f.conn();
    await c.ask('list-tube-used', 'USING default\r\n');
  });
});
