// The dashboard at / on the HTTP port (#14): one page (src/ops/dashboard/: index.html, plain
// dashboard.js and dashboard.css, no build step) that uses the JSON API like any script. Served
// with a Content-Security-Policy that allows scripts, styles and fetches from this origin only
// (no inline script or style, no frames, no form posts), so data shown by the page can never run.

const fs = process.getBuiltinModule('node:fs'); // not an ESM import: see src/server.ts
import type http from 'node:http';

/** The page's policy: everything from this origin only, nothing inline, never framed. */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Path → the file under src/ops/dashboard/ and its type. */
export const DASHBOARD_FILES: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/assets/dashboard-common.js': { file: 'dashboard-common.js', type: 'text/javascript; charset=utf-8' },
  '/assets/dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  '/assets/dashboard-workq.js': { file: 'dashboard-workq.js', type: 'text/javascript; charset=utf-8' },
  '/assets/dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
};

const cache = new Map<string, Buffer>();

/** Whether `path` is one of the dashboard's. */
export function isDashboardPath(path: string): boolean {
  return Object.hasOwn(DASHBOARD_FILES, path);
}

/** Answers GET/HEAD of a dashboard path (read once, then kept: a few kilobytes). */
export function serveDashboard(req: http.IncomingMessage, res: http.ServerResponse, path: string): void {
  const entry = DASHBOARD_FILES[path];
  let body = cache.get(entry.file);
  if (body === undefined) {
    body = fs.readFileSync(new URL(`./dashboard/${entry.file}`, import.meta.url));
    cache.set(entry.file, body);
  }
  res.writeHead(200, {
    'Content-Type': entry.type,
    'Content-Length': body.length,
    'Content-Security-Policy': DASHBOARD_CSP,
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-cache',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}
