// A raw TCP client for protocol tests: bytes in, bytes out, nothing clever.
//
// Strings are converted with 'latin1' in both directions, so every char code 0..255 is exactly one
// byte on the wire: '\0', '\r' and '\xff' in a test string are the bytes 0x00, 0x0d and 0xff.
// Replies are returned the same way, so a test can compare them with plain string equality.

import net from 'node:net';

/** How long a read waits by default before failing (ms). Generous: CI machines are slow. */
export const READ_TIMEOUT_MS_DEFAULT = 3_000;

/** Show a protocol string with CR, LF, NUL and other control bytes made visible. */
export function escapeBytes(data: string | Buffer): string {
  const s = typeof data === 'string' ? data : data.toString('latin1');
  let out = '';
  for (const ch of s) {
    const code = ch.charCodeAt(0);
    if (ch === '\r') out += '\\r';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\\') out += '\\\\';
    else if (code < 0x20 || code >= 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out;
}

function toBuffer(data: string | Buffer): Buffer {
  return typeof data === 'string' ? Buffer.from(data, 'latin1') : data;
}

/** A readable diff of two protocol byte strings: both escaped, plus where they first differ. */
export function describeMismatch(expected: string | Buffer, actual: string | Buffer): string {
  const e = toBuffer(expected);
  const a = toBuffer(actual);
  let at = 0;
  while (at < e.length && at < a.length && e[at] === a[at]) at++;
  return [
    `expected (${e.length} bytes): "${escapeBytes(e)}"`,
    `actual   (${a.length} bytes): "${escapeBytes(a)}"`,
    `first difference at byte ${at}`,
  ].join('\n');
}

interface Waiter {
  /** Returns true when satisfied (and has resolved its promise). */
  check(): boolean;
}

export class Client {
  readonly socket: net.Socket;
  /** Bytes received and not yet consumed by a read. */
  private pending: Buffer = Buffer.alloc(0);
  private waiters: Waiter[] = [];
  private ended = false;
  private closedFlag = false;
  private error: Error | null = null;

  constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
      this.wake();
    });
    socket.on('end', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('close', () => {
      this.ended = true;
      this.closedFlag = true;
      this.wake();
    });
    socket.on('error', (err) => {
      // ECONNRESET after the server closed on us is an ordinary way for a test connection to end.
      this.error = err;
      this.ended = true;
      this.wake();
    });
  }

  private wake(): void {
    this.waiters = this.waiters.filter((w) => !w.check());
  }

  /** Unconsumed bytes received so far (for diagnostics). */
  get buffered(): string {
    return this.pending.toString('latin1');
  }

  /** True once the server has closed its side (or the socket failed). */
  get serverClosed(): boolean {
    return this.ended;
  }

  /** Send bytes as they are; resolves when the kernel has taken them. */
  send(data: string | Buffer): Promise<void> {
    const buf = toBuffer(data);
    return new Promise((resolve, reject) => {
      this.socket.write(buf, (err) => (err ? reject(err) : resolve()));
    });
  }

  /** Wait until `count` bytes are buffered (or fail), and take them. */
  readBytes(count: number, timeoutMs = READ_TIMEOUT_MS_DEFAULT): Promise<Buffer> {
    return this.waitFor(
      () => (this.pending.length >= count ? count : -1),
      timeoutMs,
      () => `waiting for ${count} bytes`,
    );
  }

  /** Read one line up to and including "\r\n"; returned with the "\r\n". */
  async readLine(timeoutMs = READ_TIMEOUT_MS_DEFAULT): Promise<string> {
    const buf = await this.waitFor(
      () => {
        const at = this.pending.indexOf('\r\n', 0, 'latin1');
        return at < 0 ? -1 : at + 2;
      },
      timeoutMs,
      () => 'waiting for a line ending in \\r\\n',
    );
    return buf.toString('latin1');
  }

  /**
   * Read one complete reply: the line, plus the body and its "\r\n" when the line is
   * `RESERVED <id> <n>`, `FOUND <id> <n>` or `OK <n>`.
   */
  async readReply(timeoutMs = READ_TIMEOUT_MS_DEFAULT): Promise<string> {
    const line = await this.readLine(timeoutMs);
    const m = /^(?:(?:RESERVED|FOUND) \d+|OK) (\d+)\r\n$/.exec(line);
    if (!m) return line;
    const body = await this.readBytes(Number(m[1]) + 2, timeoutMs);
    return line + body.toString('latin1');
  }

  /** Send a command line (CRLF appended) and read one reply. */
  async request(line: string, timeoutMs = READ_TIMEOUT_MS_DEFAULT): Promise<string> {
    await this.send(line + '\r\n');
    return this.readReply(timeoutMs);
  }

  /**
   * Read exactly as many bytes as `exact` has and fail with a readable diff if they differ.
   * Fails early (without waiting for the rest) as soon as a received byte differs.
   */
  async expect(exact: string | Buffer, timeoutMs = READ_TIMEOUT_MS_DEFAULT): Promise<void> {
    const want = toBuffer(exact);
    let got: Buffer;
    try {
      got = await this.waitFor(
        () => {
          const n = Math.min(want.length, this.pending.length);
          for (let i = 0; i < n; i++) {
            // Mismatch already visible: take what we have so the error can show it.
            if (this.pending[i] !== want[i]) return this.pending.length;
          }
          return this.pending.length >= want.length ? want.length : -1;
        },
        timeoutMs,
        () => `expecting "${escapeBytes(want)}"`,
      );
    } catch (err) {
      throw new Error(
        `${(err as Error).message}\n${describeMismatch(want, this.pending)}`,
      );
    }
    if (!got.equals(want)) {
      throw new Error(`reply mismatch\n${describeMismatch(want, got)}`);
    }
  }

  /** Send `line` + "\r\n" and expect exactly `reply`. */
  async ask(line: string, reply: string | Buffer, timeoutMs = READ_TIMEOUT_MS_DEFAULT): Promise<void> {
    await this.send(line + '\r\n');
    await this.expect(reply, timeoutMs);
  }

  /** Fail if any byte arrives (or the server closes) within `ms`. */
  async expectNothing(ms: number): Promise<void> {
    await new Promise((r) => setTimeout(r, ms));
    if (this.pending.length > 0) {
      throw new Error(`expected no reply within ${ms} ms, got "${escapeBytes(this.pending)}"`);
    }
    if (this.ended) throw new Error(`expected no reply within ${ms} ms, but the server closed`);
  }

  /** Resolves true when the server closes the connection within `ms` (no unread data allowed). */
  async isClosed(ms = READ_TIMEOUT_MS_DEFAULT): Promise<boolean> {
    if (!this.ended) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve();
        }, ms);
        const waiter: Waiter = {
          check: () => {
            if (!this.ended) return false;
            clearTimeout(timer);
            resolve();
            return true;
          },
        };
        this.waiters.push(waiter);
      });
    }
    if (this.ended && this.pending.length > 0) {
      throw new Error(`server closed, but left unread bytes "${escapeBytes(this.pending)}"`);
    }
    return this.ended;
  }

  /** Close our side and wait for the socket to be fully closed. */
  close(): Promise<void> {
    if (this.closedFlag) return Promise.resolve();
    return new Promise((resolve) => {
      this.socket.once('close', () => resolve());
      this.socket.end();
      // A server that never closes its side must not hang the test.
      setTimeout(() => this.socket.destroy(), 500).unref();
    });
  }

  /** Drop the connection at once (RST if data is unread), without waiting. */
  destroy(): void {
    this.socket.destroy();
  }

  /**
   * Wait until `take()` returns a byte count >= 0, then remove that many bytes from the buffer
   * and return them. Fails on timeout or when the server closes first.
   */
  private waitFor(take: () => number, timeoutMs: number, what: () => string): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        check: () => {
          const n = take();
          if (n >= 0) {
            clearTimeout(timer);
            const out = this.pending.subarray(0, n);
            this.pending = this.pending.subarray(n);
            resolve(Buffer.from(out));
            return true;
          }
          if (this.ended) {
            clearTimeout(timer);
            const why = this.error ? `socket error ${this.error.message}` : 'server closed';
            reject(new Error(`${why} while ${what()}; unread: "${escapeBytes(this.pending)}"`));
            return true;
          }
          return false;
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(
          new Error(`timeout after ${timeoutMs} ms ${what()}; got "${escapeBytes(this.pending)}"`),
        );
      }, timeoutMs);
      if (!waiter.check()) this.waiters.push(waiter);
    });
  }
}

/** Open a connection to 127.0.0.1:port. */
export function connect(port: number, host = '127.0.0.1'): Promise<Client> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host });
    socket.setNoDelay(true);
    const onError = (err: Error) => reject(err);
    socket.once('error', onError);
    socket.once('connect', () => {
      socket.off('error', onError);
      resolve(new Client(socket));
    });
  });
}
