// n > 1 through the official openai client: the n choices are separate engine requests submitted in
// order, so the first computes the prompt and the others wait for its blocks and reuse them (only the last,
// partly filled block is computed again); usage counts the prompt once and usage.hearth shows the prefill.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { idleAndNoBlocksUsed, startServer, tokenize } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => assert.equal((await server.stop()).code, 0));

const salt = () => `n-${Math.random().toString(36).slice(2)}`;
const prompt =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. ' +
  'One day, she saw a big red ball';
const BLOCK = 16;

describe('n choices', () => {
  test('chat n: 4 at temperature 1: 4 distinct indexed choices, one prompt prefill in usage.hearth', async () => {
    const r = await client.chat.completions.create({
      messages: [{ role: 'user', content: prompt }],
      n: 4,
      temperature: 1,
      seed: 11,
      max_tokens: 24,
      cache_salt: salt(),
    });
    assert.deepEqual(
      r.choices.map((c) => c.index),
      [0, 1, 2, 3],
    );
    assert.equal(new Set(r.choices.map((c) => c.message.content)).size, 4, 'distinct choices');
    const u = r.usage;
    const P = u.prompt_tokens;
    assert.ok(P > 2 * BLOCK, `the prompt spans blocks (${P} tokens)`);
    assert.equal(u.prompt_tokens_details.cached_tokens, 0, 'a fresh salt: nothing cached before');
    const per = u.hearth.choices;
    assert.equal(per.length, 4);
    assert.equal(per[0].computed_prompt_tokens, P, 'choice 0 computes the prompt');
    const shared = Math.floor((P - 1) / BLOCK) * BLOCK;
    for (const c of per.slice(1)) {
      assert.ok(c.reused_tokens >= shared, `choice ${c.index} reuses ${c.reused_tokens} >= ${shared}`);
      assert.ok(c.computed_prompt_tokens <= BLOCK);
    }
    assert.equal(u.hearth.computed_prompt_tokens, per.reduce((s, c) => s + c.computed_prompt_tokens, 0));
    assert.ok(u.hearth.computed_prompt_tokens <= P + 3 * BLOCK, 'the prompt is computed once, not 4 times');
    assert.equal(u.completion_tokens, per.reduce((s, c) => s + c.completion_tokens, 0));
    assert.equal(u.total_tokens, P + u.completion_tokens);
    await idleAndNoBlocksUsed(server);
  });

  test('a seed reproduces all n choices', async () => {
    const body = { prompt, n: 3, temperature: 1, seed: 5, max_tokens: 12 };
    const a = await client.completions.create(body);
    const b = await client.completions.create(body);
    assert.deepEqual(
      a.choices.map((c) => c.text),
      b.choices.map((c) => c.text),
    );
    assert.equal(a.usage.prompt_tokens, (await tokenize(server, prompt)).length);
  });

  test('streamed n: 3: each index gets its text and a finish_reason, usage once at the end', async () => {
    const stream = await client.completions.create({
      prompt,
      n: 3,
      temperature: 1,
      seed: 2,
      max_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    });
    const text = ['', '', ''];
    const finish = [null, null, null];
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) {
        assert.equal(usage, null, 'one usage chunk');
        usage = chunk.usage;
      }
      for (const c of chunk.choices) {
        text[c.index] += c.text;
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
    }
    assert.deepEqual(finish, ['length', 'length', 'length']);
    assert.equal(usage.completion_tokens, 30);
    assert.equal(usage.hearth.choices.length, 3);
    const whole = await client.completions.create({ prompt, n: 3, temperature: 1, seed: 2, max_tokens: 10 });
    assert.deepEqual(
      whole.choices.map((c) => c.text),
      text,
    );
  });
});
