// Write-ahead log record format: encoders that append into one growable buffer (no object per
// record) and a decoder that fills one reusable DecodedRecord.
//
// Every record, little-endian:
//
//   u32 length   bytes after the crc field (type + payload); the record is 8 + length bytes
//   u32 crc32    zlib CRC-32 of those `length` bytes (type + payload)
//   u8  type     FULL 1, UPDATE 2, DELETE 3, ID_MARK 4 (same layout as DELETE: the largest
//                job id handed out so far; no job changes), WQ_FULL 5, WQ_UPDATE 6, WQ_DELETE 7
//   payload
//
// FULL (a whole job; 71 + tubeLen + bodyLen bytes in all):
//   f64 id, u8 tubeLen, tube bytes (<= 200, ASCII), u32 pri, u32 delaySec, u32 ttrSec, u8 state,
//   f64 deadlineMs, f64 createdMs, u32 reserves, u32 timeouts, u32 releases, u32 buries,
//   u32 kicks, u32 bodyLen, body bytes
// UPDATE (a job's mutable state, all of it; 54 bytes):
//   f64 id, u8 state, u32 pri, u32 delaySec, f64 deadlineMs, u32 reserves, u32 timeouts,
//   u32 releases, u32 buries, u32 kicks
// DELETE (17 bytes):
//   f64 id
//
// state: 1 ready, 2 reserved, 3 delayed, 4 buried (the engine's READY..BURIED). deadlineMs is
// wall-clock ms: for a delayed job the time it becomes ready, for a reserved job its TTR expiry.
//
// Workq jobs are keyed by their 16-byte UUID (chosen by the client, stable across restarts), not
// by a numeric id; their records never count toward the largest job id.
// WQ_FULL (a whole workq job: on add, when a result is stored, by compaction and by the start-up
// rewrite; 81 + nameLen + payloadLen + resultLen bytes in all):
//   16 bytes uuid, u8 nameLen, name bytes (ASCII, <= 255), i32 priority, u32 ttrMs, f64 ttlMs,
//   f64 scheduleMs (NaN: not scheduled), f64 createdMs, u8 maxAttempts, u8 maxFails,
//   u32 attempts, u8 state, f64 leaseDeadline (NaN unless leased), u32 payloadLen,
//   u32 resultLen, payload bytes, result bytes
//   (both lengths come before the payload, so a bounded prefix tells the record's length)
// WQ_UPDATE (a workq job's mutable state: a lease, a TTR requeue, a failure by the clock; 38 bytes):
//   16 bytes uuid, u32 attempts, u8 state, f64 leaseDeadline
// WQ_DELETE (25 bytes):
//   16 bytes uuid
//
// Workq state: 0..4 (the workq store's own states; the log only checks state <= 4).
//
// Every type's length is fully determined by fields near its start (FULL: tubeLen and bodyLen;
// WQ_FULL: nameLen, payloadLen and resultLen), so a reader can reject garbage without computing
// a checksum; see recordLength().

import { crc32 } from 'node:zlib';

export const FULL = 1, UPDATE = 2, DELETE = 3, ID_MARK = 4; // record types
export const WQ_FULL = 5, WQ_UPDATE = 6, WQ_DELETE = 7; // workq record types

export const STATE_READY = 1, STATE_RESERVED = 2, STATE_DELAYED = 3, STATE_BURIED = 4;

/** u32 length + u32 crc. */
export const RECORD_HEADER_BYTES = 8;
export const TUBE_NAME_BYTES_MAX = 200;
/** FULL record bytes besides the tube name and the body. */
export const FULL_FIXED_BYTES = 71;
export const UPDATE_BYTES = 54;
export const DELETE_BYTES = 17;
export const WQ_NAME_BYTES_MAX = 255;
/** WQ_FULL record bytes besides the queue name, the payload and the result. */
export const WQ_FULL_FIXED_BYTES = 81;
export const WQ_UPDATE_BYTES = 38;
export const WQ_DELETE_BYTES = 25;
/** The largest workq state. */
export const WQ_STATE_MAX = 4;
/** Bytes from a record's start that always suffice to learn its total length (FULL: up to and
 *  including bodyLen with a 200-byte tube name; WQ_FULL: up to and including resultLen with a
 *  255-byte queue name, the larger of the two). */
