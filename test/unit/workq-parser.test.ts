import { describe, expect, it } from 'vitest';
import {
  CMD_ADD, CMD_COMPLETE, CMD_DELETE, CMD_FAIL, CMD_INSPECT_JOB, CMD_INSPECT_JOBS, CMD_INSPECT_QUEUE,
  CMD_INSPECT_QUEUES, CMD_INSPECT_SCHEDULED_JOBS, CMD_LEASE, CMD_NAMES, CMD_RESULT, CMD_RUN, CMD_SCHEDULE,
} from '../../src/proto/workq/commands.ts';
import { LINE_BYTES_MAX, PAYLOAD_BYTES_MAX, Parser, RESULT_BYTES_MAX, type WorkqSink } from '../../src/proto/workq/parser.ts';
import {
  INSPECT_LIMIT_MAX, MAX_ATTEMPTS_MAX, MAX_FAILS_MAX, NAME_BYTES_MAX, TTL_MS_MAX, TTR_MS_MAX, WAIT_TIMEOUT_MS_MAX,
} from '../../src/proto/workq/validate.ts';
import { GO_ZERO_TIME_MS } from '../../src/proto/workq/values.ts';
import { formatTime } from '../../src/proto/workq/replies.ts';

// The test clock: 2020-01-01T00:00:00Z.
const NOW = Date.UTC(2020, 0, 1);

/** Records everything the parser reports, as text, so two runs can be compared. */
class Recorder implements WorkqSink {
  log: string[] = [];
  parser!: Parser;
  holdOn = -1; // command code that pauses the parser

  command(cmd: number): boolean {
    const p = this.parser;
    const body = (): string => JSON.stringify(Buffer.from(p.body.subarray(p.bodyStart, p.bodyEnd)).toString('latin1'));
    let args = '';
    switch (cmd) {
      case CMD_ADD:
        args = `${p.idText} ${p.name} ttr=${p.ttrMs} ttl=${p.ttlMs} pri=${p.priority} att=${p.maxAttempts} fails=${p.maxFails} ${body()}`;
        break;
      case CMD_SCHEDULE:
        args =
          `${p.idText} ${p.name} ttr=${p.ttrMs} ttl=${p.ttlMs} at=${p.scheduleMs}${p.scheduleZero ? ' zero' : ''}` +
          ` pri=${p.priority} att=${p.maxAttempts} fails=${p.maxFails} ${body()}`;
        break;
      case CMD_RUN:
        args = `${p.idText} ${p.name} ttr=${p.ttrMs} wait=${p.timeoutMs} pri=${p.priority} ${body()}`;
        break;
      case CMD_RESULT:
        args = `${p.idText} wait=${p.timeoutMs}`;
        break;
      case CMD_LEASE:
        args = `${p.names.join(',')} wait=${p.timeoutMs}`;
        break;
      case CMD_COMPLETE:
      case CMD_FAIL:
        args = `${p.idText} ${body()}`;
        break;
      case CMD_DELETE:
      case CMD_INSPECT_JOB:
        args = p.idText;
        break;
      case CMD_INSPECT_QUEUES:
        args = `${p.offset} ${p.limit}`;
        break;
      case CMD_INSPECT_QUEUE:
        args = p.name;
        break;
      case CMD_INSPECT_JOBS:
      case CMD_INSPECT_SCHEDULED_JOBS:
        args = `${p.name} ${p.offset} ${p.limit}`;
        break;
    }
    this.log.push(`${CMD_NAMES[cmd]}${args ? ` ${args}` : ''}`);
    return cmd !== this.holdOn;
  }
  reply(msg: Buffer): boolean {
    const s = msg.toString('latin1');
    expect(s.endsWith('\r\n')).toBe(true);
    this.log.push(s.slice(0, -2));
    return true;
  }
  drop(): void {
    this.log.push('CLOSE');
  }
}

function parse(chunks: Buffer[]): string[] {
  const r = new Recorder();
  r.parser = new Parser(r, { clock: () => NOW });
  // As a socket reads: into the start of one reused buffer holding leftovers of other reads
  // (a line and its LF), passed whole with the count read.
  const size = chunks.reduce((m, c) => Math.max(m, c.length), 0) + 32;
  const readBuffer = Buffer.alloc(size, 'add x 1 1 1 1\r\n');
  for (const c of chunks) {
    c.copy(readBuffer);
    r.parser.push(readBuffer, c.length);
    readBuffer.fill(0x0a, 0, c.length);
  }
  return r.log;
}

const b = (s: string): Buffer => Buffer.from(s, 'latin1');
const run1 = (s: string | Buffer): string[] => parse([typeof s === 'string' ? b(s) : s]);

const ID = '6ba7b810-9dad-41d1-80b4-00c04fd430c4'; // version 4, RFC 4122 variant
const ID2 = '61a444a0-6128-41c0-8078-cc757d3bd2d8';
const V1 = '6ba7b810-9dad-11d1-80b4-00c04fd430c4'; // the spec's example: version 1
const BADVAR = '6ba7b810-9dad-41d1-c0b4-00c04fd430c4'; // version 4, Microsoft variant

const E = (why: string): string => `-CLIENT-ERROR ${why}`;
const ARGS = E('Invalid command args');
const FLAGS = E('Invalid command flags');
const UNKNOWN = E('Unknown command');
const PSIZE = E('Invalid payload size');
const RSIZE = E('Invalid result size');
const BAD_ID = E('Invalid ID');
const BAD_NAME = E('Invalid Name');
const BAD_TTR = E('Invalid TTR');
const BAD_TTL = E('Invalid TTL');
const BAD_TIME = E('Invalid Time');
const BAD_ATT = E('Invalid Max Attempts');
const BAD_FAILS = E('Invalid Max Fails');
const BAD_PRI = E('Invalid Priority');
const BAD_WAIT = E('Invalid wait timeout');
const BAD_OFFSET = E('Invalid cursor offset');
const BAD_LIMIT = E('Invalid limit');
const TOO_LONG = E('Command too long');

