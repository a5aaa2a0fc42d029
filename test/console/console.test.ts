// The console in a real browser (Debian's Chromium through puppeteer-core) against a real server with
// workers: sign in, watch an SFT job's curve gain points live, cancel a job, chat with the demo model
// (streamed, with logprobs on hover, and side by side), page through a table, and no console errors.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Page } from 'puppeteer-core';
import { launchBrowser, signIn, textOf, type ConsoleBrowser } from '../helpers/browser.js';
import { startConsoleFixture, type ConsoleFixture } from '../helpers/console-fixture.js';
import { waitFor } from '../helpers/wait.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let f: ConsoleFixture;
let b: ConsoleBrowser;
beforeAll(async () => {
  [f, b] = await Promise.all([startConsoleFixture(), launchBrowser()]);
}, 120_000);
afterAll(async () => {
  await b?.close();
  await f?.close();
}, 120_000);
beforeEach(({ onTestFailed, task }) => {
  b?.problems.splice(0);
  // What a failure looked like: each open tab's screenshot, HTML and journal, and the workers' log, saved and printed.
  onTestFailed(async () => {
    if (b) console.error(await b.saveDiagnostics(task.name, f ? { 'server.log': f.serverLog() } : {}));
  }, 120_000); // screenshots of every open tab, on a machine that may be starved
});
afterEach(() => {
  // Every page the test opened stayed free of console errors, uncaught exceptions and failed requests.
  expect(b.problems, b.problems.join("\n")).toEqual([]);
});

const points = (page: Page, metric: string) =>
  page.$eval(`figure[data-metric="${metric}"]`, (el) => Number(el.getAttribute('data-points'))).catch(() => 0);

