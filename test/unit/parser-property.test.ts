// Property test of the beanstalk parser (src/proto/beanstalk/parser.ts), next to the fixed
// transcript of parser.test.ts: fast-check writes random streams of commands, each with the sink
// calls it must produce worked out here from the protocol (not by asking the parser), and feeds
// them cut into random chunks, with the sink stopping the parser at random calls and the driver
// resuming it at random moments. What it checks that the transcript does not:
//   - every command, with random arguments in their whole ranges (leading zeros, extra spaces,
//     signs and trailing bytes where beanstalkd's number readers take them), reports exactly
//     its own arguments;
//   - put bodies of arbitrary bytes, CR and LF included, come out whole;
//   - malformed lines of many kinds (unknown words, bad arguments, bad tube names, numbers out of
//     range, lines over 224 bytes, a bad body trailer, a body over -z) never throw, each gets
//     its error reply, and the command after it is parsed as if nothing had happened;
//   - all of it whatever the chunking (many cuts, not one) and whatever the pauses: once a sink
//     call returns false the parser calls the sink no more until resumed (whatever chunks are
//     pushed meanwhile), and resuming goes on where it stopped.
// (When first written it caught, where parser.test.ts did not: a u32 of 4294967295 refused, ttr 0
// not raised to 1, a 200-byte tube name refused, a stop ignored after JOB_TOO_BIG, after an
// over-long line or after a body that straddles reads, and a byte lost when a read is held.)
// A failure prints fast-check's seed and the shrunk stream; FC_SEED=<seed> replays it.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CMD_BURY, CMD_DELETE, CMD_IGNORE, CMD_KICK, CMD_KICK_JOB, CMD_LIST_TUBE_USED, CMD_LIST_TUBES,
  CMD_LIST_TUBES_WATCHED, CMD_PAUSE_TUBE, CMD_PEEK, CMD_PEEK_BURIED, CMD_PEEK_DELAYED, CMD_PEEK_READY,
  CMD_PUT, CMD_QUIT, CMD_RELEASE, CMD_RESERVE, CMD_RESERVE_JOB, CMD_RESERVE_TIMEOUT, CMD_STATS,
  CMD_STATS_JOB, CMD_STATS_TUBE, CMD_TOUCH, CMD_USE, CMD_WATCH,
} from '../../src/proto/beanstalk/commands.ts';
import { LINE_BYTES_MAX, Parser, TUBE_NAME_BYTES_MAX, type ParserSink } from '../../src/proto/beanstalk/parser.ts';

/** `-z` for these runs: small, so that bodies over it (JOB_TOO_BIG) stay small too. */
const JOB_MAX = 40;

const U32_MAX = 0xffffffff;
const U64_MAX = (1n << 64n) - 1n;

// ---- the sink: every call, with the arguments that call carries ----

function argsOf(cmd: number, p: Parser): string {
  switch (cmd) {
    case CMD_PEEK: case CMD_RESERVE_JOB: case CMD_DELETE: case CMD_KICK_JOB: case CMD_TOUCH: case CMD_STATS_JOB:
      return ` ${p.id}`;
    case CMD_RELEASE:
      return ` ${p.id} ${p.pri} ${p.delaySec}`;
    case CMD_BURY:
      return ` ${p.id} ${p.pri}`;
    case CMD_KICK:
      return ` ${p.kickCount}`;
    case CMD_RESERVE: case CMD_RESERVE_TIMEOUT:
      return ` ${p.timeoutSec}`;
    case CMD_USE: case CMD_WATCH: case CMD_IGNORE: case CMD_STATS_TUBE:
      return ` ${p.name}`;
    case CMD_PAUSE_TUBE:
      return ` ${p.name} ${p.delaySec}`;
    default:
      return '';
  }
}

class Recorder implements ParserSink {
  readonly log: string[] = [];
  /** Calls made after the sink said stop and before the driver resumed the parser. */
  readonly afterStop: string[] = [];
  /** The sink said stop (returned false); the driver clears this when it resumes the parser. */
  stopped = false;
  parser!: Parser;
  private calls = 0;
  private readonly hold: boolean[];

