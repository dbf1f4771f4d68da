// A connection served straight from its libuv TCP handle, without a net.Socket.
//
// A net.Socket is a Duplex stream: two stream states, an event emitter, and per write a write
// request, a stream callback and a nextTick. For a queue server's connection that is most of its
// cost: measured here, an idle net.Socket holds 3.9 KB (a bare handle that reads 1.2 KB), and
// Node's write machinery was a third of the bytes allocated per job at 10k jobs/s. This file
// drives the handle as net.Socket does inside (lib/net.js, lib/internal/stream_base_commons.js):
// reads land in the one shared read buffer (useUserBuffer) and the count comes from the
// stream_wrap binding's state; a write is `handle.writeBuffer(req, bytes)`, finished at once in
// the usual case (the kernel took it all), else completed later through `req.oncomplete`; an end
// is a shutdown request; close is `handle.close`. It needs two of Node's internal bindings
// (`process.binding('stream_wrap')`, allowed and unchanged through Node 24); when they or the
// handle do not look as expected, `rawBinding()` says so and the listener serves net.Sockets.

import util from 'node:util';

/** What this file uses of a TCP handle (a TCPWrap). */
export interface TcpHandle {
  readStart(): number;
  readStop(): number;
  useUserBuffer(buf: Uint8Array): void;
  writeBuffer(req: object, data: Uint8Array): number;
  shutdown(req: object): number;
  close(cb?: () => void): void;
  setNoDelay(on: boolean): number;
  getpeername(out: { address?: string; port?: number }): number;
  onread: (arrayBuffer?: ArrayBuffer) => unknown;
  readonly writeQueueSize: number;
  reading?: boolean;
}

interface WriteReq {
  handle: TcpHandle | null;
  oncomplete: ((this: WriteReq, status: number) => void) | null;
  async: boolean;
  bytes: number;
  buffer: Uint8Array | null;
  conn: RawConnection | null;
}

interface ShutdownReq {
  handle: TcpHandle | null;
  oncomplete: ((this: ShutdownReq, status: number) => void) | null;
  callback: (() => void) | null;
  conn: RawConnection | null;
}

interface StreamWrapBinding {
  WriteWrap: new () => WriteReq;
  ShutdownWrap: new () => ShutdownReq;
  streamBaseState: Int32Array;
  kReadBytesOrError: number;
  kLastWriteWasAsync: number;
}

const UV_EOF_NAME = 'EOF';

let binding: StreamWrapBinding | null | undefined;
let uvEof = 0;

/**
 * Whether connections may be served from their bare handle: yes unless the environment has
 * SHARDSTALK_RAW_SOCKETS=0 (the way back to net.Socket, should a Node version misbehave) or a
 * test said otherwise (useRawHandles).
 */
let rawWanted = process.env.SHARDSTALK_RAW_SOCKETS !== '0';

/** Test hook: serve the next connections from bare handles (true) or as net.Sockets (false). */
export function useRawHandles(on: boolean): void {
  rawWanted = on;
}

/** The stream_wrap binding, or null if this Node does not give it as expected (or it is not wanted). */
export function rawBinding(): StreamWrapBinding | null {
  if (!rawWanted) return null;
  if (binding !== undefined) return binding;
  binding = null;
  try {
    const b = (process as unknown as { binding(name: string): Partial<StreamWrapBinding> }).binding('stream_wrap');
    const eof = (process as unknown as { binding(name: string): { UV_EOF?: number } }).binding('uv').UV_EOF;
    if (
      typeof b.WriteWrap === 'function' && typeof b.ShutdownWrap === 'function' && b.streamBaseState instanceof Int32Array &&
      typeof b.kReadBytesOrError === 'number' && typeof b.kLastWriteWasAsync === 'number' &&
      typeof eof === 'number' && util.getSystemErrorName(eof) === UV_EOF_NAME
    ) {
      binding = b as StreamWrapBinding;
      uvEof = eof;
    }
  } catch {
    binding = null;
  }
  return binding;
}

/** Whether `h` has what RawConnection uses (an accepted TCP handle, not reading yet). */
export function isRawHandle(h: unknown): h is TcpHandle {
  const t = h as Partial<TcpHandle> | null;
  return t != null && typeof t.readStart === 'function' && typeof t.readStop === 'function' && typeof t.useUserBuffer === 'function' &&
    typeof t.writeBuffer === 'function' && typeof t.shutdown === 'function' && typeof t.close === 'function' &&
    typeof t.writeQueueSize === 'number' && t.reading !== true;
}

