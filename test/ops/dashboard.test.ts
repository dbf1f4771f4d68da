// The dashboard's files on the HTTP port (#14, src/ops/dashboard.ts): / is the page with a strict
// Content-Security-Policy and no inline script or style, its script and stylesheet resolve from
// the paths the page names, and data from the server is only ever set as text.

import fs from 'node:fs';
import { describe, expect, it, type TestContext } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import { DASHBOARD_CSP } from '../../src/ops/dashboard.ts';
import { request } from './support.ts';

async function start(ctx: TestContext): Promise<RunningServer> {
  const srv = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent', http: { host: '127.0.0.1', port: 0 }, httpToken: 'dashboard-token' });
  ctx.onTestFinished(() => srv.close());
  return srv;
}

describe('the dashboard', () => {
  it('serves / as HTML with a strict CSP, and the assets the page names', async (ctx) => {
    const port = (await start(ctx)).httpPort!;
    const page = await request(port, '/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = page.headers['content-security-policy'];
    expect(csp).toBe(DASHBOARD_CSP);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['x-frame-options']).toBe('DENY');
    // No inline script or style: every <script> has a src, no style attributes or <style>.
    expect(page.body).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page.body).not.toMatch(/<style\b|\sstyle=|\son[a-z]+=/i);

    // Every script and stylesheet the page names resolves with its type and the same policy.
    const refs = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(refs).toEqual(expect.arrayContaining(['/assets/dashboard-common.js', '/assets/dashboard.js', '/assets/dashboard-workq.js', '/assets/dashboard.css']));
    const types: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };
    for (const ref of refs) {
      const a = await request(port, ref);
      expect(a.status, ref).toBe(200);
      expect(a.headers['content-type'], ref).toBe(types[ref.split('.').pop()!]);
      expect(a.headers['content-security-policy'], ref).toBe(DASHBOARD_CSP);
      expect(a.body.length, ref).toBeGreaterThan(100);
    }
    const head = await request(port, '/assets/dashboard.js', 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(Number(head.headers['content-length'])).toBeGreaterThan(100);
    expect((await request(port, '/', 'POST')).status).toBe(405);
    expect((await request(port, '/assets/nope.js')).status).toBe(404);
    expect((await request(port, '/assets/../dashboard.ts')).status).toBe(404);
  });

  it('sets server data only as text, never as markup', () => {
    for (const file of ['dashboard-common.js', 'dashboard.js', 'dashboard-workq.js']) {
      const js = fs.readFileSync(new URL(`../../src/ops/dashboard/${file}`, import.meta.url), 'utf8');
      expect(js, file).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/);
      expect(js, file).toContain('textContent');
    }
  });
});
