// The disk tier as private as the API: after two tenants' runs every directory is 0700 and every file 0600 (under
// the usual umask 022); "cache_prompt": false on /v1/messages leaves nothing in /v1/cache or on disk; a FIFO, a
// socket and a device node named like entries neither block startup nor stop the server serving, and are counted.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { metrics, startServer, waitFor } from './helpers.mjs';

const root = mkdtempSync(path.join(os.tmpdir(), `hearth-privacy-${process.pid}-`));
after(() => rmSync(root, { recursive: true, force: true }));

const STORY = 'Once upon a time, there was a little house. In the little house lived a girl named Lily and a boy named Tom. '.repeat(3);

// Every path under `dir` (itself included) with its permission bits.
function modes(dir) {
  const out = [[dir, statSync(dir).mode & 0o777]];
  for (const name of readdirSync(dir, { recursive: true })) {
    const p = path.join(dir, name);
    out.push([p, statSync(p).mode & 0o777]);
  }
  return out;
}

async function settled(server) {
  return waitFor(
    async () => {
      const m = await metrics(server);
      return m['hearth_kv_tier_queued_writes{tier="disk"}'] === 0 ? m : null;
    },
    10000,
    'the disk tier to finish writing',
  );
}

const messages = (server, body) =>
  fetch(`${server.baseURL}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'stories260K', max_tokens: 4, temperature: 0, ...body }),
  }).then(async (r) => ({ status: r.status, body: await r.json() }));

const cacheListing = async (server, salt = '') =>
  (await fetch(`${server.baseURL}/v1/cache${salt ? `?cache_salt=${salt}` : ''}`)).json();

test('after two tenants run, the tier directories are 0700 and its files 0600, with no warning', async () => {
  const dir = path.join(root, 'modes', 'kv'); // the parent is created by the server, 0700 as well
  // The usual umask (the server inherits it): mkdir and open with default modes would give 0755 and 0644.
  process.umask(0o022);
  const server = await startServer(['--kv-disk', dir]);
  try {
    for (const salt of ['alice', 'bob']) {
      const out = await server.client().completions.create({ prompt: STORY + salt, max_tokens: 4, temperature: 0, cache_salt: salt });
      assert.equal(out.usage.completion_tokens, 4);
    }
    const m = await settled(server);
    assert.ok(m['hearth_kv_tier_writes_total{tier="disk"}'] > 0);
    assert.equal(m['hearth_kv_tier_loose_modes{tier="disk"}'], 0);
  } finally {
    await server.stop();
  }
  const all = modes(dir);
  assert.ok(all.some(([p]) => p.endsWith('.kvb')), 'entries were written');
  for (const [p, mode] of all) {
    const want = statSync(p).isDirectory() ? 0o700 : 0o600;
    assert.equal(mode.toString(8), want.toString(8), p);
  }
  assert.equal((statSync(path.join(root, 'modes')).mode & 0o777).toString(8), '700');
  assert.doesNotMatch(server.stdout(), /other local users/);
});

test('a tier directory left 0755 is served, counted and warned of at start', async () => {
  const dir = path.join(root, 'loose');
  mkdirSync(dir, { mode: 0o755 });
  const server = await startServer(['--kv-disk', dir]);
  try {
    assert.match(server.stdout(), /other local users may read every tenant's cached prompts: .*loose \(0755\)/);
    assert.equal((await metrics(server))['hearth_kv_tier_loose_modes{tier="disk"}'], 1);
  } finally {
    await server.stop();
  }
});

test('/v1/messages with "cache_prompt": false leaves nothing in /v1/cache or on disk', async () => {
  const dir = path.join(root, 'messages');
  const server = await startServer(['--kv-disk', dir]);
  try {
    const off = await messages(server, { cache_prompt: false, messages: [{ role: 'user', content: STORY + 'private' }] });
    assert.equal(off.status, 200, JSON.stringify(off.body));
    let m = await settled(server);
    assert.equal(m['hearth_kv_tier_writes_total{tier="disk"}'], 0);
    let listing = await cacheListing(server);
    assert.equal(listing.blocks, 0, JSON.stringify(listing));
    assert.deepEqual(listing.disk_prefixes, []);
    assert.equal(readdirSync(path.join(dir, 'v1')).filter((d) => d.length === 2).length, 0);
    // The same request with the cache on is cached and written: the test above would have seen it.
    const on = await messages(server, { messages: [{ role: 'user', content: STORY + 'private' }] });
    assert.equal(on.status, 200);
    m = await settled(server);
    assert.ok(m['hearth_kv_tier_writes_total{tier="disk"}'] > 0);
    listing = await cacheListing(server);
    assert.ok(listing.blocks > 0);
  } finally {
    await server.stop();
  }
});

test('a FIFO, a socket and a device node named like entries: the server starts, counts them and serves', async () => {
  const dir = path.join(root, 'irregular');
  const sub = path.join(dir, 'v1', 'ab');
  mkdirSync(sub, { recursive: true, mode: 0o700 });
  execFileSync('mkfifo', [path.join(sub, 'a.kvb')]);
  const sock = net.createServer();
  await new Promise((resolve) => sock.listen(path.join(sub, 'b.kvb'), resolve)); // short: sun_path holds 108 bytes
  const root_user = process.getuid() === 0; // mknod needs root; without it the FIFO and the socket still count
  if (root_user) execFileSync('mknod', [path.join(sub, 'c.kvb'), 'c', '1', '3']); // /dev/null's numbers
  const irregular = root_user ? 3 : 2;
  try {
    const server = await startServer(['--kv-disk', dir]);
    try {
      assert.match(server.stdout(), new RegExp(`skipped ${irregular} entries that are not regular files`));
      assert.equal((await metrics(server))['hearth_kv_tier_irregular_skipped_total{tier="disk"}'], irregular);
      const out = await server.client().completions.create({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
      assert.equal(out.usage.completion_tokens, 8);
    } finally {
      await server.stop();
    }
  } finally {
    sock.close();
  }
});

test("/v1/stats names a tenant's own counters: another tenant's requests never change them", async () => {
  const server = await startServer([]);
  try {
    const stats = async (salt) => (await fetch(`${server.baseURL}/v1/stats?cache_salt=${salt}`)).json();
    const ask = (salt, prompt) =>
      server.client().completions.create({ prompt, max_tokens: 3, temperature: 0, cache_salt: salt });
    const first = await ask('alice', STORY + ' Lily');
    const again = await ask('alice', STORY + ' Tom');
    const before = await stats('alice');
    assert.equal(before.tenant.requests, 2);
    assert.equal(before.tenant.prompt_tokens, first.usage.prompt_tokens + again.usage.prompt_tokens);
    assert.equal(before.tenant.cached_tokens, again.usage.prompt_tokens_details.cached_tokens);
    assert.equal(before.tenant.completion_tokens, 6);
    assert.ok(before.tenant.cached_tokens > 0 && before.tenant.hit_rate > 0, JSON.stringify(before.tenant));
    // Bob's traffic, the same prompts included, changes only bob's counters.
    for (let k = 0; k < 3; k++) await ask('bob', STORY + ' Lily');
    const after = await stats('alice');
    assert.deepEqual(after.tenant, before.tenant);
    const bob = await stats('bob');
    assert.equal(bob.tenant.requests, 3);
    assert.equal((await stats('carol')).tenant.requests, 0);
  } finally {
    await server.stop();
  }
});