const T2024 = Date.UTC(2024, 0, 1);
const addOk = (body: string, extra = ''): string => `add ${ID} q1 ttr=1000 ttl=60000 ${extra || 'pri=0 att=0 fails=0'} ${JSON.stringify(body)}`;

describe('workq parser: valid commands', () => {
  it.each<[string, string[]]>([
    [`add ${ID} q1 1000 60000 4\r\npong\r\n`, [addOk('pong')]],
    [
      `add ${ID} ping 1000 60000 4 -priority=10 -max-attempts=3 -max-fails=1\r\npong\r\n`,
      [`add ${ID} ping ttr=1000 ttl=60000 pri=10 att=3 fails=1 "pong"`],
    ],
    // Flags anywhere after the command name, spaces doubled, an empty payload.
    [`add -max-attempts=1 ${ID}  q1   1000 60000 0 \r\n\r\n`, [addOk('', 'pri=0 att=1 fails=0')]],
    // An unknown flag is counted (at most 3) but ignored; a second "=" cuts the value.
    [`add ${ID} q1 1000 60000 1 -foo=bar -priority=5=6\r\na\r\n`, [addOk('a', 'pri=5 att=0 fails=0')]],
    [`add ${ID} q1 1000 60000 1 -priority=+7\r\na\r\n`, [addOk('a', 'pri=7 att=0 fails=0')]],
    [`add ${ID} q1 1000 60000 1 -priority=-2147483648\r\na\r\n`, [addOk('a', 'pri=-2147483648 att=0 fails=0')]],
    // strconv.Atoi sizes: sign and leading zeros.
    [`add ${ID} q1 1000 60000 +02\r\nab\r\n`, [addOk('ab')]],
    [`add ${ID} q1 1000 60000 -0\r\n\r\n`, [addOk('')]],
    [
      `schedule ${ID} ping 1000 2000 2024-01-01T00:00:00Z 4\r\npong\r\n`,
      [`schedule ${ID} ping ttr=1000 ttl=2000 at=${T2024} pri=0 att=0 fails=0 "pong"`],
    ],
    [
      `schedule ${ID} ping 1000 2000 2024-01-01T00:00:00Z 1 -max-fails=255 -max-attempts=255 -priority=2147483647\r\na\r\n`,
      [`schedule ${ID} ping ttr=1000 ttl=2000 at=${T2024} pri=2147483647 att=255 fails=255 "a"`],
    ],
    [`run ${ID} ping 1000 60000 4\r\nping\r\n`, [`run ${ID} ping ttr=1000 wait=60000 pri=0 "ping"`]],
    [`run ${ID} ping 1000 0 4 -priority=-3\r\nping\r\n`, [`run ${ID} ping ttr=1000 wait=0 pri=-3 "ping"`]],
    // run reads only -priority: one other flag passes and is ignored.
    [`run ${ID} ping 1000 5 1 -max-attempts=3\r\na\r\n`, [`run ${ID} ping ttr=1000 wait=5 pri=0 "a"`]],
    [`result ${ID} 60000\r\n`, [`result ${ID} wait=60000`]],
    [`lease ping1 ping2 ping3 60000\r\n`, ['lease ping1,ping2,ping3 wait=60000']],
    [`lease a.b_c-D 0\r\n`, ['lease a.b_c-D wait=0']],
    [`complete ${ID} 4\r\npong\r\n`, [`complete ${ID} "pong"`]],
    [`fail ${ID} 0\r\n\r\n`, [`fail ${ID} ""`]],
    [`delete ${ID}\r\n`, [`delete ${ID}`]],
    ['inspect server\r\n', ['inspect server']],
    ['inspect queues 0 10\r\n', ['inspect queues 0 10']],
    ['inspect queue ping\r\n', ['inspect queue ping']],
    ['inspect jobs ping 3 100\r\n', ['inspect jobs ping 3 100']],
    ['inspect scheduled-jobs ping 0 1\r\n', ['inspect scheduled-jobs ping 0 1']],
    [`inspect job ${ID}\r\n`, [`inspect job ${ID}`]],
    // inspect job only parses the id: a non-v4 one is looked up (and not found).
    [`inspect job ${V1}\r\n`, [`inspect job ${V1}`]],
  ])('%j', (input, events) => {
    expect(run1(input)).toEqual(events);
  });

  it('gives ids as 16 bytes plus canonical lowercase text', () => {
    const r = new Recorder();
    const p = new Parser(r);
    r.parser = p;
    p.push(b(`delete ${ID.toUpperCase()}\r\n`));
    expect(r.log).toEqual([`delete ${ID}`]);
    expect(Buffer.from(p.id).toString('hex')).toBe(ID.replaceAll('-', ''));
    expect(p.idText).toBe(ID);
  });

  it('accepts ids as satori/go.uuid v1.0.0 parses them', () => {
    const hex = ID.replaceAll('-', '');
    const ok = [
      ID.toUpperCase(),
      hex, // no dashes
      `${hex.slice(0, 8)}-${hex.slice(8, 16)}${hex.slice(16)}`, // some dashes
      `-${ID}`, // a dash before the first group too
      `{${ID}}`,
      `{${ID}`, // the closing brace is never looked at
      `urn:uuid:${ID}`,
      `${ID}garbage`, // anything after the 32nd digit
      `${hex}-`,
    ];
    for (const id of ok) expect(run1(`delete ${id}\r\n`), id).toEqual([`delete ${ID}`]);
    const bad = [
      ID.slice(0, 35), // 31 digits
      ID.replace('6', 'g'),
      ID.replace('-', '--'),
      `URN:UUID:${ID}`,
      `{{${ID}`,
      `urn:uuid:${ID.slice(0, 23)}`, // 32 bytes, too short for its groups (the server crashes here)
      `${ID.slice(0, 32)}`,
      `(${ID})`,
    ];
    for (const id of bad) expect(run1(`delete ${id}\r\n`), id).toEqual([BAD_ID]);
  });

  it('parses schedule times as Go parses "2006-01-02T15:04:05Z"', () => {
    const at = (t: string): string[] => run1(`schedule ${ID} q 1 1 ${t} 0\r\n\r\n`);
    const ok = (t: string, ms: number): void => {
      expect(at(t), t).toEqual([`schedule ${ID} q ttr=1 ttl=1 at=${ms} pri=0 att=0 fails=0 ""`]);
    };
    ok('2024-02-29T23:59:59Z', Date.UTC(2024, 1, 29, 23, 59, 59));
    ok('2024-01-01T5:04:05Z', Date.UTC(2024, 0, 1, 5, 4, 5)); // Go's "15" takes 1 or 2 digits
    ok('2024-01-01T00:00:00.123Z', T2024 + 123); // a fraction, though the layout has none
    ok('2024-01-01T00:00:00,9999999999Z', T2024 + 999);
    ok('9999-12-31T23:59:59Z', Date.UTC(9999, 11, 31, 23, 59, 59));
    for (const t of [
      '2024-01-01T00:00:00', // no Z
      '2024-01-01T01:00:00Z07:00',
      '2024-01-01T01:00:00+00:00',
      '2024-01-01_00:00:00Z',
      '2024-01-01t00:00:00Z',
      '2024-01-01T00:00:00z',
      '2024-01-01T24:00:00Z',
      '2024-01-01T99:00:00Z',
      '2024-01-01T00:60:00Z',
      '2024-01-01T00:00:60Z',
      '2023-02-29T00:00:00Z', // not a leap year
      '2024-04-31T00:00:00Z',
      '2024-00-01T00:00:00Z',
      '2024-13-01T00:00:00Z',
      '2024-01-00T00:00:00Z',
      '2024-1-01T00:00:00Z',
      '24-01-01T00:00:00Z',
      '+024-01-01T00:00:00Z',
      '2024-01-01T00:0:00Z',
      '2024-01-01T00:00:00.Z',
      '2024-01-01T00:00:00ZZ',
      '2024-01-01T123:00:00Z',
    ]) {
      expect(at(t), t).toEqual([BAD_TIME]);
    }
  });

  it('checks schedule time + TTL against the clock after the payload, as the job controller does', () => {
    const past = formatTime(NOW - 5000);
    // Expiration = time + TTL; "past" means strictly before now.
    expect(run1(`schedule ${ID} q 1 5000 ${past} 0\r\n\r\n`)).toEqual([
      `schedule ${ID} q ttr=1 ttl=5000 at=${NOW - 5000} pri=0 att=0 fails=0 ""`,
    ]);
    expect(run1(`schedule ${ID} q 1 4999 ${past} 0\r\n\r\n`)).toEqual([BAD_TIME]);
    // The handler's checks come first: a bad flag beats a past time...
    expect(run1(`schedule ${ID} q 1 1 ${past} 0 -priority=x\r\n\r\n`)).toEqual([BAD_PRI]);
    // ...and so do the controller's checks of id, name, TTR and TTL.
    expect(run1(`schedule ${V1} q 1 1 ${past} 0\r\n\r\n`)).toEqual([BAD_ID]);
    expect(run1(`schedule ${ID} q! 1 1 ${past} 0\r\n\r\n`)).toEqual([BAD_NAME]);
    expect(run1(`schedule ${ID} q 0 1 ${past} 0\r\n\r\n`)).toEqual([BAD_TTR]);
    expect(run1(`schedule ${ID} q 1 0 ${past} 0\r\n\r\n`)).toEqual([BAD_TTL]);
    // Go's zero time is "not scheduled" there: no past check.
    expect(run1(`schedule ${ID} q 1 1 0001-01-01T00:00:00.000Z 0\r\n\r\n`)).toEqual([
      `schedule ${ID} q ttr=1 ttl=1 at=${GO_ZERO_TIME_MS} zero pri=0 att=0 fails=0 ""`,
    ]);
    expect(run1(`schedule ${ID} q 1 1 0001-01-01T00:00:00.000000001Z 0\r\n\r\n`)).toEqual([BAD_TIME]);
  });
});

