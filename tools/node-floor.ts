// The Node floor: the least a Node thread does per command on shardstalk's socket path, for
// bench/cycle-c.ts (--servers beanstalkd,shardstalk,node-floor). It reads and writes the way
// shardstalk does (bare libuv handles, src/net/raw.ts; each connection's replies of a turn in one
// write, at the end of the turn) and does nothing else: one FIFO of jobs for every tube, commands
// told apart by their first letter, no limits, no checks, no stats, no TTR. What cycle-c measures
// of it is what Node itself costs at a load, with one command per read; shardstalk's figures sit
// on top of it. Not a beanstalk server: never point a client at it.
//
//   node --min-semi-space-size=16 tools/node-floor.ts PORT
//
// Commands: put (a body of the length it names), reserve, reserve-with-timeout (waits however
// long it takes), delete, use, watch, ignore, list-tube-used. Anything else: UNKNOWN_COMMAND.

import { listenBare } from '../src/net/listener.ts';
import { RawConnection, type RawConn, type RawOwner, type TcpHandle } from '../src/net/raw.ts';

const CR = 13;
const LF = 10;

/** Jobs put and not reserved yet, oldest first (a queue as two stacks would be faster: no matter at these lengths). */
const ready: { id: number; body: Buffer }[] = [];
/** Connections whose reserve waits for a put, oldest first. */
const waiting: Floor[] = [];
let nextId = 1;
let nextConn = 1;

/** Connections with replies to write at the end of this turn. */
let dirty: Floor[] = [];
let flushScheduled = false;
function flushTurn(): void {
  flushScheduled = false;
  const list = dirty;
  dirty = [];
  for (const c of list) c.flush();
}

class Floor implements RawConn {
  private readonly raw: RawConnection;
  /** The bytes of an incomplete command, kept until the rest comes. */
  private pending: Buffer | null = null;
  private out = Buffer.allocUnsafe(4096);
  private outLen = 0;
  private marked = false;
  private closed = false;

  constructor(handle: TcpHandle, owner: RawOwner) {
    this.raw = new RawConnection(handle, nextConn++, owner);
    this.raw.conn = this;
    this.raw.start();
  }

  receive(buf: Buffer, n: number): void {
    let data = buf.subarray(0, n);
    if (this.pending !== null) {
      data = Buffer.concat([this.pending, data]);
      this.pending = null;
    }
    let p = 0;
    for (;;) {
      const eol = data.indexOf(CR, p);
      if (eol < 0 || eol + 1 >= data.length) break;
      const first = data[p];
      if (first === 0x70 /* put */) {
        // put <pri> <delay> <ttr> <bytes>: the last number is the body's length
        let sp = eol - 1;
        while (sp > p && data[sp] !== 0x20) sp--;
        const bytes = Number(data.toString('latin1', sp + 1, eol));
        const end = eol + 2 + bytes + 2;
        if (end > data.length) break;
        const job = { id: nextId++, body: Buffer.from(data.subarray(eol + 2, eol + 2 + bytes)) };
        this.text(`INSERTED ${job.id}\r\n`);
        const w = waiting.shift();
        if (w !== undefined) w.give(job.id, job.body);
        else ready.push(job);
        p = end;
        continue;
      }
      if (first === 0x72 /* reserve, reserve-with-timeout */) {
        const job = ready.shift();
        if (job !== undefined) this.give(job.id, job.body);
        else waiting.push(this);
      } else if (first === 0x64 /* delete */) this.text('DELETED\r\n');
      else if (first === 0x75 /* use */) this.text(`USING ${data.toString('latin1', p + 4, eol)}\r\n`);
      else if (first === 0x77 /* watch */) this.text('WATCHING 2\r\n');
      else if (first === 0x69 /* ignore */) this.text('WATCHING 1\r\n');
      else if (first === 0x6c /* list-tube-used */) this.text('USING default\r\n');
      else this.text('UNKNOWN_COMMAND\r\n');
      p = eol + 2;
    }
    if (p < data.length) this.pending = Buffer.from(data.subarray(p));
  }

  /** RESERVED for a job. */
  give(id: number, body: Buffer): void {
    this.text(`RESERVED ${id} ${body.length}\r\n`);
    this.room(body.length + 2);
    body.copy(this.out, this.outLen);
    this.outLen += body.length;
    this.out[this.outLen++] = CR;
    this.out[this.outLen++] = LF;
  }

  private text(s: string): void {
    this.room(s.length);
    this.outLen += this.out.write(s, this.outLen, 'latin1');
  }

  /** Makes room for `n` more reply bytes, and puts the connection on the turn's list to write. */
  private room(n: number): void {
    if (this.outLen + n > this.out.length) {
      const bigger = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.outLen + n));
      this.out.copy(bigger, 0, 0, this.outLen);
      this.out = bigger;
    }
    if (!this.marked) {
      this.marked = true;
      dirty.push(this);
      if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flushTurn);
      }
    }
  }

  flush(): void {
    this.marked = false;
    if (this.outLen === 0 || this.closed) return;
    // The write may keep these bytes until the kernel takes them: the next turn writes into new ones.
    this.raw.write(this.out.subarray(0, this.outLen));
    if (this.raw.bufferedOut() > 0) this.out = Buffer.allocUnsafe(this.out.length);
    this.outLen = 0;
  }

  drained(): void {}

  halfClose(): void {
    this.raw.end();
  }

  close(): void {
    this.closed = true;
    const i = waiting.indexOf(this);
    if (i >= 0) waiting.splice(i, 1);
  }
}

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  process.stderr.write('usage: node tools/node-floor.ts PORT\n');
  process.exit(2);
}
const owner: RawOwner = { closed() {}, error() {} };
await listenBare('127.0.0.1', port, (h) => void new Floor(h, owner), (socket) => {
  // This Node does not hand bare handles over: the floor is not measurable here.
  socket.destroy();
  process.stderr.write('node-floor: this Node gives no bare TCP handles (src/net/raw.ts)\n');
  process.exit(1);
}, () => {});
process.on('SIGTERM', () => process.exit(0));
