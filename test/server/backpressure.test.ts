import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INPUT_BUFFERED_MAX, type Session } from '../../src/proto/beanstalk/session.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { waitUntil } from '../support/harness.ts';

// A client that sends commands but does not read its replies must not make the server buffer
// without bound; the connection still gets every reply once it reads, and others are unaffected.
describe('backpressure', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer({ port: 0, shards: 2, logLevel: 'silent' });
  });
  afterAll(async () => {
    await server.close();
  });

  it('a client that does not read its replies holds bounded memory and still gets every reply', async () => {
    const bodyBytes = 60_000;
    const peeks = 4000; // ~240 MB of replies if the server buffered them all
    const c = net.connect(server.port, '127.0.0.1');
    await new Promise((r) => c.once('connect', r));
    c.pause(); // read nothing yet
    c.write(`put 0 0 60 ${bodyBytes}\r\n${'b'.repeat(bodyBytes)}\r\n`);
    const cmds = Buffer.from('peek 1\r\n'.repeat(peeks));
    c.write(cmds);

    // Wait until the server has done all it will do before the client reads: parsing stopped,
    // no request left in flight to a shard, and replies backed up behind the socket (so the
    // output limit has really been reached). From then on nothing changes until the client
    // reads; the same held byte counts on two polls in a row confirm it. A slow machine only
    // takes longer to get there, and the bounds are checked on that state, never before it.
    await waitUntil('the connection is accepted', () => server.beanstalk.sessions.size === 1);
    const session = [...server.beanstalk.sessions.values()][0] as Session;
    let heldIn = -1;
    let heldOut = -1;
    await waitUntil(
      'the server is parked on a client that does not read',
      () => {
        const parked = session.parser.isPaused && session.inflight === 0 && session.transport.bufferedOut() > 0;
        const same = session.parser.bufferedBytes === heldIn && session.transport.bufferedOut() === heldOut;
        heldIn = session.parser.bufferedBytes;
        heldOut = session.transport.bufferedOut();
        return parked && same;
      },
      () => `parser paused ${session.parser.isPaused}, in flight ${session.inflight}, held in ${heldIn}, held out ${heldOut}`,
      30_000,
      20,
    );
    // Output: at most a turn's batch beyond the socket's high-water mark; input: the named cap plus a read.
    expect(heldOut).toBeLessThan(16 * 1024 * 1024);
    expect(heldIn).toBeLessThanOrEqual(INPUT_BUFFERED_MAX + 256 * 1024);

    // Another client is served meanwhile.
    const o = net.connect(server.port, '127.0.0.1');
    const other = await new Promise<string>((resolve) => {
      o.once('data', (d) => resolve(d.toString()));
      o.write('list-tube-used\r\n');
    });
    expect(other).toBe('USING default\r\n');
    o.destroy();

    // Now read everything: every reply arrives, intact and in order.
    const header = `FOUND 1 ${bodyBytes}\r\n`;
    const replyBytes = 'INSERTED 1\r\n'.length + peeks * (header.length + bodyBytes + 2);
    let got = 0;
    let head = '';
    const done = new Promise<void>((resolve) => {
      c.on('data', (d: Buffer) => {
        if (head.length < 64) head += d.subarray(0, 64).toString('latin1');
        got += d.length;
        if (got >= replyBytes) resolve();
      });
    });
    c.resume();
    await done;
    expect(head.startsWith(`INSERTED 1\r\n${header}bbb`)).toBe(true);
    expect(got).toBe(replyBytes);
    c.destroy();
  }, 60_000);
});