  /** The n-th call that may stop the parser (command, putBody, reply) stops it when hold[n % length]. */
  constructor(hold: boolean[]) {
    this.hold = hold;
  }

  private note(entry: string): void {
    if (this.stopped) this.afterStop.push(entry);
    this.log.push(entry);
  }
  private go(): boolean {
    if (this.hold[this.calls++ % this.hold.length]) this.stopped = true;
    return !this.stopped;
  }
  count(cmd: number): void {
    this.note(`count ${cmd}`);
  }
  command(cmd: number): boolean {
    this.note(`cmd ${cmd}${argsOf(cmd, this.parser)}`);
    return this.go();
  }
  putStart(): void {
    const p = this.parser;
    this.note(`put ${p.pri} ${p.delaySec} ${p.ttrSec} ${p.bodyBytes}`);
  }
  putBody(buf: Uint8Array, start: number, end: number): boolean {
    this.note(`body ${Buffer.from(buf.subarray(start, end)).toString('hex')}`);
    return this.go();
  }
  reply(msg: Buffer): boolean {
    this.note(`reply ${msg.toString('latin1').trimEnd()}`);
    return this.go();
  }
}

// ---- steps: bytes on the wire, and the sink calls they must produce ----

interface Step {
  bytes: Buffer;
  want: string[];
}

const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1');
/** A step; fast-check shows a failing one as its bytes (latin1, escaped) and the calls it wants. */
const step = (bytes: Buffer, want: string[]): Step =>
  Object.assign({ bytes, want }, { [fc.toStringMethod]: () => `${JSON.stringify(bytes.toString('latin1'))} -> [${want.join(', ')}]` });
const line = (text: string, want: string[]): Step => step(latin1(`${text}\r\n`), want);
/** Any line with a NUL in it is BAD_FORMAT before anything else is looked at (beanstalkd NUL-terminates it). */
const lineOrNul = (text: string, want: string[]): Step => line(text, text.includes('\0') ? ['reply BAD_FORMAT'] : want);
const fits = (s: Step): boolean => s.bytes.length <= LINE_BYTES_MAX;

const BAD = ['reply BAD_FORMAT'];

// Pieces of command lines.
const NAME_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()';
/** Bytes a line may hold at all: anything but CR and LF (a stray CR changes where lines end). */
const lineByte = fc.integer({ min: 0, max: 255 }).filter((c) => c !== 13 && c !== 10).map((c) => String.fromCharCode(c));
const lineBytes = (minLength: number, maxLength: number) => fc.string({ unit: lineByte, minLength, maxLength });
/** Spaces before a number (read_u32 / read_u64 skip them) and leading zeros. */
const gap = fc.integer({ min: 1, max: 3 }).map((n) => ' '.repeat(n));
const zeros = fc.integer({ min: 0, max: 2 }).map((n) => '0'.repeat(n));
const u32 = fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: U32_MAX }), fc.constantFrom(0, U32_MAX));
/** Ids: u64 on the wire; up to 2^53 - 1 so that the value the parser reports is exact. */
const id = fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.maxSafeNat());
/** ` <zeros><n>` as a command argument. */
const arg = (n: fc.Arbitrary<number>) => fc.tuple(gap, zeros, n).map(([g, z, v]) => ({ text: `${g}${z}${v}`, v }));
/** Valid tube names, often at the 200-byte limit. */
const tubeName = fc
  .oneof(
    fc.string({ unit: fc.constantFrom(...NAME_CHARS), minLength: 1, maxLength: TUBE_NAME_BYTES_MAX }),
    fc.string({ unit: fc.constantFrom(...NAME_CHARS), minLength: TUBE_NAME_BYTES_MAX - 2, maxLength: TUBE_NAME_BYTES_MAX }),
  )
  .filter((n) => !n.startsWith('-'));
