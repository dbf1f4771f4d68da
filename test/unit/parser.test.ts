import { describe, expect, it } from 'vitest';
import { CMD_KICK, CMD_PAUSE_TUBE, CMD_PUT, CMD_RESERVE_TIMEOUT } from '../../src/proto/beanstalk/commands.ts';
import { LINE_BYTES_MAX, Parser, type ParserSink } from '../../src/proto/beanstalk/parser.ts';

/** Records everything the parser reports, as text, so two runs can be compared. */
class Recorder implements ParserSink {
  log: string[] = [];
  parser!: Parser;
  holdOn = -1; // command code that pauses the parser

  count(cmd: number): void {
    this.log.push(`count ${cmd}`);
  }
  command(cmd: number): boolean {
    const p = this.parser;
    let args = '';
    if (cmd === CMD_KICK) args = ` n=${p.kickCount}`;
    else if (cmd === CMD_RESERVE_TIMEOUT) args = ` t=${p.timeoutSec}`;
    else if (cmd === CMD_PAUSE_TUBE) args = ` ${p.name} ${p.delaySec}`;
    else args = ` id=${p.id} pri=${p.pri} delay=${p.delaySec} name=${p.name}`;
    this.log.push(`cmd ${cmd}${args}`);
    return cmd !== this.holdOn;
  }
  putStart(): void {
    const p = this.parser;
    this.log.push(`put pri=${p.pri} delay=${p.delaySec} ttr=${p.ttrSec} bytes=${p.bodyBytes}`);
  }
  putBody(buf: Uint8Array, start: number, end: number): boolean {
    this.log.push(`body ${JSON.stringify(Buffer.from(buf.subarray(start, end)).toString('latin1'))}`);
    return true;
  }
  reply(msg: Buffer): boolean {
    this.log.push(`reply ${msg.toString('latin1').trim()}`);
    return true;
  }
}

function parse(chunks: Buffer[], jobSizeMax = 65535): string[] {
  const r = new Recorder();
  r.parser = new Parser(r, jobSizeMax);
  for (const c of chunks) r.parser.push(c);
  return r.log;
}

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

// A transcript exercising every framing path: pipelined commands, bodies with CR/LF/NUL,
// an over-long line, a too-big body, a bad trailer, numbers at their limits.
const TRANSCRIPT = Buffer.concat([
  b('put 1 2 3 5\r\na\r\nb\0\r\n'),
  b('reserve\r\nreserve-with-timeout -3\r\nreserve-with-timeout junk\r\n'),
  b(`use ${'x'.repeat(200)}\r\nuse ${'x'.repeat(201)}\r\n`),
  b(`${'z'.repeat(LINE_BYTES_MAX + 10)}\r\nstats\r\n`),
  b('put 0 0 1 70000\r\n'),
  Buffer.alloc(70002, 65),
  b('put 0 0 1 3\r\nabcXY'),
  b('delete 18446744073709551615\r\ndelete 18446744073709551616\r\n'),
  b('release 1 4294967295 0\r\nrelease 1 4294967296 0\r\n'),
  b('kick -1\r\nkick x\r\nkick 5 trailing\r\n'),
  b('pause-tubefoo 7\r\npause-tube -bad 1\r\npause-tube foo\r\n'),
  b('reservex\r\nstatsx\r\nput\r\npeek\r\nquitx\r\nwat\0ch\r\n'),
  b('put 1 2 3 4 junk\r\nput 1 2 0 0\r\n\r\n'),
]);