// Each malformed input with the exact events, the payload's fate included. Every entry is also
// run with a probe command after it, which must come out parsed (the resync test).
const INVALID: Array<[string, string[]]> = [
  // ---- framing: prot.ParseCmd ----
  ['\r\n', [UNKNOWN]],
  ['   \r\n', [UNKNOWN]],
  ['foo\r\n', [UNKNOWN]],
  [`ADD ${ID} q 1 1 0\r\n`, [UNKNOWN]],
  [` delete ${ID}\r\n`, [UNKNOWN]], // the name is what precedes the first space
  [`delete\t${ID}\r\n`, [UNKNOWN]],
  [`-max-attempts=1 add ${ID} q1 10 100 1\r\na\r\n`, [UNKNOWN, UNKNOWN]],
  ['foo -=1\r\n', [FLAGS]], // flags are checked before the name
  [`delete ${ID} -x=\r\n`, [FLAGS]],
  [`delete ${ID} -x==1\r\n`, [FLAGS]],
  [`delete ${ID} -=1\r\n`, [FLAGS]],
  [`delete ${ID} -x=1 -x=2\r\n`, [FLAGS]],
  [`add ${ID} q1 10 100 1 -max-attempts=1 -max-attempts=1\r\na\r\n`, [FLAGS, UNKNOWN]],
  [`add -max-attempts= add ${ID} q1 10 100 1\r\na\r\n`, [FLAGS, UNKNOWN]],
  // ---- argument counts ----
  ['add\r\n', [ARGS]],
  [`add ${ID} q1 10 100\r\n`, [ARGS]],
  [`add ${ID} q1 10 100 1 -max-attempts\r\na\r\n`, [ARGS, UNKNOWN]], // no "=": a 7th argument
  ['add     -8\r\n', [ARGS]],
  [`schedule ${ID} q1 10 1000 2024-01-01T00:00:00Z\r\n`, [ARGS]],
  [`run ${ID} q1 10 1000\r\n`, [ARGS]],
  [`complete ${ID}\r\n`, [ARGS]],
  [`fail ${ID} 1 2\r\n`, [ARGS]],
  ['delete\r\n', [ARGS]],
  [`delete ${ID} ${ID}\r\n`, [ARGS]],
  [`result ${ID}\r\n`, [ARGS]],
  ['lease q1\r\n', [ARGS]],
  ['lease\r\n', [ARGS]],
  ['inspect\r\n', [ARGS]],
  // ---- sizes: answered at once, the payload then parsed as commands (as the server does) ----
  [`add ${ID} q1 10 100 *\r\nab\r\n`, [PSIZE, UNKNOWN]],
  [`add ${ID} q1 10 100 -8\r\nab\r\n`, [PSIZE, UNKNOWN]],
  [`add ${ID} q1 10 100 1.0\r\n`, [PSIZE]],
  [`add ${ID} q1 10 100 9223372036854775808\r\n`, [PSIZE]],
  [`schedule ${ID} q1 10 100 2024-01-01T00:00:00Z -1\r\na\r\n`, [PSIZE, UNKNOWN]],
  [`run ${ID} q1 10 100 *\r\n`, [PSIZE]],
  [`complete ${ID} -1\r\n`, [PSIZE]],
  [`complete ${ID} *\r\n`, [PSIZE]],
  [`fail ${ID} -1\r\n`, [RSIZE]],
  [`fail ${ID} *\r\n`, [RSIZE]],
  // ---- the trailer after the payload: its two bytes are consumed whatever they are ----
  [`add ${ID} q1 10 100 3\r\nabcXY`, [PSIZE]],
  [`add ${ID} q1 10 100 1\r\nab\r\r\n`, [PSIZE, UNKNOWN]], // trailer "b\r", then an empty line
  [`complete ${ID} 1\r\nabc\r\n`, [PSIZE, UNKNOWN]],
  [`fail ${ID} 1\r\nabc\r\n`, [RSIZE, UNKNOWN]],
  [`run ${ID} q1 10 100 1\r\nab\n\r\n`, [PSIZE, UNKNOWN]], // trailer "b\n", then "\r\n"
  // The handler's verdict waits for the payload; a bad trailer wins over it.
  [`add ${V1} q1 10 100 1\r\naXY`, [PSIZE]],
  // ---- add: the handler (syntax), then the controller (ranges), after the payload ----
  [`add ${ID} q1 1000 60000 1 -a=1 -b=1 -c=1 -d=1\r\na\r\n`, [ARGS]],
  ['add 61a444a0-6128-1c0-8078-cc757d3bd2d9 q1 10 1000 1\r\na\r\n', [BAD_ID]],
  [`add ${ID} q1 -10 1000 1\r\na\r\n`, [BAD_TTR]],
  [`add ${ID} q1 +10 1000 1\r\na\r\n`, [BAD_TTR]],
  [`add ${ID} q1 4294967296 1000 1\r\na\r\n`, [BAD_TTR]],
  [`add ${ID} q1 10 -1000 1\r\na\r\n`, [BAD_TTL]],
  [`add ${ID} q1 10 18446744073709551616 1\r\na\r\n`, [BAD_TTL]],
  [`add ${ID} q1 10 18446744073709551615 1\r\na\r\n`, [BAD_TTL]],
  [`add ${ID} q1 10 100 1 -max-attempts=256\r\na\r\n`, [BAD_ATT]],
  [`add ${ID} q1 10 100 1 -max-attempts=-1\r\na\r\n`, [BAD_ATT]],
  [`add ${ID} q1 10 100 1 -max-fails=x\r\na\r\n`, [BAD_FAILS]],
  [`add ${ID} q1 10 100 1 -priority=2147483648\r\na\r\n`, [BAD_PRI]],
  [`add ${ID} q1 10 100 1 -priority=1.5\r\na\r\n`, [BAD_PRI]],
  [`add ${V1} q1 10 100 1\r\na\r\n`, [BAD_ID]],
  [`add ${BADVAR} q1 10 100 1\r\na\r\n`, [BAD_ID]],
  ['add 00000000-0000-0000-0000-000000000000 q1 10 100 1\r\na\r\n', [BAD_ID]],
  [`add ${ID} q/1 10 100 1\r\na\r\n`, [BAD_NAME]],
  [`add ${ID} q1 0 100 1\r\na\r\n`, [BAD_TTR]],
  [`add ${ID} q1 10 0 1\r\na\r\n`, [BAD_TTL]],
  // Order: a TTL that does not parse beats a bad flag; a TTL out of range does not.
  [`add ${ID} q1 10 x 1 -priority=x\r\na\r\n`, [BAD_TTL]],
  [`add ${ID} q1 10 0 1 -priority=x\r\na\r\n`, [BAD_PRI]],
  [`add ${ID} q1 x 0 1 -max-fails=x\r\na\r\n`, [BAD_TTR]],
  [`add ${V1} q! 0 0 1\r\na\r\n`, [BAD_ID]],
  [`add ${ID} q! 0 0 1\r\na\r\n`, [BAD_NAME]],
  [`add ${ID} q1 0 0 1 -max-attempts=255 -max-fails=256 -priority=x\r\na\r\n`, [BAD_FAILS]],
  // ---- schedule ----
  [`schedule ${ID} q1 10 100 2024-01-01T00:00:00Z 1 -a=1 -b=1 -c=1 -d=1\r\na\r\n`, [ARGS]],
  [`schedule ${ID} q1 10 100 2024-01-01T00:00:00 1\r\na\r\n`, [BAD_TIME]],
  [`schedule ${ID} q1 10 x 2024-01-01T00:00:00 1\r\na\r\n`, [BAD_TTL]],
  [`schedule ${ID} q1 10 100 2024-01-01 1 -priority=x\r\na\r\n`, [BAD_TIME]],
  [`schedule ${ID} q1 10 100 2016-06-13T14:08:18Z 1\r\na\r\n`, [BAD_TIME]], // past
  // ---- run ----
  [`run ${ID} q1 10 100 1 -priority=1 -max-attempts=1\r\na\r\n`, [ARGS]],
  [`run ${ID} q1 10 86400001 1\r\na\r\n`, [BAD_WAIT]],
  [`run ${ID} q1 10 -1 1\r\na\r\n`, [BAD_WAIT]],
  [`run ${ID} q1 10 100 1 -priority=x\r\na\r\n`, [BAD_PRI]],
  [`run ${ID} q1 10 x 1 -priority=x\r\na\r\n`, [BAD_PRI]], // priority before the timeout
  [`run ${ID} q1 x x 1\r\na\r\n`, [BAD_TTR]],
  [`run ${V1} q1 10 x 1\r\na\r\n`, [BAD_WAIT]], // the timeout before the v4 check
  [`run ${ID} q1 0 x 1\r\na\r\n`, [BAD_WAIT]],
  [`run ${V1} q! 0 1 1\r\na\r\n`, [BAD_ID]],
  [`run ${ID} q! 0 1 1\r\na\r\n`, [BAD_NAME]],
  [`run ${ID} q1 0 1 1\r\na\r\n`, [BAD_TTR]],
  [`run ${ID} q1 86400001 1 1\r\na\r\n`, [BAD_TTR]],
  // ---- result ----
  [`result ${ID} 1 -x=1\r\n`, [ARGS]],
  [`result * 1\r\n`, [BAD_ID]],
  [`result ${V1} x\r\n`, [BAD_ID]],
  [`result ${ID} x\r\n`, [BAD_WAIT]],
  [`result ${ID} -1\r\n`, [BAD_WAIT]],
  [`result ${ID} 86400001\r\n`, [BAD_WAIT]],
  // ---- lease: the timeout, then each name ----
  ['lease q1 1 -x=1\r\n', [ARGS]],
  ['lease q! x\r\n', [BAD_WAIT]],
  ['lease q1 q! 1000\r\n', [BAD_NAME]],
  ['lease q1 4294967296\r\n', [BAD_WAIT]],
  // ---- complete, fail ----
  [`complete ${ID} 1 -x=1\r\na\r\n`, [ARGS]],
  [`complete * 1\r\na\r\n`, [BAD_ID]],
  [`complete ${V1} 1\r\na\r\n`, [BAD_ID]],
  [`fail ${ID} 1 -x=1\r\na\r\n`, [ARGS]],
  [`fail ${V1} 1\r\na\r\n`, [BAD_ID]],
  // ---- delete ----
  [`delete ${ID} -x=1\r\n`, [ARGS]],
  ['delete *\r\n', [BAD_ID]],
  [`delete ${V1}\r\n`, ['+OK']], // the server swallows the controller's Invalid ID
  // ---- inspect ----
  ['inspect foo\r\n', [UNKNOWN]],
  ['inspect Server\r\n', [UNKNOWN]],
  ['inspect server x\r\n', [ARGS]],
  ['inspect server -x=1\r\n', [ARGS]],
  ['inspect queues 0\r\n', [ARGS]],
  ['inspect queues 0 1 2\r\n', [ARGS]],
  ['inspect queues x 10\r\n', [BAD_OFFSET]],
  ['inspect queues -1 10\r\n', [BAD_OFFSET]],
  ['inspect queues x x\r\n', [BAD_OFFSET]],
  ['inspect queues 0 0\r\n', [BAD_LIMIT]],
  ['inspect queues 0 x\r\n', [BAD_LIMIT]],
  ['inspect queues 0 65536\r\n', [BAD_LIMIT]],
  ['inspect queue\r\n', [ARGS]],
  ['inspect queue q! \r\n', [BAD_NAME]],
  ['inspect queue q1 -x=1\r\n', [ARGS]],
  ['inspect jobs q1 0\r\n', [ARGS]],
  ['inspect jobs q! x x\r\n', [BAD_NAME]],
  ['inspect jobs q1 x x\r\n', [BAD_OFFSET]],
  ['inspect scheduled-jobs q1 0 0\r\n', [BAD_LIMIT]],
  ['inspect job\r\n', [ARGS]],
  ['inspect job *\r\n', [BAD_ID]],
  [`inspect job ${ID} x\r\n`, [ARGS]],
];

