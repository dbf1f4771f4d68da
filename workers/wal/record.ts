// Write-ahead log record format: encoders that append into one growable buffer (no object per
// record) and a decoder that fills one reusable DecodedRecord.
//
// Every record, little-endian:
//
//   u32 length   bytes after the crc field (type + payload); the record is 8 + length bytes
//   u32 crc32    zlib CRC-32 of those `length` bytes (type + payload)
//   u8  type     FULL 1, UPDATE 2, DELETE 3, ID_MARK 4 (same layout as DELETE: the largest
//                job id handed out so far; no job changes)
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
// Every type's length is fully determined by fields near its start (FULL: tubeLen and bodyLen),
// so a reader can reject garbage without computing a checksum; see recordLength().

import { crc32 } from 'node:zlib';

export const FULL = 1, UPDATE = 2, DELETE = 3, ID_MARK = 4; // record types

export const STATE_READY = 1, STATE_RESERVED = 2, STATE_DELAYED = 3, STATE_BURIED = 4;

/** u32 length + u32 crc. */
export const RECORD_HEADER_BYTES = 8;
export const TUBE_NAME_BYTES_MAX = 200;
/** FULL record bytes besides the tube name and the body. */
export const FULL_FIXED_BYTES = 71;
export const UPDATE_BYTES = 54;
export const DELETE_BYTES = 17;
/** Bytes from a record's start that always suffice to learn its total length (FULL: up to and
 *  including bodyLen with a 200-byte tube name). */
export const RECORD_PREFIX_BYTES_MAX = FULL_FIXED_BYTES + TUBE_NAME_BYTES_MAX;

/** Size of the FULL record of a job: what Wal.appendDelete / dropFull want as `fullBytes`. */
export function fullRecordBytes(tubeNameBytes: number, bodyBytes: number): number {
  return FULL_FIXED_BYTES + tubeNameBytes + bodyBytes;
}

// Offsets inside a FULL record after the tube name, relative to t = 18 + tubeLen.
const F_PRI = 0, F_DELAY = 4, F_TTR = 8, F_STATE = 12, F_DEADLINE = 13, F_CREATED = 21;
const F_RESERVES = 29, F_TIMEOUTS = 33, F_RELEASES = 37, F_BURIES = 41, F_KICKS = 45;
const F_BODYLEN = 49, F_BODY = 53;

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

  bodyCopy(): Uint8Array {
    const out = new Uint8Array(this.bodyEnd - this.bodyStart);
    out.set(this.buf.subarray(this.bodyStart, this.bodyEnd));
    return out;
  }
}

/** recordLength / decodeRecord: the bytes given end before the record (or its length fields) does. */
export const NEED_MORE = -1;
/** recordLength / decodeRecord: not a valid record. */
export const INVALID = -2;

/**
 * The total size of the record starting at buf[off], judged from its length, type and (for FULL)
 * tube and body length fields without a checksum: NEED_MORE if buf[off, end) is too short to
 * tell (RECORD_PREFIX_BYTES_MAX bytes always suffice), INVALID if the fields are inconsistent.
 */
export function recordLength(buf: Buffer, off: number, end: number): number {
  if (end - off < 9) return NEED_MORE;
  const length = buf.readUInt32LE(off);
  const type = buf[off + 8];
  if (type === DELETE || type === ID_MARK) return length === DELETE_BYTES - 8 ? DELETE_BYTES : INVALID;
  if (type === UPDATE) return length === UPDATE_BYTES - 8 ? UPDATE_BYTES : INVALID;
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
