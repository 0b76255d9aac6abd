// The disk tier end to end: a restart (SIGTERM, and SIGKILL) comes back warm with output bit-identical to a cold
// run; damaged, deleted or foreign files, a full budget, a full filesystem and another KV dtype never change an
// answer and never fail a request.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { metrics, startServer, waitFor } from './helpers.mjs';

const root = mkdtempSync(path.join(os.tmpdir(), `hearth-tiers-${process.pid}-`));
after(() => rmSync(root, { recursive: true, force: true }));

// About 390 tokens of house rules: long enough for many 16-token blocks, short of stories260K's 512-token context.
const HOUSE_RULES =
  'Once upon a time, there was a little house. ' +
  'In the little house lived a mom, a dad, a girl named Lily and a boy named Tom. '.repeat(6) +
  'Every morning Lily fed the cat and Tom fed the dog. They played in the park and ate lunch under a big tree. '.repeat(4);

async function complete(server, prompt, max_tokens = 24) {
  return server.client().completions.create({ prompt, max_tokens, temperature: 0 });
}

function entries(dir) {
  const out = [];
  const v1 = path.join(dir, 'v1');
  for (const sub of readdirSync(v1)) {
    if (sub.length !== 2) continue;
    for (const f of readdirSync(path.join(v1, sub))) if (f.endsWith('.kvb')) out.push(path.join(v1, sub, f));
  }
  return out;
}

// Waits until the tier has written everything queued (write-through is asynchronous).
async function tierSettled(server) {
  return waitFor(
    async () => {
      const m = await metrics(server);
      return m['hearth_kv_tier_queued_writes{tier="disk"}'] === 0 && m['hearth_kv_tier_writes_total{tier="disk"}'] > 0
        ? m
        : null;
    },
    10000,
    'the disk tier to finish writing',
  );
}

let coldCache;
// The same prompt on a server without any tier: the reference every warm answer must equal.
async function cold(prompt) {
  coldCache ??= new Map();
  if (!coldCache.has(prompt)) {
    const server = await startServer(['--kv-disk', 'off']);
    try {
      coldCache.set(prompt, await complete(server, prompt));
    } finally {
      await server.stop();
    }
  }
  return coldCache.get(prompt);
}

