// Speculative decoding's drafters through the official openai client: OpenAI's predicted outputs (the answer is the
// one the request gives without a prediction, greedy and seeded; usage counts accepted and rejected prediction
// tokens), and hearth serve --draft-model (the served model as its own draft: every draft accepted, the same text).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MODEL, startServer } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => assert.equal((await server.stop()).code, 0));

const messages = [{ role: 'user', content: 'Tell me a story about a cat' }];

test('a prediction equal to the answer is accepted whole; the answer is unchanged', async () => {
  const plain = await client.chat.completions.create({ messages, max_tokens: 48, temperature: 0 });
  const text = plain.choices[0].message.content;
  assert.equal(plain.usage.completion_tokens_details?.accepted_prediction_tokens, undefined);
  const predicted = await client.chat.completions.create({
    messages,
    max_tokens: 48,
    temperature: 0,
    prediction: { type: 'content', content: text },
  });
  assert.equal(predicted.choices[0].message.content, text);
  const details = predicted.usage.completion_tokens_details;
  assert.ok(details.accepted_prediction_tokens >= 32, JSON.stringify(predicted.usage));
  assert.ok(predicted.usage.hearth.speculative.verify_steps * 4 < predicted.usage.completion_tokens);
});

test('an edited prediction, streamed and seeded: the same text as without it', async () => {
  const body = { messages, max_tokens: 40, temperature: 0.8, seed: 7 };
  const plain = await client.chat.completions.create(body);
  const text = plain.choices[0].message.content;
  const edited = text.slice(0, 20) + ' a purple elephant ' + text.slice(30) + ' The end.';
  const stream = await client.chat.completions.create({
    ...body,
    prediction: { type: 'content', content: [{ type: 'text', text: edited }] },
    stream: true,
    stream_options: { include_usage: true },
  });
  let streamed = '';
  let usage;
  for await (const chunk of stream) {
    streamed += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(streamed, text);
  assert.ok(usage.completion_tokens_details.accepted_prediction_tokens > 0, JSON.stringify(usage));
  assert.ok(usage.completion_tokens_details.rejected_prediction_tokens > 0, JSON.stringify(usage));
});

test('a malformed prediction is a 400 naming the field', async () => {
  await assert.rejects(
    client.chat.completions.create({ messages, max_tokens: 4, prediction: { type: 'image', content: 'x' } }),
    (err) => err.status === 400 && err.error?.param === 'prediction.type',
  );
});

test('--draft-model drafts by default; the same answer, every draft of the model itself accepted', async () => {
  const drafted = await startServer(['--draft-model', MODEL, '--kv-memory', '64MiB', '--draft-kv-memory', '16MiB']);
  try {
    const body = { messages, max_tokens: 48, temperature: 0 };
    const plain = await client.chat.completions.create({ ...body, speculative: 'off' });
    const r = await drafted.client().chat.completions.create(body);
    assert.equal(r.choices[0].message.content, plain.choices[0].message.content);
    const s = r.usage.hearth.speculative;
    assert.ok(s.drafted_tokens > 0 && s.accepted_tokens === s.drafted_tokens, JSON.stringify(r.usage));
    // Without a draft model, asking for one is a 400 naming --draft-model.
    await assert.rejects(
      client.chat.completions.create({ ...body, speculative: 'draft_model' }),
      (err) => err.status === 400 && /--draft-model/.test(err.message),
    );
  } finally {
    assert.equal((await drafted.stop()).code, 0);
  }
});

test('a --draft-kv-memory above a quarter of the KV budget stops the server at start', async () => {
  await assert.rejects(
    startServer(['--draft-model', '../shared/models/synthetic/synth-tiny-q8_0.gguf', '--kv-memory', '64MiB',
      '--draft-kv-memory', '64MiB']),
    /quarter of the KV budget/,
  );
});
