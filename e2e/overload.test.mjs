// A full waiting queue answers 429 with Retry-After at once; admitted requests still complete.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { idleAndNoBlocksUsed, startServer } from './helpers.mjs';

let server;
before(async () => {
  server = await startServer(['--max-queue', '1', '--max-running', '1']);
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

test('requests beyond --max-queue get 429 with Retry-After', async () => {
  const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 400, temperature: 0, hearth: { ignore_eos: true } });
  const results = await Promise.all(
    Array.from({ length: 16 }, async () => {
      const res = await fetch(`${server.baseURL}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
    }),
  );
  const ok = results.filter((r) => r.status === 200);
  const overloaded = results.filter((r) => r.status === 429);
  assert.equal(ok.length + overloaded.length, results.length, JSON.stringify(results.map((r) => r.status)));
  assert.ok(ok.length >= 1);
  assert.ok(overloaded.length >= 1);
  for (const r of ok) assert.equal(r.body.usage.completion_tokens, 400);
  for (const r of overloaded) {
    assert.equal(r.retryAfter, '1');
    assert.equal(r.body.error.type, 'rate_limit_error');
    assert.match(r.body.error.message, /overloaded/);
  }
  await idleAndNoBlocksUsed(server);
});