describe('beanstalk parser', () => {
  it('reports the same events whatever the read boundaries (every split point)', () => {
    const whole = parse([TRANSCRIPT], 65535);
    expect(whole.length).toBeGreaterThan(30);
    for (let i = 1; i < TRANSCRIPT.length; i += i < 400 ? 1 : 997) {
      const split = parse([TRANSCRIPT.subarray(0, i), TRANSCRIPT.subarray(i)]);
      expect(split, `split at ${i}`).toEqual(whole);
    }
  });

  it('reports the same events when fed one byte at a time', () => {
    const small = TRANSCRIPT.subarray(0, 900);
    const bytes: Buffer[] = [];
    for (let i = 0; i < small.length; i++) bytes.push(small.subarray(i, i + 1));
    expect(parse(bytes)).toEqual(parse([small]));
  });

  it('follows beanstalkd on the odd inputs', () => {
    const log = parse([TRANSCRIPT]);
    const text = log.join('\n');
    expect(log.slice(0, 3)).toEqual(['count 1', 'put pri=1 delay=2 ttr=3 bytes=5', 'body "a\\r\\nb\\u0000"']);
    expect(text).toContain('cmd 7 t=-3'); // strtol accepts a sign
    expect(text).toContain('cmd 7 t=0'); // and no digits at all means 0
    expect(text).toContain('reply JOB_TOO_BIG');
    expect(text).toContain('reply EXPECTED_CRLF');
    expect(text).toContain('cmd 12 n=4294967295'); // kick -1
    expect(text).toContain('cmd 12 n=5'); // trailing bytes ignored
    expect(text).toContain('cmd 25 foo 7'); // pause-tubefoo 7
    expect(log.filter((l) => l === 'reply UNKNOWN_COMMAND')).toHaveLength(2); // put, peek
    expect(log.some((l) => l.startsWith('cmd 24 '))).toBe(true); // quitx quits
  });

  it('accepts a line of exactly LINE_BYTES_MAX bytes and refuses one byte more', () => {
    // Leading zeros keep the number valid while the line grows.
    const ok = `delete ${'0'.repeat(LINE_BYTES_MAX - 10)}7\r\n`; // 224 bytes with \r\n
    expect(ok.length).toBe(LINE_BYTES_MAX);
    expect(parse([b(ok)])).toEqual(['count 9', 'cmd 9 id=7 pri=0 delay=0 name=']);
    const long = `delete ${'0'.repeat(LINE_BYTES_MAX)}7\r\nlist-tubes\r\n`;
    expect(parse([b(long)])).toEqual(['reply BAD_FORMAT', 'count 21', expect.stringMatching(/^cmd 21/)]);
    // One byte over: the 224 bytes dropped end with the \r, so the \n is left over and the
    // search for the line end runs on into the next command, which is lost (beanstalkd does this).
    const oneOver = `delete ${'0'.repeat(LINE_BYTES_MAX - 9)}7\r\nlist-tubes\r\nstats\r\n`;
    expect(parse([b(oneOver)])).toEqual(['reply BAD_FORMAT', 'count 15', expect.stringMatching(/^cmd 15/)]);
  });

  it('a stray \\r hides the line end until the line buffer fills, as in beanstalkd', () => {
    expect(parse([b('stats\rx\r\n')])).toEqual([]);
    const filler = 'y'.repeat(LINE_BYTES_MAX);
    expect(parse([b(`stats\rx\r\n${filler}\r\nstats\r\n`)])).toEqual(['reply BAD_FORMAT', 'count 15', 'cmd 15 id=0 pri=0 delay=0 name=']);
  });

  it('stops at a command that holds it and resumes where it stopped', () => {
    const r = new Recorder();
    r.parser = new Parser(r);
    r.holdOn = 6; // reserve
    r.parser.push(b('reserve\r\nput 0 0 1 1\r\nx\r\n'));
    expect(r.log).toEqual(['count 6', 'cmd 6 id=0 pri=0 delay=0 name=']);
    expect(r.parser.bufferedBytes).toBe(16);
    r.parser.resume();
    expect(r.log.slice(2)).toEqual(['count 1', 'put pri=0 delay=0 ttr=1 bytes=1', 'body "x"']);
    expect(CMD_PUT).toBe(1);
  });
});