const PROBE = `inspect job ${ID2}\r\n`;
const PROBE_EVENT = `inspect job ${ID2}`;

describe('workq parser: malformed commands', () => {
  it.each(INVALID)('%j', (input, events) => {
    expect(run1(input)).toEqual(events);
  });

  it.each(INVALID)('resyncs after %j', (input, events) => {
    expect(run1(input + PROBE)).toEqual([...events, PROBE_EVENT]);
  });

  it('drops the connection, as the server does, on a line ending in a bare \\n', () => {
    expect(run1(`delete ${ID}\n${PROBE}`)).toEqual(['CLOSE']);
    expect(run1(`${PROBE}\n${PROBE}`)).toEqual([PROBE_EVENT, 'CLOSE']);
    // The server's own test case: the trailer "a\r" is bad, then "\n" alone is a read error.
    expect(run1(`complete ${ID} 0\r\na\r\n${PROBE}`)).toEqual([PSIZE, 'CLOSE']);
    // Nothing after the close is looked at.
    const r = new Recorder();
    r.parser = new Parser(r);
    r.parser.push(b('x\n'));
    r.parser.push(b(PROBE));
    expect(r.log).toEqual(['CLOSE']);
  });
});

describe('workq parser: payloads', () => {
  it('passes payloads with CR, LF and NUL through untouched', () => {
    const body = '\r\n\0\ra\n\r\n';
    expect(run1(`add ${ID} q1 1000 60000 ${body.length}\r\n${body}\r\n${PROBE}`)).toEqual([addOk(body), PROBE_EVENT]);
    expect(run1(`complete ${ID} 3\r\n\0\r\n\r\n`)).toEqual([`complete ${ID} "\\u0000\\r\\n"`]);
    const bin = Buffer.alloc(256);
    for (let i = 0; i < 256; i++) bin[i] = i;
    const r = new Recorder();
    const p = new Parser(r);
    r.parser = p;
    let got: Buffer | null = null;
    r.command = (): boolean => {
      got = Buffer.from(p.body.subarray(p.bodyStart, p.bodyEnd));
      return true;
    };
    p.push(Buffer.concat([b(`fail ${ID} 256\r\n`), bin.subarray(0, 100)]));
    p.push(Buffer.concat([bin.subarray(100), b('\r\n')]));
    expect(got).toEqual(bin);
  });

  it('lets go of the payload view after the command', () => {
    const r = new Recorder();
    const p = new Parser(r);
    r.parser = p;
    p.push(b(`complete ${ID} 2\r\nok\r\n`));
    expect(p.body.length).toBe(0);
  });
});