export const RECORD_PREFIX_BYTES_MAX = Math.max(FULL_FIXED_BYTES + TUBE_NAME_BYTES_MAX,
  WQ_FULL_FIXED_BYTES + WQ_NAME_BYTES_MAX);

/** Size of the FULL record of a job: what Wal.appendDelete / dropFull want as `fullBytes`. */
export function fullRecordBytes(tubeNameBytes: number, bodyBytes: number): number {
  return FULL_FIXED_BYTES + tubeNameBytes + bodyBytes;
}

/** Size of the WQ_FULL record of a workq job: what Wal.appendWqDelete wants as `fullBytes` and
 *  appendWqFull as `replacesBytes` (also Wal.lastFullBytes right after appendWqFull). */
export function wqFullRecordBytes(nameBytes: number, payloadBytes: number, resultBytes: number): number {
  return WQ_FULL_FIXED_BYTES + nameBytes + payloadBytes + resultBytes;
}

// Offsets inside a FULL record after the tube name, relative to t = 18 + tubeLen.
const F_PRI = 0, F_DELAY = 4, F_TTR = 8, F_STATE = 12, F_DEADLINE = 13, F_CREATED = 21;
const F_RESERVES = 29, F_TIMEOUTS = 33, F_RELEASES = 37, F_BURIES = 41, F_KICKS = 45;
const F_BODYLEN = 49, F_BODY = 53;

// Offsets inside a WQ_FULL record after the queue name, relative to t = 26 + nameLen.
const W_PRIORITY = 0, W_TTR = 4, W_TTL = 8, W_SCHEDULE = 16, W_CREATED = 24, W_MAX_ATTEMPTS = 32;
const W_MAX_FAILS = 33, W_ATTEMPTS = 34, W_STATE = 38, W_LEASE = 39, W_PAYLOADLEN = 47;
const W_RESULTLEN = 51, W_PAYLOAD = 55;
// Offsets inside every workq record: the uuid, and (WQ_FULL) the name length and the name.
const W_UUID = 9, W_NAMELEN = 25, W_NAME = 26;
// Offsets inside a WQ_UPDATE record.
const WU_ATTEMPTS = 25, WU_STATE = 29, WU_LEASE = 30;

const BUFFER_SHRINK_ABOVE = 4 * 1024 * 1024;

/** A growable byte buffer that records are appended to (one per Wal: the pending batch). */
export class Writer {
  buf: Buffer;
  view: DataView;
  /** Bytes used. */
  len = 0;
  private readonly initialBytes: number;

  constructor(initialBytes = 64 * 1024) {
    this.initialBytes = Math.max(256, initialBytes);
    this.buf = Buffer.allocUnsafe(this.initialBytes);
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  }

  /** Makes room for `extra` more bytes. */
  ensure(extra: number): void {
    const need = this.len + extra;
    if (need <= this.buf.length) return;
    let n = this.buf.length * 2;
    while (n < need) n *= 2;
    const b = Buffer.allocUnsafe(n);
    this.buf.copy(b, 0, 0, this.len);
    this.setBuffer(b);
  }

  /** Empties the buffer; gives back memory after an unusually large batch. */
  reset(): void {
    this.len = 0;
    if (this.buf.length > BUFFER_SHRINK_ABOVE) this.setBuffer(Buffer.allocUnsafe(this.initialBytes));
  }

