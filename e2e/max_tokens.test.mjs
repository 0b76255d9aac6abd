// max_tokens beyond the context's room: clamped by default (Anthropic clients always send a large one), the answer
// ends with length / max_tokens when it reaches the clamp, and usage.hearth.max_tokens_clamped_to says so; with
// --strict-max-tokens it is a 400 as before. A prompt alone beyond the context stays a 400 either way.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { startServer } from './helpers.mjs';

let server;
let strict;
before(async () => {
  [server, strict] = await Promise.all([startServer(), startServer(['--strict-max-tokens'])]);
});
after(async () => {
  for (const s of [server, strict]) assert.equal((await s.stop()).code, 0);
});

// 505 prompt tokens: the 512-token context leaves 7.
const longPrompt = Array.from({ length: 505 }, (_, i) => 300 + (i % 100));

test('completions: a max_tokens beyond the room is clamped, the answer ends with length', async () => {
  const client = server.client();
  const r = await client.completions.create({ prompt: longPrompt, max_tokens: 100000, temperature: 0, ignore_eos: true });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.prompt_tokens, 505);
  assert.equal(r.usage.completion_tokens, 7);
  assert.equal(r.usage.hearth.max_tokens_clamped_to, 7);
  // The same answer as asking for exactly the room, which is not marked.
  const exact = await client.completions.create({ prompt: longPrompt, max_tokens: 7, temperature: 0, ignore_eos: true });
  assert.equal(exact.choices[0].text, r.choices[0].text);
  assert.equal(exact.usage.hearth.max_tokens_clamped_to, undefined);
  // Streamed, the final usage says it too.
  const stream = await client.completions.create({
    prompt: longPrompt,
    max_tokens: 100000,
    temperature: 0,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  });
  let usage;
  let finish;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(finish, 'length');
  assert.equal(usage.hearth.max_tokens_clamped_to, 7);
});

test('chat: a short prompt with a huge max_tokens answers normally', async () => {
  const r = await server.client().chat.completions.create({
    messages: [{ role: 'user', content: 'Once upon a time' }],
    max_tokens: 1000000,
    temperature: 0,
  });
  assert.ok(r.usage.completion_tokens > 0);
  assert.equal(r.usage.hearth.max_tokens_clamped_to, 512 - r.usage.prompt_tokens);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
});

test('messages: the Anthropic client with max_tokens 64000 gets stop_reason max_tokens at the context end', async () => {
  const client = new Anthropic({ apiKey: 'unused', baseURL: server.baseURL, maxRetries: 0, timeout: 30000 });
  // The longest story of whole sentences that leaves at most 40 tokens of room, counted by the server.
  const sentence = 'Tom saw a big dog in the park. ';
  let content = '';
  let room = 512;
  while (room > 40) {
    content += sentence;
    const counted = await client.messages.countTokens({ model: 'm', messages: [{ role: 'user', content }] });
    room = 512 - counted.input_tokens;
  }
  assert.ok(room > 0, `room ${room}`);
  const r = await client.messages.create({
    model: 'claude-sonnet-4-5',
    max_tokens: 64000,
    temperature: 0,
    messages: [{ role: 'user', content }],
  });
  assert.equal(r.usage.hearth.max_tokens_clamped_to, room);
  assert.ok(r.usage.output_tokens <= room);
  if (r.usage.output_tokens === room) assert.equal(r.stop_reason, 'max_tokens');
});

test('a prompt alone beyond the context stays a 400', async () => {
  const tokens = Array.from({ length: 600 }, (_, i) => 300 + (i % 100));
  await assert.rejects(server.client().completions.create({ prompt: tokens, max_tokens: 100000 }), (err) => {
    assert.equal(err.status, 400);
    assert.match(err.message, /600 tokens.*512/);
    return true;
  });
  const full = Array.from({ length: 512 }, (_, i) => 300 + (i % 100));
  await assert.rejects(server.client().completions.create({ prompt: full, max_tokens: 5 }), { status: 400 });
});

test('--strict-max-tokens: prompt + max_tokens beyond the context is a 400 with the numbers', async () => {
  const client = strict.client();
  for (const [prompt, max_tokens] of [
    ['x', 100000],
    ['Once upon a time', 510],
    [longPrompt, 8],
  ]) {
    await assert.rejects(client.completions.create({ prompt, max_tokens }), (err) => {
      assert.equal(err.status, 400);
      assert.match(err.message, /exceeds the model context of 512/);
      return true;
    });
  }
  const fits = await client.completions.create({ prompt: longPrompt, max_tokens: 7, temperature: 0, ignore_eos: true });
  assert.equal(fits.usage.completion_tokens, 7);
});