/** The buffer every connection of this thread reads into (a read is parsed before the next one can happen). */
export const RAW_READ_BUFFER_BYTES = 64 * 1024;
export const RAW_READ_BUFFER = Buffer.allocUnsafeSlow(RAW_READ_BUFFER_BYTES);

/** Bytes queued in the kernel-facing write queue above which a write reports "wait for drained" (net.Socket's default high-water mark). */
export const RAW_WRITE_HIGH_WATER = 16 * 1024;

/** What a RawConnection tells (a protocol connection, src/net/listener.ts's Conn). */
export interface RawConn {
  /** `n` bytes were read into `buf` (valid only during the call). */
  receive(buf: Buffer, n: number): void;
  /** Writes queued above the high-water mark have gone out. */
  drained(): void;
  /** The peer shut its sending side. */
  halfClose(): void;
  /** The connection is gone. */
  close(): void;
}

/** Where a RawConnection reports its end and its errors (one per listener, shared by its connections). */
export interface RawOwner {
  closed(raw: RawConnection): void;
  error(raw: RawConnection, code: string): void;
}

// A write request that finished at once binds nothing to the request object, so one is kept for
// the next write; one that went on asynchronously keeps it until its completion.
let spareWrite: WriteReq | null = null;

/** A handle's read callback once its reads no longer matter (the field takes only a function). */
export function ignoreRead(): void {}

/** Makes `handle` (accepted, paused) read into RAW_READ_BUFFER, shared by every connection of this thread, and call `onread` after each read. */
export function readIntoSharedBuffer(handle: TcpHandle, onread: () => unknown): void {
  handle.setNoDelay(true);
  handle.useUserBuffer(RAW_READ_BUFFER);
  handle.onread = onread;
}

/** What this thread's last handle read returned, inside its `onread`: bytes read (into RAW_READ_BUFFER), 0, or the end or an error (negative). */
export function lastReadResult(): number {
  const b = binding as StreamWrapBinding;
  return b.streamBaseState[b.kReadBytesOrError];
}

function onWriteDone(this: WriteReq, status: number): void {
  const conn = this.conn as RawConnection;
  this.conn = null;
  this.buffer = null;
  this.handle = null;
  conn.written(status);
}

function onShutdownDone(this: ShutdownReq, status: number): void {
  const conn = this.conn as RawConnection;
  this.conn = null;
  this.handle = null;
  conn.shutDown(status);
}

/** The handle's read callback, one for all (`this` is the handle; a closure of its own per connection cost ~140 bytes more, heap snapshot). */
function onHandleRead(this: TcpHandle & { raw: RawConnection }): void {
  this.raw.onRead();
}

// Its state, as bits of one field.
const F_READING = 1;
const F_NEED_DRAIN = 2; // a write reported the high-water mark: tell `drained` once the queue is empty
const F_ENDED = 4; //      our FIN is asked for
const F_PEER_ENDED = 8; // the peer's FIN came
const F_CLOSING = 16; //   the handle is closing or closed

// Fields only, no closures: this object and its handle are what an idle connection costs.
export class RawConnection {
  readonly connId: number;
  /** Who hears of reads and the end (set once the protocol connection is made). */
  conn: RawConn | null = null;
  private readonly handle: TcpHandle & { raw: RawConnection | null };
  private readonly owner: RawOwner;
  private flags = 0;

  /** Takes over `handle` (accepted, paused): its reads go to RAW_READ_BUFFER, shared by every connection of this thread. */
  constructor(handle: TcpHandle, connId: number, owner: RawOwner) {
    this.connId = connId;
    this.handle = handle as TcpHandle & { raw: RawConnection | null };
    this.owner = owner;
    this.handle.raw = this;
    readIntoSharedBuffer(handle, onHandleRead);
  }

  private has(f: number): boolean {
    return (this.flags & f) !== 0;
  }

  /** Starts reading. */
  start(): void {
    this.setReading(true);
  }

