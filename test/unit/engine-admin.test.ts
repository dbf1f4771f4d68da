// The shard's paged admin operations (#14): listing a tube's jobs by state (Engine.listJobs, in
// each state's order, page after page by cursor, with jobs leaving and arriving between pages)
// and clearing a tube a page at a time (OP_CLEAR_TUBE through ShardCore: every id deleted is in
// the reply, jobs put between pages are cleared too, reserved jobs stay).

import { describe, expect, it } from 'vitest';
import { BURIED, DELAYED, Engine, READY, RESERVED } from '../../workers/engine/engine.ts';
import { ShardCore } from '../../workers/core.ts';
import {
  CLEAR_BURIED, CLEAR_DELAYED, CLEAR_READY, HEADER_BYTES, idsAt, LIST_BODY_BYTES, LIST_DELAY, LIST_ID, LIST_JOBS_MAX,
  LIST_KEY, LIST_PREVIEW_BYTES, LIST_PRI, LIST_STATE, LIST_TIME_LEFT, LIST_TTR, listCount, listMore, OP_CLEAR_TUBE,
  OP_LIST_JOBS, OP_PUT, R_IDS, R_JOB_LIST, readJobList, replyKind,
} from '../../src/shared/records.ts';
import { mulberry32 as rng } from '../support/prng.ts';
import { applyToCore, T0 } from '../support/core.ts';

const body = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Every page of `state` from the start, `limit` at a time, as ids; calls between(page) after each. */
function pages(e: Engine, tube: number, state: number, limit: number, between: (ids: number[]) => void = () => {}): number[][] {
  const all: number[][] = [];
  let key = 0;
  let id = 0;
  for (let guard = 0; guard < 100_000; guard++) {
    const more = e.listJobs(tube, state, key, id, limit);
    const ids = [...e.lastListed];
    expect(ids.length).toBeLessThanOrEqual(limit);
    if (ids.length > 0) {
      id = ids[ids.length - 1];
      key = e.listKey(id);
      all.push(ids);
    }
    between(ids);
    if (!more) return all;
    expect(ids.length).toBe(limit);
  }
  throw new Error('listing never ended');
}

describe('Engine.listJobs', () => {
  it('lists each state in its order, page after page, the deep pages included', () => {
    const seed = Date.now() % 100_000;
    const rand = rng(seed);
    const e = new Engine({ initialSlots: 16 });
    const jobs: { id: number; pri: number; delay: number }[] = [];
    for (let id = 1; id <= 3000; id++) {
      const pri = Math.floor(rand() * 20); // many ties: order by id within a pri
      const delay = rand() < 0.3 ? 1 + Math.floor(rand() * 50) : 0;
      e.put(7, id, pri, delay, 60, body(`job ${id}`), T0 + id); // a delay's deadline depends on the put time too
      jobs.push({ id, pri, delay });
    }
    e.put(8, 5000, 0, 0, 60, body('other tube'), T0); // never listed for tube 7
    const ready = jobs.filter((j) => j.delay === 0).sort((a, b) => a.pri - b.pri || a.id - b.id).map((j) => j.id);
    const delayed = jobs.filter((j) => j.delay > 0)
      .sort((a, b) => T0 + a.id + a.delay * 1000 - (T0 + b.id + b.delay * 1000) || a.id - b.id).map((j) => j.id);
    for (const limit of [1, 7, 100, LIST_JOBS_MAX]) {
      expect(pages(e, 7, READY, limit).flat(), `seed ${seed} ready limit ${limit}`).toEqual(ready);
      expect(pages(e, 7, DELAYED, limit).flat(), `seed ${seed} delayed limit ${limit}`).toEqual(delayed);
    }
    // Bury some (reserve, then bury) in an order of our own: FIFO is the order they were buried.
    const buried: number[] = [];
    for (let i = 0; i < 50; i++) {
      const id = ready[(i * 37) % ready.length];
      if (buried.includes(id)) continue;
      expect(e.reserveJob(id, 3, T0)).toBe(true);
      expect(e.bury(id, 3, 0)).toBe(true);
      buried.push(id);
    }
    expect(pages(e, 7, BURIED, 7).flat()).toEqual(buried);
    // Reserved, by id, over several connections.
    const reserved = ready.filter((id) => !buried.includes(id)).slice(0, 40);
    reserved.forEach((id, i) => expect(e.reserveJob(id, 10 + (i % 3), T0)).toBe(true));
    expect(pages(e, 7, RESERVED, 6).flat()).toEqual([...reserved].sort((a, b) => a - b));
    expect(pages(e, 8, READY, 10).flat()).toEqual([5000]);
    expect(pages(e, 9, READY, 10)).toEqual([]); // no such tube
    e.invariants();
  });

  it('a page starts after the cursor job even when that job left, and shows jobs that arrived', () => {
    const e = new Engine();
    for (let id = 1; id <= 100; id++) e.put(1, id, id % 10, 0, 60, body('x'), T0);
    for (let id = 101; id <= 120; id++) {
      e.put(1, id, 0, 0, 60, body('b'), T0);
      e.reserveJob(id, 2, T0);
      e.bury(id, 2, 0);
    }
    // Ready: delete each page's last job before the next page; put a job that sorts after the cursor.
    let nextId = 1000;
    const seen: number[] = [];
    pages(e, 1, READY, 9, (ids) => {
      seen.push(...ids);
      if (ids.length > 0) expect(e.deleteJob(ids[ids.length - 1], 0)).toBe(1);
      e.put(1, nextId++, 9, 0, 60, body('late'), T0); // pri 9: after every cursor until the end
    });
    expect(new Set(seen).size).toBe(seen.length); // nothing twice
    for (let id = 1; id <= 100; id++) expect(seen).toContain(id);
    expect(seen.filter((id) => id >= 1000).length).toBeGreaterThan(0);
    // Buried: kick each page's last job before the next page; nothing skipped, nothing twice.
    const buried: number[] = [];
    pages(e, 1, BURIED, 3, (ids) => {
      buried.push(...ids);
      if (ids.length > 0) expect(e.kickJob(ids[ids.length - 1], T0)).toBe(true);
    });
    expect(buried).toEqual(Array.from({ length: 20 }, (_, i) => 101 + i));
    e.invariants();
  });
});

