// What every protocol parser here shares: the chunks received and not parsed yet, and pausing.
//
// A parser consumes chunks in place through `feed`; while a command holds it (a blocking
// reserve, a full output), later chunks queue up unparsed and `resume()` goes on exactly where it
// stopped. `resume()` from inside a sink call only clears the flag: the running loop continues.
// A chunk is valid only during `push` (the listener reads every socket into one buffer), so what
// queues up is a copy.

/** What a parser holding nothing has instead of an empty array of its own (frozen: a push throws). */
const NO_CHUNKS: Buffer[] = Object.freeze([]) as unknown as Buffer[];

export class StreamParser {
  protected paused = false;
  private running = false; // inside run(): resume() must not re-enter it
  private queue: Buffer[] = NO_CHUNKS; // an array of its own once something is held
  private queuePos = 0; // offset into queue[0]

  get isPaused(): boolean {
    return this.paused;
  }

  /** Bytes received but not parsed yet (held while paused). */
  get bufferedBytes(): number {
    const q = this.queue;
    if (q.length === 0) return 0;
    // An index loop: for-of over the shared frozen empty array made an iterator object per read.
    let n = 0 - this.queuePos; // not -queuePos: that is -0 when nothing is held
    for (let i = 0; i < q.length; i++) n += q[i].length;
    return n;
  }

  /**
   * Parses the first `len` bytes of `chunk` (valid only during the call; a socket's read buffer
   * is passed whole with the count read, so no view is made per read); keeps a copy of what it
   * does not get to.
   */
  push(chunk: Buffer, len = chunk.length): void {
    if (this.queue.length === 0 && !this.paused) {
      // Nothing held from before (the usual case): parse straight from the chunk, no queueing.
      this.running = true;
      let used: number;
      try {
        used = this.feed(chunk, 0, len);
      } finally {
        this.running = false;
      }
      if (used < len) this.hold(Buffer.from(chunk.subarray(used, len)));
      return;
    }
    this.hold(Buffer.from(chunk.subarray(0, len)));
    if (!this.paused) this.run();
  }

  private hold(chunk: Buffer): void {
    if (this.queue === NO_CHUNKS) this.queue = [];
    this.queue.push(chunk);
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    if (!this.running) this.run();
  }

  /** Consumes bytes of `buf` from `pos` up to `end` until done or paused; returns where it stopped. */
  protected feed(_buf: Buffer, _pos: number, _end: number): number {
    throw new Error('StreamParser.feed must be overridden');
  }

  private run(): void {
    this.running = true;
    try {
      while (!this.paused && this.queue.length > 0) {
        const chunk = this.queue[0];
        const used = this.feed(chunk, this.queuePos, chunk.length);
        if (used >= chunk.length) {
          this.queue.shift();
          this.queuePos = 0;
        } else {
          this.queuePos = used;
        }
      }
    } finally {
      this.running = false;
    }
  }
}
