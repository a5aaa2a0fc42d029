// `npm run console:screenshots`: refresh docs/console/*.png, one screenshot per console page, taken with
// Debian's Chromium against a fresh server in the state `hearth tour` leaves (the demo model fine-tuned on
// models/tour-corpus.txt), plus a short SFT job, two tables and a few chats. Run it after changing a page;
// the README shows these files.
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'puppeteer-core';
import { launchBrowser, signIn } from '../test/helpers/browser.js';
import { DEMO, startConsoleFixture } from '../test/helpers/console-fixture.js';
import { waitFor } from '../test/helpers/wait.js';
import { runTour } from '../src/cli/commands/tour.js';

const OUT = path.resolve('docs/console');

async function main() {
  fs.mkdirSync(OUT, { recursive: true });
  const f = await startConsoleFixture('my-team');
  const b = await launchBrowser();
  try {
    const data = await f.dataset('facts', 96);
    const bot = await f.model('support', 'support-bot');
    const job1 = await f.sftJob(bot.id, data, 4);
    await waitFor(async () => (await f.jobStatus(job1)) === 'succeeded', 'job 1', 600_000, 500);
    const tour = await runTour({ baseUrl: f.s.url, key: f.key, modelName: 'tour-corpus', print: (l) => process.stdout.write(`${l}\n`) });
    const digest = await f.table('evals', 1000);
    await f.table('evals', 250);
    for (const model of [DEMO, 'wandb-artifact:///my-team/support/support-bot']) {
      await f.s.call('POST', '/v1/chat/completions', {
        key: f.key, headers: { 'openai-project': 'my-team/support' },
        body: { model, messages: [{ role: 'user', content: 'What is the capital of France?' }], max_tokens: 8 },
      });
    }

    const page = await b.newPage({ width: 1280, height: 860 });
    const shot = async (name: string, p: Page = page) => {
      await new Promise((r) => setTimeout(r, 400)); // let charts and fonts settle before the picture
      await p.screenshot({ path: path.join(OUT, `${name}.png`) });
      process.stdout.write(`docs/console/${name}.png\n`);
    };
    const visit = async (hash: string, ready: string, p: Page = page) => {
      await p.goto(`${f.s.url}/${hash}`);
      await p.waitForSelector(ready, { timeout: 60_000 });
    };

    await page.goto(`${f.s.url}/`);
    await page.waitForSelector('#api-key');
    await shot('sign-in');
    await signIn(page, f.s.url, f.key);
    await visit('#/jobs', 'tbody tr');
    await shot('jobs');
    await visit(`#/jobs/${tour.jobId}`, 'figure[data-metric="loss"]');
    await page.waitForFunction((n) => document.querySelector('#step-count')?.textContent === String(n), { polling: 100 }, tour.losses.length);
    await shot('job');
    await visit('#/models', 'tr[data-model]');
    await page.waitForSelector('a[href^="#/models/"]');
    await shot('models');
    await visit(`#/models/${tour.modelId}`, 'tbody tr');
    await shot('model');
    await visit(`#/playground?model=${encodeURIComponent(tour.checkpointName)}`, 'textarea[aria-label="Message"]');
    await page.$eval('input[type=number][step="0.1"]', (el) => {
      const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value')!.set!;
      setter.call(el, '0');
      el.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await page.click('.page-header input[type=checkbox]');
    await page.waitForSelector('.panes-2');
    await page.$$eval('input[list="model-names"]', (els) => {
      const b = els[1] as HTMLInputElement;
      const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value')!.set!;
      setter.call(b, 'hearth/tiny-random-llama');
      b.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await page.type('textarea[aria-label="Message"]', 'There was once a');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant[data-done="true"]').length === 2, { polling: 100, timeout: 60_000 });
    await page.hover('.transcript .msg.assistant .tok');
    await shot('playground');
    await visit('#/tables', `a[href="#/tables/evals/${digest}"]`);
    await shot('tables');
    await visit(`#/tables/evals/${digest}`, '.rows tbody tr');
    await page.click('.rows tbody tr:nth-child(3)');
    await page.waitForSelector('.row-json');
    await shot('table');
    await visit('#/system', '.facts');
    await page.waitForFunction(() => !document.querySelector('main')?.textContent?.includes('…'), { polling: 100 });
    await shot('system');

    const phone = await b.newPage({ width: 390, height: 844, mobile: true });
    await signIn(phone, f.s.url, f.key);
    await visit(`#/jobs/${job1}`, 'figure[data-metric="loss"]', phone);
    await shot('job-phone', phone);
    if (b.problems.length) throw new Error(`the pages reported problems:\n${b.problems.join('\n')}`);
  } finally {
    await b.close();
    await f.close();
  }
}

await main();
process.exit(0);
