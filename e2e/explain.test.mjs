// Cache-miss explanations through a real server: the reason and text in every response's usage.hearth,
// POST /v1/cache/explain (no model run), and the volatile-prefix warning counted on /metrics.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MODEL_ID, explain as explainAt, metrics, startServer, tokenize } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0);
});

const STORY =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog. ' +
  'One day, she saw a big, red ball under a tree. She ran to the ball and picked it up. ';

const explain = (body) => explainAt(server, body);

async function complete(prompt, extra = {}) {
  const r = await client.completions.create({ model: MODEL_ID, prompt, max_tokens: 1, temperature: 0, ...extra });
  return r.usage.hearth;
}

// ~450 tokens of story, and the same with a timestamp inserted at token 5.
async function stampedPair(stamp) {
  const base = (await tokenize(server, STORY.repeat(6))).slice(0, 450);
  const ts = await tokenize(server, stamp, false);
  return { base, stamped: [...base.slice(0, 5), ...ts, ...base.slice(5)] };
}

describe('cache explanations', () => {
  test('a timestamp at token 5 is a divergence at token 5, before and after it runs', async () => {
    const { base, stamped } = await stampedPair(' 08:00:13 ');
    const cold = await complete(base);
    assert.equal(cold.reuse_stop_reason, 'no_cached_prefix');

    const before = await explain({ model: MODEL_ID, prompt: stamped });
    assert.equal(before.status, 200);
    assert.equal(before.body.object, 'cache.explanation');
    assert.equal(before.body.prompt_tokens, stamped.length);
    assert.equal(before.body.cached_tokens, 5);
    assert.equal(before.body.tiers.ram, 5);
    assert.equal(before.body.reuse_stopped_at, 5);
    assert.equal(before.body.reuse_stop_reason, 'diverged');
    assert.match(before.body.reuse_stop.prompt_text, /^ *08:00:1/);
    assert.doesNotMatch(before.body.reuse_stop.cached_text, /08:00/);

    const u = await complete(stamped);
    assert.equal(u.reuse_stop_reason, 'diverged');
    assert.equal(u.reuse_stopped_at, 5);
    assert.equal(u.reused_tokens, 5);
    assert.equal(u.reuse_stop.block, 0);
    assert.equal(u.reuse_stop.prompt_text, before.body.reuse_stop.prompt_text);
    assert.equal(u.reuse_stop.cached_text, before.body.reuse_stop.cached_text);

    const again = await complete(stamped);
    // Everything cached is reused: the whole blocks the first run computed (only full blocks are cached).
    assert.equal(again.reuse_stop_reason, 'end_of_prompt');
    assert.equal(again.reuse_stopped_at, Math.floor(stamped.length / 16) * 16);
  });

  test('explain takes chat messages, cache_salt and cache_prompt; errors are OpenAI errors', async () => {
    const messages = [{ role: 'user', content: 'Tell me a story about a red ball and a dog in the park.' }];
    await client.chat.completions.create({ model: MODEL_ID, messages, max_tokens: 1, temperature: 0 });
    const chat = await explain({ messages });
    assert.equal(chat.status, 200);
    assert.ok(chat.body.prompt_tokens > 16);
    // All of it is cached: the full blocks and the partly filled last one.
    assert.equal(chat.body.cached_tokens, chat.body.prompt_tokens);
    const salted = await explain({ messages, cache_salt: 'someone-else' });
    assert.equal(salted.body.reuse_stop_reason, 'different_salt');
    assert.equal(salted.body.cached_tokens, 0);
    assert.equal(salted.body.reuse_stop.other_salt_tokens, chat.body.cached_tokens);
    const off = await explain({ messages, cache_prompt: false });
    assert.equal(off.body.reuse_stop_reason, 'cache_disabled');
    assert.equal((await complete('Once upon a time', { cache_prompt: false })).reuse_stop_reason, 'cache_disabled');

    assert.equal((await explain({ model: 'any-name', prompt: 'x' })).status, 200, 'any model name works (lenient names)');
    const missing = await explain({});
    assert.equal(missing.status, 400);
    assert.equal(missing.body.error.param, 'prompt');
  });

  test('a stream of timestamped prompts is counted as a volatile prefix; different prompts are not', async () => {
    const m0 = await metrics(server);
    const cache_salt = 'volatile-stream';
    for (let i = 0; i < 6; i++) {
      const { stamped } = await stampedPair(` 08:0${i}:1${i} `);
      await complete(stamped, { cache_salt });
    }
    const m1 = await metrics(server);
    assert.ok(m1['hearth_volatile_prefix_requests_total'] - (m0['hearth_volatile_prefix_requests_total'] ?? 0) >= 3);
    assert.equal(m1['hearth_volatile_prefix_warnings_total'], 1, 'rate-limited to one warning');
    assert.ok(m1['hearth_volatile_prefix_tokens_lost'] >= 400, `${m1['hearth_volatile_prefix_tokens_lost']}`);
    assert.ok(m1['hearth_prefix_reuse_stops_total{reason="diverged"}'] >= 5);

    const starts = ['The cat sat', 'A boy named Tim', 'In a small town', 'Sue had a kite', 'The sun was hot', 'Max'];
    for (const [i, s] of starts.entries()) {
      await complete(`${s} and ${'a'.repeat(i + 1)} wanted to ${i % 2 ? 'run' : 'jump'} far away.`, {
        cache_salt: 'different-prompts',
      });
    }
    const m2 = await metrics(server);
    assert.equal(m2['hearth_volatile_prefix_requests_total'], m1['hearth_volatile_prefix_requests_total']);
  });
});
