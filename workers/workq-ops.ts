// A shard's workq requests: decode each OP_WQ_* record, apply it to the shard's WorkqStore and
// write its one reply (layouts in src/shared/records.ts). The clock's workq events (schedule
// times, TTR ends, TTL ends) are written by the same `events` object the shard passes to tick().

import {
  E_WQ_DONE, E_WQ_GONE, E_WQ_READY, HEADER_BYTES, OP_WQ_ADD, OP_WQ_COMPLETE, OP_WQ_DELETE, OP_WQ_FAIL,
  OP_WQ_INSPECT_JOB, OP_WQ_INSPECT_JOBS, OP_WQ_LEASE, OP_WQ_LEASE_ID, OP_WQ_LENS, OP_WQ_PEEK,
  OP_WQ_RESULT, OP_WQ_RUN_END, R_BEST, R_JOB, R_NONE, R_NUMS, R_OK, R_WQ_JOBS, type RecordWriter,
  WQ_ADD_FIXED, WQ_INFO_FIELDS, WQ_INFO_BYTES,
} from '../src/shared/records.ts';
import { WQ_COMPLETED, WQ_FAILED, WQ_LEASED, WorkqStore, type WorkqEvents } from './engine/workq.ts';

export class WorkqOps {
  private storeOrNull: WorkqStore | null = null;
  private readonly out: RecordWriter;
  private queueScratch = new Int32Array(16);
  private readonly info = new Float64Array(WQ_INFO_FIELDS);
  /** Events of the clock and of leases, written straight into the batch's output. */
  readonly events: WorkqEvents;

  constructor(out: RecordWriter) {
    this.out = out;
    this.events = {
      ready(queue: number): void {
        out.header(E_WQ_READY, 0, 0, queue, 0, 0, 0);
      },
      done(id: number): void {
        out.header(E_WQ_DONE, 0, 0, 0, 0, 0, id);
      },
      gone(id: number, evicted: boolean, uuid: Uint8Array, uuidAt: number): void {
        out.header(E_WQ_GONE, 16, 0, evicted ? 1 : 0, 0, 0, id);
        out.bytes(uuid, uuidAt, uuidAt + 16);
      },
    };
  }

  /** Made on first use: a shard that never sees a workq job keeps no workq memory. */
  get store(): WorkqStore {
    return (this.storeOrNull ??= new WorkqStore());
  }

  /** The clock's workq work; returns the next deadline (Infinity if none). */
  tick(now: number): number {
    return this.storeOrNull === null ? Infinity : this.storeOrNull.tick(now, this.events);
  }

  private queues(buf: Buffer, at: number, count: number): Int32Array {
    if (count > this.queueScratch.length) this.queueScratch = new Int32Array(count * 2);
    for (let i = 0; i < count; i++) this.queueScratch[i] = buf.readUInt32LE(at + HEADER_BYTES + i * 4);
    return this.queueScratch;
  }

  /** R_JOB for a job just leased: a = queue, b = more, id; payload UUID + body. */
  private leased(id: number): void {
    const store = this.store;
    const body = store.payload(id);
    const out = this.out;
    out.header(R_JOB, 16 + body.length, 0, store.lastQueue, store.lastMore, 0, id);
    const u = store.uuidAt(id);
    out.bytes(store.uuids, u, u + 16);
    out.bytes(body, 0, body.length);
  }

  /** R_JOB with the result of a completed / failed job: a = state, b = success, id; payload the result. */
  private resultOf(id: number, state: number): void {
    const result = this.store.result(id);
    this.out.header(R_JOB, result.length, 0, state, this.store.success(id) ? 1 : 0, 0, id);
    this.out.bytes(result, 0, result.length);
  }

  /** One job's inspect record: f64 fields, UUID, payload. */
  private infoOf(id: number): void {
    const store = this.store;
    const info = this.info;
    store.info(id, info);
    for (let i = 0; i < WQ_INFO_FIELDS; i++) this.out.f64(info[i]);
    const u = store.uuidAt(id);
    this.out.bytes(store.uuids, u, u + 16);
    const body = store.payload(id);
    this.out.bytes(body, 0, body.length);
  }