/** Bytes after a number that strtol/strtoul leave unread: nothing, or something not a digit first. */
const cTail = fc.oneof(
  fc.constant(''),
  fc.tuple(fc.constantFrom(' ', 'x', '-', '\t'), lineBytes(0, 8)).map(([a, b]) => a + b),
);
/** C isspace bytes that fit in a line (strtol skips them). */
const cSpaces = fc.string({ unit: fc.constantFrom(' ', '\t', '\v', '\f'), maxLength: 3 });
const body = (maxLength: number) =>
  fc.oneof(
    fc.uint8Array({ maxLength }),
    // mostly CR, LF and NUL: a body full of line ends must not end the body early
    fc.array(fc.constantFrom(13, 10, 0, 32, 120), { maxLength }).map((a) => Uint8Array.from(a)),
  );

// Valid commands.

const putStep = fc
  .tuple(arg(u32), arg(u32), arg(u32), body(JOB_MAX), gap, zeros)
  .map(([pri, delay, ttr, bytes, g, z]) =>
    step(
      Buffer.concat([latin1(`put${pri.text}${delay.text}${ttr.text}${g}${z}${bytes.length}\r\n`), bytes, latin1('\r\n')]),
      [`count ${CMD_PUT}`, `put ${pri.v} ${delay.v} ${Math.max(1, ttr.v)} ${bytes.length}`, `body ${Buffer.from(bytes).toString('hex')}`],
    ));

const ID_COMMANDS: Array<[string, number]> = [
  ['peek', CMD_PEEK], ['reserve-job', CMD_RESERVE_JOB], ['delete', CMD_DELETE],
  ['kick-job', CMD_KICK_JOB], ['touch', CMD_TOUCH], ['stats-job', CMD_STATS_JOB],
];
const idStep = fc.tuple(fc.constantFrom(...ID_COMMANDS), arg(id)).map(([[word, cmd], i]) => line(`${word}${i.text}`, [`count ${cmd}`, `cmd ${cmd} ${i.v}`]));

const releaseStep = fc.tuple(arg(id), arg(u32), arg(u32)).map(([i, pri, delay]) =>
  line(`release${i.text}${pri.text}${delay.text}`, [`count ${CMD_RELEASE}`, `cmd ${CMD_RELEASE} ${i.v} ${pri.v} ${delay.v}`]));

const buryStep = fc.tuple(arg(id), arg(u32)).map(([i, pri]) =>
  line(`bury${i.text}${pri.text}`, [`count ${CMD_BURY}`, `cmd ${CMD_BURY} ${i.v} ${pri.v}`]));

// kick: strtoul, so a sign is taken (negated in 64 bits), trailing bytes ignored, then cut to 32 bits.
const kickStep = fc
  .tuple(cSpaces, fc.constantFrom('', '+', '-'), zeros, fc.oneof(u32.map(BigInt), fc.bigInt({ min: 0n, max: U64_MAX })), cTail)
  .map(([ws, sign, z, n, tail]) => {
    const v = Number(BigInt.asUintN(32, sign === '-' ? -n : n));
    return lineOrNul(`kick ${ws}${sign}${z}${n}${tail}`, [`count ${CMD_KICK}`, `cmd ${CMD_KICK} ${v}`]);
  });

// reserve-with-timeout: strtol; no digits at all reads as 0.
const reserveTimeoutStep = fc.oneof(
  fc.tuple(cSpaces, fc.constantFrom('', '+'), zeros, fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), cTail).map(([ws, plus, z, t, tail]) => {
    const num = t < 0 ? `-${z}${-t}` : `${plus}${z}${t}`;
    return lineOrNul(`reserve-with-timeout ${ws}${num}${tail}`, [`count ${CMD_RESERVE_TIMEOUT}`, `cmd ${CMD_RESERVE_TIMEOUT} ${t}`]);
  }),
  fc.constantFrom('', 'x', 'junk', '-', '+', '+y', '- 5', '\tx9').map((t) =>
    line(`reserve-with-timeout ${t}`, [`count ${CMD_RESERVE_TIMEOUT}`, `cmd ${CMD_RESERVE_TIMEOUT} 0`])),
);

