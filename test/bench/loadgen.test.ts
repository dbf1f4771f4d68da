// The load generator: its reply scanner at every split point, its histogram and ledger, and short
// real runs against a beanstalkd started on a free port (no timing thresholds: only that the run
// completed, moved jobs, and accounted for every one of them exactly once). Without beanstalkd at
// /usr/bin/beanstalkd those runs fail, saying so (they never skip).

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { bucketLowUs, bucketOf, Histogram } from '../../bench/loadgen/histogram.ts';
import { Ledger, verifyLedgers } from '../../bench/loadgen/ledger.ts';
import { makePutTemplate, readBodySeq, SEQ_DIGITS, writeFixedDigits } from '../../bench/loadgen/protocol.ts';
import {
  REPLY_BURIED,
  REPLY_DELETED,
  REPLY_GARBLED,
  REPLY_INSERTED,
  REPLY_NAMES,
  REPLY_OK,
  REPLY_RESERVED,
  REPLY_WQ_JOB,
  ReplyScanner,
  type FrameScanner,
  type ReplySink,
} from '../../bench/loadgen/scanner.ts';
import { JobIds, makeAddTemplate, WorkqReplyScanner } from '../../bench/loadgen/workq.ts';
import { runLoad } from '../../bench/loadgen/run.ts';
import { formatReport } from '../../bench/report/text.ts';
import { parseStats, queryServer } from '../../bench/loadgen/procfs.ts';
import { BEANSTALKD_PATH, beanstalkdSpec, shardstalkSpec, startServer, type RunningServer } from '../../bench/suite/servers.ts';
import { beanstalkdMissingAt } from '../support/servers.ts';

// Every reply shape the generator can meet, including bodies that hold CRLF and a zero-length body.
const BODY = 'a1b2c3d4:00000000042.....';
const TRANSCRIPT =
  'INSERTED 1\r\n' +
  'USING bench.a1b2c3d4.0\r\n' +
  'WATCHING 2\r\n' +
  `RESERVED 18446744073 ${BODY.length}\r\n${BODY}\r\n` +
  'DELETED\r\n' +
  'TIMED_OUT\r\n' +
  'OK 12\r\nab\r\ncd\r\nef\r\n\r\n' +
  'BURIED 7\r\n' +
  'BURIED\r\n' +
  'NOT_FOUND\r\n' +
  'RESERVED 6 0\r\n\r\n' +
  'DEADLINE_SOON\r\n' +
  'INSERTED 123456789\r\n';

// The same for workq: the 0.2 server's three-field job line and the spec's four-field one.
const UUID_A = '6ba7b810-9dad-41d1-80b4-00c04fd430c4';
const UUID_B = 'f47ac10b-58cc-4372-a567-0e02b2c3d479';
const WQ_TRANSCRIPT =
  '+OK\r\n' +
  `+OK 1\r\n${UUID_A} bench.a1b2c3d4.0 ${BODY.length}\r\n${BODY}\r\n` +
  '-TIMEOUT\r\n' +
  `+OK 1\r\n${UUID_B} ping 1000 12\r\nab\r\ncd\r\nef\r\n\r\n` +
  '-NOT-FOUND\r\n' +
  '-CLIENT-ERROR Invalid ID\r\n' +
  `+OK 1\r\n${UUID_A} x 0\r\n\r\n` +
  '-SERVER-ERROR Queue out of sync\r\n' +
  '+OK\r\n';

interface Event {
  kind: string;
  arg: number;
  body: string;
  bodyBytes: number;
  /** workq: the leased job's id, or the error's text. */
  id?: string;
}

type Scanner = ReplyScanner | WorkqReplyScanner;

