// The answer memory through a real server: a conversation's next turn quotes the previous answer, and the
// server builds that part of the prompt from the answer's generated ids, so the prefix cache covers the previous
// prompt and the answer (usage.hearth.answer_tokens_reused, /metrics). cache_prompt false and --answer-memory 0
// turn it off.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MODEL_ID, explain, metrics, startServer } from './helpers.mjs';

const BLOCK = 16; // hearth serve's default --block-size
const SYSTEM = 'You tell short stories to children. Every story has a cat, a dog and a big red ball in the park.';

async function turn(client, messages, extra = {}) {
  const r = await client.chat.completions.create({
    model: MODEL_ID,
    messages,
    max_tokens: 24,
    temperature: 0,
    ...extra,
  });
  return { text: r.choices[0].message.content, usage: r.usage };
}

async function streamedTurn(client, messages) {
  const stream = await client.chat.completions.create({
    model: MODEL_ID,
    messages,
    max_tokens: 24,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage;
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) text += chunk.choices[0].delta.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  return { text, usage };
}

describe('answer memory', () => {
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

  test('later turns reuse the previous answer ids, streamed or not; cache_prompt false does not', async () => {
    const messages = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Tell me a story about Tom the cat.' },
    ];
    const first = await turn(client, messages);
    assert.equal(first.usage.hearth.answer_tokens_reused, 0);
    assert.ok(first.text.length > 0);

    messages.push({ role: 'assistant', content: first.text }, { role: 'user', content: 'What happened next?' });
    // /v1/cache/explain builds the prompt the same way, without running it.
    const { status, body: explained } = await explain(server, { messages });
    assert.equal(status, 200);
    assert.ok(explained.answer_tokens_reused >= first.usage.completion_tokens - 1, JSON.stringify(explained));
    const second = await turn(client, messages);
    assert.equal(second.usage.hearth.answer_tokens_reused, explained.answer_tokens_reused);
    assert.equal(second.usage.prompt_tokens_details.cached_tokens, explained.reusable_tokens);
    // Every answer id but an end-of-text token (not in the text the client got) is quoted back.
    assert.ok(second.usage.hearth.answer_tokens_reused >= first.usage.completion_tokens - 1, JSON.stringify(second.usage));
    assert.ok(second.usage.hearth.answer_tokens_reused > 0);
    // The cache holds every full block of the first prompt and the answer's ids (all but the last sampled id
    // were computed; a finished request's last, partial block is not kept).
    const computed = first.usage.prompt_tokens + second.usage.hearth.answer_tokens_reused - 1;
    assert.ok(
      second.usage.prompt_tokens_details.cached_tokens >= Math.floor(computed / BLOCK) * BLOCK,
      JSON.stringify({ first: first.usage, second: second.usage }),
    );

    messages.push({ role: 'assistant', content: second.text }, { role: 'user', content: 'And the dog?' });
    const third = await streamedTurn(client, messages);
    assert.ok(third.usage.hearth.answer_tokens_reused >= second.usage.completion_tokens - 1, JSON.stringify(third.usage));
    assert.ok(third.usage.prompt_tokens_details.cached_tokens >= second.usage.prompt_tokens);

    const off = await turn(client, messages, { cache_prompt: false });
    assert.equal(off.usage.hearth.answer_tokens_reused, 0);
    assert.equal(off.usage.prompt_tokens_details.cached_tokens, 0);

    const m = await metrics(server);
    assert.equal(m.hearth_answer_memory_prompts_total, 2);
    assert.equal(
      m.hearth_answer_memory_tokens_total,
      second.usage.hearth.answer_tokens_reused + third.usage.hearth.answer_tokens_reused,
    );
  });
});

describe('answer memory off', () => {
  test('--answer-memory 0 tokenizes every turn from its text', async () => {
    const server = await startServer(['--answer-memory', '0']);
    try {
      const client = server.client();
      const messages = [{ role: 'user', content: 'Tell me a story about Tom the cat.' }];
      const first = await turn(client, messages);
      messages.push({ role: 'assistant', content: first.text }, { role: 'user', content: 'What happened next?' });
      const second = await turn(client, messages);
      assert.equal(second.usage.hearth.answer_tokens_reused, 0);
      assert.equal((await metrics(server)).hearth_answer_memory_tokens_total, 0);
    } finally {
      const { code } = await server.stop();
      assert.equal(code, 0);
    }
  });
});
