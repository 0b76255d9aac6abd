// The dashboard (GET /, /v1/stats, /v1/cache) against a real `hearth serve`: a short household workload, then the
// page in headless Debian Chromium (driven by playwright-core, pinned in package.json; never a downloaded browser).
// The figures the page renders must equal the server's own (/v1/stats and /metrics) within one refresh, the
// browser may talk to no origin but the server's, prefix text is shown as text, and a salt's prefixes reach only
// that salt. The screenshot is kept in e2e/artifacts/dashboard.png (git-ignored).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BIN, metrics, startServer, waitFor } from './helpers.mjs';

const CHROMIUM = '/usr/bin/chromium';
const noBrowser = existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} is missing: install Debian's chromium package (scripts/install-deps.sh does)`;
const ARTIFACTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'artifacts');
const SECRET = 'The vault code of tenant A is 4711 and only tenant A may read it.';
const MARKUP = 'Once upon a time <img src=x onerror="window.__injected=1"><b>bold</b> & a dog.';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

async function getJson(url, headers = {}) {
  const res = await fetch(url, { headers });
  assert.equal(res.status, 200, url);
  return res.json();
}

async function complete(body) {
  const res = await fetch(`${server.baseURL}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ max_tokens: 4, temperature: 0, ...body }),
  });
  assert.equal(res.status, 200);
  return res.json();
}

// `hearth bench household`: 3 users sharing a prefix (~400 stories260K tokens), 2 turns each.
function household(baseURL) {
  const args = ['bench', 'household', '--url', baseURL, '--users', '3', '--turns', '2', '--prefix-tokens', '100',
    '--question-tokens', '8', '--max-tokens', '8'];
  const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (out += d));
  return new Promise((resolve) => proc.on('close', (code) => resolve({ code, out })));
}

async function launch() {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

const digits = (text) => Number(text.replace(/[^0-9]/g, ''));

test('the workload runs, and /v1/cache lists each salt only to itself', async () => {
  const bench = await household(server.baseURL);
  assert.equal(bench.code, 0, bench.out);
  assert.doesNotMatch(bench.out, /errors:/, bench.out);
  await complete({ prompt: 'Once upon a time there was a house with rules that every child knew by heart.', pin_prefix: true });
  await complete({ prompt: MARKUP });
  await complete({ prompt: SECRET, cache_salt: 'tenant-a' });

  const shared = await getJson(`${server.baseURL}/v1/cache`);
  assert.equal(shared.salted, false);
  assert.deepEqual(shared.prefixes.map((p) => p.tiers), shared.prefixes.map(() => ['ram']));
  const sharedText = shared.prefixes.map((p) => p.text).join('\n');
  assert.ok(!sharedText.includes('vault'), 'a salted prompt is never listed without its salt');
  assert.ok(sharedText.includes('<img src=x'), 'the markup prompt is listed as it was sent');
  assert.ok(shared.prefixes.some((p) => p.pinned && p.pinned_blocks > 0), 'the pinned prompt is marked');
  assert.ok(shared.prefixes.every((p) => p.text.length <= shared.max_text_bytes));
  // The bench's users share their prefix: one run of blocks with a branch per user.
  assert.ok(shared.prefixes.some((p) => p.parent >= 0), 'shared stems branch');

  const salted = await getJson(`${server.baseURL}/v1/cache?cache_salt=tenant-a`);
  assert.equal(salted.salted, true);
  assert.equal(salted.prefixes.length, 1);
  assert.ok(salted.prefixes[0].text.includes('vault code'));
  assert.deepEqual((await getJson(`${server.baseURL}/v1/cache?cache_salt=tenant-b`)).prefixes, []);
});

test('the page renders the server\'s own figures, talks to no other origin and shows prefix text as text',
  { skip: noBrowser }, async () => {
    const browser = await launch();
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1200 } });
      const origins = new Set();
      const problems = [];
      // Every network request (a data: URL, such as the page's empty favicon, is not one).
      page.on('request', (r) => r.url().startsWith('data:') || origins.add(new URL(r.url()).origin));
      page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
      page.on('pageerror', (e) => problems.push(e.message));
      const res = await page.goto(`${server.baseURL}/`);
      assert.equal(res.status(), 200);
      const csp = res.headers()['content-security-policy'];
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /script-src 'sha256-[A-Za-z0-9+/=]+'/);
      assert.doesNotMatch(csp, /unsafe-inline|\*/);
      const seq = async (name) => Number((await page.getAttribute('body', `data-${name}-seq`)) ?? 0);
      await waitFor(async () => (await seq('stats')) >= 1 && (await seq('tree')) >= 1, 10000, 'the first render');

      // The server is idle, so its figures hold still; the page must show them after its next refresh.
      const stats = await getJson(`${server.baseURL}/v1/stats`);
      const m = await metrics(server);
      const before = await seq('stats');
      await waitFor(async () => (await seq('stats')) > before, 5000, 'a refresh');
      const text = async (id) => (await page.textContent(`#${id}`)).trim();
      const c = stats.counters;
      assert.equal(digits(await text('requests-total')), c.requests);
      assert.ok(c.requests >= 9, `6 bench requests and 3 more, got ${c.requests}`);
      assert.equal(await text('hit-rate'), `${(100 * c.hit_rate).toFixed(1)} %`);
      assert.ok(c.hit_rate > 0);
      assert.equal(digits(await text('reused-tokens')), c.reused_tokens);
      assert.equal(digits(await text('computed-tokens')), c.computed_prompt_tokens);
      for (const s of ['running', 'pinned', 'cached', 'free', 'total']) {
        assert.equal(digits(await text(`blocks-${s}`)), stats.kv.blocks[s], `blocks ${s}`);
        assert.equal(digits(await text(`tokens-${s}`)), stats.kv.tokens[s], `tokens ${s}`);
      }
      assert.ok(stats.kv.blocks.pinned > 0 && stats.kv.blocks.cached > 0);
      assert.equal(digits(await text('evictions')), c.evictions);
      assert.equal(digits(await text('preemptions')), c.preemptions);
      assert.equal(digits(await text('requests-running')), 0);
      assert.equal(digits(await text('requests-waiting')), 0);
      // The same figures as /metrics names them.
      const requestsTotal = Object.entries(m)
        .filter(([k]) => k.startsWith('hearth_requests_total{'))
        .reduce((sum, [, v]) => sum + v, 0);
      assert.equal(c.requests, requestsTotal);
      assert.equal(stats.kv.blocks.pinned, m['hearth_kv_blocks{state="pinned"}']);
      assert.equal(stats.kv.blocks.running, m['hearth_kv_blocks{state="used"}']);
      assert.equal(stats.kv.blocks.total, m.hearth_kv_blocks_total);
      assert.equal(c.prefix_hit_tokens, m.hearth_prefix_cache_hit_tokens_total);
      assert.equal(c.prefix_query_tokens, m.hearth_prefix_cache_queried_tokens_total);
      assert.equal(stats.ttft.count, c.requests);
      assert.equal(digits(await text('ttft-count')), stats.ttft.count);

      // The tree: the markup prompt is text, never elements; no script of its ran; the salted prompt is absent.
      const tree = await text('tree');
      assert.ok(tree.includes('<img src=x onerror='), tree.slice(0, 400));
      assert.ok(!tree.includes('vault'));
      assert.equal(await page.locator('#tree img, #tree b').count(), 0);
      assert.equal(await page.evaluate(() => window.__injected), undefined);
      assert.ok((await page.locator('#tree .tag.pin').count()) > 0, 'a pinned prefix is tagged');

      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard.png'), fullPage: true });
      assert.deepEqual([...origins], [server.baseURL], 'the page made no request to any other origin');
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
    }
  });

