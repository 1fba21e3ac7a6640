// Browser tests of `sessions serve`: real headless Chromium driven by playwright-core.
//
// Run by `.ci/run` as `node --test tests/browser/`. Needs:
// - the `sessions` binary: $SESSIONS_BIN, else $CARGO_TARGET_DIR/debug/sessions, else
//   target/debug/sessions (build it first: `cargo build -p session-cli`);
// - playwright-core resolvable by require() (NODE_PATH may point at an install outside the
//   checkout; no browser is downloaded);
// - Chromium at $CHROMIUM or /usr/bin/chromium (the distribution's package).
// $SCREENSHOT, when set, is where the runs-list screenshot is written (the README's picture).
//
// The store is a copy of testdata/codelia-runtime in a temporary directory, plus a run with
// hostile tool output and a run this test appends to; nothing is written into the checkout.

'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { chromium } = require('playwright-core');

const repo = path.resolve(__dirname, '..', '..');
const bin =
  process.env.SESSIONS_BIN ||
  path.join(process.env.CARGO_TARGET_DIR || path.join(repo, 'target'), 'debug', 'sessions');

const IMAGE_RUN = '812276ce-7f41-4280-92eb-e61a9c795043';
const HOSTILE =
  '<script>window.__pwned = 1; alert(1)</script>\n<img src=x onerror="window.__pwned = 2">\n' +
  Array.from({ length: 20 }, (_, i) => `output line ${i + 1}`).join('\n');

let dir, root, server, base, browser, context;
const requests = [];
const dialogs = [];

function line(obj) {
  return JSON.stringify(obj) + '\n';
}

function plant() {
  const day = path.join(root, '2026', '11', '30');
  const header = (run) => ({
    type: 'header', schema_version: 1, run_id: run, session_id: 's-' + run,
    started_at: '2026-11-30T11:59:00.000Z', client: { name: 'browser-test', version: '1' },
  });
  fs.writeFileSync(
    path.join(day, 'run-hostile.jsonl'),
    line(header('run-hostile')) +
      line({ type: 'run.start', run_id: 'run-hostile', ts: '2026-11-30T11:59:00.100Z', input: { type: 'text', text: 'show me <b>bold</b>' } }) +
      line({ type: 'agent.event', run_id: 'run-hostile', ts: '2026-11-30T11:59:00.200Z', seq: 1, event: { type: 'tool_call', tool: 'shell', tool_call_id: 'c1', args: { command: 'cat evil.html' } } }) +
      line({ type: 'tool.output', run_id: 'run-hostile', ts: '2026-11-30T11:59:00.300Z', tool: 'shell', tool_call_id: 'c1', result_raw: HOSTILE }) +
      line({ type: 'run.end', run_id: 'run-hostile', ts: '2026-11-30T11:59:01.000Z', outcome: 'completed', final: 'done' }),
  );
  fs.writeFileSync(
    path.join(day, 'run-live.jsonl'),
    line(header('run-live')) +
      line({ type: 'run.start', run_id: 'run-live', ts: '2026-11-30T11:59:30.000Z', input: { type: 'text', text: 'first words' } }),
  );
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sessions-browser-'));
  root = path.join(dir, 'sessions');
  fs.cpSync(path.join(repo, 'testdata', 'codelia-runtime', 'sessions'), root, { recursive: true });
  plant();
  server = spawn(bin, ['--root', root, 'serve', '--port', '0'], {
    env: { PATH: process.env.PATH, HOME: dir, TZ: 'UTC', SESSIONS_NOW: '2026-11-30T12:00:00Z' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const first = await new Promise((resolve, reject) => {
    readline.createInterface({ input: server.stdout }).once('line', resolve);
    server.once('exit', (code) => reject(new Error(`sessions serve exited with ${code}`)));
  });
  assert.match(first, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{32}$/);
  base = first;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
  context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  context.on('request', (r) => requests.push(r.url()));
  context.on('page', (p) => p.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); }));
});

after(async () => {
  if (browser) await browser.close();
  if (server) server.kill();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function origin() {
  return new URL(base).origin;
}

test('the printed URL opens the runs list and leaves the token behind', async () => {
  const page = await context.newPage();
  await page.goto(base);
  assert.equal(page.url(), origin() + '/');
  assert.equal(await page.locator('h1').innerText(), 'Runs');
  const rows = await page.locator('tbody tr').count();
  assert.equal(rows, 22);
  if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT, fullPage: false });
  await page.close();
});