describe('workq parser: limits at the boundary and one past', () => {
  /** A lease line of exactly `len` bytes, \r\n included. */
  function leaseLine(len: number): string {
    const head = 'lease';
    const tail = ' 1000\r\n';
    let mid = '';
    let left = len - head.length - tail.length;
    while (left > 0) {
      const n = Math.min(left - 1, NAME_BYTES_MAX);
      if (n < 1) throw new Error('bad length');
      mid += ` ${'q'.repeat(n)}`;
      left -= n + 1;
    }
    const line = head + mid + tail;
    expect(line.length).toBe(len);
    return line;
  }

  it(`LINE_BYTES_MAX = ${LINE_BYTES_MAX} bytes per line, \\r\\n included`, () => {
    const ok = run1(leaseLine(LINE_BYTES_MAX) + PROBE);
    expect(ok.length).toBe(2);
    expect(ok[0].startsWith('lease q')).toBe(true);
    expect(ok[1]).toBe(PROBE_EVENT);
    expect(run1(leaseLine(LINE_BYTES_MAX + 1) + PROBE)).toEqual([TOO_LONG, PROBE_EVENT]);
    // A long line with no end yet: nothing until its \n comes, then one error.
    const r = new Recorder();
    r.parser = new Parser(r);
    r.parser.push(b('x'.repeat(3 * LINE_BYTES_MAX)));
    r.parser.push(b('y'.repeat(LINE_BYTES_MAX)));
    expect(r.log).toEqual([]);
    r.parser.push(b(`z\r\n${PROBE}`));
    expect(r.log).toEqual([TOO_LONG, PROBE_EVENT]);
  });

  it(`PAYLOAD_BYTES_MAX = ${PAYLOAD_BYTES_MAX}: one past is answered at once and skipped`, () => {
    const max = Buffer.alloc(PAYLOAD_BYTES_MAX, 0x0d);
    const r = new Recorder();
    const p = new Parser(r, { clock: () => NOW });
    r.parser = p;
    let size = -1;
    r.command = (): boolean => {
      size = p.bodyEnd - p.bodyStart;
      return true;
    };
    p.push(Buffer.concat([b(`add ${ID} q1 1000 60000 ${PAYLOAD_BYTES_MAX}\r\n`), max, b('\r\n')]));
    expect(size).toBe(PAYLOAD_BYTES_MAX);
    // One past: the reply comes with the line; the payload (CR LF inside) and trailer are skipped.
    const over = Buffer.alloc(PAYLOAD_BYTES_MAX + 1, 0x0a);
    over.write('\r\ndelete x\r\n', 10, 'latin1');
    expect(parse([b(`add ${ID} q1 1000 60000 ${PAYLOAD_BYTES_MAX + 1}\r\n`), over, b(`\r\n${PROBE}`)])).toEqual([
      PSIZE,
      PROBE_EVENT,
    ]);
    expect(parse([b(`run ${ID} q1 1000 1 ${PAYLOAD_BYTES_MAX + 1}\r\n`), over, b(`\r\n${PROBE}`)])).toEqual([
      PSIZE,
      PROBE_EVENT,
    ]);
    // The skip does not look at the trailer.
    expect(parse([b(`schedule ${ID} q1 1 1 2024-01-01T00:00:00Z 2000000\r\n`), Buffer.alloc(2000002, 0x41), b(PROBE)])).toEqual([
      PSIZE,
      PROBE_EVENT,
    ]);
  });

  it(`RESULT_BYTES_MAX = ${RESULT_BYTES_MAX} for complete and fail`, () => {
    const max = Buffer.alloc(RESULT_BYTES_MAX, 0x41);
    expect(parse([b(`complete ${ID} ${RESULT_BYTES_MAX}\r\n`), max, b(`\r\n${PROBE}`)]).length).toBe(2);
    expect(parse([b(`fail ${ID} ${RESULT_BYTES_MAX}\r\n`), max, b(`\r\n${PROBE}`)]).length).toBe(2);
    const over = Buffer.alloc(RESULT_BYTES_MAX + 1, 0x41);
    expect(parse([b(`complete ${ID} ${RESULT_BYTES_MAX + 1}\r\n`), over, b(`\r\n${PROBE}`)])).toEqual([PSIZE, PROBE_EVENT]);
    expect(parse([b(`fail ${ID} ${RESULT_BYTES_MAX + 1}\r\n`), over, b(`\r\n${PROBE}`)])).toEqual([RSIZE, PROBE_EVENT]);
  });

  it(`NAME_BYTES_MAX = ${NAME_BYTES_MAX}`, () => {
    const n = 'n'.repeat(NAME_BYTES_MAX);
    expect(run1(`inspect queue ${n}\r\n`)).toEqual([`inspect queue ${n}`]);
    expect(run1(`inspect queue ${n}n\r\n`)).toEqual([BAD_NAME]);
    expect(run1(`lease ${n} 1\r\n`)).toEqual([`lease ${n} wait=1`]);
    expect(run1(`lease ${n}n 1\r\n`)).toEqual([BAD_NAME]);
    expect(run1(`add ${ID} ${n} 1 1 0\r\n\r\n`)[0].startsWith(`add ${ID} ${n} `)).toBe(true);
    expect(run1(`add ${ID} ${n}n 1 1 0\r\n\r\n`)).toEqual([BAD_NAME]);
  });

  it(`TTR_MS_MAX = ${TTR_MS_MAX}, TTL_MS_MAX = ${TTL_MS_MAX}`, () => {
    expect(run1(`add ${ID} q 1 1 0\r\n\r\n`)[0]).toContain('ttr=1 ttl=1');
    expect(run1(`add ${ID} q ${TTR_MS_MAX} ${TTL_MS_MAX} 0\r\n\r\n`)[0]).toContain(`ttr=${TTR_MS_MAX} ttl=${TTL_MS_MAX}`);
    expect(run1(`add ${ID} q ${TTR_MS_MAX + 1} ${TTL_MS_MAX} 0\r\n\r\n`)).toEqual([BAD_TTR]);
    expect(run1(`add ${ID} q ${TTR_MS_MAX} ${TTL_MS_MAX + 1} 0\r\n\r\n`)).toEqual([BAD_TTL]);
    expect(run1(`run ${ID} q ${TTR_MS_MAX} 1 0\r\n\r\n`)[0]).toContain(`ttr=${TTR_MS_MAX}`);
    expect(run1(`run ${ID} q ${TTR_MS_MAX + 1} 1 0\r\n\r\n`)).toEqual([BAD_TTR]);
  });

  it(`WAIT_TIMEOUT_MS_MAX = ${WAIT_TIMEOUT_MS_MAX}`, () => {
    const max = WAIT_TIMEOUT_MS_MAX;
    expect(run1(`lease q ${max}\r\n`)).toEqual([`lease q wait=${max}`]);
    expect(run1(`lease q ${max + 1}\r\n`)).toEqual([BAD_WAIT]);
    expect(run1(`result ${ID} ${max}\r\n`)).toEqual([`result ${ID} wait=${max}`]);
    expect(run1(`result ${ID} ${max + 1}\r\n`)).toEqual([BAD_WAIT]);
    expect(run1(`run ${ID} q 1 ${max} 0\r\n\r\n`)[0]).toContain(`wait=${max}`);
    expect(run1(`run ${ID} q 1 ${max + 1} 0\r\n\r\n`)).toEqual([BAD_WAIT]);
  });

  it(`flags: max-attempts <= ${MAX_ATTEMPTS_MAX}, max-fails <= ${MAX_FAILS_MAX}, priority int32`, () => {
    const add = (flags: string): string[] => run1(`add ${ID} q 1 1 0 ${flags}\r\n\r\n`);
    expect(add(`-max-attempts=${MAX_ATTEMPTS_MAX}`)[0]).toContain(`att=${MAX_ATTEMPTS_MAX}`);
    expect(add(`-max-attempts=${MAX_ATTEMPTS_MAX + 1}`)).toEqual([BAD_ATT]);
    expect(add(`-max-fails=${MAX_FAILS_MAX}`)[0]).toContain(`fails=${MAX_FAILS_MAX}`);
    expect(add(`-max-fails=${MAX_FAILS_MAX + 1}`)).toEqual([BAD_FAILS]);
    expect(add('-priority=2147483647')[0]).toContain('pri=2147483647');
    expect(add('-priority=2147483648')).toEqual([BAD_PRI]);
    expect(add('-priority=-2147483648')[0]).toContain('pri=-2147483648');
    expect(add('-priority=-2147483649')).toEqual([BAD_PRI]);
    // Three flags, whatever their keys; a fourth is too many.
    expect(add('-a=1 -b=2 -priority=3')[0]).toContain('pri=3');
    expect(add('-a=1 -b=2 -c=3 -priority=3')).toEqual([ARGS]);
    expect(run1(`run ${ID} q 1 1 0 -priority=3\r\n\r\n`)[0]).toContain('pri=3');
    expect(run1(`run ${ID} q 1 1 0 -priority=3 -a=1\r\n\r\n`)).toEqual([ARGS]);
  });

  it(`inspect: limit 1..${INSPECT_LIMIT_MAX}, offset uint32`, () => {
    expect(run1(`inspect queues 4294967295 ${INSPECT_LIMIT_MAX}\r\n`)).toEqual([`inspect queues 4294967295 ${INSPECT_LIMIT_MAX}`]);
    expect(run1('inspect queues 4294967296 1\r\n')).toEqual([BAD_OFFSET]);
    expect(run1(`inspect queues 0 ${INSPECT_LIMIT_MAX + 1}\r\n`)).toEqual([BAD_LIMIT]);
    expect(run1(`inspect jobs q 0 ${INSPECT_LIMIT_MAX + 1}\r\n`)).toEqual([BAD_LIMIT]);
  });
});

