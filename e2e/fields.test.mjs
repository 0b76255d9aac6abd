// OpenAI request fields Hearth does not implement, through the official openai client: a field that
// would change the answer's meaning is a 400 naming it unless it holds its neutral value; the fields that cannot
// change the answer are accepted and ignored (README: "OpenAI request fields").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { GOLDEN_64, startServer, tokenize } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => assert.equal((await server.stop()).code, 0));

const messages = [{ role: 'user', content: 'Hi' }];

test('fields that change the answer are refused with a 400 naming them', async () => {
  const chat = [
    ['modalities', ['text', 'audio']],
  ];
  for (const [field, value] of chat) {
    await assert.rejects(client.chat.completions.create({ messages, max_tokens: 1, [field]: value }), (e) => {
      assert.equal(e.status, 400, field);
      assert.equal(e.param, field);
      assert.equal(e.code, 'unsupported_parameter');
      return true;
    });
  }
  await assert.rejects(client.completions.create({ prompt: 'x', max_tokens: 1, suffix: 'The end.' }), {
    status: 400,
    param: 'suffix',
  });
});

test('their neutral values and the fields that cannot change the answer are accepted', async () => {
  const r = await client.chat.completions.create({
    messages,
    max_tokens: 2,
    logit_bias: {},
    frequency_penalty: 0,
    presence_penalty: 0,
    response_format: { type: 'text' },
    tool_choice: 'none',
    user: 'household-member-1',
    metadata: { room: 'kitchen' },
    store: false,
    service_tier: 'auto',
    parallel_tool_calls: false,
  });
  assert.equal(r.usage.completion_tokens, 2);
});

test('logit_bias, frequency_penalty and presence_penalty change the tokens as OpenAI defines them', async () => {
  const ids = await tokenize(server, 'the', false); // "▁the": the space prefix is the token's own
  assert.equal(ids.length, 1);
  const forced = await client.completions.create({
    prompt: 'Once upon a time',
    max_tokens: 4,
    temperature: 0,
    logit_bias: { [ids[0]]: 100 },
  });
  assert.equal(forced.choices[0].text, ' the'.repeat(4));
  const plain = { prompt: 'Once upon a time', max_tokens: 64, temperature: 0 };
  assert.equal((await client.completions.create(plain)).choices[0].text, GOLDEN_64);
  for (const penalty of [{ frequency_penalty: 1.5 }, { presence_penalty: 2 }]) {
    const r = await client.completions.create({ ...plain, ...penalty });
    assert.notEqual(r.choices[0].text, GOLDEN_64, JSON.stringify(penalty));
    assert.equal(r.usage.completion_tokens, 64);
  }
  await assert.rejects(
    client.completions.create({ prompt: 'x', max_tokens: 1, logit_bias: { 100000: 1 } }),
    (e) => e.status === 400 && /outside the vocabulary/.test(e.message),
  );
});

test('system_fingerprint names the model and the build, whole and streamed', async () => {
  const r = await client.chat.completions.create({ messages, max_tokens: 2 });
  assert.match(r.system_fingerprint, /^fp_[0-9a-f]{12}_[0-9a-z]+$/);
  const stream = await client.chat.completions.create({ messages, max_tokens: 2, stream: true });
  for await (const chunk of stream) assert.equal(chunk.system_fingerprint, r.system_fingerprint);
});