function put(core: ShardCore, tube: number, id: number, pri: number, delay: number, text: string): void {
  const b = Buffer.from(text);
  applyToCore(core, (w) => {
    w.header(OP_PUT, 4 + b.length, 0, tube, pri, delay, id);
    w.u32(60);
    w.bytes(b, 0, b.length);
  });
}

function clear(core: ShardCore, tube: number, mask: number, max: number): { ids: number[]; more: boolean } {
  const at = applyToCore(core, (w) => w.header(OP_CLEAR_TUBE, 0, 0, tube, mask, max, 0));
  const buf = core.out.buf;
  expect(replyKind(buf, at)).toBe(R_IDS);
  const ids: number[] = [];
  for (let i = 0; i < listCount(buf, at); i++) ids.push(idsAt(buf, at, i));
  return { ids, more: listMore(buf, at) };
}

describe('OP_LIST_JOBS and OP_CLEAR_TUBE through ShardCore', () => {
  it('a page carries stats-job figures and a preview of at most LIST_PREVIEW_BYTES', () => {
    const core = new ShardCore({ index: 0 });
    put(core, 1, 1, 5, 0, 'short');
    put(core, 1, 2, 5, 0, 'y'.repeat(200));
    put(core, 1, 3, 1, 30, 'later');
    const at = applyToCore(core, (w) => {
      w.header(OP_LIST_JOBS, 8, 0, 1, READY, 10, 0);
      w.f64(0);
    }, T0 + 2500);
    expect(replyKind(core.out.buf, at)).toBe(R_JOB_LIST);
    const items = readJobList(core.out.buf, at);
    expect(items.map((j) => j.fields[LIST_ID])).toEqual([1, 2]);
    expect(items[0].preview.toString()).toBe('short');
    expect(items[1].preview.length).toBe(LIST_PREVIEW_BYTES);
    expect(items[1].fields[LIST_BODY_BYTES]).toBe(200);
    expect([items[0].fields[LIST_PRI], items[0].fields[LIST_STATE], items[0].fields[LIST_TTR], items[0].fields[LIST_KEY]]).toEqual([5, READY, 60, 5]);
    const d = applyToCore(core, (w) => {
      w.header(OP_LIST_JOBS, 8, 0, 1, DELAYED, 10, 0);
      w.f64(0);
    }, T0 + 2500);
    const [job] = readJobList(core.out.buf, d);
    expect([job.fields[LIST_ID], job.fields[LIST_DELAY], job.fields[LIST_TIME_LEFT], job.fields[LIST_STATE]]).toEqual([3, 30, 27, DELAYED]);
    core.close();
  });

  it('clears across pages with puts in between, every deleted id in a reply, reserved jobs left', () => {
    const core = new ShardCore({ index: 0 });
    let id = 1;
    for (; id <= 2500; id++) put(core, 1, id, id % 7, id % 5 === 0 ? 10 : 0, 'j');
    put(core, 2, id++, 0, 0, 'other tube');
    // One reserved job, one buried job.
    const e = core.engine;
    expect(e.reserveJob(3, 9, T0)).toBe(true);
    expect(e.reserveJob(4, 9, T0)).toBe(true);
    expect(e.bury(4, 9, 0)).toBe(true);
    const deleted: number[] = [];
    let more = true;
    let pagesN = 0;
    while (more) {
      const page = clear(core, 1, CLEAR_READY | CLEAR_DELAYED | CLEAR_BURIED, 1100);
      expect(page.ids.length).toBeLessThanOrEqual(1100);
      deleted.push(...page.ids);
      more = page.more;
      if (more) {
        put(core, 1, id++, 0, 0, 'put between pages'); // cleared by a later page
        pagesN++;
      }
      e.invariants();
    }
    expect(new Set(deleted).size).toBe(deleted.length);
    expect(pagesN).toBeGreaterThanOrEqual(2);
    expect(deleted.length).toBe(2500 - 1 + pagesN); // all but the reserved job, plus those put between pages
    for (const got of deleted) expect(e.state(got)).toBe(0);
    expect(e.state(3)).toBe(RESERVED);
    expect(e.state(2501)).toBe(READY); // the other tube
    for (let i = 0; i < pagesN; i++) expect(deleted).toContain(2502 + i);
    // Clearing only buried jobs leaves ready ones.
    put(core, 1, id++, 0, 0, 'ready');
    expect(e.reserveJob(id - 1, 9, T0) && e.bury(id - 1, 9, 0)).toBe(true);
    put(core, 1, id++, 0, 0, 'ready 2');
    expect(clear(core, 1, CLEAR_BURIED, 100)).toEqual({ ids: [id - 2], more: false });
    expect(e.state(id - 1)).toBe(READY);
    expect(clear(core, 1, CLEAR_READY, 0)).toEqual({ ids: [], more: true });
    expect(clear(core, 1, CLEAR_READY, 100)).toEqual({ ids: [id - 1], more: false });
    expect(HEADER_BYTES).toBe(32);
    core.close();
  });
});