// A transcript exercising every path: pipelined commands, payloads with CR/LF/NUL, a payload
// straddling reads, a too-long line, a too-big payload, bad trailers, bad sizes whose payload
// is read as commands, every command and error kind; it ends in a bare-\n close.
const TRANSCRIPT = Buffer.concat([
  b(`add ${ID} q1 1000 60000 5 -priority=3\r\na\r\nb\0\r\n`),
  b(`schedule ${ID} q.2 1 2 2024-02-29T23:59:59.5Z 3 -max-attempts=2\r\n\r\n\n\r\n`),
  b(`run ${ID} r 10 20 0\r\n\r\nresult ${ID} 7\r\nlease a b c 9\r\n`),
  b(`complete ${ID} 2\r\nok\r\nfail ${ID} 4\r\nno\r\n\r\ndelete ${ID}\r\ndelete ${V1}\r\n`),
  b(`inspect server\r\ninspect queues 1 2\r\ninspect queue q\r\ninspect jobs q 0 9\r\n`),
  b(`inspect scheduled-jobs q 1 1\r\ninspect job ${ID2}\r\ninspect what\r\n`),
  b(`${'z'.repeat(LINE_BYTES_MAX + 10)}\r\n`),
  b(`add ${ID} q1 1 1 ${PAYLOAD_BYTES_MAX + 1}\r\n`),
  Buffer.alloc(PAYLOAD_BYTES_MAX + 3, 0x0a),
  b(`complete ${ID} 3\r\nabcXY`),
  b(`add ${ID} q1 1 1 -3\r\nabc\r\n`),
  b(`fail ${ID} 1 -x=1\r\nz\r\nlease q! 1\r\nlease q 99999999999\r\n`),
  b(`add ${V1} q 1 1 0\r\n\r\nadd ${ID} q 0 1 0\r\n\r\nadd ${ID} q 1 1 0 -max-fails=300\r\n\r\n`),
  b(`result ${ID}\r\nfoo -=\r\n\r\n`),
  b(`inspect job ${ID.toUpperCase()}\r\n`),
  b('add\n'),
  b(PROBE),
]);