  handle(op: number, buf: Buffer, at: number, now: number): void {
    const store = this.store;
    const out = this.out;
    const a = buf.readUInt32LE(at + 12);
    const b = buf.readUInt32LE(at + 16);
    const c = buf.readUInt32LE(at + 20);
    const id = buf.readDoubleLE(at + 24);
    const len = buf.readUInt32LE(at);
    switch (op) {
      case OP_WQ_ADD: {
        const p = at + HEADER_BYTES;
        const flags = buf.readUInt32LE(p + 24);
        const state = store.add(a, id, buf, p + 32, b | 0, c, buf.readDoubleLE(p), buf.readDoubleLE(p + 8),
          buf.readDoubleLE(p + 16), flags & 0xff, (flags >>> 8) & 0xff, buf.subarray(p + WQ_ADD_FIXED, at + len), now);
        out.header(R_OK, 0, 0, state, a, 0, id);
        return;
      }
      case OP_WQ_LEASE: {
        const got = store.leaseBest(this.queues(buf, at, a), a, now, this.events);
        if (got === 0) out.header(R_NONE, 0, 0, 0, 0, 0, 0);
        else this.leased(got);
        return;
      }
      case OP_WQ_PEEK: {
        const best = store.peekBest(this.queues(buf, at, a), a);
        if (best === 0) {
          out.header(R_NONE, 0, 0, 0, 0, 0, 0);
          return;
        }
        out.header(R_BEST, 16, 0, store.lastQueue, store.lastPriority, 0, best);
        out.f64(store.lastScheduleKey);
        out.f64(store.lastCreated);
        return;
      }
      case OP_WQ_LEASE_ID:
        if (store.leaseId(id, now, this.events)) this.leased(id);
        else out.header(R_NONE, 0, 0, 0, 0, 0, 0);
        return;
      case OP_WQ_COMPLETE:
      case OP_WQ_FAIL: {
        const result = buf.subarray(at + HEADER_BYTES, at + len);
        const code = op === OP_WQ_COMPLETE ? store.complete(id, result, now) : store.fail(id, result, now);
        out.header(R_OK, 0, 0, code, 0, 0, id);
        return;
      }
      case OP_WQ_DELETE:
        out.header(R_OK, 0, 0, store.delete(id) ? 1 : 0, 0, 0, id);
        return;
      case OP_WQ_RESULT:
      case OP_WQ_RUN_END: {
        const state = store.state(id);
        if (state === WQ_COMPLETED || state === WQ_FAILED) {
          this.resultOf(id, state);
        } else if (state < 0) {
          out.header(R_NONE, 0, 0, 0, 0, 0, id);
        } else if (op === OP_WQ_RESULT) {
          out.header(R_OK, 0, 0, state, 0, 0, id);
        } else if (state === WQ_LEASED) {
          // A run whose job is being worked on waits on until the lease's TTR end.
          out.header(R_OK, 0, 0, state, 0, 0, store.leaseDeadline(id));
        } else {
          store.delete(id);
          out.header(R_NONE, 0, 0, 0, 0, 0, id);
        }
        return;
      }
      case OP_WQ_LENS: {
        out.header(R_NUMS, a * 16, 0, a * 2, 0, 0, 0);
        for (let i = 0; i < a; i++) {
          const q = buf.readUInt32LE(at + HEADER_BYTES + i * 4);
          out.f64(store.readyLen(q));
          out.f64(store.scheduledLen(q));
        }
        return;
      }
      case OP_WQ_INSPECT_JOB: {
        if (store.state(id) < 0) {
          out.header(R_NONE, 0, 0, 0, 0, 0, id);
          return;
        }
        out.header(R_WQ_JOBS, WQ_INFO_BYTES + store.payload(id).length, 0, 1, 0, 0, id);
        this.infoOf(id);
        return;
      }
      case OP_WQ_INSPECT_JOBS: {
        const scheduled = buf.readUInt32LE(at + 8) !== 0;
        const ids = store.jobsOf(a, scheduled, b, c);
        let bytes = 0;
        for (const j of ids) bytes += WQ_INFO_BYTES + store.payload(j).length;
        out.header(R_WQ_JOBS, bytes, 0, ids.length, 0, 0, 0);
        for (const j of ids) this.infoOf(j);
        return;
      }
      default:
        throw new Error(`unknown workq op ${op}`);
    }
  }
}
