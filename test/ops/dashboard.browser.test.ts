// The dashboard in a real browser (#14): Debian's chromium driven by playwright-core. A tube
// appears with its count after puts over the protocol; a job buried over the protocol shows in the
// buried count and in the tube's buried list (its body as text, not markup); kick on the page asks
// for the token once, and the counts follow. Fails, never skips, when chromium is missing.
// The README's screenshot is retaken by tools/dashboard-screenshot.ts.

import type { Page } from 'playwright-core';
import { browser, WAIT_MS, watchErrors, type PageDocument } from './browser.ts';
import { describe, expect, it, type TestContext } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { putForId } from '../support/harness.ts';

const TOKEN = 'browser-token-0123456789';

async function start(ctx: TestContext, http = { host: '127.0.0.1', port: 0 }): Promise<RunningServer> {
  const srv = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent', http, httpToken: TOKEN });
  ctx.onTestFinished(() => srv.close());
  return srv;
}

async function client(ctx: TestContext, port: number): Promise<Client> {
  const c = await connect(port);
  ctx.onTestFinished(() => c.destroy());
  return c;
}

/** Waits until the cell of `tube`'s row in column `col` reads `text`. */
async function cellIs(page: Page, tube: string, col: string, text: string): Promise<void> {
  await page.waitForFunction(
    ([t, c, want]) => (globalThis as unknown as { document: PageDocument }).document.querySelector(`#tubes tr[data-tube="${t}"] td.${c}`)?.textContent === want,
    [tube, col, text] as const,
    { timeout: WAIT_MS },
  );
}