describe('workq parser: read boundaries', () => {
  const whole = parse([TRANSCRIPT]);

  it('transcript sanity', () => {
    expect(whole.length).toBeGreaterThan(30);
    expect(whole.at(-1)).toBe('CLOSE');
    expect(whole).toContain(TOO_LONG);
    expect(whole).toContain(`add ${ID} q1 ttr=1000 ttl=60000 pri=3 att=0 fails=0 "a\\r\\nb\\u0000"`);
  });

  it('reports the same events whatever the read boundaries (every split point)', () => {
    const big = TRANSCRIPT.indexOf(b(`add ${ID} q1 1 1 ${PAYLOAD_BYTES_MAX + 1}`));
    const bigEnd = big + PAYLOAD_BYTES_MAX + 200;
    for (let i = 1; i < TRANSCRIPT.length; i += i > big + 200 && i < bigEnd - 200 ? 4099 : 1) {
      const split = parse([TRANSCRIPT.subarray(0, i), TRANSCRIPT.subarray(i)]);
      if (split.length !== whole.length || split.some((e, k) => e !== whole[k])) {
        expect(split, `split at ${i}`).toEqual(whole);
      }
    }
  });

  it('reports the same events when fed one byte at a time', () => {
    const start = TRANSCRIPT.indexOf(b(`complete ${ID} 3\r\nabcXY`));
    const pieces: Buffer[] = [];
    for (let i = 0; i < TRANSCRIPT.length; i++) {
      if (i >= LINE_BYTES_MAX + 2000 && i < start) {
        // The too-long line and too-big payload in mid-size pieces, to keep the test quick.
        const j = Math.min(start, i + 997);
        pieces.push(TRANSCRIPT.subarray(i, j));
        i = j - 1;
      } else {
        pieces.push(TRANSCRIPT.subarray(i, i + 1));
      }
    }
    expect(parse(pieces)).toEqual(whole);
  });

  it('reports the same events split in three at pseudo-random points', () => {
    let seed = 12345;
    const rnd = (n: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    for (let k = 0; k < 300; k++) {
      const a = 1 + rnd(TRANSCRIPT.length - 2);
      const c = a + 1 + rnd(TRANSCRIPT.length - a - 1);
      expect(parse([TRANSCRIPT.subarray(0, a), TRANSCRIPT.subarray(a, c), TRANSCRIPT.subarray(c)]), `${a} ${c}`).toEqual(whole);
    }
  });
});

describe('workq parser: flow control', () => {
  it('stops when the sink says so and resumes where it stopped', () => {
    const r = new Recorder();
    const p = new Parser(r, { clock: () => NOW });
    r.parser = p;
    r.holdOn = CMD_LEASE;
    const rest = `add ${ID} q 1 1 2\r\nhi\r\n${PROBE}`;
    p.push(b(`lease q 1000\r\n${rest}`));
    expect(r.log).toEqual(['lease q wait=1000']);
    expect(p.isPaused).toBe(true);
    expect(p.bufferedBytes).toBe(rest.length);
    p.push(b('delete x\r\n'));
    expect(r.log.length).toBe(1);
    p.resume();
    expect(r.log).toEqual(['lease q wait=1000', `add ${ID} q ttr=1 ttl=1 pri=0 att=0 fails=0 "hi"`, PROBE_EVENT, BAD_ID]);
    expect(p.isPaused).toBe(false);
    expect(p.bufferedBytes).toBe(0);
  });

  it('pauses on a reply too, and inside a skipped payload', () => {
    const r = new Recorder();
    const p = new Parser(r);
    r.parser = p;
    r.reply = (msg: Buffer): boolean => {
      r.log.push(msg.toString('latin1').trim());
      return false;
    };
    p.push(Buffer.concat([b(`add ${ID} q 1 1 ${PAYLOAD_BYTES_MAX + 1}\r\n`), Buffer.alloc(10)]));
    expect(r.log).toEqual([PSIZE]);
    expect(p.bufferedBytes).toBe(10);
    p.resume();
    expect(p.bufferedBytes).toBe(0);
    p.push(Buffer.concat([Buffer.alloc(PAYLOAD_BYTES_MAX + 1 - 10 + 2), b(PROBE)]));
    expect(r.log).toEqual([PSIZE, PROBE_EVENT]);
  });

  it('does not re-enter when resumed from inside a callback', () => {
    const r = new Recorder();
    const p = new Parser(r);
    r.parser = p;
    const base = r.command.bind(r);
    r.command = (cmd: number): boolean => {
      base(cmd);
      p.pause();
      p.resume();
      return true;
    };
    p.push(b(`${PROBE}${PROBE}`));
    expect(r.log).toEqual([PROBE_EVENT, PROBE_EVENT]);
  });
});