const BARE: Array<[string, number, string]> = [
  ['peek-ready', CMD_PEEK_READY, ''], ['peek-delayed', CMD_PEEK_DELAYED, ''], ['peek-buried', CMD_PEEK_BURIED, ''],
  ['reserve', CMD_RESERVE, ' -1'], ['stats', CMD_STATS, ''], ['list-tubes', CMD_LIST_TUBES, ''],
  ['list-tube-used', CMD_LIST_TUBE_USED, ''], ['list-tubes-watched', CMD_LIST_TUBES_WATCHED, ''],
];
const bareStep = fc.constantFrom(...BARE).map(([word, cmd, args]) => line(word, [`count ${cmd}`, `cmd ${cmd}${args}`]));

const TUBE_COMMANDS: Array<[string, number]> = [['use', CMD_USE], ['watch', CMD_WATCH], ['ignore', CMD_IGNORE], ['stats-tube', CMD_STATS_TUBE]];
const tubeStep = fc.tuple(fc.constantFrom(...TUBE_COMMANDS), tubeName).map(([[word, cmd], name]) => line(`${word} ${name}`, [`count ${cmd}`, `cmd ${cmd} ${name}`]));

// pause-tube: spaces, the longest run of name bytes (no space needed after the command word), a number.
const pauseStep = fc
  .tuple(fc.integer({ min: 0, max: 2 }), tubeName, arg(u32))
  .map(([sp, name, delay]) => line(`pause-tube${' '.repeat(sp)}${name}${delay.text}`, [`count ${CMD_PAUSE_TUBE}`, `cmd ${CMD_PAUSE_TUBE} ${name} ${delay.v}`]))
  .filter(fits);

// quit: the prefix is enough ("quitx" quits); not counted.
const quitStep = lineBytes(0, 6).map((tail) => lineOrNul(`quit${tail}`, [`cmd ${CMD_QUIT}`]));

const validStep: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: putStep, weight: 4 }, idStep, releaseStep, buryStep, kickStep, reserveTimeoutStep, bareStep, tubeStep, pauseStep, quitStep,
);

// Malformed input: each is answered with its error reply, then the next command parses.

/** Arbitrary bytes as a line; a first byte that could start a command is uppercased (commands are lowercase). */
const unknownStep = lineBytes(0, LINE_BYTES_MAX - 2).map((text) => {
  const t = /^[pdrbktsuwilq]/.test(text) ? text[0]!.toUpperCase() + text.slice(1) : text;
  return lineOrNul(t, ['reply UNKNOWN_COMMAND']);
});

/** An id command whose argument is not a number ending the line, or is over 2^64 - 1. */
const badIdStep = fc
  .tuple(
    fc.constantFrom(...ID_COMMANDS),
    fc.oneof(
      fc.string({ unit: fc.constantFrom(' ', '1', '9', 'x', '-', '+', '\t', '\0', '\xff'), maxLength: 12 }).filter((t) => !/^ *\d+$/.test(t)),
      fc.tuple(gap, fc.bigInt({ min: U64_MAX + 1n, max: 10n ** 30n })).map(([g, n]) => `${g}${n}`),
    ),
  )
  .map(([[word], tail]) => line(`${word} ${tail}`, BAD));

/** A u32 argument over 2^32 - 1 (bury, release, put): BAD_FORMAT, and nothing counted. */
const badU32Step = fc.tuple(fc.integer({ min: 0, max: 2 }), fc.bigInt({ min: BigInt(U32_MAX) + 1n, max: 10n ** 15n })).map(([which, big]) =>
  line(['bury 1 ', 'release 1 0 ', 'put 0 0 '][which] + String(big) + (which === 2 ? ' 1' : ''), BAD));

/** A command that takes no arguments, with some: BAD_FORMAT (a first byte '-' could make another command). */
const bareTailStep = fc.tuple(fc.constantFrom(...BARE), lineBytes(1, 12).filter((t) => !t.startsWith('-'))).map(([[word], tail]) => line(`${word}${tail}`, BAD));