/** A sink recording every reply; `scanner` (set after construction) adds workq's id or error text. */
function collector(): { sink: ReplySink; events: Event[]; scanner: Scanner | null } {
  const events: Event[] = [];
  const c: { sink: ReplySink; events: Event[]; scanner: Scanner | null } = {
    events,
    scanner: null,
    sink: {
      onReply(kind, arg, body, start, kept, bodyBytes) {
        const e: Event = { kind: REPLY_NAMES[kind]!, arg, body: Buffer.from(body.subarray(start, start + kept)).toString('latin1'), bodyBytes };
        if (c.scanner instanceof WorkqReplyScanner) e.id = kind === REPLY_WQ_JOB ? Buffer.from(c.scanner.id).toString('latin1') : c.scanner.errorText;
        events.push(e);
      },
    },
  };
  return c;
}

/** Feeds `chunks` through one reused buffer with garbage after each chunk, like net's onread. */
function feedShared(scanner: FrameScanner, chunks: Buffer[]): void {
  const shared = Buffer.alloc(4096, 0x0a); // stale LFs beyond `end` must not be seen
  for (const c of chunks) {
    c.copy(shared, 0);
    scanner.feed(shared, 0, c.length);
    shared.fill(0x0a);
  }
}

const SCANNERS: Array<[string, (sink: ReplySink, prefixBytes?: number) => Scanner, string]> = [
  ['beanstalk', (sink, prefixBytes) => new ReplyScanner(sink, prefixBytes), TRANSCRIPT],
  ['workq', (sink, prefixBytes) => new WorkqReplyScanner(sink, prefixBytes), WQ_TRANSCRIPT],
];

function scan(make: (sink: ReplySink, prefixBytes?: number) => Scanner, chunks: Buffer[], prefixBytes?: number): { events: Event[]; scanner: Scanner } {
  const c = collector();
  const scanner = make(c.sink, prefixBytes);
  c.scanner = scanner;
  feedShared(scanner, chunks);
  return { events: c.events, scanner };
}

describe.each(SCANNERS)('%s reply scanner, split anywhere', (_name, make, transcript) => {
  const whole = Buffer.from(transcript, 'latin1');
  const reference = scan(make, [whole]).events;

  it('gives the same replies when every byte arrives in its own read', () => {
    const { events, scanner } = scan(make, [...whole].map((b) => Buffer.from([b])));
    expect(events).toEqual(reference);
    expect(scanner.idle).toBe(true);
    expect(scanner.failed).toBe(false);
  });

  it('gives the same replies split into two reads at every point', () => {
    for (let cut = 0; cut <= whole.length; cut++) {
      expect(scan(make, [whole.subarray(0, cut), whole.subarray(cut)]).events, `split at byte ${cut}`).toEqual(reference);
    }
  });

  it('keeps only the body prefix it was asked for, at every split point', () => {
    const expected = scan(make, [whole], 8).events;
    expect(expected.find((e) => e.bodyBytes === BODY.length)!.body).toBe(BODY.slice(0, 8));
    for (let cut = 0; cut <= whole.length; cut++) {
      expect(scan(make, [whole.subarray(0, cut), whole.subarray(cut)], 8).events, `split at byte ${cut}`).toEqual(expected);
    }
  });
});