describe('console in a browser', () => {
  it('signs in with a key kept in session storage only, and refuses a wrong key', async () => {
    const page = await b.newPage();
    await page.goto(`${f.s.url}/`);
    await page.waitForSelector('#api-key');
    await page.type('#api-key', 'hearth_not-a-key');
    await page.keyboard.press('Enter');
    await page.waitForSelector('.error');
    expect(await textOf(page, '.error')).toMatch(/Invalid or revoked API key/);
    b.problems.splice(0); // the 401 of the refused key is expected
    await page.$eval('#api-key', (el) => {
      (el as HTMLInputElement).value = '';
      el.dispatchEvent(new Event('input', { bubbles: true })); // the page's state follows (as for max tokens below)
    });
    await page.type('#api-key', f.key);
    await page.keyboard.press('Enter');
    await page.waitForSelector('nav[aria-label="Sections"]');
    expect(await textOf(page, '.who .muted')).toBe(f.entity);
    const stored = await page.evaluate(() => ({ session: Object.values(sessionStorage), local: Object.keys(localStorage) }));
    expect(stored.session).toContain(f.key);
    expect(stored.local).toEqual([]);

    // A key revoked while signed in signs the tab out at the next call.
    const doomed = f.s.ctx.keys.create(f.entity);
    await page.evaluate(() => sessionStorage.clear());
    await signIn(page, f.s.url, doomed.key);
    f.s.ctx.keys.revoke(doomed.prefix);
    await page.goto(`${f.s.url}/#/system`);
    await page.waitForSelector('#api-key');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect(b.problems.every((p) => p.startsWith('HTTP 401') || /401/.test(p))).toBe(true);
    b.problems.splice(0);
    await page.close();
  });

  it('lists the base models on a fresh install, chats with one from its row, and starts fine-tunes from an uploaded JSONL and from a table', async () => {
    const page = await b.newPage();
    await signIn(page, f.s.url, f.key);
    await page.goto(`${f.s.url}/#/models`);
    const row = 'tr[data-model="hearth/tiny-random-llama"]';
    await page.waitForSelector(row);
    const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => td.textContent ?? ''));
    expect(cells.slice(0, 6)).toEqual(['hearth/tiny-random-llama llama', 'generated', 'F32', '0.92M', '3.7 MB', expect.stringMatching(/^\d[\d,]*$/)]);
    expect(cells[6]).toMatch(/not loaded|cpu \(/);
    expect(await textOf(page, 'main')).toContain('No trained models yet');

    // "Chat" opens the Playground on that model, and it answers.
    await page.click(`${row} a.button`);
    await page.waitForSelector('textarea[aria-label="Message"]');
    expect(await page.$eval('input[list="model-names"]', (el) => (el as HTMLInputElement).value)).toBe('hearth/tiny-random-llama');
    await page.type('textarea[aria-label="Message"]', 'Hello');
    await page.keyboard.press('Enter');
    await page.waitForSelector('.msg.assistant[data-done="true"]', { timeout: 60_000 });
    expect(await page.$$eval('.msg.assistant .tok', (els) => els.length)).toBeGreaterThan(0);
    expect(await page.$$eval('.msg.assistant .error', (els) => els.length)).toBe(0);

    // Having answered, the model is loaded on the inference worker, and the page says where.
    await page.goto(`${f.s.url}/#/models`);
    await page.waitForFunction((sel) => /cpu \(/.test(document.querySelector(`${sel} .loaded-on`)?.textContent ?? ''), { polling: 200, timeout: 30_000 }, row);

    // "Fine-tune" starts an SFT job from an uploaded JSONL file and opens the job's page.
    const dir = mkdtempSync(join(tmpdir(), 'hearth-console-upload-'));
    const file = join(dir, 'train.jsonl');
    writeFileSync(file, Array.from({ length: 4 }, () => JSON.stringify({ messages: [{ role: 'user', content: 'Who wrote Hamlet?' }, { role: 'assistant', content: 'Shakespeare' }] })).join('\n'));
    await page.click(`${row} button`);
    const form = 'form[aria-label="Fine-tune hearth/tiny-random-llama"]';
    await page.waitForSelector(form);
    const input = await page.$(`${form} input[type=file]`);
    await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(file);
    await page.$eval(`${form} input[inputmode="decimal"]`, (el) => {
      (el as HTMLInputElement).value = '';
      el.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await page.type(`${form} input[inputmode="decimal"]`, '5e-3');
    await page.click(`${form} button[type=submit]`);
    await page.waitForFunction(() => /^#\/jobs\/[0-9a-f-]{36}$/.test(location.hash), { polling: 100, timeout: 30_000 });
    const jobId = (await page.evaluate(() => location.hash)).split('/').pop()!;
    await page.waitForSelector('#step-count');
    const config = (await f.s.call('GET', `/v1/preview/training-jobs/${jobId}/config`, { key: f.key })).body;
    expect(config.kind).toBe('sft');
    expect(config.request.config).toMatchObject({ learning_rate: 5e-3, batch_size: 'auto' });
    // Let it finish, so the training worker is free for the next job (and the page follows it there).
    await page.waitForSelector('.badge-succeeded', { timeout: 180_000 });
    rmSync(dir, { recursive: true, force: true });

    // The same from a table of {messages} rows.
    const rows = Array.from({ length: 4 }, () => ({ messages: [{ role: 'user', content: 'What color is the sky?' }, { role: 'assistant', content: 'blue' }] }));
    const table = await f.s.call('POST', '/table/create', { key: f.key, body: { table: { project_id: `${f.entity}/sft-rows`, rows } } });
    expect(table.status).toBe(200);
    await page.goto(`${f.s.url}/#/models`);
    await page.waitForSelector(row);
    await page.click(`${row} button`);
    await page.waitForSelector(form);
    await page.click(`${form} input[type=radio]:not(:checked)`);
    const url = `weave:///${f.entity}/sft-rows/table/${table.body.digest}`;
    await page.waitForSelector(`${form} select option[value="${url}"]`);
    await page.select(`${form} select`, url);
    await page.click(`${form} button[type=submit]`);
    await page.waitForFunction((old) => /^#\/jobs\/[0-9a-f-]{36}$/.test(location.hash) && !location.hash.endsWith(old), { polling: 100, timeout: 30_000 }, jobId);
    const tableJob = (await page.evaluate(() => location.hash)).split('/').pop()!;
    expect((await f.s.call('GET', `/v1/preview/training-jobs/${tableJob}/config`, { key: f.key })).body.request.training_data_url).toBe(url);
    await waitFor(async () => (await f.jobStatus(tableJob)) === 'succeeded', 'the table job to succeed', 180_000, 200);
    await page.close();
  }, 300_000);

  it('shows a queued SFT job, then its loss curve gaining points without a reload; cancels a job from its page', async () => {
    // Job A holds the only training worker (thousands of steps) until the console cancels it, so job B is
    // surely still queued when its page opens: every point of B's curve then arrives live.
    const [longData, shortData] = await Promise.all([f.dataset('long', 3000), f.dataset('short', 48)]);
    const [ma, mb] = await Promise.all([f.model('demo', 'blocker'), f.model('demo', 'facts')]);
    const jobA = await f.sftJob(ma.id, longData, 1);
    await waitFor(async () => (await f.jobStatus(jobA)) === 'running', 'job A to run', 60_000, 100);
    const jobB = await f.sftJob(mb.id, shortData, 4);

    const watch = await b.newPage();
    await signIn(watch, f.s.url, f.key);
    await watch.goto(`${f.s.url}/#/jobs`);
    await watch.waitForSelector(`a[href="#/jobs/${jobB}"]`);
    await watch.click(`a[href="#/jobs/${jobB}"]`);
    // The list shows B's badge too: wait for what only the job page has before reading it.
    await watch.waitForSelector('#step-count');
    await watch.waitForSelector('.badge-queued');
    expect(await textOf(watch, '#step-count')).toBe('0');
    expect(await f.jobStatus(jobB)).toBe('queued');
    const loadsBefore = await watch.evaluate(() => performance.getEntriesByType('navigation').length + ':' + performance.timeOrigin);

    const control = await b.newPage();
    await signIn(control, f.s.url, f.key);
    await control.goto(`${f.s.url}/#/jobs/${jobA}`);
    await control.waitForSelector('#step-count');
    await control.waitForSelector('.badge-running');
    await control.bringToFront(); // the cancel button asks confirm(), a dialog Chromium opens in the front tab
    const cancel = await control.waitForSelector('xpath/.//button[contains(., "Cancel job")]');
    await cancel!.click();
    // A's worker honours the cancel between steps, or once its model is loaded: on a starved machine that is a
    // minute away (65 s seen with both cores busy), so the budget is generous, as for B's steps below.
    await control.waitForSelector('.badge-cancelled', { timeout: 180_000 });

    // B's curve grows from nothing (asserted above, while B was surely queued) to every step, in the same page.
    await watch
      .waitForFunction(() => Number(document.querySelector('figure[data-metric="loss"]')?.getAttribute('data-points') ?? 0) >= 1, { timeout: 120_000, polling: 200 })
      .catch(async (err: Error) => {
        const events = (await f.s.call('GET', `/v1/preview/training-jobs/${jobB}/events?limit=100`, { key: f.key })).body;
        throw new Error(`${err.message}; job B ${await f.jobStatus(jobB)}, page says ${await textOf(watch, 'main')}; events ${JSON.stringify(events).slice(0, 600)}`);
      });
    const seen = new Set<number>([await points(watch, 'loss')]);
    await waitFor(async () => {
      const n = await points(watch, 'loss');
      seen.add(n);
      return n === 12 && (await textOf(watch, '.badge-succeeded')) !== null;
    }, 'job B to succeed in the page with all its steps', 240_000, 100);
    seen.add(await points(watch, 'loss'));
    expect(Math.max(...seen)).toBe(12); // 48 rows / batch 4
    expect(await textOf(watch, '#step-count')).toBe('12');
    expect(await watch.evaluate(() => performance.getEntriesByType('navigation').length + ':' + performance.timeOrigin)).toBe(loadsBefore);
    // started + 12 steps + ended (the terminal event may come one poll after the status)
    await watch.waitForFunction(() => document.querySelectorAll('.event-log tbody tr').length === 14, { polling: 100, timeout: 30_000 });
    expect(await textOf(watch, '.event-log tbody tr:last-child .event')).toBe('training_ended');
    expect(await watch.$eval('pre.json', (el) => el.textContent)).toContain('"batch_size": 4');

    // The model page lists the checkpoint with its inference name…
    // (The job page has table rows too: wait for the checkpoint's own text, which only the model page shows.)
    await watch.goto(`${f.s.url}/#/models/${mb.id}`);
    await watch.waitForFunction(() => document.querySelector('main tbody')?.textContent?.includes('wandb-artifact:///alice/demo/facts:step1'), { polling: 100, timeout: 30_000 });
    // …and deletes it (the confirm dialog is accepted by the helper; Chromium opens dialogs of the front tab only).
    await watch.bringToFront();
    await watch.click('tbody button.danger');
    await watch.waitForFunction(() => document.querySelector('main')?.textContent?.includes('No checkpoints yet'), { polling: 100, timeout: 30_000 });
    expect((await f.s.call('GET', `/v1/preview/models/${mb.id}/checkpoints`, { key: f.key })).body.data).toEqual([]);
    await watch.close();
    await control.close();
  }, 400_000);

  it('streams a chat answer from the demo model with logprobs on hover, and compares two models', async () => {
    const page = await b.newPage();
    await signIn(page, f.s.url, f.key);
    const streamed: string[] = [];
    const bad: Promise<string>[] = [];
    page.on('response', (r) => {
      if (r.url().endsWith('/v1/chat/completions')) {
        streamed.push(r.headers()['content-type'] ?? '');
        if (r.status() >= 400) bad.push(r.text().then((t) => `chat ${r.status()}: ${t} (request ${r.request().postData()})`));
      }
    });
    await page.goto(`${f.s.url}/#/playground?model=hearth%2Ftiny-random-llama`);
    await page.waitForSelector('textarea[aria-label="Message"]');
    // Cleared with an input event, so the page's state follows: a bare `value = ''` is undone by the next render
    // (the model list arriving), and typing then appended to 128 (max_tokens 12812: a 400 from the server).
    await page.$eval('input[type=number][step="1"][min="1"]', (el) => {
      (el as HTMLInputElement).value = '';
      el.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await page.type('input[type=number][step="1"][min="1"]', '12');
    await page.type('textarea[aria-label="Message"]', 'Hello there');
    await page.keyboard.press('Enter');
    await page.waitForSelector('.msg.assistant[data-done="true"]', { timeout: 60_000 });
    expect(streamed, (await Promise.all(bad)).join('\n')).toEqual([expect.stringMatching(/^text\/event-stream/)]);
    const tokens = await page.$$eval('.msg.assistant .tok', (els) => els.length);
    // Sampled (no seed): the random demo model may end before max_tokens; never past it.
    expect(tokens).toBeGreaterThan(0);
    expect(tokens).toBeLessThanOrEqual(12);
    expect((await textOf(page, '.msg.user')) ?? '').toBe('Hello there');
    // Every token has a box to hover, also one that draws no text (a special token, a held byte: marked).
    const widths = await page.$$eval('.msg.assistant .tok', (els) => els.map((el) => el.getBoundingClientRect().width));
    expect(widths.filter((w) => !(w > 0))).toEqual([]);
    await page.hover('.msg.assistant .tok');
    const tip = await page.$eval('.msg.assistant .tok .tok-tip', (el) => ({ visible: getComputedStyle(el).display !== 'none', text: el.textContent ?? '' }));
    expect(tip.visible).toBe(true);
    expect(tip.text).toMatch(/-?\d+\.\d{3} \(\S+%\)/);
    // The same from the keyboard: focus the answer, arrow to the second token.
    await page.mouse.move(0, 0);
    await page.focus('.msg.assistant');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    // (the second token, or the only one when the model drew its EOS first: the arrows stop at the last token)
    expect(await page.$$eval('.msg.assistant .tok', (els) => els.findIndex((el) => el.classList.contains('active')))).toBe(Math.min(1, tokens - 1));
    expect(await page.$eval('.msg.assistant .tok.active .tok-tip', (el) => getComputedStyle(el).display)).toBe('block');

    await page.click('.page-header input[type=checkbox]');
    await page.waitForSelector('.panes-2');
    await page.type('textarea[aria-label="Message"]', 'And again');
    await page.keyboard.press('Enter');
    // Model B joins at the second turn: its first turn is marked "not asked", the second is answered by both.
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant[data-done="true"]').length === 4, { timeout: 60_000, polling: 100 });
    // Sampled, so B may end early: a random model draws its EOS now and then (seen: 2 tokens, the EOS shown '∅').
    const tokensB = await page.$$eval('.transcript:nth-child(2) .msg.assistant .tok', (els) => els.length);
    expect(tokensB).toBeGreaterThan(0);
    expect(tokensB).toBeLessThanOrEqual(12);
    expect(await page.$$eval('.transcript .msg.assistant .error', (els) => els.map((el) => el.textContent))).toEqual([]);
    const panes = await page.$$eval('.transcript', (els) => els.map((el) => el.querySelectorAll('.exchange').length));
    expect(panes).toEqual([2, 2]);
    expect(streamed).toHaveLength(3);
    await page.close();
  }, 120_000);

  it('opens a table, pages it, shows a row as JSON and sorts it', async () => {
    const digest = await f.table('evals', 2500);
    const page = await b.newPage();
    await signIn(page, f.s.url, f.key);
    await page.goto(`${f.s.url}/#/tables`);
    await page.waitForSelector('a[href="#/tables/evals"]');
    await page.click('a[href="#/tables/evals"]');
    // The all-projects list links the table too, and it is replaced once the hash changes: wait for the
    // project's own list (its chip current) before clicking a link in it.
    await page.waitForSelector('nav.chips a[aria-current="page"][href="#/tables/evals"]');
    await page.waitForSelector(`a[href="#/tables/evals/${digest}"]`);
    await page.click(`a[href="#/tables/evals/${digest}"]`);
    await page.waitForFunction(() => document.querySelector('#page-label')?.textContent === 'Page 1 of 50', { polling: 100 });
    const firstIndex = () => page.$eval('.rows tbody tr td', (el) => el.textContent);
    expect(await page.$$eval('.rows tbody tr', (rows) => rows.length)).toBe(50);
    expect(await firstIndex()).toBe('0');
    await page.click('button[aria-label="Next page"]');
    await page.waitForFunction(() => document.querySelector('#page-label')?.textContent === 'Page 2 of 50', { polling: 100 });
    await page.waitForFunction(() => document.querySelector('.rows tbody tr td')?.textContent === '50', { polling: 100 });
    await page.focus('.rows tbody tr');
    await page.keyboard.press('Enter');
    await page.waitForSelector('.row-json pre.json');
    expect(JSON.parse((await textOf(page, '.row-json pre.json'))!)).toMatchObject({ i: 50, score: (50 * 37) % 101 });

    await page.type('input[placeholder^="e.g. score"]', 'i');
    await page.select('select', 'desc');
    await page.click('form.controls button[type=submit]');
    await page.waitForFunction(() => document.querySelector('.rows tbody tr td')?.textContent === '2499', { polling: 100 });
    expect(await textOf(page, '#page-label')).toBe('Page 1 of 50');
    await page.close();
  }, 120_000);

  it('renders the models, jobs and system pages on a phone-sized screen', async () => {
    const page = await b.newPage({ width: 390, height: 844, mobile: true });
    await signIn(page, f.s.url, f.key);
    for (const [path, marker] of [['models', 'blocker'], ['jobs', 'SFT'], ['system', 'hearth/tiny-random-llama']]) {
      await page.goto(`${f.s.url}/#/${path}`);
      // The section's own content (its tab current, its marker), not the previous page's.
      await page.waitForFunction(
        (p, m) => document.querySelector(`nav[aria-label="Sections"] a[aria-current="page"][href="#/${p}"]`) && document.querySelector('main')?.textContent?.includes(m),
        { polling: 100 }, path, marker,
      );
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect(overflow, `${path} scrolls sideways`).toBeLessThanOrEqual(0);
    }
    await page.close();
  }, 60_000);
});