test('a transcript shows Japanese text and the data-URL image', async () => {
  const page = await context.newPage();
  await page.goto(origin() + '/');
  await page.click(`a[href="/run/${IMAGE_RUN}"]`);
  await page.waitForURL(`**/run/${IMAGE_RUN}`);
  assert.ok((await page.locator('body').innerText()).includes('この画像は何ですか？'));
  const width = await page.locator('img.input').evaluate((img) => img.naturalWidth);
  assert.equal(width, 4);
  // The anchor of a record is addressable.
  await page.goto(origin() + `/run/${IMAGE_RUN}#L2`);
  assert.equal(await page.locator('#L2 .who').first().innerText().then((t) => t.startsWith('User')), true);
  await page.close();
});

test('hostile tool output is shown as text, never run, and a long output expands', async () => {
  const page = await context.newPage();
  await page.goto(origin() + '/run/run-hostile');
  const details = page.locator('details').filter({ hasText: 'output line 20' });
  assert.equal(await details.count(), 1);
  assert.equal(await details.evaluate((d) => d.open), false);
  assert.equal(await details.locator('pre').isVisible(), false);
  await details.locator('summary').click();
  assert.equal(await details.evaluate((d) => d.open), true);
  const pre = await details.locator('pre').innerText();
  assert.ok(pre.includes('<script>window.__pwned = 1; alert(1)</script>'), pre);
  assert.ok(pre.includes('<img src=x onerror="window.__pwned = 2">'), pre);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator('pre img, pre script, img[src="x"]').count(), 0);
  assert.ok((await page.locator('body').innerText()).includes('show me <b>bold</b>'));
  assert.deepEqual(dialogs, []);
  await page.close();
});

test('the live view follows a run that is being appended to', async () => {
  const page = await context.newPage();
  await page.goto(origin() + '/live/run-live');
  await page.evaluate(() => { window.__same = 'page'; });
  assert.equal(await page.locator('#live').getAttribute('data-open'), '1');
  const file = path.join(root, '2026', '11', '30', 'run-live.jsonl');
  fs.appendFileSync(file, line({ type: 'agent.event', run_id: 'run-live', ts: '2026-11-30T11:59:31.000Z', seq: 1, event: { type: 'text', content: 'second words' } }));
  await page.locator('#live').getByText('second words').waitFor({ timeout: 10000 });
  fs.appendFileSync(file, line({ type: 'run.end', run_id: 'run-live', ts: '2026-11-30T11:59:32.000Z', outcome: 'completed', final: 'all done' }));
  await page.locator('#live[data-open="0"]').waitFor({ timeout: 10000 });
  assert.ok((await page.locator('#live').innerText()).includes('all done'));
  // Followed in place by the script, not by reloading.
  assert.equal(await page.evaluate(() => window.__same), 'page');
  await page.close();
});

test('search finds a Japanese phrase inside a longer word and opens the hit', async () => {
  const page = await context.newPage();
  await page.goto(origin() + '/');
  await page.click('nav a[href="/search"]');
  await page.waitForURL('**/search');
  await page.fill('#q', 'メッセージを改善');
  await page.click('form button');
  await page.waitForURL('**/search?q=*');
  const marks = page.locator('.snippet mark');
  assert.ok((await marks.count()) > 0);
  assert.equal(await marks.first().innerText(), 'メッセージを改善');
  const hit = page.locator('a.hit').first();
  const href = await hit.getAttribute('href');
  assert.match(href, /^\/at\/[A-Za-z0-9._-]+\/\d+$/);
  await hit.click();
  await page.waitForURL(/\/run\/[A-Za-z0-9._-]+#L\d+$/);
  const anchor = new URL(page.url()).hash.slice(1);
  assert.ok((await page.locator(`[id="${anchor}"]`).innerText()).includes('挨拶メッセージを改善しました'));
  await page.close();
});

test('no request left 127.0.0.1', () => {
  assert.ok(requests.length > 5);
  const outside = requests.filter((u) => !u.startsWith(origin() + '/') && !u.startsWith('data:'));
  assert.deepEqual(outside, []);
});