describe('reply scanner', () => {
  const whole = Buffer.from(TRANSCRIPT, 'latin1');
  const reference = collector();
  new ReplyScanner(reference.sink).feed(whole, 0, whole.length);

  it('reads every reply of the transcript in one read', () => {
    expect(reference.events.map((e) => e.kind)).toEqual([
      'INSERTED',
      'USING',
      'WATCHING',
      'RESERVED',
      'DELETED',
      'TIMED_OUT',
      'OK',
      'BURIED',
      'BURIED',
      'NOT_FOUND',
      'RESERVED',
      'DEADLINE_SOON',
      'INSERTED',
    ]);
    expect(reference.events[0]!.arg).toBe(1);
    expect(reference.events[3]).toEqual({ kind: 'RESERVED', arg: 18446744073, body: BODY, bodyBytes: BODY.length });
    expect(reference.events[6]).toEqual({ kind: 'OK', arg: -1, body: 'ab\r\ncd\r\nef\r\n', bodyBytes: 12 });
    expect(reference.events[7]!.arg).toBe(7);
    expect(reference.events[10]).toEqual({ kind: 'RESERVED', arg: 6, body: '', bodyBytes: 0 });
    expect(reference.events[12]!.arg).toBe(123456789);
  });

  // Canaries: input that is not beanstalk must stop the scanner, not be misread.
  it.each([
    ['an unknown word', 'HELLO\r\n'],
    ['a missing CR', 'DELETED\n'],
    ['a body without its CRLF', 'RESERVED 1 3\r\nabcXY'],
    ['a reply word with a stray argument', 'DELETED 5\r\n'],
    ['a line longer than any reply', `USING ${'x'.repeat(300)}\r\n`],
  ])('reports %s as GARBLED', (_name, text) => {
    const c = collector();
    const scanner = new ReplyScanner(c.sink);
    feedShared(scanner, [Buffer.from(text, 'latin1')]);
    expect(c.events.at(-1)!.kind).toBe('GARBLED');
    expect(scanner.failed).toBe(true);
  });

  it('reads workq replies: jobs with their ids (three- and four-field job lines), errors with their text', () => {
    const { events } = scan(SCANNERS[1]![1], [Buffer.from(WQ_TRANSCRIPT, 'latin1')]);
    expect(events.map((e) => e.kind)).toEqual(['+OK', '+OK 1 (job)', '-TIMEOUT', '+OK 1 (job)', '-NOT-FOUND', '-CLIENT-ERROR', '+OK 1 (job)', '-SERVER-ERROR', '+OK']);
    expect(events[1]).toEqual({ kind: '+OK 1 (job)', arg: -1, body: BODY, bodyBytes: BODY.length, id: UUID_A });
    expect(events[3]).toMatchObject({ body: 'ab\r\ncd\r\nef\r\n', bodyBytes: 12, id: UUID_B });
    expect(events[5]!.id).toBe('-CLIENT-ERROR Invalid ID');
    expect(events[6]).toMatchObject({ body: '', bodyBytes: 0, id: UUID_A });
    expect(events[7]!.id).toBe('-SERVER-ERROR Queue out of sync');
  });

  // Canaries for workq: a beanstalk reply, a job count other than 1, a job line without a name.
  it.each([
    ['a beanstalk reply', 'INSERTED 1\r\n'],
    ['two jobs announced', '+OK 2\r\n'],
    ['a job line without a name', `+OK 1\r\n${UUID_A} 5\r\nhello\r\n`],
    ['an unknown error', '-OOPS\r\n'],
    ['-TIMEOUT with an argument', '-TIMEOUT 5\r\n'],
  ])('reports %s as GARBLED (workq)', (_name, text) => {
    const { events, scanner } = scan(SCANNERS[1]![1], [Buffer.from(text, 'latin1')]);
    expect(events.at(-1)!.kind).toBe('GARBLED');
    expect(scanner.failed).toBe(true);
  });

  it('names its constants consistently', () => {
    expect(REPLY_NAMES[REPLY_INSERTED]).toBe('INSERTED');
    expect(REPLY_NAMES[REPLY_RESERVED]).toBe('RESERVED');
    expect(REPLY_NAMES[REPLY_DELETED]).toBe('DELETED');
    expect(REPLY_NAMES[REPLY_OK]).toBe('OK');
    expect(REPLY_NAMES[REPLY_BURIED]).toBe('BURIED');
    expect(REPLY_NAMES[REPLY_GARBLED]).toBe('GARBLED');
  });
});

describe('job body', () => {
  it('carries the nonce and sequence number the ledger reads back', () => {
    const t = makePutTemplate('a1b2c3d4', 100, 1024, 120);
    const bytes = Buffer.from(t.bytes);
    writeFixedDigits(bytes, t.seqOffset + SEQ_DIGITS, SEQ_DIGITS, 98765432109);
    const text = bytes.toString('latin1');
    expect(text.startsWith('put 1024 0 120 100\r\na1b2c3d4:98765432109.')).toBe(true);
    expect(bytes.length).toBe('put 1024 0 120 100\r\n'.length + 100 + 2);
    const bodyStart = text.indexOf('\r\n') + 2;
    expect(readBodySeq(bytes, bodyStart, 64, Buffer.from('a1b2c3d4'))).toBe(98765432109);
    expect(readBodySeq(bytes, bodyStart, 64, Buffer.from('ffffffff'))).toBe(-1);
  });
});

