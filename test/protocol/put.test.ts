// put: command line parsing, body framing, JOB_TOO_BIG / EXPECTED_CRLF, and which rejected puts
// use up a job id. Every expectation here was checked against beanstalkd 1.12.

import { describe, expect, it } from 'vitest';
import { fixture, putCmd } from '../support/harness.ts';
import { targets } from '../support/servers.ts';

describe.each(targets())('$name: put', (target) => {
  it('INSERTED with ids counting up from 1', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('a'));
    await c.expect('INSERTED 1\r\n');
    await c.send(putCmd('bb', 5, 0, 10));
    await c.expect('INSERTED 2\r\n');
    // A second connection shares the id counter.
    const d = await f.conn();
    await d.send(putCmd('ccc'));
    await d.expect('INSERTED 3\r\n');
    await c.ask('peek 2', 'FOUND 2 2\r\nbb\r\n');
  });

  it('bodies with CR, LF, CRLF, NUL and high bytes come back verbatim', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    const bodies = ['\r', '\n', '\r\n', '\0', 'a\r\nput 0 0 1 1\r\nb', '\0\r\n\0', '\xff\xfe\x80', '\r\n\r\n'];
    for (let i = 0; i < bodies.length; i++) {
      await c.send(putCmd(bodies[i]!));
      await c.expect(`INSERTED ${i + 1}\r\n`);
    }
    for (let i = 0; i < bodies.length; i++) {
      const b = bodies[i]!;
      await c.ask('reserve-with-timeout 0', `RESERVED ${i + 1} ${b.length}\r\n${b}\r\n`);
      await c.ask(`peek ${i + 1}`, `FOUND ${i + 1} ${b.length}\r\n${b}\r\n`);
    }
  });

  it('an empty body is fine', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('put 0 0 10 0\r\n\r\n');
    await c.expect('INSERTED 1\r\n');
    await c.ask('reserve', 'RESERVED 1 0\r\n\r\n');
  });

  it('a body that arrives in pieces, and several puts in one write', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('put 0 0 10 10\r\n01234');
    await c.expectNothing(50);
    await c.send('56789');
    await c.expectNothing(50);
    await c.send('\r');
    await c.expectNothing(50);
    await c.send('\n');
    await c.expect('INSERTED 1\r\n');
    await c.send(putCmd('x') + putCmd('yy') + putCmd('zzz'));
    await c.expect('INSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n');
    await c.ask('peek 1', 'FOUND 1 10\r\n0123456789\r\n');
  });

  it('ttr 0 is raised to 1', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('put 0 0 0 1\r\nx\r\n');
    await c.expect('INSERTED 1\r\n');
    const reply = await c.request('stats-job 1');
    expect(reply).toMatch(/\nttr: 1\n/);
  });

  it('pri, delay and ttr accept the full u32 range; 2^32 is BAD_FORMAT', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('put 4294967295 0 4294967295 1\r\nx\r\n');
    await c.expect('INSERTED 1\r\n');
    await c.send('put 0 4294967295 1 1\r\ny\r\n');
    await c.expect('INSERTED 2\r\n');
    const s = await c.request('stats-job 1');
    expect(s).toMatch(/\npri: 4294967295\n/);
    expect(s).toMatch(/\nttr: 4294967295\n/);
    expect(await c.request('stats-job 2')).toMatch(/\nstate: delayed\n(?:.*\n)*delay: 4294967295\n/);
    // A rejected command line does not consume the body: beanstalkd then reads the body as the
    // next command line (here "x" -> UNKNOWN_COMMAND). Odd, but that is the reference.
    for (const line of ['put 4294967296 0 10 1', 'put 0 4294967296 10 1', 'put 0 0 4294967296 1', 'put 0 0 10 4294967296']) {
      await c.send(`${line}\r\nx\r\n`);
      await c.expect('BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n');
    }
    // u64 overflow is just as bad
    await c.send('put 18446744073709551616 0 10 1\r\nx\r\n');
    await c.expect('BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n');
    await c.send(putCmd('ok'));
    await c.expect('INSERTED 3\r\n');
  });

  it('number syntax: leading zeros and extra spaces are accepted; signs, junk, trailing space are not', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('put 0000000000000000000000000000007 0 10 1\r\nx\r\n');
    await c.expect('INSERTED 1\r\n');
    // Each number may be preceded by any number of spaces (beanstalkd skips them).
    await c.send('put  1   0    10     1\r\ny\r\n');
    await c.expect('INSERTED 2\r\n');
    expect(await c.request('stats-job 1')).toMatch(/\npri: 7\n/);
    const bad = [
      'put -1 0 10 1',
      'put +1 0 10 1',
      'put 0 0 10 -1',
      'put 0 0 10 +1',
      'put 1x 0 10 1',
      'put 0 x 10 1',
      'put 0 0 10 1 ', // trailing space
      'put 0 0 10 1 x', // trailing garbage
      'put 0 0 10 1x',
      'put\t0 0 10 1',
      'put 0\t0 10 1',
      'put 0 0 10 0x1',
      'put 0 0 10 1.0',
    ];
    for (const line of bad) {
      await c.send(`${line}\r\nx\r\n`);
      // "put\t..." is not even a put: no "put " prefix.
      const first = line.startsWith('put\t') ? 'UNKNOWN_COMMAND' : 'BAD_FORMAT';
      await c.expect(`${first}\r\nUNKNOWN_COMMAND\r\n`);
    }
    await c.send(putCmd('z'));
    await c.expect('INSERTED 3\r\n');
  });

  it('missing arguments', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('put', 'UNKNOWN_COMMAND\r\n'); // no "put " prefix
    await c.ask('put ', 'BAD_FORMAT\r\n');
    await c.ask('put 0', 'BAD_FORMAT\r\n');
    await c.ask('put 0 0', 'BAD_FORMAT\r\n');
    await c.ask('put 0 0 10', 'BAD_FORMAT\r\n');
    await c.ask('put 0 0 10 ', 'BAD_FORMAT\r\n');
    await c.send(putCmd('ok'));
    await c.expect('INSERTED 1\r\n');
  });

  it('EXPECTED_CRLF when the body is not followed by CRLF; the id is used up anyway', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    // Exactly <bytes>+2 bytes are taken as body+trailer; here the trailer is "XY".
    await c.send('put 0 0 10 5\r\nhelloXY');
    await c.expect('EXPECTED_CRLF\r\n');
    // beanstalkd creates the job (and its id) before it sees the trailer, so id 1 is gone.
    await c.send(putCmd('next'));
    await c.expect('INSERTED 2\r\n');
    await c.ask('peek 1', 'NOT_FOUND\r\n');
    // Trailer of "\r" + something else, and "\n\r", are also wrong.
    await c.send('put 0 0 10 1\r\na\rX');
    await c.expect('EXPECTED_CRLF\r\n');
    await c.send('put 0 0 10 1\r\na\n\r');
    await c.expect('EXPECTED_CRLF\r\n');
    // The bytes after the bad trailer are the next command.
    await c.send('put 0 0 10 1\r\naXYput 0 0 10 1\r\nb\r\n');
    await c.expect('EXPECTED_CRLF\r\nINSERTED 6\r\n');
    // A body one byte shorter than announced: the CRLF becomes body, the trailer is "st".
    await c.send('put 0 0 10 5\r\nabc\r\nst');
    await c.expect('EXPECTED_CRLF\r\n');
    await c.ask('list-tube-used', 'USING default\r\n');
    await c.send(putCmd('last'));
    await c.expect('INSERTED 8\r\n');
    const stats = await c.request('stats');
    expect(stats).toMatch(/\ncmd-put: 8\n/);
    expect(stats).toMatch(/\ntotal-jobs: 3\n/);
  });

  it('BAD_FORMAT puts do not use up an id', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('put x 0 10 1', 'BAD_FORMAT\r\n');
    await c.ask('put 0 0 10 1 junk', 'BAD_FORMAT\r\n');
    await c.send(putCmd('a'));
    await c.expect('INSERTED 1\r\n');
  });
});

