// The dashboard's workq panel in a real browser (#14, src/ops/dashboard/dashboard-workq.js):
// Debian's chromium through playwright-core, as test/ops/dashboard.browser.test.ts. A queue
// appears with its ready count after adds over the workq protocol; its jobs list shows the
// payload as text (not markup); delete on the page asks for the token, and the job is gone over
// the protocol. Without a workq listener the panel stays hidden. Fails, never skips, without chromium.

import type { Page } from 'playwright-core';
import { browser, WAIT_MS, watchErrors, type PageDocument } from './browser.ts';
import { describe, expect, it, type TestContext } from 'vitest';
import { startServer, type RunningServer, type ServerOptions } from '../../src/server.ts';
import { addCmd, NOT_FOUND, OK, uuid, wqConnect } from '../support/workq.ts';

const TOKEN = 'browser-token-workq-0123456789';

async function start(ctx: TestContext, opts: ServerOptions = {}): Promise<RunningServer> {
  const srv = await startServer({
    host: '127.0.0.1', port: 0, logLevel: 'silent', http: { host: '127.0.0.1', port: 0 }, httpToken: TOKEN,
    workq: { host: '127.0.0.1', port: 0 }, ...opts,
  });
  ctx.onTestFinished(() => srv.close());
  return srv;
}

async function cellIs(page: Page, queue: string, col: string, text: string): Promise<void> {
  await page.waitForFunction(
    ([q, c, want]) => (globalThis as unknown as { document: PageDocument }).document.querySelector(`#wq-queues tr[data-queue="${q}"] td.${c}`)?.textContent === want,
    [queue, col, text] as const,
    { timeout: WAIT_MS },
  );
}

describe('the dashboard\'s workq panel in chromium', () => {
  it('shows a queue after adds, lists its jobs, and deletes one with the token', async (ctx) => {
    const b = await browser(ctx);
    const srv = await start(ctx);
    const page = await b.newPage();
    const errors = watchErrors(page);
    page.on('dialog', (d) => void d.accept());
    await page.goto(`http://127.0.0.1:${srv.httpPort}/`);
    await page.waitForSelector('#workq:not([hidden])', { timeout: WAIT_MS });

    const c = await wqConnect(srv.workqPort as number);
    ctx.onTestFinished(() => c.destroy());
    const ids = [uuid(), uuid()];
    await c.want(addCmd(ids[0], 'wqbrowser', 5000, 60000, '<b>first</b>', { priority: 2 }), OK);
    await c.want(addCmd(ids[1], 'wqbrowser', 5000, 60000, 'second', { priority: 1 }), OK);
    await cellIs(page, 'wqbrowser', 'ready', '2');
    await cellIs(page, 'wqbrowser', 'scheduled', '0');

    await page.click('#wq-queues tr[data-queue="wqbrowser"] td.name');
    const row = page.locator(`#wq-jobs tr[data-id="${ids[0]}"]`);
    await row.waitFor({ timeout: WAIT_MS });
    expect(await row.locator('td.body').textContent()).toBe('<b>first</b>');
    expect(await row.locator('td.body b').count()).toBe(0);

    // Delete: no token kept yet, so the page asks for it, then the delete runs.
    await row.locator('button.wq-job-delete').click();
    await page.waitForSelector('#token-form:not([hidden])', { timeout: WAIT_MS });
    await page.fill('#token', TOKEN);
    await page.click('#token-save');
    await cellIs(page, 'wqbrowser', 'ready', '1');
    await page.waitForFunction(
      (id) => (globalThis as unknown as { document: PageDocument }).document.querySelector('#wq-message')?.textContent === `deleted workq job ${id}`,
      ids[0],
      { timeout: WAIT_MS },
    );
    await c.want(`inspect job ${ids[0]}\r\n`, NOT_FOUND);
    expect(errors).toEqual([]);
  });

  it('keeps the panel hidden when the server has no workq listener', async (ctx) => {
    const b = await browser(ctx);
    const srv = await start(ctx, { workq: null });
    const page = await b.newPage();
    const errors = watchErrors(page);
    await page.goto(`http://127.0.0.1:${srv.httpPort}/`);
    await page.waitForSelector('#tubes tr[data-tube="default"]', { timeout: WAIT_MS });
    await page.waitForTimeout(300);
    expect(await page.locator('#workq').isHidden()).toBe(true);
    expect(errors).toEqual([]);
  });
});
