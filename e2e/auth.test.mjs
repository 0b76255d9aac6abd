// API-key enforcement: every endpoint but /health needs "Authorization: Bearer KEY" (scheme in any case); an empty
// key is refused at startup, and listening beyond loopback without a key is warned about.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { BIN, MODEL, startServer, waitFor } from './helpers.mjs';

const KEY = 'sk-hearth-test-0123456789';
let server;
before(async () => {
  server = await startServer([], { HEARTH_API_KEY: KEY });
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

test('the right key works', async () => {
  const r = await server.client(KEY).completions.create({ prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });
  assert.equal(r.usage.completion_tokens, 4);
  assert.equal((await server.client(KEY).models.list()).data.length, 1);
});

test('a wrong or missing key is a 401 on every endpoint except /health and the dashboard page', async () => {
  for (const key of ['sk-wrong', KEY + 'x', KEY.slice(0, -1)]) {
    await assert.rejects(server.client(key).completions.create({ prompt: 'x', max_tokens: 1 }), (err) => {
      assert.ok(err instanceof OpenAI.AuthenticationError);
      assert.equal(err.status, 401);
      assert.equal(err.error.type, 'authentication_error');
      return true;
    });
  }
  await assert.rejects(server.client('sk-wrong').models.list(), { status: 401 });
  for (const [method, path] of [
    ['GET', '/v1/models'],
    ['GET', '/metrics'],
    ['GET', '/v1/stats'],
    ['GET', '/v1/cache'],
    ['POST', '/v1/chat/completions'],
    ['POST', '/v1/completions'],
  ]) {
    const res = await fetch(server.baseURL + path, { method, body: method === 'POST' ? '{}' : undefined });
    assert.equal(res.status, 401, path);
    assert.match((await res.json()).error.message, /API key/);
  }
  assert.equal((await fetch(`${server.baseURL}/health`)).status, 200);
  // The dashboard page holds no data; it asks for the key (e2e/dashboard.test.mjs).
  for (const page of ['/', '/dashboard']) assert.equal((await fetch(server.baseURL + page)).status, 200, page);
  const m = await fetch(`${server.baseURL}/metrics`, { headers: { Authorization: `Bearer ${KEY}` } });
  assert.equal(m.status, 200);
});

test('the Bearer scheme is case-insensitive (RFC 7235)', async () => {
  for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
    const res = await fetch(`${server.baseURL}/v1/models`, { headers: { Authorization: `${scheme} ${KEY}` } });
    assert.equal(res.status, 200, scheme);
  }
  const wrong = await fetch(`${server.baseURL}/v1/models`, { headers: { Authorization: `bearer ${KEY}x` } });
  assert.equal(wrong.status, 401);
});

// Runs `hearth serve` that is expected to refuse to start: its exit code and all of its stderr.
function serveRefusal(args, env = {}) {
  const proc = spawn(BIN, ['serve', '-m', MODEL, '--port', '0', '--kv-disk', 'off', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => proc.on('close', (code) => resolve({ code, stderr })));
}

test('an empty --api-key or HEARTH_API_KEY is refused at startup', async () => {
  const flag = await serveRefusal(['--api-key', '']);
  assert.equal(flag.code, 1);
  assert.match(flag.stderr, /--api-key is empty/);
  const env = await serveRefusal([], { HEARTH_API_KEY: '' });
  assert.equal(env.code, 1);
  assert.match(env.stderr, /HEARTH_API_KEY is set but empty/);
});

test('listening beyond loopback without a key logs a warning; with a key it does not', async () => {
  const open = await startServer(['--host', '0.0.0.0'], { HEARTH_API_KEY: undefined });
  try {
    await waitFor(() => open.stdout().includes('listening on 0.0.0.0 with no API key'), 10000, 'the warning');
    assert.equal((await fetch(`${open.baseURL}/health`)).status, 200);
  } finally {
    assert.equal((await open.stop()).code, 0);
  }
  const keyed = await startServer(['--host', '0.0.0.0', '--api-key', KEY]);
  try {
    assert.equal((await fetch(`${keyed.baseURL}/health`)).status, 200);
    assert.ok(!keyed.stdout().includes('no API key'), keyed.stdout());
  } finally {
    assert.equal((await keyed.stop()).code, 0);
  }
});