describe('the dashboard in chromium', () => {
  it('shows a tube after puts, a buried job, and kicks it with the token', async (ctx) => {
    const b = await browser(ctx);
    const srv = await start(ctx);
    const page = await b.newPage();
    const errors = watchErrors(page);
    await page.goto(`http://127.0.0.1:${srv.httpPort}/`);
    await page.waitForSelector('#tubes tr[data-tube="default"]', { timeout: WAIT_MS });

    const producer = await client(ctx, srv.port);
    expect(await producer.request('use browsertube')).toBe('USING browsertube\r\n');
    for (let i = 0; i < 3; i++) await putForId(producer, `<b>job ${i}</b>`, 10 + i);
    await cellIs(page, 'browsertube', 'ready', '3');
    await cellIs(page, 'browsertube', 'buried', '0');
    // The put rate follows from one poll to the next (three puts, then none).
    await page.waitForFunction(
      () => /^[0-9]+(\.[0-9])?$/.test((globalThis as unknown as { document: PageDocument }).document.querySelector('#tubes tr[data-tube="browsertube"] td.rate')?.textContent ?? ''),
      undefined,
      { timeout: WAIT_MS },
    );

    // Bury one over the protocol: the page follows.
    const worker = await client(ctx, srv.port);
    await worker.request('watch browsertube');
    const reserved = /^RESERVED (\d+) /.exec(await worker.request('reserve-with-timeout 0'));
    expect(reserved).not.toBeNull();
    const id = Number(reserved![1]);
    expect(await worker.request(`bury ${id} 5`)).toBe('BURIED\r\n');
    await cellIs(page, 'browsertube', 'buried', '1');
    await cellIs(page, 'browsertube', 'ready', '2');

    // The tube's buried jobs: the body shows as text (no <b> element made of it).
    await page.click('#tubes tr[data-tube="browsertube"] td.name');
    await page.waitForSelector('#detail:not([hidden])', { timeout: WAIT_MS });
    await page.click('nav.states button[data-state="buried"]');
    const row = page.locator(`#jobs tr[data-id="${id}"]`);
    await row.waitFor({ timeout: WAIT_MS });
    expect(await row.locator('td.body').textContent()).toBe('<b>job 0</b>');
    expect(await row.locator('td.body b').count()).toBe(0);

    // Kick from the page: no token yet, so the page asks for it once, then the kick runs.
    expect(await page.evaluate(() => sessionStorage.getItem('shardstalk-token'))).toBeNull();
    await page.click('#kick');
    await page.waitForSelector('#token-form:not([hidden])', { timeout: WAIT_MS });
    await page.fill('#token', TOKEN);
    await page.click('#token-save');
    await cellIs(page, 'browsertube', 'buried', '0');
    await cellIs(page, 'browsertube', 'ready', '3');
    await page.waitForFunction(() => (globalThis as unknown as { document: PageDocument }).document.querySelector('#message')?.textContent === 'kicked 1 job in browsertube', undefined, { timeout: WAIT_MS });
    expect(await page.evaluate(() => sessionStorage.getItem('shardstalk-token'))).toBe(TOKEN);
    await page.waitForSelector('#jobs tr.empty', { timeout: WAIT_MS }); // the buried list is empty now

    // The protocol agrees: the job is ready again.
    expect(await worker.request(`stats-job ${id}`)).toMatch(/\nstate: ready\n/);
    // The changed counts were highlighted, and nothing broke the policy.
    expect(await page.locator('#tubes td.changed').count()).toBeGreaterThan(0);
    expect(errors).toEqual([]);
  });

  it('pages a tube\'s jobs, pauses and resumes, deletes and kicks a job, moves jobs to another tube and back, clears by state', async (ctx) => {
    const b = await browser(ctx);
    const srv = await start(ctx);
    const page = await b.newPage();
    const errors = watchErrors(page);
    page.on('dialog', (d) => void d.accept()); // delete, move and clear ask first
    await page.goto(`http://127.0.0.1:${srv.httpPort}/`);
    await page.evaluate((t) => sessionStorage.setItem('shardstalk-token', t), TOKEN);
    const c = await client(ctx, srv.port);
    await c.request('use pager');
    const ids: number[] = [];
    for (let i = 0; i < 25; i++) ids.push(await putForId(c, `job ${i}`, 100));
    await cellIs(page, 'pager', 'ready', '25');
    const message = (text: string): Promise<unknown> => page.waitForFunction(
      (want) => (globalThis as unknown as { document: PageDocument }).document.querySelector('#message')?.textContent === want,
      text,
      { timeout: WAIT_MS },
    );

    // Pages of 20, in (pri, id) order.
    await page.click('#tubes tr[data-tube="pager"] td.name');
    await page.locator(`#jobs tr[data-id="${ids[19]}"]`).waitFor({ timeout: WAIT_MS });
    expect(await page.locator('#jobs tr[data-id]').count()).toBe(20);
    await page.click('#next-page');
    await page.locator(`#jobs tr[data-id="${ids[24]}"]`).waitFor({ timeout: WAIT_MS });
    expect(await page.locator('#jobs tr[data-id]').count()).toBe(5);
    expect(await page.locator('#next-page').isDisabled()).toBe(true);
    await page.click('#first-page');
    await page.locator(`#jobs tr[data-id="${ids[0]}"]`).waitFor({ timeout: WAIT_MS });

    // Pause and resume.
    await page.fill('#pause-seconds', '100');
    await page.click('#pause');
    await message('paused pager for 100 s');
    await page.waitForFunction(
      () => /^[0-9]+ s$/.test((globalThis as unknown as { document: PageDocument }).document.querySelector('#tubes tr[data-tube="pager"] td.paused')?.textContent ?? ''),
      undefined,
      { timeout: WAIT_MS },
    );
    await page.click('#resume');
    await message('resumed pager');
    await cellIs(page, 'pager', 'paused', 'no');

    // Delete one job from its row.
    await page.click(`#jobs tr[data-id="${ids[0]}"] button.job-delete`);
    await message(`deleted job ${ids[0]}`);
    await cellIs(page, 'pager', 'ready', '24');
    expect(await c.request(`peek ${ids[0]}`)).toBe('NOT_FOUND\r\n');

    // Bury two over the protocol, kick one from its row.
    await c.request('watch pager');
    for (let i = 0; i < 2; i++) {
      const r = /^RESERVED (\d+) /.exec(await c.request('reserve-with-timeout 0'));
      expect(await c.request(`bury ${r![1]} 1`)).toBe('BURIED\r\n');
    }
    await cellIs(page, 'pager', 'buried', '2');
    await page.click('nav.states button[data-state="buried"]');
    await page.locator(`#jobs tr[data-id="${ids[1]}"]`).waitFor({ timeout: WAIT_MS });
    await page.click(`#jobs tr[data-id="${ids[1]}"] button.job-kick`);
    await message(`kicked job ${ids[1]}`);
    await cellIs(page, 'pager', 'buried', '1');
    await cellIs(page, 'pager', 'ready', '23');

    // Move the ready jobs (checked by default) to another tube, once a target is named, and back.
    await page.click('#move');
    await message('name the tube to move to');
    await page.fill('#move-to', 'moved');
    await page.click('#move');
    await message('moved 23 jobs from pager to moved');
    await cellIs(page, 'pager', 'ready', '0');
    await cellIs(page, 'moved', 'ready', '23');
    await cellIs(page, 'pager', 'buried', '1');
    await page.click('#tubes tr[data-tube="moved"] td.name');
    await page.fill('#move-to', 'pager');
    await page.click('#move');
    // (Emptied and used by nobody, "moved" is gone: the page then says so for its job list.)
    await cellIs(page, 'pager', 'ready', '23');
    await page.locator('#tubes tr[data-tube="moved"]').waitFor({ state: 'detached', timeout: WAIT_MS });
    await page.click('#tubes tr[data-tube="pager"] td.name');

    // Clear the buried (checked by default), then the ready ones.
    await page.click('#clear');
    await message('deleted 1 job from pager');
    await cellIs(page, 'pager', 'buried', '0');
    await page.check('input.clear-state[value="ready"]');
    await page.uncheck('input.clear-state[value="buried"]');
    await page.click('#clear');
    await message('deleted 23 jobs from pager');
    await cellIs(page, 'pager', 'ready', '0');
    expect(errors).toEqual([]);
  });

  it('asks for the token when reading needs it too (not bound to loopback)', async (ctx) => {
    const b = await browser(ctx);
    const srv = await start(ctx, { host: '0.0.0.0', port: 0 });
    const page = await b.newPage();
    await page.goto(`http://127.0.0.1:${srv.httpPort}/`);
    await page.waitForSelector('#token-form:not([hidden])', { timeout: WAIT_MS });
    expect(await page.locator('#tubes tr[data-tube]').count()).toBe(0);
    await page.fill('#token', TOKEN);
    await page.click('#token-save');
    await cellIs(page, 'default', 'ready', '0');
  });
});
