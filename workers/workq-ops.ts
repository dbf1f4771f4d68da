// A shard's workq requests: decode each OP_WQ_* record, apply it to the shard's WorkqStore and
// write its one reply (layouts in src/shared/records.ts). The clock's workq events (schedule
// times, TTR ends, TTL ends) are written by the same `events` object the shard passes to tick().
//
// With a write-ahead log every change goes to it before the batch's replies leave: a WQ_FULL
// record for a new job and for a stored result (the job with its payload and result), a
// WQ_UPDATE for a lease, a TTR requeue or a failure by the clock, a WQ_DELETE when it goes. A
// run's job (no TTL) is not logged: nobody waits for it after a restart (as the workq server's
// own notes say of run).

import {
  E_WQ_DONE, E_WQ_GONE, E_WQ_READY, HEADER_BYTES, OP_WQ_ADD, OP_WQ_COMPLETE, OP_WQ_DELETE, OP_WQ_FAIL,
  OP_WQ_INSPECT_JOB, OP_WQ_INSPECT_JOBS, OP_WQ_LEASE, OP_WQ_LEASE_BOUNDED, OP_WQ_LENS, OP_WQ_PEEK,
  OP_WQ_QUEUE_NAME, OP_WQ_RESTORE, OP_WQ_RESULT, OP_WQ_RUN_END, R_BEST, R_JOB, R_NONE, R_NUMS, R_OK, R_WQ_JOBS, type RecordWriter,
  WQ_ADD_FIXED, WQ_INFO_FIELDS, WQ_INFO_BYTES, WQ_RESTORE_FIXED, IdList,
} from '../src/shared/records.ts';
import { f64le, u32le } from '../src/shared/bytes.ts';
import type { Wal } from './wal/index.ts';
import type { LoggedReplies } from './wal/logged.ts';
import { WQ_COMPLETED, WQ_FAILED, WQ_LEASED, WorkqStore, type WorkqEvents } from './engine/workq-store.ts';

export class WorkqOps {
  private storeOrNull: WorkqStore | null = null;
  private readonly out: RecordWriter;
  private readonly queueList = new IdList(16);
  private readonly info = new Float64Array(WQ_INFO_FIELDS);
  private readonly img = new Float64Array(10);
  private readonly wal: Wal | null;
  /** Replies whose change went to the log (the shard flags them if the write fails). */
  private readonly logged: LoggedReplies;
  /** Queue names by id: log records name their queue. */
  private readonly queueNames: string[] = [];
  /** Events of the clock and of leases, written straight into the batch's output. */
  readonly events: WorkqEvents;

  constructor(out: RecordWriter, wal: Wal | null, logged: LoggedReplies) {
    this.out = out;
    this.wal = wal;
    this.logged = logged;
    this.events = {
      ready: (queue: number): void => {
        out.header(E_WQ_READY, 0, 0, queue, 0, 0, 0);
      },
      done: (id: number): void => {
        this.logUpdate(id);
        out.header(E_WQ_DONE, 0, 0, 0, 0, 0, id);
      },
      gone: (id: number, evicted: boolean, uuid: Uint8Array, uuidAt: number, fileSeq: number, fileBytes: number): void => {
        if (this.wal !== null && fileSeq > 0) this.wal.appendWqDelete(uuid, uuidAt, fileSeq, fileBytes);
        out.header(E_WQ_GONE, 16, 0, evicted ? 1 : 0, 0, 0, id);
        out.bytes(uuid, uuidAt, uuidAt + 16);
      },
      requeued: (id: number): void => this.logUpdate(id),
    };
  }

  // ---- the write-ahead log ----

  /** The job whole (new, its result stored, restored, or moved by compaction). */
  private logFull(id: number, migrating = false): void {
    const wal = this.wal;
    if (wal === null) return;
    const store = this.store;
    const img = this.img;
    store.image(id, img);
    if (img[2] === 0) return; // a run's job
    const u = store.uuidAt(id);
    const prev = store.fileOf(id);
    const seq = wal.appendWqFull(store.uuids, u, this.queueNames[store.queueOf(id)] ?? '', img[0], img[1], img[2], img[3],
      img[4], img[5], img[6], img[7], img[8], img[9], store.payload(id), store.result(id), prev > 0 ? prev : -1,
      store.fileBytesOf(id), migrating);
    store.setFile(id, seq, wal.lastFullBytes);
  }

  private logUpdate(id: number): void {
    const wal = this.wal;
    if (wal === null) return;
    const store = this.store;
    const seq = store.fileOf(id);
    if (seq <= 0) return;
    const img = this.img;
    store.image(id, img);
    wal.appendWqUpdate(store.uuids, store.uuidAt(id), seq, img[7], img[8], img[9]);
  }

