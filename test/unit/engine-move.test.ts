// The shard's side of the API's move (#14, src/ops/admin.ts moveTube), through ShardCore: the
// reply to OP_RESERVE_JOB says the state the job was taken from and a delayed job's delay left
// (seconds, rounded up), and OP_PUT_BURIED puts a job that is buried at once.

import { describe, expect, it } from 'vitest';
import { BURIED, DELAYED, READY, RESERVED } from '../../workers/engine/engine.ts';
import { ShardCore } from '../../workers/core.ts';
import {
  jobBodyAt, jobDelayLeft, jobFromState, OP_PUT, OP_PUT_BURIED, OP_RESERVE_JOB, okResult, R_JOB, R_NONE, R_OK,
  recordEnd, replyKind,
} from '../../src/shared/records.ts';
import { applyToCore, T0 } from '../support/core.ts';


function put(core: ShardCore, op: number, id: number, pri: number, delay: number, text: string, now = T0): number {
  const b = Buffer.from(text);
  const at = applyToCore(core, (w) => {
    w.header(op, 4 + b.length, 0, 1, pri, delay, id);
    w.u32(60);
    w.bytes(b, 0, b.length);
  }, now);
  expect(replyKind(core.out.buf, at)).toBe(R_OK);
  return okResult(core.out.buf, at);
}

describe('the move\'s shard requests', () => {
  it('reserve-job tells the state it took the job from and the delay left; OP_PUT_BURIED buries at once', () => {
    const core = new ShardCore({ index: 0 });
    const e = core.engine;
    expect(put(core, OP_PUT, 1, 5, 0, 'ready')).toBe(READY);
    expect(put(core, OP_PUT, 2, 5, 100, 'delayed')).toBe(DELAYED);
    expect(put(core, OP_PUT_BURIED, 3, 7, 0, 'buried')).toBe(BURIED);
    expect(e.state(3)).toBe(BURIED);
    e.invariants();
    const take = (id: number, now: number): { kind: number; from: number; left: number; body: string } => {
      const at = applyToCore(core, (w) => w.header(OP_RESERVE_JOB, 0, 9, 0, 0, 0, id), now);
      const buf = core.out.buf;
      return { kind: replyKind(buf, at), from: jobFromState(buf, at), left: jobDelayLeft(buf, at), body: buf.subarray(jobBodyAt(at), recordEnd(buf, at)).toString() };
    };
    expect(take(1, T0)).toEqual({ kind: R_JOB, from: READY, left: 0, body: 'ready' });
    expect(take(2, T0 + 30_500)).toEqual({ kind: R_JOB, from: DELAYED, left: 70, body: 'delayed' }); // 69.5 s, rounded up
    expect(take(3, T0)).toEqual({ kind: R_JOB, from: BURIED, left: 0, body: 'buried' });
    for (const id of [1, 2, 3]) expect(e.state(id)).toBe(RESERVED);
    expect(take(1, T0).kind).toBe(R_NONE); // already reserved
    e.invariants();
    core.close();
  });
});
