// Job id -> shard index, for routing `delete <id>`, `peek <id>`, `kick-job <id>` and friends to
// the shard that owns the job, in O(1) and about one byte per live id.
//
// Ids come from one sequential counter, so live ids cluster: the map is paged. Each page covers
// PAGE_IDS consecutive ids with a Uint8Array holding shard+1 (0 = unknown) and a count of its live
// ids; a page is dropped when its count reaches 0, so memory follows the live ids rather than every
// id ever issued (a queue that has processed 10^9 jobs but holds 10^5 costs a few pages). The page
// table is a Map entry per page, never per id. The last page dropped is kept (all zero, as its
// count says) and reused by the next page made: a busy queue holding a job or none at a time
// drops and makes the current page with every job, and a fresh 64 KiB array each time made V8
// run a full collection every ~40 ms (external memory pressure) at 10k jobs/s.

/** Ids per page: 64 Ki ids = 64 KiB per page; small enough that a sparse tail wastes little. */
export const PAGE_IDS = 65536;
const PAGE_SHIFT_DIVISOR = PAGE_IDS; // ids go up to 2^53, beyond 32-bit shifts: divide instead
const OFFSET_MASK = PAGE_IDS - 1; // `id & mask` is exact for any safe integer (ToInt32 is mod 2^32)
/** Shards are stored as shard+1 in a byte, so 0 means unknown and 255 shards fit (0..254). */
export const SHARD_MAX = 254;

class Page {
  readonly slots = new Uint8Array(PAGE_IDS);
  live = 0;
}

export class JobShardMap {
  private readonly pages = new Map<number, Page>();
  private live = 0;
  // One-entry cache of the last page touched: ids arrive in runs (sequential puts, FIFO deletes),
  // so most lookups skip the Map.
  private lastPageNo = -1;
  private lastPage: Page | undefined = undefined;
  /** The last page dropped: all zero, reused by the next page made. */
  private spare: Page | null = null;
  /** Page arrays allocated so far (tests). */
  pagesMade = 0;

  get liveIds(): number {
    return this.live;
  }

  /** Record that job `id` lives on `shard` (overwrites a previous shard for the same id). */
  set(id: number, shard: number): void {
    checkId(id);
    if (!(shard >= 0 && shard <= SHARD_MAX && Number.isInteger(shard))) {
      throw new RangeError(`JobShardMap: shard must be an integer in 0..${SHARD_MAX}, got ${shard}`);
    }
    const offset = id & OFFSET_MASK;
    const pageNo = (id - offset) / PAGE_SHIFT_DIVISOR;
    let page = this.page(pageNo);
    if (page === undefined) {
      if (this.spare === null) {
        page = new Page();
        this.pagesMade++;
      } else {
        page = this.spare;
        this.spare = null;
      }
      this.pages.set(pageNo, page);
      this.lastPageNo = pageNo;
      this.lastPage = page;
    }
    if (page.slots[offset] === 0) {
      page.live++;
      this.live++;
    }
    page.slots[offset] = shard + 1;
  }

  /**
   * The shard of job `id`, or -1 if the id is unknown (never issued, deleted, or not a valid id at
   * all: ids here come straight from client commands, and a bad one is a NOT_FOUND, not a bug).
   */
  get(id: number): number {
    if (!(id > 0 && Number.isSafeInteger(id))) return -1;
    const offset = id & OFFSET_MASK;
    const page = this.page((id - offset) / PAGE_SHIFT_DIVISOR);
    if (page === undefined) return -1;
    return page.slots[offset]! - 1;
  }

  /** Forget job `id`; a no-op if unknown. Drops the page when its last live id goes. */
  delete(id: number): void {
    checkId(id);
    const offset = id & OFFSET_MASK;
    const pageNo = (id - offset) / PAGE_SHIFT_DIVISOR;
    const page = this.page(pageNo);
    if (page === undefined || page.slots[offset] === 0) return;
    page.slots[offset] = 0;
    this.live--;
    if (--page.live === 0) {
      this.pages.delete(pageNo);
      this.spare = page;
      if (this.lastPageNo === pageNo) {
        this.lastPageNo = -1;
        this.lastPage = undefined;
      }
    }
  }

  /** Bytes held in page arrays (the per-page Map entry and object add a few dozen bytes each). */
  bytesAllocated(): number {
    return (this.pages.size + (this.spare === null ? 0 : 1)) * PAGE_IDS;
  }

  /** Number of pages held; for tests and stats. */
  pageCount(): number {
    return this.pages.size;
  }

  /** Assertions about our own mistakes; O(pages * PAGE_IDS), for tests only. */
  invariants(): void {
    let total = 0;
    for (const [pageNo, page] of this.pages) {
      let nonZero = 0;
      for (let i = 0; i < PAGE_IDS; i++) if (page.slots[i] !== 0) nonZero++;
      if (nonZero !== page.live) {
        throw new Error(`JobShardMap invariant: page ${pageNo} counts ${page.live} live ids, holds ${nonZero}`);
      }
      if (page.live === 0) throw new Error(`JobShardMap invariant: empty page ${pageNo} was kept`);
      total += page.live;
    }
    if (total !== this.live) throw new Error(`JobShardMap invariant: pages hold ${total} ids, liveIds is ${this.live}`);
    if (this.spare !== null) {
      for (const [, page] of this.pages) if (page === this.spare) throw new Error('JobShardMap invariant: the spare page is in use');
      if (this.spare.live !== 0 || this.spare.slots.some((x) => x !== 0)) throw new Error('JobShardMap invariant: the spare page is not empty');
    }
    if (this.lastPage !== undefined && this.pages.get(this.lastPageNo) !== this.lastPage) {
      throw new Error('JobShardMap invariant: page cache points at a dropped page');
    }
  }

  private page(pageNo: number): Page | undefined {
    if (pageNo === this.lastPageNo) return this.lastPage;
    const page = this.pages.get(pageNo);
    if (page !== undefined) {
      this.lastPageNo = pageNo;
      this.lastPage = page;
    }
    return page;
  }
}

function checkId(id: number): void {
  // Job ids are positive and come from one counter, so they stay safe integers (< 2^53).
  if (!(id > 0 && Number.isSafeInteger(id))) {
    throw new RangeError(`JobShardMap: job id must be a positive safe integer, got ${id}`);
  }
}