  private logDelete(id: number): void {
    const wal = this.wal;
    if (wal === null) return;
    const store = this.store;
    const seq = store.fileOf(id);
    if (seq > 0) wal.appendWqDelete(store.uuids, store.uuidAt(id), seq, store.fileBytesOf(id));
  }

  /** This reply's change is in the log's pending batch. */
  private noteLogged(): void {
    this.logged.mark(this.out.len);
  }

  /** Compaction: moves up to `limit` live jobs out of segment `seq`; returns the next cursor (-1: done). */
  migrate(seq: number, cursor: number, limit: number): number {
    if (this.storeOrNull === null) return -1;
    return this.storeOrNull.jobsInFile(seq, cursor, limit, (id) => this.logFull(id, true));
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
    return this.queueList.read(buf, at + HEADER_BYTES, count);
  }

  /** R_JOB for a job just leased: a = queue, b = more, c = TTR (ms), id; payload UUID + body. */
  private leased(id: number): void {
    const store = this.store;
    this.logUpdate(id);
    this.noteLogged();
    const body = store.payload(id);
    const out = this.out;
    out.header(R_JOB, 16 + body.length, 0, store.lastQueue, store.lastMore, store.ttrOf(id), id);
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
    const a = u32le(buf, at + 12);
    const b = u32le(buf, at + 16);
    const c = u32le(buf, at + 20);
    const id = f64le(buf, at + 24);
    const len = u32le(buf, at);
    switch (op) {
      case OP_WQ_ADD: {
        const p = at + HEADER_BYTES;
        const flags = u32le(buf, p + 24);
        const state = store.add(a, id, buf, p + 32, b | 0, c, f64le(buf, p), f64le(buf, p + 8),
          f64le(buf, p + 16), flags & 0xff, (flags >>> 8) & 0xff, buf.subarray(p + WQ_ADD_FIXED, at + len), now);
        this.logFull(id);
        this.noteLogged();
        out.header(R_OK, 0, 0, state, a, 0, id);
        return;
      }
      case OP_WQ_LEASE: {
        const got = store.leaseBest(this.queues(buf, at, a), a, now, this.events);
        if (got === 0) out.header(R_NONE, 0, 0, 0, 0, 0, 0);
        else this.leased(got);
        return;
      }
      case OP_WQ_LEASE_BOUNDED: {
        const p = at + HEADER_BYTES;
        const queues = this.queues(buf, at + 16, a); // the ids follow the two f64 of the bound
        const got = store.leaseBounded(queues, a, b | 0, f64le(buf, p), f64le(buf, p + 8), id, now, this.events);
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
      case OP_WQ_COMPLETE:
      case OP_WQ_FAIL: {
        const result = buf.subarray(at + HEADER_BYTES, at + len);
        const code = op === OP_WQ_COMPLETE ? store.complete(id, result, now) : store.fail(id, result, now);
        if (code === 0) {
          this.logFull(id);
          this.noteLogged();
        }
        out.header(R_OK, 0, 0, code, 0, 0, id);
        return;
      }
      case OP_WQ_DELETE:
        this.logDelete(id);
        this.noteLogged();
        out.header(R_OK, 0, 0, store.delete(id) ? 1 : 0, 0, 0, id);
        return;
      case OP_WQ_QUEUE_NAME:
        this.queueNames[a] = buf.toString('latin1', at + HEADER_BYTES, at + len);
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      case OP_WQ_RESTORE: {
        const p = at + HEADER_BYTES;
        const flags = u32le(buf, p + 24);
        const payloadLen = u32le(buf, p + 44);
        const body = p + WQ_RESTORE_FIXED;
        store.restore(a, id, buf, p + 48, b | 0, c, f64le(buf, p), f64le(buf, p + 8), f64le(buf, p + 16),
          flags & 0xff, (flags >>> 8) & 0xff, u32le(buf, p + 28), u32le(buf, p + 40), f64le(buf, p + 32),
          buf.subarray(body, body + payloadLen), buf.subarray(body + payloadLen, at + len), now);
        this.logFull(id);
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      }
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
          this.logDelete(id);
          store.delete(id);
          out.header(R_NONE, 0, 0, 0, 0, 0, id);
        }
        return;
      }
      case OP_WQ_LENS: {
        out.header(R_NUMS, a * 16, 0, a * 2, 0, 0, 0);
        for (let i = 0; i < a; i++) {
          const q = u32le(buf, at + HEADER_BYTES + i * 4);
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
        const scheduled = u32le(buf, at + 8) !== 0;
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