  private setReading(on: boolean): void {
    if (this.has(F_CLOSING) || on === this.has(F_READING)) return;
    const err = on ? this.handle.readStart() : this.handle.readStop();
    this.flags = on ? this.flags | F_READING : this.flags & ~F_READING;
    this.handle.reading = on;
    if (err < 0) this.fail(err);
  }

  /** The handle read something, or its end, or an error. */
  onRead(): void {
    const n = lastReadResult();
    if (n > 0) {
      // After our end, the peer's last bytes are read and dropped until its FIN (closing now
      // would answer them with a reset, which may destroy replies it has not read yet).
      if (!this.has(F_ENDED)) this.conn?.receive(RAW_READ_BUFFER, n);
      return;
    }
    if (n === 0) return;
    if (n !== uvEof) {
      this.fail(n);
      return;
    }
    this.flags |= F_PEER_ENDED;
    this.setReading(false);
    if (this.has(F_ENDED)) this.destroy();
    else this.conn?.halfClose();
  }

  /** Writes `data` (kept referenced until written); returns whether the queue is below its high-water mark. */
  write(data: Uint8Array): boolean {
    if (this.has(F_CLOSING | F_ENDED)) return false;
    const b = binding as StreamWrapBinding;
    const req = spareWrite ?? new b.WriteWrap();
    spareWrite = null;
    req.handle = this.handle;
    req.oncomplete = onWriteDone;
    req.async = false;
    req.conn = this;
    const err = this.handle.writeBuffer(req, data);
    if (err < 0) {
      req.conn = null;
      req.handle = null;
      spareWrite = req;
      this.fail(err);
      return false;
    }
    if (b.streamBaseState[b.kLastWriteWasAsync] !== 0) {
      req.async = true;
      req.buffer = data; // the kernel has not taken all of it: it must live until oncomplete
    } else {
      req.conn = null;
      req.handle = null;
      spareWrite = req;
    }
    const below = this.handle.writeQueueSize < RAW_WRITE_HIGH_WATER;
    if (!below) this.flags |= F_NEED_DRAIN;
    return below;
  }

  /** An asynchronous write finished. */
  written(status: number): void {
    if (status < 0) {
      this.fail(status);
      return;
    }
    if (this.has(F_NEED_DRAIN) && this.handle.writeQueueSize === 0 && !this.has(F_CLOSING)) {
      this.flags &= ~F_NEED_DRAIN;
      this.conn?.drained();
    }
  }

  /** Bytes written but not yet taken by the kernel. */
  bufferedOut(): number {
    return this.has(F_CLOSING) ? 0 : this.handle.writeQueueSize;
  }

  pauseReading(): void {
    this.setReading(false);
  }

  resumeReading(): void {
    if (!this.has(F_PEER_ENDED)) this.setReading(true);
  }

  /**
   * Sends FIN after everything written; the handle closes once the peer has ended too (at once
   * when it already has: see shutDown).
   */
  end(): void {
    if (this.has(F_ENDED | F_CLOSING)) return;
    this.flags |= F_ENDED;
    const req = new (binding as StreamWrapBinding).ShutdownWrap();
    req.handle = this.handle;
    req.oncomplete = onShutdownDone;
    req.callback = null;
    req.conn = this;
    if (this.handle.shutdown(req) < 0) {
      req.conn = null;
      this.destroy();
      return;
    }
    // Read on (and drop) until the peer's FIN, as a half-open net.Socket does.
    if (!this.has(F_PEER_ENDED)) this.setReading(true);
  }

  /** The FIN went out (or could not). */
  shutDown(status: number): void {
    if (status < 0 || this.has(F_PEER_ENDED)) this.destroy();
  }

  /** The peer's address, for logs. */
  remoteAddress(): string | undefined {
    const out: { address?: string } = {};
    return this.handle.getpeername(out) === 0 ? out.address : undefined;
  }

  private fail(err: number): void {
    if (this.has(F_CLOSING)) return;
    this.owner.error(this, util.getSystemErrorName(err));
    this.destroy();
  }

  /** Closes the handle now; `closed` follows. */
  destroy(): void {
    if (this.has(F_CLOSING)) return;
    this.flags |= F_CLOSING;
    this.handle.onread = ignoreRead; // a function: the handle's field takes nothing else
    this.handle.raw = null;
    this.handle.close(() => {
      this.owner.closed(this);
      this.conn?.close();
    });
  }
}