  private setBuffer(b: Buffer): void {
    this.buf = b;
    this.view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
}

function finish(w: Writer, start: number, end: number): void {
  const v = w.view;
  v.setUint32(start, end - start - RECORD_HEADER_BYTES, true);
  v.setUint32(start + 4, crc32(w.buf.subarray(start + RECORD_HEADER_BYTES, end)), true);
  w.len = end;
}

/** Appends a FULL record; returns its size in bytes (fullRecordBytes(tube.length, body length)).
 *  `tube` must be ASCII, at most 200 characters. The body is body[bodyStart, bodyEnd). */
export function encodeFull(
  w: Writer,
  id: number,
  tube: string,
  pri: number,
  delaySec: number,
  ttrSec: number,
  state: number,
  deadlineMs: number,
  createdMs: number,
  reserves: number,
  timeouts: number,
  releases: number,
  buries: number,
  kicks: number,
  body: Uint8Array,
  bodyStart: number,
  bodyEnd: number,
): number {
  const tubeLen = tube.length;
  if (tubeLen > TUBE_NAME_BYTES_MAX) throw new RangeError(`tube name longer than ${TUBE_NAME_BYTES_MAX} bytes`);
  const bodyLen = bodyEnd - bodyStart;
  const size = FULL_FIXED_BYTES + tubeLen + bodyLen;
  w.ensure(size);
  const start = w.len;
  const v = w.view;
  v.setUint8(start + 8, FULL);
  v.setFloat64(start + 9, id, true);
  v.setUint8(start + 17, tubeLen);
  if (tubeLen > 0) w.buf.write(tube, start + 18, tubeLen, 'latin1');
  const t = start + 18 + tubeLen;
  v.setUint32(t + F_PRI, pri, true);
  v.setUint32(t + F_DELAY, delaySec, true);
  v.setUint32(t + F_TTR, ttrSec, true);
  v.setUint8(t + F_STATE, state);
  v.setFloat64(t + F_DEADLINE, deadlineMs, true);
  v.setFloat64(t + F_CREATED, createdMs, true);
  v.setUint32(t + F_RESERVES, reserves, true);
  v.setUint32(t + F_TIMEOUTS, timeouts, true);
  v.setUint32(t + F_RELEASES, releases, true);
  v.setUint32(t + F_BURIES, buries, true);
  v.setUint32(t + F_KICKS, kicks, true);
  v.setUint32(t + F_BODYLEN, bodyLen, true);
  if (bodyLen > 0) {
    w.buf.set(bodyStart === 0 && bodyEnd === body.length ? body : body.subarray(bodyStart, bodyEnd), t + F_BODY);
  }
  finish(w, start, start + size);
  return size;
}

/** Appends an UPDATE record (UPDATE_BYTES). */
export function encodeUpdate(
  w: Writer,
  id: number,
  state: number,
  pri: number,
  delaySec: number,
  deadlineMs: number,
  reserves: number,
  timeouts: number,
  releases: number,
  buries: number,
  kicks: number,
): number {
  w.ensure(UPDATE_BYTES);
  const start = w.len;
  const v = w.view;
  v.setUint8(start + 8, UPDATE);
  v.setFloat64(start + 9, id, true);
  v.setUint8(start + 17, state);
  v.setUint32(start + 18, pri, true);
  v.setUint32(start + 22, delaySec, true);
  v.setFloat64(start + 26, deadlineMs, true);
  v.setUint32(start + 34, reserves, true);
  v.setUint32(start + 38, timeouts, true);
  v.setUint32(start + 42, releases, true);
  v.setUint32(start + 46, buries, true);
  v.setUint32(start + 50, kicks, true);
  finish(w, start, start + UPDATE_BYTES);
  return UPDATE_BYTES;
}

/** Appends a DELETE record (DELETE_BYTES); with type ID_MARK, a mark of the largest id so far. */
export function encodeDelete(w: Writer, id: number, type: number = DELETE): number {
  w.ensure(DELETE_BYTES);
  const start = w.len;
  w.view.setUint8(start + 8, type);
  w.view.setFloat64(start + 9, id, true);
  finish(w, start, start + DELETE_BYTES);
  return DELETE_BYTES;
}

/** Copies uuid[uuidAt, uuidAt + 16) to buf[at] (no view object per record). */
function putUuid(buf: Buffer, at: number, uuid: Uint8Array, uuidAt: number): void {
  if (uuidAt < 0 || uuidAt + 16 > uuid.length) throw new RangeError('wal: uuid out of range');
  for (let i = 0; i < 16; i++) buf[at + i] = uuid[uuidAt + i];
}

/** Appends a WQ_FULL record; returns its size in bytes (wqFullRecordBytes(name.length, payload
 *  length, result length)). The uuid is uuid[uuidAt, uuidAt + 16); `name` must be ASCII, at most
 *  255 characters. scheduleMs / leaseDeadline: NaN when not scheduled / not leased. */
export function encodeWqFull(
  w: Writer,
  uuid: Uint8Array,
  uuidAt: number,
  name: string,
  priority: number,
  ttrMs: number,
  ttlMs: number,
  scheduleMs: number,
  createdMs: number,
  maxAttempts: number,
  maxFails: number,
  attempts: number,
  state: number,
  leaseDeadline: number,
  payload: Uint8Array,
  result: Uint8Array,
): number {
  const nameLen = name.length;
  if (nameLen > WQ_NAME_BYTES_MAX) throw new RangeError(`queue name longer than ${WQ_NAME_BYTES_MAX} bytes`);
  const payloadLen = payload.length;
  const resultLen = result.length;
  const size = WQ_FULL_FIXED_BYTES + nameLen + payloadLen + resultLen;
  w.ensure(size);
  const start = w.len;
  const v = w.view;
  v.setUint8(start + 8, WQ_FULL);
  putUuid(w.buf, start + W_UUID, uuid, uuidAt);
  v.setUint8(start + W_NAMELEN, nameLen);
  if (nameLen > 0) w.buf.write(name, start + W_NAME, nameLen, 'latin1');
  const t = start + W_NAME + nameLen;
  v.setInt32(t + W_PRIORITY, priority, true);
  v.setUint32(t + W_TTR, ttrMs, true);
  v.setFloat64(t + W_TTL, ttlMs, true);
  v.setFloat64(t + W_SCHEDULE, scheduleMs, true);
  v.setFloat64(t + W_CREATED, createdMs, true);
  v.setUint8(t + W_MAX_ATTEMPTS, maxAttempts);
  v.setUint8(t + W_MAX_FAILS, maxFails);
  v.setUint32(t + W_ATTEMPTS, attempts, true);
  v.setUint8(t + W_STATE, state);
  v.setFloat64(t + W_LEASE, leaseDeadline, true);
  v.setUint32(t + W_PAYLOADLEN, payloadLen, true);
  v.setUint32(t + W_RESULTLEN, resultLen, true);
  if (payloadLen > 0) w.buf.set(payload, t + W_PAYLOAD);
  if (resultLen > 0) w.buf.set(result, t + W_PAYLOAD + payloadLen);
  finish(w, start, start + size);
  return size;
}

/** Appends a WQ_UPDATE record (WQ_UPDATE_BYTES). */
export function encodeWqUpdate(
  w: Writer, uuid: Uint8Array, uuidAt: number, attempts: number, state: number, leaseDeadline: number,
): number {
  w.ensure(WQ_UPDATE_BYTES);
  const start = w.len;
  const v = w.view;
  v.setUint8(start + 8, WQ_UPDATE);
  putUuid(w.buf, start + W_UUID, uuid, uuidAt);
  v.setUint32(start + WU_ATTEMPTS, attempts, true);
  v.setUint8(start + WU_STATE, state);
  v.setFloat64(start + WU_LEASE, leaseDeadline, true);
  finish(w, start, start + WQ_UPDATE_BYTES);
  return WQ_UPDATE_BYTES;
}

/** Appends a WQ_DELETE record (WQ_DELETE_BYTES). */
export function encodeWqDelete(w: Writer, uuid: Uint8Array, uuidAt: number): number {
  w.ensure(WQ_DELETE_BYTES);
  const start = w.len;
  w.view.setUint8(start + 8, WQ_DELETE);
  putUuid(w.buf, start + W_UUID, uuid, uuidAt);
  finish(w, start, start + WQ_DELETE_BYTES);
  return WQ_DELETE_BYTES;
}

/** One decoded record; decodeRecord overwrites it. Fields a type does not carry keep stale
 *  values. The body is buf[bodyStart, bodyEnd): a view of the reader's buffer, valid only until
 *  the next record is decoded (copy it with bodyCopy() to keep it). */
export class DecodedRecord {
  type = 0;
  id = 0;
  /** FULL only. */
  tube = '';
  pri = 0;
  delaySec = 0;
  /** FULL only. */
  ttrSec = 0;
  state = 0;
  deadlineMs = 0;
  /** FULL only. */
  createdMs = 0;
  reserves = 0;
  timeouts = 0;
  releases = 0;
  buries = 0;
  kicks = 0;
  buf: Buffer = Buffer.alloc(0);
  bodyStart = 0;
  bodyEnd = 0;
  /** Total bytes of the record (header included). */
  size = 0;

