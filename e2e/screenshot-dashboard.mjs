// Makes docs/dashboard.png: a `hearth serve` on stories260K, a pinned prompt, prompts with a timestamp at the top
// (a volatile-prefix warning), then SECONDS of household traffic (two `hearth bench household` runs, open loop,
// 2 turns per user); 10 s before the traffic ends, the page in headless Debian Chromium. Not a test (node --test
// does not pick it up): run it by hand,
//   node e2e/screenshot-dashboard.mjs [OUT.png] [SECONDS]
import { spawn } from 'node:child_process';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { BIN, startServer, waitFor } from './helpers.mjs';

const out = process.argv[2] ?? path.join(path.dirname(new URL(import.meta.url).pathname), '../docs/dashboard.png');
const seconds = Number(process.argv[3] ?? 120);

function bench(url, args) {
  const proc = spawn(BIN, ['bench', 'household', '--url', url, ...args], { stdio: 'ignore' });
  return new Promise((resolve) => proc.on('close', resolve));
}

async function complete(server, body) {
  const res = await fetch(`${server.baseURL}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ max_tokens: 8, temperature: 0, ...body }),
  });
  if (res.status !== 200) throw new Error(`completion: HTTP ${res.status}`);
}

const server = await startServer();
try {
  await complete(server, {
    prompt: 'House rules: shoes off at the door, dinner at six, and the dog is not allowed on the sofa. ' +
      'Homework comes before games, and whoever cooks does not wash up.',
    pin_prefix: true,
  });
  const shared = ' Once upon a time there was a little girl named Lily. She loved to play outside in the park ' +
    'with her friends. One day she saw a big red ball under a tree.';
  for (const [i, t] of ['10:01:07', '10:02:44', '10:03:15', '10:04:52', '10:05:30'].entries()) {
    await complete(server, { prompt: `Time ${t}.${shared} Question ${i}: what happened next?` });
  }
  const common = ['--turns', '2', '--prefix-tokens', '60', '--question-tokens', '6', '--max-tokens', '12',
    '--duration', String(seconds)];
  const traffic = Promise.all([
    bench(server.baseURL, ['--users', String(2 * seconds), '--rate', '2', '--seed', '1', ...common]),
    bench(server.baseURL, ['--users', String(seconds), '--rate', '1', '--seed', '2', ...common]),
  ]);
  await new Promise((r) => setTimeout(r, 1000 * Math.max(0, seconds - 10)));
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.goto(`${server.baseURL}/`);
  await waitFor(async () => Number((await page.getAttribute('body', 'data-stats-seq')) ?? 0) >= 2 &&
    (await page.getAttribute('body', 'data-tree-seq')) !== null, 10000, 'the page');
  await page.screenshot({ path: out, fullPage: true });
  await browser.close();
  console.log(`wrote ${out}`);
  await traffic;
} finally {
  await server.stop();
}
