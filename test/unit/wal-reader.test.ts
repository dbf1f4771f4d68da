// WAL replay: log order over generations, seqs and shards; torn tails cut at every byte offset;
// corruption elsewhere reported with its file and offset (or skipped with skipCorrupt); recovery
// folding records into the live job table; largest id; old generations removed.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import {
  DELETE, encodeDelete, encodeFull, encodeUpdate, FULL, STATE_BURIED, STATE_READY, UPDATE, Writer,
} from '../../workers/wal/record.ts';
import { segmentName } from '../../workers/wal/segment.ts';
import {
  listSegments, recover, removeGenerationsBefore, replay, WalCorruptError, type WalWarning,
} from '../../workers/wal/reader.ts';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), 'wal-reader-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const body = (id: number, n = 20) => Uint8Array.from({ length: n }, (_, i) => (id * 7 + i) & 255);

/** Writes one segment file of FULL records (ids given) and returns each record's [start, end). */
function writeSegment(gen: number, shard: number, seq: number, ids: number[], bodyBytes = 20): Array<[number, number]> {
  const w = new Writer();
  const spans: Array<[number, number]> = [];
  for (const id of ids) {
    const start = w.len;
    encodeFull(w, id, `tube-${shard}`, id, 0, 60, STATE_READY, 0, 1000 + id, 0, 0, 0, 0, 0, body(id, bodyBytes), 0, bodyBytes);
    spans.push([start, w.len]);
  }
  fs.writeFileSync(join(dir, segmentName(gen, shard, seq)), w.buf.subarray(0, w.len));
  return spans;
}

function replayIds(opts: Parameters<typeof replay>[2] = {}): { ids: number[]; warnings: WalWarning[]; maxId: number } {
  const ids: number[] = [];
  const warnings: WalWarning[] = [];
  const r = replay(dir, (rec) => {
    ids.push(rec.id);
    if (rec.type === FULL) expect(rec.bodyCopy()).toEqual(body(rec.id, rec.bodyEnd - rec.bodyStart));
  }, { onWarning: (w) => warnings.push(w), ...opts });
  return { ids, warnings, maxId: r.maxId };
}

describe('wal replay order', () => {
  it('lists segments by (generation, seq, shard) and replays in that order', () => {
    // Written out of order on purpose; ids encode the expected position.
    writeSegment(2, 1, 1, [9]);
    writeSegment(1, 0, 2, [5]);
    writeSegment(1, 1, 1, [3, 4]);
    writeSegment(2, 0, 1, [7, 8]);
    writeSegment(1, 0, 1, [1, 2]);
    writeSegment(1, 1, 12, [6]); // seq 12 sorts after seq 2 numerically
    fs.writeFileSync(join(dir, 'lock'), '1\n');
    fs.writeFileSync(join(dir, 'notes.txt'), 'ignored');
    const segs = listSegments(dir);
    expect(segs.map((s) => [s.generation, s.seq, s.shard])).toEqual([
      [1, 1, 0], [1, 1, 1], [1, 2, 0], [1, 12, 1], [2, 1, 0], [2, 1, 1],
    ]);
    const { ids, warnings, maxId } = replayIds();
    expect(ids).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(warnings).toEqual([]);
    expect(maxId).toBe(9);
  });

  it('returns nothing for a missing or empty directory', () => {
    expect(listSegments(join(dir, 'nope'))).toEqual([]);
    const r = replay(join(dir, 'nope'), () => {
      throw new Error('no records expected');
    });
    expect([r.records, r.maxId, r.maxGeneration]).toEqual([0, 0, 0]);
  });
});

