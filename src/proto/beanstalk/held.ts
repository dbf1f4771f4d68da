// The jobs one beanstalk connection holds (reserved by it), with their TTR deadlines, as the
// main thread knows them. A connection holds few, so one small array searched linearly: ids and
// deadlines interleaved, made on the first reserve (an idle connection holds no array), and kept
// at its size when jobs go (a pop can shrink the array, and the next push allocate again).

export class HeldJobs {
  /** [id₀, deadline₀, id₁, deadline₁, …]: the first 2 × count entries. */
  private pairs: number[] | null = null;
  private n = 0;

  get count(): number {
    return this.n;
  }

  private indexOf(id: number): number {
    const p = this.pairs;
    if (p === null) return -1;
    for (let i = 0; i < this.n; i++) if (p[2 * i] === id) return i;
    return -1;
  }

  has(id: number): boolean {
    return this.indexOf(id) !== -1;
  }

  /** Job `id` was reserved by this connection until `deadlineMs` (its TTR end). */
  add(id: number, deadlineMs: number): void {
    const p = (this.pairs ??= []);
    p[2 * this.n] = id;
    p[2 * this.n + 1] = deadlineMs;
    this.n++;
  }

  /** The connection no longer holds job `id` (deleted, released, buried, its TTR ran out). */
  remove(id: number): boolean {
    const i = this.indexOf(id);
    if (i === -1) return false;
    // Shift the later ones down (order kept).
    const p = this.pairs as number[];
    for (let k = 2 * i + 2; k < 2 * this.n; k++) p[k - 2] = p[k];
    this.n--;
    return true;
  }

  /** The ids held, in the order they were reserved. */
  ids(): number[] {
    const ids: number[] = [];
    for (let i = 0; i < this.n; i++) ids.push((this.pairs as number[])[2 * i]);
    return ids;
  }

  /** A touch moved job `id`'s TTR end. */
  touched(id: number, deadlineMs: number): void {
    const i = this.indexOf(id);
    if (i !== -1) (this.pairs as number[])[2 * i + 1] = deadlineMs;
  }

  /** The soonest TTR end (ms) of the jobs held (those `which` accepts, if given), Infinity if none. */
  soonestDeadline(which?: (id: number) => boolean): number {
    const p = this.pairs;
    let soonest = Infinity;
    for (let i = 0; i < this.n; i++) {
      const d = (p as number[])[2 * i + 1];
      if (d < soonest && (which === undefined || which((p as number[])[2 * i]))) soonest = d;
    }
    return soonest;
  }
}
