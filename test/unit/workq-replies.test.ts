import { describe, expect, it } from 'vitest';
import { STATE_LEASED, STATE_NEW, STATE_PENDING } from '../../src/proto/workq/commands.ts';
import { Parser } from '../../src/proto/workq/parser.ts';
import { GO_ZERO_TIME_MS } from '../../src/proto/workq/values.ts';
import {
  REPLY_COMMAND_TOO_LONG, REPLY_DUPLICATE_JOB, REPLY_DUPLICATE_RESULT, REPLY_INVALID_ARGS,
  REPLY_INVALID_CURSOR_OFFSET, REPLY_INVALID_FLAGS, REPLY_INVALID_ID, REPLY_INVALID_LIMIT,
  REPLY_INVALID_MAX_ATTEMPTS, REPLY_INVALID_MAX_FAILS, REPLY_INVALID_NAME, REPLY_INVALID_PAYLOAD_SIZE,
  REPLY_INVALID_PRIORITY, REPLY_INVALID_RESULT_SIZE, REPLY_INVALID_TIME, REPLY_INVALID_TTL,
  REPLY_INVALID_TTR, REPLY_INVALID_WAIT_TIMEOUT, REPLY_NOT_FOUND, REPLY_OK, REPLY_OK_0,
  REPLY_QUEUE_OUT_OF_SYNC, REPLY_TIMEOUT, REPLY_UNKNOWN_COMMAND, clientError, daysFromCivil, formatTime,
  inspectReply, inspectServerReply, jobBlock, leaseReply, queueBlock, resultReply, serverError,
  type InspectedJob,
} from '../../src/proto/workq/replies.ts';

const s = (buf: Buffer): string => buf.toString('latin1');
const ID = '6ba7b810-9dad-11d1-80b4-00c04fd430c4';

describe('workq replies: constants', () => {
  it('success and error words, as prot.SendReply / SendErr write them', () => {
    expect(s(REPLY_OK)).toBe('+OK\r\n');
    expect(s(REPLY_OK_0)).toBe('+OK 0\r\n');
    expect(s(REPLY_NOT_FOUND)).toBe('-NOT-FOUND\r\n');
    expect(s(REPLY_TIMEOUT)).toBe('-TIMEOUT\r\n');
    expect(s(clientError('Whatever'))).toBe('-CLIENT-ERROR Whatever\r\n');
    expect(s(serverError('Boom'))).toBe('-SERVER-ERROR Boom\r\n');
    expect(s(REPLY_QUEUE_OUT_OF_SYNC)).toBe('-SERVER-ERROR Queue out of sync\r\n');
  });

  it('client error texts, byte for byte the server\'s', () => {
    const texts: Array<[Buffer, string]> = [
      [REPLY_UNKNOWN_COMMAND, 'Unknown command'],
      [REPLY_INVALID_ARGS, 'Invalid command args'],
      [REPLY_INVALID_FLAGS, 'Invalid command flags'],
      [REPLY_INVALID_PAYLOAD_SIZE, 'Invalid payload size'],
      [REPLY_INVALID_RESULT_SIZE, 'Invalid result size'],
      [REPLY_INVALID_ID, 'Invalid ID'],
      [REPLY_INVALID_NAME, 'Invalid Name'],
      [REPLY_INVALID_TTR, 'Invalid TTR'],
      [REPLY_INVALID_TTL, 'Invalid TTL'],
      [REPLY_INVALID_TIME, 'Invalid Time'],
      [REPLY_INVALID_MAX_ATTEMPTS, 'Invalid Max Attempts'],
      [REPLY_INVALID_MAX_FAILS, 'Invalid Max Fails'],
      [REPLY_INVALID_PRIORITY, 'Invalid Priority'],
      [REPLY_INVALID_WAIT_TIMEOUT, 'Invalid wait timeout'],
      [REPLY_INVALID_CURSOR_OFFSET, 'Invalid cursor offset'],
      [REPLY_INVALID_LIMIT, 'Invalid limit'],
      [REPLY_DUPLICATE_JOB, 'Duplicate job'],
      [REPLY_DUPLICATE_RESULT, 'Duplicate result'],
      [REPLY_COMMAND_TOO_LONG, 'Command too long'],
    ];
    for (const [buf, text] of texts) expect(s(buf)).toBe(`-CLIENT-ERROR ${text}\r\n`);
  });
});