describe('wal torn tails', () => {
  it('cuts the last record of the last segment at every byte offset, the length field included', () => {
    writeSegment(1, 0, 1, [1, 2, 3]);
    const spans = writeSegment(1, 0, 2, [4, 5, 6, 7]);
    writeSegment(1, 1, 1, [100, 101]); // another shard's stream: its own last segment
    const last = join(dir, segmentName(1, 0, 2));
    const original = fs.readFileSync(last);
    const [start, end] = spans[spans.length - 1];
    for (let cut = start + 1; cut < end; cut++) {
      fs.writeFileSync(last, original.subarray(0, cut));
      const first = replayIds();
      expect(first.ids, `cut at ${cut}`).toEqual([1, 2, 3, 100, 101, 4, 5, 6]);
      expect(first.warnings.length, `cut at ${cut}`).toBe(1);
      expect(first.warnings[0]).toMatchObject({ kind: 'torn-tail', path: last, offset: start, bytes: cut - start });
      expect(fs.statSync(last).size).toBe(start);
      const second = replayIds();
      expect(second.ids).toEqual(first.ids);
      expect(second.warnings).toEqual([]);
    }
  });

  it('treats a damaged last record (checksum) as torn, and can report without cutting', () => {
    const spans = writeSegment(1, 0, 1, [1, 2, 3]);
    const path = join(dir, segmentName(1, 0, 1));
    const bytes = fs.readFileSync(path);
    bytes[spans[2][0] + 30] ^= 1; // inside the last record's payload
    fs.writeFileSync(path, bytes);
    const dry = replayIds({ truncateTornTails: false });
    expect(dry.ids).toEqual([1, 2]);
    expect(dry.warnings.map((w) => w.kind)).toEqual(['torn-tail']);
    expect(fs.statSync(path).size).toBe(bytes.length);
    const cut = replayIds();
    expect(cut.ids).toEqual([1, 2]);
    expect(fs.statSync(path).size).toBe(spans[2][0]);
  });

  it('cuts zeros left after the last record (file extended, data never written)', () => {
    const spans = writeSegment(1, 0, 1, [1, 2]);
    const path = join(dir, segmentName(1, 0, 1));
    fs.appendFileSync(path, Buffer.alloc(4096));
    const r = replayIds();
    expect(r.ids).toEqual([1, 2]);
    expect(r.warnings[0]).toMatchObject({ kind: 'torn-tail', offset: spans[1][1], bytes: 4096 });
  });
});

describe('wal corruption', () => {
  it('throws WalCorruptError naming the file and offset for a flipped byte in a non-last segment', () => {
    const spans = writeSegment(1, 0, 1, [1, 2, 3, 4]);
    writeSegment(1, 0, 2, [5, 6]);
    const path = join(dir, segmentName(1, 0, 1));
    const bytes = fs.readFileSync(path);
    bytes[spans[1][0] + 40] ^= 0x10;
    fs.writeFileSync(path, bytes);
    let err: unknown;
    try {
      replayIds();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WalCorruptError);
    expect(err).toMatchObject({ path, offset: spans[1][0], reason: 'checksum mismatch' });
    expect((err as Error).message).toContain(`byte ${spans[1][0]} of ${path}`);
    expect(fs.readFileSync(path)).toEqual(bytes); // nothing cut

    const skipped = replayIds({ skipCorrupt: true });
    expect(skipped.ids).toEqual([1, 3, 4, 5, 6]);
    expect(skipped.warnings).toHaveLength(1);
    expect(skipped.warnings[0]).toMatchObject({
      kind: 'corrupt-skipped', path, offset: spans[1][0], bytes: spans[1][1] - spans[1][0],
    });
  });

  it('flags a damaged length field, and a bad record followed by good ones in the last segment', () => {
    const spans = writeSegment(1, 0, 1, [1, 2, 3, 4]);
    const path = join(dir, segmentName(1, 0, 1));
    const bytes = fs.readFileSync(path);
    bytes[spans[2][0] + 1] ^= 0x01; // length field of record 3: valid record 4 follows, so not torn
    fs.writeFileSync(path, bytes);
    expect(() => replayIds()).toThrow(WalCorruptError);
    const skipped = replayIds({ skipCorrupt: true });
    expect(skipped.ids).toEqual([1, 2, 4]);
    expect(skipped.warnings[0]).toMatchObject({ kind: 'corrupt-skipped', offset: spans[2][0] });
  });

  it('treats a truncated non-last segment as corruption, not as a torn tail', () => {
    const spans = writeSegment(1, 0, 1, [1, 2, 3]);
    writeSegment(1, 0, 2, [4]);
    const path = join(dir, segmentName(1, 0, 1));
    fs.truncateSync(path, spans[2][1] - 5);
    expect(() => replayIds()).toThrow(WalCorruptError);
    const skipped = replayIds({ skipCorrupt: true });
    expect(skipped.ids).toEqual([1, 2, 4]);
    expect(skipped.warnings[0]).toMatchObject({ kind: 'corrupt-skipped', offset: spans[2][0] });
    expect(fs.statSync(path).size).toBe(spans[2][1] - 5); // only the last segment's tail is ever cut
  });
});