describe('workq job ids', () => {
  const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

  it('are canonical lowercase UUIDv4s, distinct per job and per run', () => {
    const a = new JobIds('a1b2c3d4');
    const b = new JobIds('a1b2c3d5');
    const seen = new Set<string>();
    const seqs = [...Array.from({ length: 100_000 }, (_, i) => i), 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 98765432109, 2 ** 48 - 1];
    for (const seq of seqs) {
      const id = a.text(seq);
      expect(V4.test(id), id).toBe(true);
      seen.add(id);
      seen.add(b.text(seq));
    }
    expect(seen.size).toBe(2 * seqs.length);
    // The leading field varies like a random id's, not like a counter's.
    expect(new Set(Array.from({ length: 256 }, (_, i) => a.text(i).slice(0, 2))).size).toBeGreaterThan(100);
  });

  it('are checked against the sequence number a payload carries', () => {
    const ids = new JobIds('00c0ffee');
    const id = Buffer.from(ids.text(42), 'latin1');
    expect(ids.matches(id, 0, 42)).toBe(true);
    expect(ids.matches(id, 0, 43)).toBe(false);
    expect(new JobIds('00c0ffef').matches(id, 0, 42)).toBe(false);
  });

  it('go into an add command whose id and sequence digits are rewritten per job', () => {
    const ids = new JobIds('a1b2c3d4');
    const t = makeAddTemplate(ids, 'a1b2c3d4', 'bench.a1b2c3d4.0', 100, 120_000, 600_000);
    const bytes = Buffer.from(t.bytes);
    ids.writeVarying(bytes, t.idOffset, 98765432109);
    writeFixedDigits(bytes, t.seqOffset + SEQ_DIGITS, SEQ_DIGITS, 98765432109);
    const head = `add ${ids.text(98765432109)} bench.a1b2c3d4.0 120000 600000 100\r\n`;
    expect(bytes.toString('latin1').startsWith(`${head}a1b2c3d4:98765432109.`)).toBe(true);
    expect(bytes.length).toBe(head.length + 100 + 2);
    expect(bytes.toString('latin1').endsWith('.\r\n')).toBe(true);
  });
});

describe('histogram', () => {
  it('reports quantiles within one sub-bucket (1/64) of the truth', () => {
    const h = new Histogram();
    for (let v = 1; v <= 100_000; v++) h.record(v);
    for (const q of [0.5, 0.9, 0.99, 0.999]) {
      const truth = q * 100_000;
      expect(Math.abs(h.quantileUs(q) - truth) / truth).toBeLessThan(1 / 64);
    }
    expect(h.maxUs).toBe(100_000);
  });

  it('maps every bucket back to a lower bound inside it', () => {
    for (const v of [0, 1, 127, 128, 129, 255, 256, 1000, 65_535, 1e6, 2 ** 31 - 1]) {
      const b = bucketOf(v);
      expect(bucketLowUs(b)).toBeLessThanOrEqual(v);
      expect(bucketOf(bucketLowUs(b))).toBe(b);
    }
  });

  it('merges by adding counts', () => {
    const a = new Histogram();
    const b = new Histogram();
    a.record(10);
    b.record(1000);
    a.add(b);
    expect(a.count).toBe(2);
    expect(a.maxUs).toBe(1000);
  });
});

