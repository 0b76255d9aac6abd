// OpenAI request fields Hearth does not implement (issue 19), through the official openai client: a field that
// would change the answer's meaning is a 400 naming it unless it holds its neutral value; the fields that cannot
// change the answer are accepted and ignored (README: "OpenAI request fields").
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startServer } from './helpers.mjs';

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
    ['logit_bias', { 5: 10 }],
    ['frequency_penalty', 0.5],
    ['presence_penalty', 1],
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