test('with --api-key the page loads without it, asks for it, and only then shows data', { skip: noBrowser },
  async () => {
    const KEY = 'sk-dashboard-test-0123456789';
    const keyed = await startServer([], { HEARTH_API_KEY: KEY });
    const browser = await launch();
    try {
      for (const p of ['/v1/stats', '/v1/cache']) assert.equal((await fetch(keyed.baseURL + p)).status, 401, p);
      const page = await browser.newPage();
      const res = await page.goto(`${keyed.baseURL}/dashboard`);
      assert.equal(res.status(), 200);
      await page.locator('#auth').waitFor({ state: 'visible' });
      assert.equal(await page.getAttribute('body', 'data-stats-seq'), null, 'no data without the key');
      await page.fill('#key', KEY);
      await page.click('#auth button');
      await waitFor(async () => Number((await page.getAttribute('body', 'data-stats-seq')) ?? 0) >= 1, 10000,
        'a render with the key');
      await page.locator('#auth').waitFor({ state: 'hidden' });
      const stats = await getJson(`${keyed.baseURL}/v1/stats`, { Authorization: `Bearer ${KEY}` });
      assert.equal(digits(await page.textContent('#blocks-total')), stats.kv.blocks.total);
    } finally {
      await browser.close();
      assert.equal((await keyed.stop()).code, 0);
    }
  });
