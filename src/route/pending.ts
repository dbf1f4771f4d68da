// What to do with each coming reply of one shard, in request order (every request gets exactly
// one reply, in order, so replies need no tags).

/** Whoever a shard's reply to a request is for: a connection, a fan-in attempt, the router itself. */
export interface ReplyTarget {
  /** The reply (at `at` in `buf`, valid during the call) to the request sent with `kind` and `seq`. */
  onShardReply(shard: number, kind: number, seq: number, buf: Buffer, at: number): void;
}

/** The target of requests whose replies nobody needs (every request gets a reply). */
export const NO_REPLY: ReplyTarget = { onShardReply() {} };

/** A FIFO of pending replies: parallel arrays used as a circular queue, no object per entry. */
export class PendingFifo {
  private kinds = new Int32Array(1024);
  private seqs = new Float64Array(1024);
  private targets: (ReplyTarget | null)[] = new Array(1024).fill(null);
  private head = 0;
  private size = 0;

  get length(): number {
    return this.size;
  }

  push(kind: number, target: ReplyTarget, seq: number): void {
    if (this.size === this.kinds.length) this.grow();
    const i = (this.head + this.size) & (this.kinds.length - 1);
    this.kinds[i] = kind;
    this.seqs[i] = seq;
    this.targets[i] = target;
    this.size++;
  }

  // Results of shift(), read right after it.
  kind = 0;
  seq = 0;
  target: ReplyTarget = NO_REPLY;

  shift(): boolean {
    if (this.size === 0) return false;
    const i = this.head;
    this.kind = this.kinds[i];
    this.seq = this.seqs[i];
    this.target = this.targets[i] as ReplyTarget;
    this.targets[i] = null;
    this.head = (i + 1) & (this.kinds.length - 1);
    this.size--;
    return true;
  }

  private grow(): void {
    const cap = this.kinds.length;
    const kinds = new Int32Array(cap * 2);
    const seqs = new Float64Array(cap * 2);
    const targets: (ReplyTarget | null)[] = new Array(cap * 2).fill(null);
    for (let k = 0; k < this.size; k++) {
      const i = (this.head + k) & (cap - 1);
      kinds[k] = this.kinds[i];
      seqs[k] = this.seqs[i];
      targets[k] = this.targets[i];
    }
    this.kinds = kinds;
    this.seqs = seqs;
    this.targets = targets;
    this.head = 0;
  }
}
