// The exactly-once ledger: did every acknowledged put get reserved and deleted exactly once?
//
// Each load thread keeps three byte columns indexed by job sequence number (STYLE.md habit 5:
// columns, not an object per job): INSERTED seen, RESERVED count, DELETED count, saturating at
// 255. Threads fill them independently (a job put on one thread may be reserved on another) and
// the main thread adds them up at the end. Sequence numbers are dense (handed out in blocks from a
// shared counter), so a run of N jobs costs 3 bytes per job per thread.

const INITIAL_CAPACITY = 1 << 16;

export class Ledger {
  inserted: Uint8Array;
  reserved: Uint8Array;
  deleted: Uint8Array;
  /** Highest sequence number touched, plus one. */
  length = 0;
  /** RESERVED bodies without our nonce: another run's or another client's job in our tubes. */
  foreign = 0;

  constructor(capacity = INITIAL_CAPACITY) {
    this.inserted = new Uint8Array(capacity);
    this.reserved = new Uint8Array(capacity);
    this.deleted = new Uint8Array(capacity);
  }

  markInserted(seq: number): void {
    if (seq >= this.inserted.length) this.grow(seq);
    if (seq >= this.length) this.length = seq + 1;
    this.inserted[seq] = 1;
  }

  markReserved(seq: number): void {
    if (seq >= this.reserved.length) this.grow(seq);
    if (seq >= this.length) this.length = seq + 1;
    if (this.reserved[seq]! < 255) this.reserved[seq]!++;
  }

  markDeleted(seq: number): void {
    if (seq >= this.deleted.length) this.grow(seq);
    if (seq >= this.length) this.length = seq + 1;
    if (this.deleted[seq]! < 255) this.deleted[seq]!++;
  }

  private grow(seq: number): void {
    let capacity = this.inserted.length;
    while (capacity <= seq) capacity *= 2;
    this.inserted = grown(this.inserted, capacity);
    this.reserved = grown(this.reserved, capacity);
    this.deleted = grown(this.deleted, capacity);
  }

  /** The columns cut to `length`, ready to be sent to the main thread. */
  export(): LedgerColumns {
    return {
      length: this.length,
      inserted: this.inserted.slice(0, this.length),
      reserved: this.reserved.slice(0, this.length),
      deleted: this.deleted.slice(0, this.length),
      foreign: this.foreign,
    };
  }
}

function grown(column: Uint8Array, capacity: number): Uint8Array {
  const next = new Uint8Array(capacity);
  next.set(column);
  return next;
}

export interface LedgerColumns {
  length: number;
  inserted: Uint8Array;
  reserved: Uint8Array;
  deleted: Uint8Array;
  foreign: number;
}

export interface Verdict {
  /** Puts acknowledged with INSERTED. */
  inserted: number;
  /** Acknowledged jobs deleted exactly once. */
  deletedOnce: number;
  /** Acknowledged puts never deleted. */
  lost: number;
  /** Jobs reserved or deleted more than once. */
  duplicated: number;
  /** Jobs reserved or deleted whose put was never acknowledged (the generator lost a reply). */
  unacknowledged: number;
  foreign: number;
  ok: boolean;
}

/** Adds up the columns of every thread and counts the jobs that broke exactly-once. */
export function verifyLedgers(parts: LedgerColumns[]): Verdict {
  let length = 0;
  for (const p of parts) length = Math.max(length, p.length);
  const inserted = new Uint8Array(length);
  const reserved = new Uint16Array(length);
  const deleted = new Uint16Array(length);
  let foreign = 0;
  for (const p of parts) {
    foreign += p.foreign;
    for (let i = 0; i < p.length; i++) {
      inserted[i]! |= p.inserted[i]!;
      reserved[i]! += p.reserved[i]!;
      deleted[i]! += p.deleted[i]!;
    }
  }
  const verdict: Verdict = { inserted: 0, deletedOnce: 0, lost: 0, duplicated: 0, unacknowledged: 0, foreign, ok: false };
  for (let i = 0; i < length; i++) {
    const r = reserved[i]!;
    const d = deleted[i]!;
    if (inserted[i] === 1) {
      verdict.inserted++;
      if (d === 0) verdict.lost++;
      else if (d === 1 && r === 1) verdict.deletedOnce++;
    } else if (r !== 0 || d !== 0) {
      verdict.unacknowledged++;
    }
    if (r > 1 || d > 1) verdict.duplicated++;
  }
  verdict.ok = verdict.lost === 0 && verdict.duplicated === 0 && verdict.unacknowledged === 0 && foreign === 0;
  return verdict;
}