describe('workq replies: time', () => {
  it('formats as Go formats "2006-01-02T15:04:05Z": UTC, whole seconds', () => {
    expect(formatTime(0)).toBe('1970-01-01T00:00:00Z');
    expect(formatTime(Date.UTC(2016, 0, 2, 15, 4, 5))).toBe('2016-01-02T15:04:05Z');
    expect(formatTime(Date.UTC(2016, 0, 2, 15, 4, 5, 999))).toBe('2016-01-02T15:04:05Z');
    expect(formatTime(-1)).toBe('1969-12-31T23:59:59Z');
    expect(formatTime(Date.UTC(2024, 1, 29, 23, 59, 59))).toBe('2024-02-29T23:59:59Z');
    expect(formatTime(GO_ZERO_TIME_MS)).toBe('0001-01-01T00:00:00Z');
    expect(formatTime(daysFromCivil(0, 1, 1) * 86400000)).toBe('0000-01-01T00:00:00Z');
    expect(formatTime(Date.UTC(9999, 11, 31, 23, 59, 59))).toBe('9999-12-31T23:59:59Z');
    expect(formatTime(daysFromCivil(10000, 1, 1) * 86400000)).toBe('10000-01-01T00:00:00Z');
  });

  it('agrees with Date over 500 years', () => {
    let seed = 7;
    for (let i = 0; i < 2000; i++) {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      const ms = Math.floor((seed / 0x7fffffff) * 16e12) - 6e12; // 1779..2477
      expect(formatTime(ms)).toBe(`${new Date(ms).toISOString().slice(0, 19)}Z`);
      const d = new Date(ms);
      expect(daysFromCivil(d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate())).toBe(Math.floor(ms / 86400000));
    }
  });

  it('round-trips a schedule time through the parser', () => {
    const id = '6ba7b810-9dad-41d1-80b4-00c04fd430c4';
    let at = 0;
    const p: Parser = new Parser(
      {
        command: () => {
          at = p.scheduleMs;
          return true;
        },
        reply: () => true,
        drop: () => {},
      },
      { clock: () => 0 },
    );
    for (const t of ['2016-06-14T06:46:46Z', '2020-02-02T00:00:00Z', '2100-12-31T23:59:59Z']) {
      p.push(Buffer.from(`schedule ${id} q 1 1 ${t} 0\r\n\r\n`, 'latin1'));
      expect(formatTime(at)).toBe(t);
    }
  });
});

describe('workq replies: jobs and results', () => {
  it('lease: +OK 1, then <id> <name> <ttr> <size>, the payload', () => {
    expect(s(leaseReply(ID, 'ping', 1000, Buffer.from('ping')))).toBe(`+OK 1\r\n${ID} ping 1000 4\r\nping\r\n`);
    const raw = Buffer.from('xx\r\n\0yy', 'latin1');
    expect(s(leaseReply(ID, 'q', 86400000, raw, 2, 5))).toBe(`+OK 1\r\n${ID} q 86400000 3\r\n\r\n\0\r\n`);
    expect(s(leaseReply(ID, 'q', 1, new Uint8Array(0)))).toBe(`+OK 1\r\n${ID} q 1 0\r\n\r\n`);
  });

  it('run and result: +OK 1, then <id> <0|1> <size>, the result', () => {
    expect(s(resultReply(ID, true, Buffer.from('pong')))).toBe(`+OK 1\r\n${ID} 1 4\r\npong\r\n`);
    expect(s(resultReply(ID, false, new Uint8Array(0)))).toBe(`+OK 1\r\n${ID} 0 0\r\n\r\n`);
    const raw = Buffer.from('\r\n\0', 'latin1');
    expect(s(resultReply(ID, false, raw))).toBe(`+OK 1\r\n${ID} 0 3\r\n\r\n\0\r\n`);
  });
});

