// The connection's output path: replies leave in command order whatever order they complete in,
// whether they are copied into the output bytes (small), queued as they are (big), or written
// straight in (INSERTED, RESERVED/FOUND).

import { describe, expect, it } from 'vitest';
import { COPY_REPLY_MAX, Connection, type Transport, writeDecimal } from '../../src/proto/connection.ts';
import { StreamParser } from '../../src/proto/stream.ts';

class TestConn extends Connection {
  protected readonly parser = new StreamParser();
  seq(): number {
    return this.nextSeq();
  }
  inserted(seq: number, id: number): void {
    this.completeInserted(seq, id);
  }
  job(seq: number, word: string, id: number, body: Buffer): void {
    // The body sits inside a bigger buffer, as it does in a shard's reply record.
    const rec = Buffer.concat([Buffer.from('xx'), body, Buffer.from('yy')]);
    this.completeJob(seq, Buffer.from(`${word} `, 'latin1'), id, rec, 2, 2 + body.length);
  }
  protected onClose(): void {}
}

function setup(): { conn: TestConn; written: Buffer[]; flush: () => string } {
  const written: Buffer[] = [];
  const transport: Transport = {
    write: (d) => {
      written.push(Buffer.from(d)); // a copy: the test must see what was handed over at the time
      return true;
    },
    end: () => {},
    pauseReading: () => {},
    resumeReading: () => {},
    bufferedOut: () => 0,
  };
  const dirty: { flush(): void }[] = [];
  const conn = new TestConn({ markDirty: (c) => dirty.push(c), flushSoon: () => {}, readDone: () => {}, backlogFull: () => false, waitForRoom: () => {}, flushRequests: () => {} }, 1, transport);
  const flush = (): string => {
    for (const c of dirty.splice(0)) c.flush();
    return Buffer.concat(written.splice(0)).toString('latin1');
  };
  return { conn, written, flush };
}

describe('writeDecimal', () => {
  it('writes every digit count up to 2^53 - 1', () => {
    const buf = Buffer.alloc(32);
    for (const n of [0, 1, 9, 10, 99, 100, 4294967295, 4294967296, 1e15, 2 ** 53 - 1]) {
      const end = writeDecimal(buf, 3, n);
      expect(buf.toString('latin1', 3, end)).toBe(String(n));
    }
  });
});

describe('connection output', () => {
  it('keeps command order when replies complete out of order, small and big mixed', () => {
    const { conn, written, flush } = setup();
    const big = Buffer.alloc(COPY_REPLY_MAX + 1, 'b');
    const s = [conn.seq(), conn.seq(), conn.seq(), conn.seq(), conn.seq()];
    conn.complete(s[3], Buffer.from('D\r\n'));
    conn.complete(s[1], big);
    conn.inserted(s[2], 42);
    expect(flush()).toBe(''); // the first reply is not known yet
    conn.complete(s[0], Buffer.from('A\r\n'));
    conn.inserted(s[4], 7);
    expect(written.length).toBe(0);
    expect(flush()).toBe(`A\r\n${big.toString('latin1')}INSERTED 42\r\nD\r\nINSERTED 7\r\n`);
  });

  it('one write per turn, and the bytes handed over are not changed by the next turn', () => {
    const { conn, written } = setup();
    const dirty: { flush(): void }[] = [];
    const c2 = new (conn.constructor as typeof TestConn)({ markDirty: (c) => dirty.push(c), flushSoon: () => {}, readDone: () => {}, backlogFull: () => false, waitForRoom: () => {}, flushRequests: () => {} }, 2, {
      write: (d) => {
        written.push(d); // no copy, and not sent: a later turn must not write into it
        return true;
      },
      end: () => {},
      pauseReading: () => {},
      resumeReading: () => {},
      bufferedOut: () => written.reduce((n, b) => n + b.length, 0),
    });
    for (let i = 1; i <= 50; i++) c2.inserted(c2.seq(), i);
    for (const c of dirty.splice(0)) c.flush();
    expect(written.length).toBe(1);
    const first = written[0].toString('latin1');
    for (let i = 51; i <= 60; i++) c2.inserted(c2.seq(), i);
    for (const c of dirty.splice(0)) c.flush();
    expect(written.length).toBe(2);
    expect(written[0].toString('latin1')).toBe(first);
    expect(first).toBe(Array.from({ length: 50 }, (_, i) => `INSERTED ${i + 1}\r\n`).join(''));
    expect(written[1].toString('latin1')).toBe(Array.from({ length: 10 }, (_, i) => `INSERTED ${i + 51}\r\n`).join(''));
  });

  it('job replies, small (written in) and big (one buffer), in order and out of order', () => {
    const { conn, flush } = setup();
    const small = Buffer.from('hello');
    const big = Buffer.alloc(COPY_REPLY_MAX + 10, 'z');
    const a = conn.seq();
    const b = conn.seq();
    const c = conn.seq();
    conn.job(a, 'RESERVED', 5, small);
    conn.job(c, 'FOUND', 2 ** 40, small); // waits for b
    conn.job(b, 'RESERVED', 6, big);
    conn.job(conn.seq(), 'RESERVED', 7, Buffer.alloc(0));
    expect(flush()).toBe(
      `RESERVED 5 5\r\nhello\r\nRESERVED 6 ${big.length}\r\n${big.toString('latin1')}\r\nFOUND ${2 ** 40} 5\r\nhello\r\nRESERVED 7 0\r\n\r\n`,
    );
  });

  it('a turn with far more output than the connection keeps still goes out whole', () => {
    const { conn, flush } = setup();
    let want = '';
    for (let i = 0; i < 5000; i++) {
      conn.complete(conn.seq(), Buffer.from(`R${i}\r\n`));
      want += `R${i}\r\n`;
    }
    expect(flush()).toBe(want);
    conn.inserted(conn.seq(), 1);
    expect(flush()).toBe('INSERTED 1\r\n');
  });
});