describe('ledger', () => {
  it('passes jobs deleted exactly once, across threads', () => {
    const producer = new Ledger();
    const consumer = new Ledger();
    for (let seq = 0; seq < 1000; seq++) {
      producer.markInserted(seq);
      consumer.markReserved(seq);
      consumer.markDeleted(seq);
    }
    const v = verifyLedgers([producer.export(), consumer.export()]);
    expect(v).toMatchObject({ inserted: 1000, deletedOnce: 1000, lost: 0, duplicated: 0, ok: true });
  });

  // Canary: the check must be able to fail.
  it('catches a lost job, a duplicate and an unacknowledged reservation', () => {
    const a = new Ledger();
    const b = new Ledger();
    for (let seq = 0; seq < 10; seq++) a.markInserted(seq);
    for (let seq = 0; seq < 9; seq++) {
      b.markReserved(seq);
      b.markDeleted(seq);
    }
    a.markReserved(3); // job 3 handed out twice
    b.markReserved(70_000); // a job we never saw acknowledged (and beyond the initial capacity)
    const v = verifyLedgers([a.export(), b.export()]);
    expect(v).toMatchObject({ lost: 1, duplicated: 1, unacknowledged: 1, ok: false });
  });
});

describe('against beanstalkd', () => {
  const beanstalkd = beanstalkdSpec();
  let server: RunningServer;

  beforeAll(async () => {
    if (beanstalkd !== null) server = await startServer(beanstalkd);
  });

  // A missing beanstalkd fails each test here with this message (never a skip).
  beforeEach(() => {
    if (beanstalkd === null) throw beanstalkdMissingAt(BEANSTALKD_PATH, 'the bench (bench/suite/servers.ts)');
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('cycles for a second with every job deleted exactly once', async () => {
    const r = await runLoad({ port: server.port, mode: 'cycle', connections: 8, pipeline: 4, durationS: 1, warmupS: 0 });
    expect(r.failures).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.jobsPerSec).toBeGreaterThan(0);
    expect(r.verify.checked).toBe(true);
    expect(r.verify.lost).toBe(0);
    expect(r.verify.duplicated).toBe(0);
    expect(r.verify.inserted).toBeGreaterThan(0);
    expect(r.verify.deletedOnce).toBe(r.verify.inserted);
    expect(r.latencyUs.put.count).toBeGreaterThan(0);
    expect(r.serverPid).toBe(server.pid);
    expect(r.serverRss?.startBytes).toBeGreaterThan(0);
    expect(r.serverRss?.endBytes).toBeGreaterThan(0);
    expect(formatReport(r)).toMatch(/server RSS {3}\S+ .*→ .* over the measured window \([+−]/);
  });

  it('drains a pre-filled queue over two threads and several tubes (reserve mode)', async () => {
    const r = await runLoad({ port: server.port, mode: 'reserve', connections: 4, pipeline: 8, jobs: 5000, tubes: 4, threads: 2 });
    expect(r.failures).toEqual([]);
    expect(r.verify).toMatchObject({ inserted: 5000, deletedOnce: 5000, lost: 0, duplicated: 0 });
    expect(r.jobs).toBe(5000);
  });

  it('runs producers against consumers (mixed mode, -n) and accounts for every job', async () => {
    const r = await runLoad({ port: server.port, mode: 'mixed', connections: 6, pipeline: 4, jobs: 3000, tubes: 2, watch: 1 });
    expect(r.failures).toEqual([]);
    expect(r.verify).toMatchObject({ inserted: 3000, deletedOnce: 3000, lost: 0, duplicated: 0 });
  });

  it('verifies a put run when asked to drain it, and paces puts with --rate', async () => {
    const r = await runLoad({ port: server.port, mode: 'put', connections: 2, pipeline: 4, durationS: 0.5, warmupS: 0, rate: 2000, drain: true });
    expect(r.failures).toEqual([]);
    expect(r.verify.checked).toBe(true);
    expect(r.verify.drained).toBe(r.verify.inserted);
    expect(r.verify.lost).toBe(0);
    // Open loop at 2000/s for 0.5 s: about 1000 puts, never wildly more.
    expect(r.phases[0]!.totals.puts).toBeLessThanOrEqual(1100);
  });

  it('lengthens a short window to hold its waves of in-flight jobs, up to 5 × -d', async () => {
    // 1e6 waves can never fit: the window must stop growing at the cap.
    const r = await runLoad({ port: server.port, mode: 'cycle', connections: 4, pipeline: 4, durationS: 0.3, warmupS: 0, minWaves: 1e6 });
    expect(r.failures).toEqual([]);
    const load = r.phases.find((p) => p.phase === 'load')!;
    expect(load.windowExtendedS).toBeGreaterThan(0);
    expect(load.windowExtendedS).toBeLessThanOrEqual(4 * 0.3 + 1e-9);
    expect(r.elapsedS).toBeGreaterThan(0.3);
    // -d exactly when asked.
    const exact = await runLoad({ port: server.port, mode: 'cycle', connections: 4, pipeline: 4, durationS: 0.3, warmupS: 0, minWaves: 0 });
    expect(exact.phases.find((p) => p.phase === 'load')!.windowExtendedS).toBe(0);
  });

  it('lengthens the window when no job at all is done before its deadline (a stalled server)', async () => {
    // A proxy that holds the server's replies for 0.8 s from the first put: nothing completes in
    // the 0.3 s window, so there is no rate to go by; the window must still grow (to its cap)
    // rather than end with no job measured.
    const net = await import('node:net');
    const proxy = net.createServer((client) => {
      const upstream = net.connect(server.port, '127.0.0.1');
      let holdUntil = 0; // set at the first put
      const held: Buffer[] = [];
      let releaseTimer: NodeJS.Timeout | null = null;
      const release = (): void => {
        for (const b of held.splice(0)) client.write(b);
      };
      client.on('data', (d) => {
        if (holdUntil === 0 && d.includes('put ')) {
          holdUntil = Date.now() + 800;
          releaseTimer = setTimeout(release, 800);
        }
        upstream.write(d);
      });
      upstream.on('data', (d) => {
        if (Date.now() < holdUntil) held.push(d);
        else {
          release();
          client.write(d);
        }
      });
      const close = (): void => {
        if (releaseTimer !== null) clearTimeout(releaseTimer);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', close);
      upstream.on('close', close);
      client.on('error', close);
      upstream.on('error', close);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const port = (proxy.address() as { port: number }).port;
      const r = await runLoad({ port, mode: 'cycle', connections: 2, pipeline: 4, durationS: 0.3, warmupS: 0, minWaves: 1 });
      expect(r.failures).toEqual([]);
      const load = r.phases.find((p) => p.phase === 'load')!;
      expect(load.windowExtendedS).toBeCloseTo(4 * 0.3, 5);
      expect(load.totals.deletes).toBeGreaterThan(0);
    } finally {
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });
});

// These need no beanstalkd: shardstalk, and a port nobody listens on.
describe('against shardstalk, and against nothing', () => {
  it('mem mode waits until shardstalk holds every acknowledged job, then reports RSS per job', async () => {
    const server = await startServer(shardstalkSpec(2));
    try {
      const r = await runLoad({ port: server.port, mode: 'mem', jobs: 30_000, connections: 4, pipeline: 64 });
      expect(r.failures).toEqual([]);
      expect(r.memory?.jobs).toBe(30_000);
      expect(r.memory!.rssAfterBytes).toBeGreaterThan(r.memory!.rssBeforeBytes);
      expect(r.memory!.bytesPerJob).toBeGreaterThan(100); // at least the bodies
      expect(formatReport(r)).toMatch(/memory {7}server RSS .* for 30,000 jobs = \d+ bytes\/job/);
      const st = parseStats((await queryServer('127.0.0.1', server.port, 'stats')).body);
      expect(Number(st['current-jobs-ready'])).toBe(30_000);
    } finally {
      await server.stop();
    }
  });

  it('fails loudly when nothing listens on the port', async () => {
    const { freePort } = await import('../../bench/suite/servers.ts');
    const port = await freePort();
    await expect(runLoad({ port, mode: 'put', connections: 2, durationS: 0.2 })).rejects.toThrow(/ECONNREFUSED/);
  });
});
