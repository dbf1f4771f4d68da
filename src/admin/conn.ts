// A small beanstalk protocol connection for shardstalk-admin: send commands (several at once,
// pipelined) and read their replies in order. Works against beanstalkd and shardstalk alike.
import net from 'node:net';

/** One reply: its first line and, for OK / FOUND / RESERVED, the body that followed. */
export interface Reply {
  readonly line: string;
  readonly body: Buffer | null;
}

/** The connection failed or the server went away; the CLI exits 3 on it. */
export class ConnectionError extends Error {}

export class Conn {
  private buf: Buffer = Buffer.alloc(0);
  private wake: (() => void) | null = null;
  private failure: Error | null = null;
  private readonly socket: net.Socket;
  private readonly where: string;
  /** How long a reply may take before the tool gives up (ms). */
  replyTimeoutMs: number;

  private constructor(socket: net.Socket, where: string, replyTimeoutMs: number) {
    this.socket = socket;
    this.where = where;
    this.replyTimeoutMs = replyTimeoutMs;
    socket.on('data', (chunk: Buffer) => {
      this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
      this.poke();
    });
    socket.on('error', (err) => {
      this.failure ??= new ConnectionError(`connection to ${where} failed: ${err.message}`);
      this.poke();
    });
    socket.on('close', () => {
      this.failure ??= new ConnectionError(`${where} closed the connection`);
      this.poke();
    });
  }

  static open(host: string, port: number, timeoutMs = 10_000): Promise<Conn> {
    const where = `${host}:${port}`;
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new ConnectionError(`cannot connect to ${where}: timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        const why = err.code === 'ECONNREFUSED' ? 'connection refused (is the server running?)' : err.message;
        reject(new ConnectionError(`cannot connect to ${where}: ${why}`));
      });
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        socket.setNoDelay(true);
        resolve(new Conn(socket, where, timeoutMs));
      });
    });
  }

  private poke(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  /** Write these command lines in one go (each gets "\r\n"). */
  send(...lines: string[]): void {
    if (this.failure) throw this.failure;
    this.socket.write(lines.map((l) => l + '\r\n').join(''));
  }

  /** Wait for more bytes, the connection's end, or the reply timeout. */
  private async more(): Promise<void> {
    if (this.failure) throw this.failure;
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        this.wake = resolve;
        timer = setTimeout(() => reject(new ConnectionError(`${this.where} sent no reply within ${this.replyTimeoutMs / 1000} s`)), this.replyTimeoutMs);
      });
    } finally {
      clearTimeout(timer);
    }
  }

  private async need(n: number): Promise<void> {
    while (this.buf.length < n) await this.more();
  }

  /** Read the next reply in order. */
  async reply(): Promise<Reply> {
    let eol: number;
    for (;;) {
      eol = this.buf.indexOf('\r\n');
      if (eol >= 0) break;
      await this.more();
    }
    const line = this.buf.subarray(0, eol).toString('latin1');
    this.buf = this.buf.subarray(eol + 2);
    const word = line.split(' ', 1)[0];
    if (word !== 'OK' && word !== 'FOUND' && word !== 'RESERVED') return { line, body: null };
    const bytes = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw new ConnectionError(`malformed reply: ${line}`);
    await this.need(bytes + 2);
    const body = Buffer.from(this.buf.subarray(0, bytes));
    this.buf = this.buf.subarray(bytes + 2);
    return { line, body };
  }

  /** Send one command and read its reply. */
  async request(line: string): Promise<Reply> {
    this.send(line);
    return this.reply();
  }

  close(): void {
    this.socket.removeAllListeners('close');
    this.socket.removeAllListeners('error');
    this.socket.on('error', () => {});
    this.socket.end();
    this.socket.destroy();
  }
}

/** Parse beanstalk's YAML: a dictionary ("key: value" lines) of numbers and strings. */
export function parseYamlDict(body: Buffer): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const raw of body.toString('utf8').split('\n')) {
    const line = raw.trimEnd();
    if (line === '---' || line === '') continue;
    const colon = line.indexOf(': ');
    if (colon < 0) continue;
    const key = line.slice(0, colon);
    const value = line.slice(colon + 2).trim();
    // A quoted value is a string even when it looks like a number (beanstalkd's version "1.10").
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) out[key] = value.slice(1, -1);
    else out[key] = /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : value;
  }
  return out;
}

/** Parse beanstalk's YAML list ("- name" lines). */
export function parseYamlList(body: Buffer): string[] {
  const out: string[] = [];
  for (const raw of body.toString('utf8').split('\n')) {
    const line = raw.trimEnd();
    if (line.startsWith('- ')) out.push(line.slice(2));
  }
  return out;
}
