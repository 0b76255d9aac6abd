// Retention from Hearth's API: the cache_retention request field (strictly validated), the evictable blocks by
// priority band on /metrics, and the operator's POST /v1/cache/pin and DELETE /v1/cache/pin/{key}.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { idleAndNoBlocksUsed, metrics, startServer } from './helpers.mjs';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

const long = () => `Rules ${randomUUID()}: ` + 'Tom and Sue went to the big park. They saw a dog and a cat. '.repeat(6);

async function post(path, body, method = 'POST') {
  const res = await fetch(server.baseURL + path, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

test('cache_retention gives the prompt blocks their priority band on /metrics', async () => {
  const before = await metrics(server);
  const r = await server.client().chat.completions.create({
    messages: [{ role: 'system', content: long() }, { role: 'user', content: 'Hi' }],
    max_tokens: 2,
    cache_retention: { priority: 90, ttl: '1h' },
  });
  assert.ok(r.usage.prompt_tokens > 48);
  const m = await idleAndNoBlocksUsed(server);
  const high = m['hearth_kv_blocks_evictable{priority="75-100"}'];
  assert.ok(high >= before['hearth_kv_blocks_evictable{priority="75-100"}'] + 3, `75-100 band: ${high}`);
  // Only the first 16 tokens, at a low priority: one block in the 0-24 band.
  await server.client().completions.create({ prompt: long(), max_tokens: 1, cache_retention: { priority: 10, tokens: 16 } });
  const low = (await idleAndNoBlocksUsed(server))['hearth_kv_blocks_evictable{priority="0-24"}'];
  assert.equal(low, before['hearth_kv_blocks_evictable{priority="0-24"}'] + 1);
});

test('bad cache_retention values are 400s naming the field', async () => {
  const cases = [
    [{ priority: 101 }, 'cache_retention.priority'],
    [{ priority: -1 }, 'cache_retention.priority'],
    [{ priority: 'high' }, 'cache_retention.priority'],
    [{ ttl: '31d' }, 'cache_retention.ttl'],
    [{ ttl: '5 minutes' }, 'cache_retention.ttl'],
    [{ ttl: 300 }, 'cache_retention.ttl'],
    [{ tokens: 0 }, 'cache_retention.tokens'],
    [{ forever: true }, 'cache_retention.forever'],
    ['high', 'cache_retention'],
  ];
  for (const [value, param] of cases) {
    await assert.rejects(
      server.client().completions.create({ prompt: 'x', max_tokens: 1, cache_retention: value }),
      (err) => {
        assert.ok(err instanceof OpenAI.BadRequestError, String(err));
        assert.equal(err.param, param, JSON.stringify(value));
        return true;
      },
    );
  }
});

test('POST /v1/cache/pin pins a cached prompt; DELETE /v1/cache/pin/{key} removes it', async () => {
  const prompt = long();
  const none = await post('/v1/cache/pin', { prompt });
  assert.equal(none.status, 400);
  assert.equal(none.body.error.code, 'pin_failed');
  await server.client().completions.create({ prompt, max_tokens: 1 });
  const pinned = await post('/v1/cache/pin', { prompt });
  assert.equal(pinned.status, 200, JSON.stringify(pinned.body));
  assert.match(pinned.body.key, /^[0-9a-f]{64}$/);
  assert.ok(pinned.body.pinned_tokens >= 48);
  assert.equal((await metrics(server))['hearth_kv_blocks{state="pinned"}'], pinned.body.pinned_tokens / 16);
  const again = await post('/v1/cache/pin', { prompt });
  assert.equal(again.body.key, pinned.body.key); // the same prefix: the same pin
  const deleted = await post(`/v1/cache/pin/${pinned.body.key}`, undefined, 'DELETE');
  assert.equal(deleted.status, 200);
  assert.equal(deleted.body.deleted, true);
  assert.equal((await metrics(server))['hearth_kv_blocks{state="pinned"}'], 0);
  const gone = await post(`/v1/cache/pin/${pinned.body.key}`, undefined, 'DELETE');
  assert.equal(gone.status, 404);
  assert.equal(gone.body.error.code, 'pin_not_found');
});