/** use / watch / ignore / stats-tube with a bad name: empty, leading '-', a byte beanstalkd does not allow, or too long. */
const badTubeStep = fc
  .tuple(
    fc.constantFrom(...TUBE_COMMANDS),
    fc.oneof(
      fc.constant(''),
      tubeName.map((n) => `-${n}`.slice(0, TUBE_NAME_BYTES_MAX)),
      fc.tuple(tubeName, lineByte.filter((c) => !NAME_CHARS.includes(c)), fc.nat()).map(([n, c, at]) => {
        const i = at % (n.length + 1);
        return n.slice(0, i) + c + n.slice(i);
      }),
      fc.string({ unit: fc.constantFrom(...NAME_CHARS), minLength: TUBE_NAME_BYTES_MAX + 1, maxLength: LINE_BYTES_MAX - 14 }).map((n) => `a${n.slice(1)}`),
    ),
  )
  .map(([[word], name]) => line(`${word} ${name}`, BAD))
  .filter(fits);

/** pause-tube counts before it checks the name: a name starting with '-' is counted, then BAD_FORMAT. */
const badPauseStep = fc.tuple(tubeName, arg(u32)).map(([name, delay]) => line(`pause-tube -${name}${delay.text}`, [`count ${CMD_PAUSE_TUBE}`, 'reply BAD_FORMAT'])).filter(fits);

/** A put line with bytes after the size: counted, BAD_FORMAT, and no body is read. */
const putTailStep = fc
  .tuple(arg(u32), fc.integer({ min: 0, max: JOB_MAX }), fc.tuple(fc.constantFrom(' ', 'x', '-'), lineBytes(0, 8)).map(([a, b]) => a + b))
  .map(([pri, n, tail]) => lineOrNul(`put${pri.text} 0 1 ${n}${tail}`, [`count ${CMD_PUT}`, 'reply BAD_FORMAT']));

/**
 * A line longer than LINE_BYTES_MAX: dropped up to its CRLF, then BAD_FORMAT. Not the lengths
 * where the 224-byte window ends between the line's CR and LF (L % 224 == 223): beanstalkd then
 * loses the next line too (parser.test.ts pins that case down).
 */
const longLineStep = lineBytes(LINE_BYTES_MAX, 3 * LINE_BYTES_MAX)
  .filter((t) => t.length % LINE_BYTES_MAX !== LINE_BYTES_MAX - 1)
  .map((t) => line(t, BAD));

/** A put whose body is not followed by CRLF: counted, started, then EXPECTED_CRLF; exactly size + 2 bytes used. */
const badTrailerStep = fc
  .tuple(body(JOB_MAX), lineBytes(2, 2).filter((t) => t !== '\r\n'), fc.string({ unit: fc.constantFrom('\r', '\n', 'x'), minLength: 2, maxLength: 2 }), fc.boolean())
  .map(([bytes, t1, t2, which]) => {
    const trailer = which ? t1 : t2;
    return step(
      Buffer.concat([latin1(`put 0 0 1 ${bytes.length}\r\n`), bytes, latin1(trailer === '\r\n' ? 'xx' : trailer)]),
      [`count ${CMD_PUT}`, `put 0 0 1 ${bytes.length}`, 'reply EXPECTED_CRLF'],
    );
  });

/** A put over -z: counted, its size + 2 bytes (whatever they are) thrown away, then JOB_TOO_BIG; trailing bytes on the line do not matter. */
const tooBigStep = fc
  .tuple(fc.integer({ min: JOB_MAX + 1, max: 3 * JOB_MAX }), fc.oneof(fc.constant(''), fc.constant(' junk')), fc.uint8Array({ minLength: 3 * JOB_MAX + 2, maxLength: 3 * JOB_MAX + 2 }))
  .map(([n, tail, junk]) =>
    step(Buffer.concat([latin1(`put 0 0 1 ${n}${tail}\r\n`), junk.subarray(0, n + 2)]), [`count ${CMD_PUT}`, 'reply JOB_TOO_BIG']));

const badStep: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: unknownStep, weight: 3 }, badIdStep, badU32Step, bareTailStep, badTubeStep, badPauseStep, putTailStep, longLineStep, badTrailerStep, tooBigStep,
);

// ---- the driver ----

/**
 * Feed `stream` cut at the offsets `at` (ascending, inside the stream). The sink stops the parser as `hold`
 * says; while it is stopped, before each further chunk the driver resumes it or not as
 * `resumeEarly` says (a connection whose output drains at random moments), and at the end
 * resumes it until it has parsed everything.
 */
