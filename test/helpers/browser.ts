/// <reference lib="dom" />
// Debian's Chromium driven by puppeteer-core, for the console's browser tests and screenshots.
// .ci/run installs the `chromium` package when /usr/bin/chromium is missing; CHROMIUM_PATH overrides.
// The DOM types above are for the callbacks tests hand to page.evaluate, which run in the browser.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export interface ConsoleBrowser {
  browser: Browser;
  /** A new tab that records console errors, page errors and failed requests into `problems`. */
  newPage(opts?: { width?: number; height?: number; mobile?: boolean }): Promise<Page>;
  /** Everything that went wrong in any tab so far (console errors, uncaught exceptions, HTTP ≥ 400, failed loads). */
  problems: string[];
  /**
   * For a failed test: a screenshot, the HTML and the journal (every console message, page error, request
   * failure and HTTP status ≥ 400, timed) of each tab still open, written to a new temp folder; returns a
   * summary naming the folder, with each journal's tail, to print.
   */
  saveDiagnostics(label: string, extra?: Record<string, string>): Promise<string>;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<ConsoleBrowser> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`No Chromium at ${CHROMIUM}: install it (apt-get install -y chromium) or set CHROMIUM_PATH`);
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', `--user-data-dir=${profile}`,
    ],
  });
  const problems: string[] = [];
  const journals = new Map<Page, string[]>();
  return {
    browser,
    problems,
    async newPage(opts = {}) {
      const page = await browser.newPage();
      const journal: string[] = [];
      journals.set(page, journal);
      page.once('close', () => journals.delete(page));
      const note = (line: string) => journal.push(`${new Date().toISOString()} ${line}`);
      await page.setViewport({ width: opts.width ?? 1280, height: opts.height ?? 800, deviceScaleFactor: 1, isMobile: opts.mobile ?? false, hasTouch: opts.mobile ?? false });
      page.on('console', (m) => {
        note(`console ${m.type()}: ${m.text()}`);
        if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
      });
      page.on('pageerror', (e) => {
        note(`page error: ${(e as Error).stack ?? (e as Error).message}`);
        problems.push(`page error: ${(e as Error).message}`);
      });
      page.on('framenavigated', (fr) => {
        if (fr === page.mainFrame()) note(`navigated: ${fr.url()}`);
      });
      page.on('requestfailed', (r) => {
        note(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
        // A stream the page aborted on purpose (Stop button, leaving a view) is not a failure.
        if (r.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
      });
      page.on('response', (r) => {
        if (r.status() >= 400) {
          note(`HTTP ${r.status()}: ${r.request().method()} ${r.url()} ${r.request().postData() ?? ''}`);
          problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
        }
      });
      page.on('dialog', (d) => {
        note(`dialog ${d.type()}: ${d.message()} (accepted)`);
        void d.accept();
      });
      return page;
    },
    async saveDiagnostics(label, extra = {}) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hearth-console-failure-${label.replace(/[^\w-]+/g, '-').slice(0, 40)}-`));
      const lines = [`[console diagnostics] ${label}: ${dir}`];
      let n = 0;
      for (const [page, journal] of journals) {
        n += 1;
        const base = path.join(dir, `tab${n}`);
        await page.screenshot({ path: `${base}.png`, fullPage: true }).catch((e: Error) => journal.push(`(screenshot failed: ${e.message})`));
        const html = await page.content().catch((e: Error) => `(page.content failed: ${e.message})`);
        fs.writeFileSync(`${base}.html`, html);
        fs.writeFileSync(`${base}.log`, journal.join('\n') + '\n');
        lines.push(`tab${n} ${page.url()}`, ...journal.slice(-30).map((l) => `  ${l}`));
      }
      for (const [name, text] of Object.entries(extra)) {
        fs.writeFileSync(path.join(dir, name), text);
        lines.push(`${name}:`, ...text.split('\n').slice(-30).map((l) => `  ${l}`));
      }
      return lines.join('\n');
    },
    async close() {
      await browser.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Sign in through the console's form and wait for the navigation bar. */
export async function signIn(page: Page, baseUrl: string, key: string): Promise<void> {
  await page.goto(`${baseUrl}/`, { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('#api-key');
  await page.type('#api-key', key);
  await page.keyboard.press('Enter');
  await page.waitForSelector('nav[aria-label="Sections"]');
}

/** Text of the first element matching `selector`, or null. */
export function textOf(page: Page, selector: string): Promise<string | null> {
  return page.$eval(selector, (el) => el.textContent).catch(() => null);
}