describe('wal recovery', () => {
  it('folds FULL, UPDATE and DELETE into the live job table; unknown ids are ignored', () => {
    const w = new Writer();
    encodeUpdate(w, 77, STATE_BURIED, 1, 0, 0, 0, 0, 0, 1, 0); // unknown id: its FULL is gone
    encodeDelete(w, 78);
    encodeFull(w, 1, 'a', 10, 0, 60, STATE_READY, 0, 111, 0, 0, 0, 0, 0, body(1), 0, 20);
    encodeFull(w, 2, 'b', 20, 0, 60, STATE_READY, 0, 222, 0, 0, 0, 0, 0, body(2), 0, 20);
    encodeUpdate(w, 1, STATE_BURIED, 11, 0, 0, 1, 0, 0, 1, 0);
    encodeDelete(w, 2);
    fs.writeFileSync(join(dir, segmentName(3, 0, 1)), w.buf.subarray(0, w.len));
    // A later generation rewrote job 1 (FULL replaces) and then it was kicked.
    const w2 = new Writer();
    encodeFull(w2, 1, 'a', 11, 0, 60, STATE_BURIED, 0, 111, 1, 0, 0, 1, 0, body(1), 0, 20);
    encodeUpdate(w2, 1, STATE_READY, 11, 0, 0, 1, 0, 0, 1, 1);
    encodeFull(w2, 5, 'c', 5, 0, 60, STATE_READY, 0, 555, 0, 0, 0, 0, 0, body(5), 0, 20);
    fs.writeFileSync(join(dir, segmentName(4, 2, 1)), w2.buf.subarray(0, w2.len));
    const r = recover(dir);
    expect(r.maxId).toBe(78);
    expect(r.maxGeneration).toBe(4);
    expect(r.records).toBe(9);
    expect([...r.jobs.keys()].sort()).toEqual([1, 5]);
    expect(r.jobs.get(1)).toEqual({
      id: 1, tube: 'a', pri: 11, delaySec: 0, ttrSec: 60, state: STATE_READY, deadlineMs: 0, createdMs: 111,
      reserves: 1, timeouts: 0, releases: 0, buries: 1, kicks: 1, body: body(1),
    });
    expect(r.jobs.get(5)?.tube).toBe('c');

    expect(removeGenerationsBefore(dir, 4)).toBe(1);
    expect(listSegments(dir).map((s) => s.generation)).toEqual([4]);
    expect([...recover(dir).jobs.keys()].sort()).toEqual([1, 5]);
  });

  it('replays records of every type with their types', () => {
    const w = new Writer();
    encodeFull(w, 1, 't', 0, 0, 1, STATE_READY, 0, 0, 0, 0, 0, 0, 0, body(1), 0, 20);
    encodeUpdate(w, 1, STATE_BURIED, 0, 0, 0, 0, 0, 0, 1, 0);
    encodeDelete(w, 1);
    fs.writeFileSync(join(dir, segmentName(1, 0, 1)), w.buf.subarray(0, w.len));
    const types: number[] = [];
    const offsets: number[] = [];
    replay(dir, (rec, seg, off) => {
      types.push(rec.type);
      offsets.push(off);
      expect(seg).toMatchObject({ generation: 1, shard: 0, seq: 1 });
    });
    expect(types).toEqual([FULL, UPDATE, DELETE]);
    expect(offsets).toEqual([0, 92, 146]); // FULL: 71 + 1 (tube) + 20 (body); UPDATE: 54
  });
});
