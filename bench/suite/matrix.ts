// The configurations the side-by-side suite measures.

export interface Point {
  /** Stable id, used in file names: "cycle-c100-p16-s100-t1". */
  id: string;
  /** Short label for tables and charts: "cycle 100×16 100B". */
  label: string;
  mode: 'put' | 'cycle';
  connections: number;
  pipeline: number;
  bodyBytes: number;
  tubes: number;
}

export function point(mode: Point['mode'], connections: number, pipeline: number, bodyBytes: number, tubes: number): Point {
  const size = bodyBytes >= 1024 && bodyBytes % 1024 === 0 ? `${bodyBytes / 1024}KiB` : `${bodyBytes}B`;
  return {
    id: `${mode}-c${connections}-p${pipeline}-s${bodyBytes}-t${tubes}`,
    label: `${mode} ${connections}×${pipeline} ${size}${tubes > 1 ? ` ${tubes}t` : ''}`,
    mode,
    connections,
    pipeline,
    bodyBytes,
    tubes,
  };
}

/**
 * put and cycle × connections 1/100/1000 × pipeline 1/16 × bodies 100 B/4 KiB × 1 and 64 tubes.
 * 64 tubes with a single connection would use one tube, so c=1 runs only with 1 tube: 40 points.
 */
export function fullMatrix(): Point[] {
  const points: Point[] = [];
  for (const mode of ['put', 'cycle'] as const) {
    for (const c of [1, 100, 1000]) {
      for (const p of [1, 16]) {
        for (const s of [100, 4096]) {
          for (const t of c === 1 ? [1] : [1, 64]) points.push(point(mode, c, p, s, t));
        }
      }
    }
  }
  return points;
}

/** A handful of points that CI can afford: the headline figures of MEASURED.md and two variations. */
export function quickMatrix(): Point[] {
  return [point('put', 100, 16, 100, 1), point('cycle', 100, 16, 100, 1), point('cycle', 100, 1, 100, 1), point('cycle', 1000, 1, 4096, 64)];
}

/**
 * `--protocol workq`: the headline points only (each connection adding; add → lease → complete
 * deep and shallow pipelines); there is no reference workq server to hold a whole matrix against.
 */
export function workqMatrix(): Point[] {
  return [point('put', 100, 16, 100, 1), point('cycle', 100, 16, 100, 1), point('cycle', 100, 1, 100, 1)];
}