for (const signal of ['SIGTERM', 'SIGKILL']) {
  test(`after a ${signal} restart the house rules load from the disk tier, bit-identical to a cold run`, async () => {
    const dir = path.join(root, `restart-${signal}`);
    const first = await startServer(['--kv-disk', dir]);
    const a = await complete(first, HOUSE_RULES + ' What did Lily feed?');
    assert.equal(a.usage.prompt_tokens_details.cached_tokens, 0);
    await tierSettled(first);
    first.proc.kill(signal);
    await first.exited;

    const second = await startServer(['--kv-disk', dir]);
    try {
      assert.match(second.stdout(), /KV disk tier: .*\(\d+ entries/);
      const prompt = HOUSE_RULES + ' Where did they eat lunch?';
      const b = await complete(second, prompt);
      const h = b.usage.hearth;
      assert.ok(b.usage.prompt_tokens_details.cached_tokens >= 256, JSON.stringify(b.usage));
      assert.equal(h.tiers.disk, b.usage.prompt_tokens_details.cached_tokens);
      assert.equal(h.tiers.ram, 0);
      assert.equal(h.tier_load.decision, 'load');
      assert.equal(b.choices[0].text, (await cold(prompt)).choices[0].text);
      const m = await metrics(second);
      assert.ok(m['hearth_kv_tier_hits_total{tier="disk"}'] >= 16);
      assert.equal(m['hearth_kv_tier_decisions_total{tier="disk",decision="load"}'], 1);
    } finally {
      await second.stop();
    }
  });
}

test('damage while stopped and while running is counted, removed, and never changes an answer', async () => {
  const dir = path.join(root, 'damage');
  const prompt = HOUSE_RULES + ' Who fed the dog?';
  const first = await startServer(['--kv-disk', dir]);
  await complete(first, prompt);
  await tierSettled(first);
  await first.stop();
  const files = entries(dir).sort();
  assert.ok(files.length >= 16);
  truncateSync(files[0], 100); // truncated
  const bytes = readFileSync(files[1]);
  bytes[bytes.length - 50] ^= 0xff; // a flipped payload byte
  writeFileSync(files[1], bytes);
  rmSync(files[2]); // deleted
  writeFileSync(path.join(path.dirname(files[3]), 'f'.repeat(64) + '.kvb'), 'foreign bytes'); // a foreign file

  // A pool of 32 blocks: the next prompt evicts this one's blocks, so asking it again reads the disk tier. The
  // reads are what is tested, so they happen whatever the costs measured (stories260K recomputes a block about as
  // fast as it reads one, and the measured decision went to recompute on a CI machine).
  const server = await startServer(['--kv-disk', dir, '--kv-memory', '320KiB', '--kv-disk-load', 'always']);
  try {
    assert.match(server.stdout(), /corrupt entries removed/);
    assert.equal((await complete(server, prompt)).choices[0].text, (await cold(prompt)).choices[0].text);
    await tierSettled(server);
    const before = (await metrics(server))['hearth_kv_tier_corrupt_removed_total{tier="disk"}'];
    const other = ' Who is Tom?' + HOUSE_RULES; // another first block: evicts the first prompt from the pool
    assert.equal((await complete(server, other)).choices[0].text, (await cold(other)).choices[0].text);
    await tierSettled(server);
    for (const f of entries(dir)) appendFileSync(f, 'x'); // while it runs: every entry damaged
    const again = await complete(server, prompt);
    assert.equal(again.choices[0].text, (await cold(prompt)).choices[0].text);
    assert.equal(again.usage.hearth.tiers.disk, 0);
    const m = await metrics(server);
    assert.ok(m['hearth_kv_tier_corrupt_removed_total{tier="disk"}'] > before, 'the damage was found at load');
  } finally {
    await server.stop();
  }
});

test('a tiny budget stays under its cap with evictions, and every answer is still right', async () => {
  const dir = path.join(root, 'budget');
  const server = await startServer(['--kv-disk', dir, '--kv-disk-size', '64KiB']);
  try {
    for (const q of [' What did Lily feed?', ' Where did they eat?', ' Who fed the dog?']) {
      const prompt = q + HOUSE_RULES; // a different first block each time: three chains
      assert.equal((await complete(server, prompt)).choices[0].text, (await cold(prompt)).choices[0].text);
    }
    const m = await tierSettled(server);
    assert.ok(m['hearth_kv_tier_bytes{tier="disk",state="used"}'] <= 65536);
    assert.ok(m['hearth_kv_tier_evictions_total{tier="disk"}'] > 0);
  } finally {
    await server.stop();
  }
});

test('a full filesystem degrades to recompute: write errors are counted, requests never fail', async (t) => {
  const mnt = path.join(root, 'full');
  mkdirSync(mnt);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', mnt], { stdio: 'ignore' });
  } catch {
    t.skip('cannot mount a small tmpfs here (needs root)');
    return;
  }
  try {
    const server = await startServer(['--kv-disk', mnt, '--kv-disk-size', '64MiB']); // the budget exceeds the disk
    try {
      for (const q of [' What did Lily feed?', ' Where did they eat?', ' Who fed the dog?', ' Who is Tom?']) {
        const prompt = q + HOUSE_RULES;
        assert.equal((await complete(server, prompt)).choices[0].text, (await cold(prompt)).choices[0].text);
      }
      const m = await tierSettled(server);
      assert.ok(m['hearth_kv_tier_write_errors_total{tier="disk"}'] > 0, 'the filesystem filled up');
    } finally {
      await server.stop();
    }
  } finally {
    execFileSync('umount', [mnt]);
  }
});

test('two KV dtypes in one directory never load each other\'s blocks', async () => {
  const dir = path.join(root, 'dtypes');
  const prompt = HOUSE_RULES + ' What did Lily feed?';
  const f16 = await startServer(['--kv-disk', dir, '--kv-dtype', 'f16']);
  await complete(f16, prompt);
  await tierSettled(f16);
  await f16.stop();
  const q8 = await startServer(['--kv-disk', dir, '--kv-dtype', 'q8_0']);
  try {
    const r = await complete(q8, prompt + ' And Tom?');
    assert.equal(r.usage.prompt_tokens_details.cached_tokens, 0);
    assert.equal(r.usage.hearth.tiers.disk, 0);
  } finally {
    await q8.stop();
  }
});

