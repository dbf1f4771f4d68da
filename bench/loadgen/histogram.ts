// Log-linear latency histogram in microseconds, HDR style.
//
// Values below 128 µs get one bucket per microsecond; above, each power of two is split into 64
// buckets, so a reported percentile is within 1/64 (1.6 %) of the true value. Recording is a
// clz32 and an increment, no allocation; histograms of different threads merge by adding counts,
// and travel between threads as one Float64Array.
//
// Range: 0 .. 2^31 µs (~36 minutes); longer values are clamped into the last bucket.

const LINEAR_BUCKETS = 128; // 2^LINEAR_BITS
const LINEAR_BITS = 7;
const SUB_BITS = 6; // 64 buckets per power of two
const SUB_BUCKETS = 1 << SUB_BITS;
const TOP_EXPONENT = 30; // values up to 2^31 - 1
export const HISTOGRAM_BUCKETS = LINEAR_BUCKETS + (TOP_EXPONENT - LINEAR_BITS + 1) * SUB_BUCKETS;
/** Extra slots after the buckets: total count, sum of values, max value. */
const kCount = HISTOGRAM_BUCKETS;
const kSum = HISTOGRAM_BUCKETS + 1;
const kMax = HISTOGRAM_BUCKETS + 2;
export const HISTOGRAM_SLOTS = HISTOGRAM_BUCKETS + 3;

export interface LatencySummary {
  count: number;
  meanUs: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
  p999Us: number;
  maxUs: number;
}

export function bucketOf(valueUs: number): number {
  const v = valueUs >= 2147483647 ? 2147483647 : valueUs > 0 ? valueUs | 0 : 0;
  if (v < LINEAR_BUCKETS) return v;
  const exponent = 31 - Math.clz32(v); // >= LINEAR_BITS
  return LINEAR_BUCKETS + ((exponent - LINEAR_BITS) << SUB_BITS) + ((v >>> (exponent - SUB_BITS)) & (SUB_BUCKETS - 1));
}

/** Lowest value that falls into `bucket`. */
export function bucketLowUs(bucket: number): number {
  if (bucket < LINEAR_BUCKETS) return bucket;
  const i = bucket - LINEAR_BUCKETS;
  const exponent = (i >>> SUB_BITS) + LINEAR_BITS;
  const sub = i & (SUB_BUCKETS - 1);
  return (SUB_BUCKETS + sub) * 2 ** (exponent - SUB_BITS);
}

/** Width of `bucket` in microseconds. */
function bucketWidthUs(bucket: number): number {
  if (bucket < LINEAR_BUCKETS) return 1;
  const exponent = ((bucket - LINEAR_BUCKETS) >>> SUB_BITS) + LINEAR_BITS;
  return 2 ** (exponent - SUB_BITS);
}

export class Histogram {
  readonly slots: Float64Array;

  constructor(slots?: Float64Array) {
    if (slots !== undefined && slots.length !== HISTOGRAM_SLOTS) throw new RangeError('histogram slot count mismatch');
    this.slots = slots ?? new Float64Array(HISTOGRAM_SLOTS);
  }

  record(valueUs: number): void {
    const s = this.slots;
    s[bucketOf(valueUs)]!++;
    s[kCount]!++;
    s[kSum]! += valueUs;
    if (valueUs > s[kMax]!) s[kMax] = valueUs;
  }

  add(other: Histogram): void {
    const s = this.slots;
    const o = other.slots;
    for (let i = 0; i < HISTOGRAM_BUCKETS; i++) s[i]! += o[i]!;
    s[kCount]! += o[kCount]!;
    s[kSum]! += o[kSum]!;
    if (o[kMax]! > s[kMax]!) s[kMax] = o[kMax]!;
  }

  get count(): number {
    return this.slots[kCount]!;
  }

  get maxUs(): number {
    return this.slots[kMax]!;
  }

  /**
   * The value at quantile q (0..1): the middle of the bucket holding the ceil(q*count)-th value,
   * never above the recorded maximum.
   */
  quantileUs(q: number): number {
    const count = this.count;
    if (count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * count));
    let seen = 0;
    for (let b = 0; b < HISTOGRAM_BUCKETS; b++) {
      seen += this.slots[b]!;
      if (seen >= rank) return Math.min(this.maxUs, bucketLowUs(b) + bucketWidthUs(b) / 2);
    }
    return this.maxUs;
  }

  summary(): LatencySummary {
    const count = this.count;
    return {
      count,
      meanUs: count === 0 ? 0 : this.slots[kSum]! / count,
      p50Us: this.quantileUs(0.5),
      p90Us: this.quantileUs(0.9),
      p99Us: this.quantileUs(0.99),
      p999Us: this.quantileUs(0.999),
      maxUs: this.maxUs,
    };
  }
}
