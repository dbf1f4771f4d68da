// The jobs one beanstalk connection holds (reserved by it), with their TTR deadlines, as the
// main thread knows them. A connection holds few, so two small arrays searched linearly.

export class HeldJobs {
  private readonly ids: number[] = [];
  private readonly deadlines: number[] = [];

  get count(): number {
    return this.ids.length;
  }

  has(id: number): boolean {
    return this.ids.indexOf(id) !== -1;
  }

  /** Job `id` was reserved by this connection until `deadlineMs` (its TTR end). */
  add(id: number, deadlineMs: number): void {
    this.ids.push(id);
    this.deadlines.push(deadlineMs);
  }

  /** The connection no longer holds job `id` (deleted, released, buried, its TTR ran out). */
  remove(id: number): boolean {
    const i = this.ids.indexOf(id);
    if (i === -1) return false;
    // Shift the later ones down (order kept, no array made as splice would).
    const ids = this.ids;
    const deadlines = this.deadlines;
    for (let k = i + 1; k < ids.length; k++) {
      ids[k - 1] = ids[k];
      deadlines[k - 1] = deadlines[k];
    }
    ids.pop();
    deadlines.pop();
    return true;
  }

  /** A touch moved job `id`'s TTR end. */
  touched(id: number, deadlineMs: number): void {
    const i = this.ids.indexOf(id);
    if (i !== -1) this.deadlines[i] = deadlineMs;
  }

  /** The soonest TTR end (ms) of the jobs held (those `which` accepts, if given), Infinity if none. */
  soonestDeadline(which?: (id: number) => boolean): number {
    let soonest = Infinity;
    for (let i = 0; i < this.ids.length; i++) {
      const d = this.deadlines[i];
      if (d < soonest && (which === undefined || which(this.ids[i]))) soonest = d;
    }
    return soonest;
  }
}