  // Workq records (WQ_FULL, WQ_UPDATE, WQ_DELETE); `state` (0..4) is shared with the beanstalk
  // records, and so is `createdMs` (WQ_FULL). `id` is not set by them.
  /** The job's UUID: a copy, overwritten by the next workq record (uuidHex() for a map key). */
  readonly uuid: Buffer = Buffer.alloc(16);
  /** WQ_FULL only: the queue name. */
  name = '';
  /** WQ_FULL only. */
  priority = 0;
  ttrMs = 0;
  ttlMs = 0;
  /** NaN: not scheduled. */
  scheduleMs = NaN;
  maxAttempts = 0;
  maxFails = 0;
  /** WQ_FULL and WQ_UPDATE. */
  attempts = 0;
  /** WQ_FULL and WQ_UPDATE; NaN unless leased. */
  leaseDeadline = NaN;
  /** WQ_FULL: payload buf[payloadStart, payloadEnd) and result buf[resultStart, resultEnd),
   *  views like the body (payloadCopy() / resultCopy() to keep them). */
  payloadStart = 0;
  payloadEnd = 0;
  resultStart = 0;
  resultEnd = 0;

  bodyCopy(): Uint8Array {
    const out = new Uint8Array(this.bodyEnd - this.bodyStart);
    out.set(this.buf.subarray(this.bodyStart, this.bodyEnd));
    return out;
  }