function drive(stream: Buffer, at: number[], hold: boolean[], resumeEarly: boolean[]): string[] {
  const readBuffer = Buffer.alloc(stream.length + 64, 'put 1 0 1 5\r\nhello\r\nreserve\r\n');
  const sink = new Recorder(hold);
  const parser = new Parser(sink, JOB_MAX);
  sink.parser = parser;
  const bounds = [0, ...at, stream.length];
  let r = 0;
  const resume = (): void => {
    sink.stopped = false;
    parser.resume();
  };
  for (let i = 0; i + 1 < bounds.length; i++) {
    if (parser.isPaused && resumeEarly[r++ % resumeEarly.length]) resume();
    const before = sink.log.length;
    const wasPaused = parser.isPaused;
    // As a socket reads: into the start of one reused buffer whose other bytes are left over from
    // earlier reads, passed whole with the count read. The parser must stop at the count and
    // copy whatever it keeps, since the next read overwrites the buffer.
    const n = bounds[i + 1] - bounds[i];
    stream.copy(readBuffer, 0, bounds[i], bounds[i + 1]);
    parser.push(readBuffer, n);
    readBuffer.fill(0x58, 0, n); // 'X': what the parser kept must not be a view of this
    if (wasPaused) expect(sink.log.length, 'a stopped parser reported something on push').toBe(before);
  }
  for (let guard = 0; parser.isPaused; guard++) {
    expect(guard, 'resume never finishes').toBeLessThan(100_000);
    resume();
  }
  expect(sink.afterStop, 'the parser went on after the sink said stop').toEqual([]);
  expect(parser.bufferedBytes, 'bytes left unparsed').toBe(0);
  return sink.log;
}

const seed = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : undefined;
const runs = (numRuns: number) => (seed !== undefined ? { seed, numRuns } : { numRuns });

const cutsArb = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 40, size: 'max' });

/** Cut offsets from fractions of the stream's length: distinct, ascending, inside the stream. */
function offsets(stream: Buffer, fractions: number[]): number[] {
  const at = new Set(fractions.map((f) => Math.floor(f * stream.length)));
  return [...at].filter((n) => n > 0 && n < stream.length).sort((a, b) => a - b);
}
const holdArb = fc.array(fc.boolean(), { minLength: 1, maxLength: 6 });

describe('beanstalk parser, properties', () => {
  it('valid commands: each reports exactly its arguments, whatever the chunks and pauses', () => {
    fc.assert(
      fc.property(fc.array(validStep, { minLength: 1, maxLength: 30, size: 'max' }), cutsArb, holdArb, holdArb, (steps, cuts, hold, resumeEarly) => {
        const stream = Buffer.concat(steps.map((s) => s.bytes));
        expect(drive(stream, [], [false], [true])).toEqual(steps.flatMap((s) => s.want));
        expect(drive(stream, offsets(stream, cuts), hold, resumeEarly)).toEqual(steps.flatMap((s) => s.want));
      }),
      runs(400),
    );
  });

  it('malformed input between valid commands: never throws, each gets its error reply, the next command parses', () => {
    const mixed = fc.array(fc.oneof(validStep, badStep), { minLength: 1, maxLength: 30, size: 'max' });
    fc.assert(
      fc.property(mixed, cutsArb, holdArb, holdArb, (steps, cuts, hold, resumeEarly) => {
        const stream = Buffer.concat(steps.map((s) => s.bytes));
        expect(drive(stream, [], [false], [true])).toEqual(steps.flatMap((s) => s.want));
        expect(drive(stream, offsets(stream, cuts), hold, resumeEarly)).toEqual(steps.flatMap((s) => s.want));
      }),
      runs(400),
    );
  });

  it('one byte per chunk gives the same calls as one chunk', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(validStep, badStep), { minLength: 1, maxLength: 8 }), holdArb, (steps, hold) => {
        const stream = Buffer.concat(steps.map((s) => s.bytes));
        const everyByte = Array.from({ length: stream.length - 1 }, (_, i) => i + 1);
        expect(drive(stream, everyByte, hold, [true, false])).toEqual(steps.flatMap((s) => s.want));
      }),
      runs(100),
    );
  });
});
