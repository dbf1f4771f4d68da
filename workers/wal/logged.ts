// Replies of the current batch whose change went into the log's pending records. If the batch's
// write fails, each of them becomes an error reply: never a success for a change that is not on
// disk. Without a log nothing is kept — a server in memory would otherwise hold one number per
// change it ever made.

export class LoggedReplies {
  private readonly offsets: number[] = [];
  private readonly enabled: boolean;

  constructor(enabled: boolean) {
    this.enabled = enabled;
  }

  /** The reply starting at `offset` of the batch's output reports a logged change. */
  mark(offset: number): void {
    if (this.enabled) this.offsets.push(offset);
  }

  /** Replies marked in this batch. */
  get size(): number {
    return this.offsets.length;
  }

  /** The batch's write failed: set byte `flagAt` of every marked reply in `buf`. */
  flagAll(buf: Uint8Array, flagAt: number): void {
    for (const off of this.offsets) buf[off + flagAt] = 1;
  }

  /** The batch is done (written, or its replies flagged). */
  clear(): void {
    this.offsets.length = 0;
  }
}