  payloadCopy(): Uint8Array {
    const out = new Uint8Array(this.payloadEnd - this.payloadStart);
    out.set(this.buf.subarray(this.payloadStart, this.payloadEnd));
    return out;
  }

  resultCopy(): Uint8Array {
    const out = new Uint8Array(this.resultEnd - this.resultStart);
    out.set(this.buf.subarray(this.resultStart, this.resultEnd));
    return out;
  }

  /** The UUID as 32 lowercase hex digits. */
  uuidHex(): string {
    return this.uuid.toString('hex');
  }
}

/** recordLength / decodeRecord: the bytes given end before the record (or its length fields) does. */
export const NEED_MORE = -1;
/** recordLength / decodeRecord: not a valid record. */
export const INVALID = -2;

/**
 * The total size of the record starting at buf[off], judged from its length, type and (for FULL)
 * tube and body length fields (WQ_FULL: name, payload and result length fields) without a
 * checksum: NEED_MORE if buf[off, end) is too short to tell (RECORD_PREFIX_BYTES_MAX bytes always
 * suffice), INVALID if the fields are inconsistent.
 */
export function recordLength(buf: Buffer, off: number, end: number): number {
  if (end - off < 9) return NEED_MORE;
  const length = buf.readUInt32LE(off);
  const type = buf[off + 8];
  if (type === DELETE || type === ID_MARK) return length === DELETE_BYTES - 8 ? DELETE_BYTES : INVALID;
  if (type === UPDATE) return length === UPDATE_BYTES - 8 ? UPDATE_BYTES : INVALID;
  if (type === WQ_UPDATE) return length === WQ_UPDATE_BYTES - 8 ? WQ_UPDATE_BYTES : INVALID;
  if (type === WQ_DELETE) return length === WQ_DELETE_BYTES - 8 ? WQ_DELETE_BYTES : INVALID;
  if (type === WQ_FULL) return wqFullLength(buf, off, end, length);
  if (type !== FULL) return INVALID;
  if (length < FULL_FIXED_BYTES - 8) return INVALID;
  if (end - off < 18) return NEED_MORE;
  const tubeLen = buf[off + 17];
  if (tubeLen > TUBE_NAME_BYTES_MAX) return INVALID;
  const lenAt = off + 18 + tubeLen + F_BODYLEN;
  if (end < lenAt + 4) return NEED_MORE;
  const bodyLen = buf.readUInt32LE(lenAt);
  const size = FULL_FIXED_BYTES + tubeLen + bodyLen;
  return size - 8 === length ? size : INVALID;
}

function wqFullLength(buf: Buffer, off: number, end: number, length: number): number {
  if (length < WQ_FULL_FIXED_BYTES - 8) return INVALID;
  if (end - off < W_NAME) return NEED_MORE;
  const nameLen = buf[off + W_NAMELEN];
  const lenAt = off + W_NAME + nameLen + W_PAYLOADLEN;
  if (end < lenAt + 8) return NEED_MORE;
  const size = WQ_FULL_FIXED_BYTES + nameLen + buf.readUInt32LE(lenAt) + buf.readUInt32LE(lenAt + 4);
  return size - 8 === length ? size : INVALID;
}

/**
 * Decodes the record at buf[off] into `out`: returns its size, NEED_MORE if buf[off, end) ends
 * inside it, or INVALID (inconsistent lengths, checksum mismatch, unknown state).
 */
export function decodeRecord(buf: Buffer, off: number, end: number, out: DecodedRecord): number {
  const size = recordLength(buf, off, end);
  if (size < 0) return size;
  if (end - off < size) return NEED_MORE;
  if (crc32(buf.subarray(off + 8, off + size)) !== buf.readUInt32LE(off + 4)) return INVALID;
  const type = buf[off + 8];
  out.type = type;
  out.size = size;
  if (type >= WQ_FULL) return decodeWq(buf, off, size, type, out);
  out.id = buf.readDoubleLE(off + 9);
  if (type === FULL) {
    const tubeLen = buf[off + 17];
    out.tube = buf.toString('latin1', off + 18, off + 18 + tubeLen);
    const t = off + 18 + tubeLen;
    out.pri = buf.readUInt32LE(t + F_PRI);
    out.delaySec = buf.readUInt32LE(t + F_DELAY);
    out.ttrSec = buf.readUInt32LE(t + F_TTR);
    out.state = buf[t + F_STATE];
    out.deadlineMs = buf.readDoubleLE(t + F_DEADLINE);
    out.createdMs = buf.readDoubleLE(t + F_CREATED);
    out.reserves = buf.readUInt32LE(t + F_RESERVES);
    out.timeouts = buf.readUInt32LE(t + F_TIMEOUTS);
    out.releases = buf.readUInt32LE(t + F_RELEASES);
    out.buries = buf.readUInt32LE(t + F_BURIES);
    out.kicks = buf.readUInt32LE(t + F_KICKS);
    out.buf = buf;
    out.bodyStart = t + F_BODY;
    out.bodyEnd = off + size;
  } else if (type === UPDATE) {
    out.state = buf[off + 17];
    out.pri = buf.readUInt32LE(off + 18);
    out.delaySec = buf.readUInt32LE(off + 22);
    out.deadlineMs = buf.readDoubleLE(off + 26);
    out.reserves = buf.readUInt32LE(off + 34);
    out.timeouts = buf.readUInt32LE(off + 38);
    out.releases = buf.readUInt32LE(off + 42);
    out.buries = buf.readUInt32LE(off + 46);
    out.kicks = buf.readUInt32LE(off + 50);
  }
  if (type !== DELETE && type !== ID_MARK && (out.state < STATE_READY || out.state > STATE_BURIED)) return INVALID;
  return size;
}

function decodeWq(buf: Buffer, off: number, size: number, type: number, out: DecodedRecord): number {
  buf.copy(out.uuid, 0, off + W_UUID, off + W_UUID + 16);
  if (type === WQ_FULL) {
    const nameLen = buf[off + W_NAMELEN];
    out.name = buf.toString('latin1', off + W_NAME, off + W_NAME + nameLen);
    const t = off + W_NAME + nameLen;
    out.priority = buf.readInt32LE(t + W_PRIORITY);
    out.ttrMs = buf.readUInt32LE(t + W_TTR);
    out.ttlMs = buf.readDoubleLE(t + W_TTL);
    out.scheduleMs = buf.readDoubleLE(t + W_SCHEDULE);
    out.createdMs = buf.readDoubleLE(t + W_CREATED);
    out.maxAttempts = buf[t + W_MAX_ATTEMPTS];
    out.maxFails = buf[t + W_MAX_FAILS];
    out.attempts = buf.readUInt32LE(t + W_ATTEMPTS);
    out.state = buf[t + W_STATE];
    out.leaseDeadline = buf.readDoubleLE(t + W_LEASE);
    out.buf = buf;
    out.payloadStart = t + W_PAYLOAD;
    out.payloadEnd = out.payloadStart + buf.readUInt32LE(t + W_PAYLOADLEN);
    out.resultStart = out.payloadEnd;
    out.resultEnd = off + size;
  } else if (type === WQ_UPDATE) {
    out.attempts = buf.readUInt32LE(off + WU_ATTEMPTS);
    out.state = buf[off + WU_STATE];
    out.leaseDeadline = buf.readDoubleLE(off + WU_LEASE);
  }
  if (type !== WQ_DELETE && out.state > WQ_STATE_MAX) return INVALID;
  return size;
}