describe.each(targets())('$name: put and max-job-size', (target) => {
  it('default limit is 65535 bytes: 65535 is accepted, 65536 is JOB_TOO_BIG', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    expect(await c.request('stats')).toMatch(/\nmax-job-size: 65535\n/);
    await c.send(putCmd('a'.repeat(65535)));
    await c.expect('INSERTED 1\r\n');
    await c.send(putCmd('b'.repeat(65536)));
    await c.expect('JOB_TOO_BIG\r\n');
    await c.send(putCmd('c'));
    await c.expect('INSERTED 2\r\n');
  });

  it('JOB_TOO_BIG discards the body, uses no id, and the next command works', async (ctx) => {
    const f = await fixture(target, ctx, { maxJobSize: 10 });
    const c = await f.conn();
    expect(await c.request('stats')).toMatch(/\nmax-job-size: 10\n/);
    await c.send(putCmd('0123456789'));
    await c.expect('INSERTED 1\r\n');
    await c.send(putCmd('0123456789A'));
    await c.expect('JOB_TOO_BIG\r\n');
    await c.send(putCmd('ok'));
    await c.expect('INSERTED 2\r\n');
  });

  it('JOB_TOO_BIG: the reply waits until all <bytes>+2 have been thrown away, whatever they are', async (ctx) => {
    const f = await fixture(target, ctx, { maxJobSize: 10 });
    const c = await f.conn();
    await c.send('put 0 0 10 20\r\n');
    await c.expectNothing(100);
    await c.send('0123456789');
    await c.expectNothing(50);
    // The skipped bytes are not checked at all: no CRLF needed at the end, and a
    // command-looking body is ignored.
    await c.send('stats\r\nXXX');
    await c.expectNothing(50);
    await c.send('YZ');
    await c.expect('JOB_TOO_BIG\r\n');
    await c.ask('list-tube-used', 'USING default\r\n');
  });

  it('JOB_TOO_BIG is checked before trailing garbage on the command line', async (ctx) => {
    const f = await fixture(target, ctx, { maxJobSize: 10 });
    const c = await f.conn();
    // Size 11 is too big, so the body (13 bytes) is skipped even though the line has junk.
    await c.send('put 0 0 10 11 junk\r\n0123456789A\r\nlist-tube-used\r\n');
    await c.expect('JOB_TOO_BIG\r\nUSING default\r\n');
    // Size 5 fits, so the junk is reported and the body is read as a command line.
    await c.send('put 0 0 10 5 junk\r\nhello\r\n');
    await c.expect('BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n');
    // Bad numbers are found before the size check: no skip.
    await c.send('put x 0 10 11\r\n0123456789A\r\n');
    await c.expect('BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n');
    // cmd-put counts the two puts that got past number parsing (JOB_TOO_BIG and the junk one).
    expect(await c.request('stats')).toMatch(/\ncmd-put: 2\n/);
    await c.send(putCmd('fine'));
    await c.expect('INSERTED 1\r\n');
  });

  it('JOB_TOO_BIG with the body in the same write as the next commands', async (ctx) => {
    const f = await fixture(target, ctx, { maxJobSize: 3 });
    const c = await f.conn();
    await c.send(putCmd('abcd') + putCmd('abc') + 'list-tube-used\r\n' + putCmd('abcdefgh') + putCmd('x'));
    await c.expect('JOB_TOO_BIG\r\nINSERTED 1\r\nUSING default\r\nJOB_TOO_BIG\r\nINSERTED 2\r\n');
  });
});
