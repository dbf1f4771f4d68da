// Retakes the README's dashboard picture: a server with a few busy tubes, the page in Debian's
// chromium (playwright-core), a screenshot once the charts have twenty seconds of history.
//
//   npx node tools/dashboard-screenshot.ts [docs/dashboard.png]

import fs from 'node:fs';
import { chromium } from 'playwright-core';
import { startServer } from '../src/server.ts';
import { connect } from '../test/support/client.ts';
import { putForId } from '../test/support/harness.ts';

const out = process.argv[2] ?? 'docs/dashboard.png';
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (!fs.existsSync(CHROMIUM)) throw new Error(`chromium is missing at ${CHROMIUM} (apt-get install -y --no-install-recommends chromium)`);

const TOKEN = 'screenshot-token-0123456789';
const srv = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent', http: { host: '127.0.0.1', port: 0 }, httpToken: TOKEN });
const b = await chromium.launch({ executablePath: CHROMIUM, headless: true });
try {
  const page = await b.newPage({ viewport: { width: 1180, height: 760 } });
  await page.goto(`http://127.0.0.1:${srv.httpPort}/`);
  const c = await connect(srv.port);
  const tubes = ['emails', 'thumbnails', 'webhooks'];
  // A second of puts and reserves; twenty of them, so the charts have a shape.
  const second = async (s: number): Promise<void> => {
    for (const [i, t] of tubes.entries()) {
      await c.request(`use ${t}`);
      const n = Math.round(20 + 15 * Math.sin((s + i * 4) / 3) + i * 8);
      for (let k = 0; k < n; k++) await putForId(c, JSON.stringify({ tube: t, n: s * 100 + k }), 100 * i, s % 5 === 0 && k < 3 ? 120 : 0);
      await c.request(`watch ${t}`);
    }
    for (let k = 0; k < 22; k++) {
      const r = /^RESERVED (\d+) /.exec(await c.request('reserve-with-timeout 0'));
      if (r === null) break;
      await c.request(k % 9 === 0 ? `bury ${r[1]} 0` : `delete ${r[1]}`);
    }
    await page.waitForTimeout(1000);
  };
  for (let s = 0; s < 18; s++) await second(s);
  await c.request('pause-tube webhooks 300');
  await page.click('#tubes tr[data-tube="emails"] td.name');
  await page.click('nav.states button[data-state="buried"]');
  await page.waitForSelector('#jobs tr[data-id]', { timeout: 15_000 });
  for (let s = 18; s < 20; s++) await second(s); // the put rates are live in the picture
  await page.screenshot({ path: out });
  c.destroy();
  process.stdout.write(`written: ${out}\n`);
} finally {
  await b.close();
  await srv.close();
}
