// What the dashboard's browser tests share: Debian's chromium through playwright-core (they fail,
// never skip, when it is missing), and a watch on page errors and CSP violations.

import fs from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { TestContext } from 'vitest';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const CHROMIUM_HINT =
  `chromium is missing at ${CHROMIUM}: install Debian's chromium package ` +
  '(apt-get install -y --no-install-recommends chromium), as .ci/run does, or set CHROMIUM_PATH';
/** How long a test waits for the page to show something. */
export const WAIT_MS = 15_000;

/**
 * The little of the DOM the functions run in the page use (the project compiles with Node's types,
 * not the DOM's; those functions are sent to the page as source, so they reach it by globalThis).
 */
export interface PageDocument {
  querySelector(selector: string): { textContent: string | null } | null;
}

/** A headless chromium, closed when the test ends. */
export async function browser(ctx: TestContext): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) throw new Error(CHROMIUM_HINT);
  const b = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  ctx.onTestFinished(() => b.close());
  return b;
}

/** Page errors and CSP violations, which fail the test. */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused/.test(m.text())) errors.push(`console: ${m.text()}`);
  });
  return errors;
}