test('SIGKILL in the middle of writes leaves nothing that loads garbage', async () => {
  const dir = path.join(root, 'kill-during-writes');
  const prompts = [' What did Lily feed?', ' Where did they eat?', ' Who fed the dog?'].map((q) => HOUSE_RULES + q);
  const first = await startServer(['--kv-disk', dir]);
  const client = first.client();
  const inflight = prompts.map((p) => client.completions.create({ prompt: p, max_tokens: 100, temperature: 0 }).catch(() => null));
  await waitFor(async () => (await metrics(first))['hearth_kv_tier_writes_total{tier="disk"}'] > 0, 10000, 'a write');
  first.proc.kill('SIGKILL');
  await first.exited;
  await Promise.all(inflight);
  const killedPid = first.proc.pid;
  const second = await startServer(['--kv-disk', dir]);
  const tmp = path.join(dir, 'v1', 'tmp');
  try {
    for (const p of prompts) assert.equal((await complete(second, p)).choices[0].text, (await cold(p)).choices[0].text);
    // The killed server's half-written files were removed at open (their names carry its pid); the second
    // server's own may be in flight right now (written, then synced, then renamed), so they are checked after
    // its clean stop.
    assert.deepEqual(readdirSync(tmp).filter((f) => f.includes(`.${killedPid}.`)), []);
  } finally {
    assert.equal((await second.stop()).code, 0);
  }
  assert.deepEqual(readdirSync(tmp), []);
});

test('--warm FILE and POST /v1/cache/warm prefill and pin the house rules; after a restart the warm-up loads from disk', async () => {
  const dir = path.join(root, 'warm');
  const file = path.join(root, 'warm.txt');
  writeFileSync(file, `${HOUSE_RULES}\n\n${JSON.stringify({ messages: [{ role: 'system', content: HOUSE_RULES }] })}\n`);
  const first = await startServer(['--kv-disk', dir, '--warm', file]);
  try {
    await waitFor(() => /--warm line 2: /.test(first.stdout()), 10000, 'the warm-up');
    assert.match(first.stdout(), /--warm line 1: \d+ tokens, 0 were cached \(0 from disk\), \d+ pinned/);
    const m = await metrics(first);
    assert.ok(m['hearth_kv_blocks{state="pinned"}'] >= 20);
    // The first request of the morning: everything but the question is cached.
    const r = await complete(first, HOUSE_RULES + ' Who fed the cat?');
    assert.ok(r.usage.prompt_tokens_details.cached_tokens >= 368, JSON.stringify(r.usage));
    // The route: a new prefix, pinned; bad bodies are refused.
    const res = await fetch(`${first.baseURL}/v1/cache/warm`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Tom and Sue went to the big park. They saw a dog and a cat. '.repeat(4) }),
    });
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.object, 'cache.warm');
    assert.ok(body.cached_tokens < 16); // at most the BOS token is shared with what is cached
    assert.ok(body.pinned_tokens >= 48 && body.pinned_tokens <= body.prompt_tokens, JSON.stringify(body));
    const bad = await fetch(`${first.baseURL}/v1/cache/warm`, { method: 'POST', body: '{"prompt": "x", "pin": "yes"}' });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.param, 'pin');
    await tierSettled(first);
  } finally {
    await first.stop();
  }
  const second = await startServer(['--kv-disk', dir, '--warm', file]);
  try {
    await waitFor(() => /--warm line 2: /.test(second.stdout()), 10000, 'the warm-up after the restart');
    const line = second.stdout().match(/--warm line 1: (\d+) tokens, (\d+) were cached \((\d+) from disk\)/);
    assert.ok(Number(line[3]) >= 368 && Number(line[3]) === Number(line[2]), line[0]);
  } finally {
    await second.stop();
  }
});

test('GET /v1/cache lists the disk tier\'s prefixes after a restart, each salt only its own', async () => {
  const dir = path.join(root, 'listing');
  const first = await startServer(['--kv-disk', dir]);
  await complete(first, HOUSE_RULES + ' Who fed the cat?');
  await first.client().completions.create({ prompt: 'Tom has a secret red ball. '.repeat(8), max_tokens: 4, cache_salt: 'tom' });
  await tierSettled(first);
  await first.stop();
  const second = await startServer(['--kv-disk', dir]);
  try {
    const get = async (q) => (await fetch(`${second.baseURL}/v1/cache${q}`)).json();
    const open = await get('');
    assert.equal(open.disk_prefixes.length, 1, JSON.stringify(open.disk_prefixes));
    const d = open.disk_prefixes[0];
    assert.deepEqual(d.tiers, ['disk']); // after the restart the pool is empty
    assert.ok(d.tokens >= 368 && d.text.includes('Once upon a time'), JSON.stringify(d));
    assert.ok(!JSON.stringify(open).includes('secret'));
    const tom = await get('?cache_salt=tom');
    assert.equal(tom.disk_prefixes.length, 1);
    assert.ok(tom.disk_prefixes[0].text.includes('secret red ball'));
    const stats = await (await fetch(`${second.baseURL}/v1/stats`)).json();
    assert.ok(stats.tiers.disk.blocks >= 26);
  } finally {
    await second.stop();
  }
});