describe('workq replies: inspect', () => {
  const job = (over: Partial<InspectedJob> = {}): InspectedJob => ({
    idText: '61a444a0-6128-41c0-8078-cc757d3bd2d8',
    name: 'q1',
    ttrMs: 1000,
    ttlMs: 60000,
    payload: Buffer.from('a'),
    maxAttempts: 3,
    attempts: 1,
    maxFails: 1,
    fails: 0,
    priority: 100,
    state: STATE_PENDING,
    createdMs: Date.UTC(2016, 5, 13, 14, 8, 18),
    scheduleMs: null,
    ...over,
  });

  it('inspect job: the bytes of the server\'s own test (inspect_job_test.go)', () => {
    expect(s(inspectReply([jobBlock(job())]))).toBe(
      '+OK 1\r\n' +
        '61a444a0-6128-41c0-8078-cc757d3bd2d8 12\r\n' +
        'name q1\r\n' +
        'ttr 1000\r\n' +
        'ttl 60000\r\n' +
        'payload-size 1\r\n' +
        'payload a\r\n' +
        'max-attempts 3\r\n' +
        'attempts 1\r\n' +
        'max-fails 1\r\n' +
        'fails 0\r\n' +
        'priority 100\r\n' +
        'state 3\r\n' +
        'created 2016-06-13T14:08:18Z\r\n',
    );
  });

  it('inspect scheduled-jobs: 13 keys, `time` last (the spec\'s example)', () => {
    const blocks = [
      job({
        idText: '6ba7b810-9dad-11d1-80b4-00c04fd430c9',
        name: 'ping',
        ttlMs: 60000,
        payload: Buffer.from('ping'),
        maxAttempts: 0,
        attempts: 0,
        maxFails: 0,
        priority: 0,
        state: STATE_NEW,
        createdMs: Date.UTC(2016, 7, 22, 2, 16, 30),
        scheduleMs: Date.UTC(2016, 8, 1, 18, 0, 0),
      }),
      job({
        idText: '6ba7b810-9dad-11d1-80b4-00c04fd430c8',
        name: 'ping',
        payload: Buffer.from('ping'),
        maxAttempts: 0,
        attempts: 0,
        maxFails: 0,
        priority: 0,
        state: STATE_NEW,
        createdMs: Date.UTC(2016, 7, 22, 2, 16, 58),
        scheduleMs: Date.UTC(2016, 8, 1, 19, 0, 0),
      }),
    ].map(jobBlock);
    const keys = (id: string, created: string, time: string): string =>
      `${id} 13\r\nname ping\r\nttr 1000\r\nttl 60000\r\npayload-size 4\r\npayload ping\r\nmax-attempts 0\r\n` +
      `attempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\nstate 0\r\ncreated ${created}\r\ntime ${time}\r\n`;
    expect(s(inspectReply(blocks))).toBe(
      '+OK 2\r\n' +
        keys('6ba7b810-9dad-11d1-80b4-00c04fd430c9', '2016-08-22T02:16:30Z', '2016-09-01T18:00:00Z') +
        keys('6ba7b810-9dad-11d1-80b4-00c04fd430c8', '2016-08-22T02:16:58Z', '2016-09-01T19:00:00Z'),
    );
  });

  it('a payload with CR/LF/NUL goes out raw, as fmt %s writes it', () => {
    const out = s(jobBlock(job({ payload: Buffer.from('a\r\nb\0', 'latin1'), state: STATE_LEASED, priority: -5 })));
    expect(out).toContain('payload-size 5\r\npayload a\r\nb\0\r\nmax-attempts 3\r\n');
    expect(out).toContain('priority -5\r\nstate 4\r\n');
  });

  it('inspect queue(s): <name> 2, ready-len, scheduled-len', () => {
    expect(s(inspectReply([queueBlock('ping', 3, 0)]))).toBe('+OK 1\r\nping 2\r\nready-len 3\r\nscheduled-len 0\r\n');
    expect(s(inspectReply([queueBlock('ping1', 3, 0), queueBlock('ping2', 9, 0)]))).toBe(
      '+OK 2\r\nping1 2\r\nready-len 3\r\nscheduled-len 0\r\nping2 2\r\nready-len 9\r\nscheduled-len 0\r\n',
    );
    expect(inspectReply([])).toEqual(REPLY_OK_0);
  });

  it('inspect server: the server\'s "server 2" header over three keys', () => {
    expect(s(inspectServerReply(123, 1, Date.UTC(2016, 0, 2, 15, 4, 5)))).toBe(
      '+OK 1\r\nserver 2\r\nactive-clients 123\r\nevicted-jobs 1\r\nstarted 2016-01-02T15:04:05Z\r\n',
    );
  });
});
