// A chat that ends with the assistant's words is continued from them: Anthropic's prefill, Ollama's, and OpenAI's
// continue_final_message (vLLM's extension). stories260K has no chat template, so the fallback format renders the
// chat ("User: Hi\nAssistant:" then the words), and greedy continuation of exactly that text through
// /v1/completions is what every route must answer.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { collectStream, startServer } from './helpers.mjs';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

const PREFILL = 'Once upon a time, there was a';
const CHAT = [
  { role: 'user', content: 'Tell me a story.' },
  { role: 'assistant', content: PREFILL },
];
// The fallback format's rendering of CHAT, continued (chat.h).
const PROMPT = `User: Tell me a story.\nAssistant:${PREFILL}`;

async function reference(maxTokens) {
  const r = await server.client().completions.create({ prompt: PROMPT, max_tokens: maxTokens, temperature: 0 });
  assert.ok(r.choices[0].text.length > 0);
  return r;
}

test('Anthropic: a final assistant message is continued, whole and streamed', async () => {
  const ref = await reference(12);
  const client = new Anthropic({ apiKey: 'unused', baseURL: server.baseURL, maxRetries: 0, timeout: 30000 });
  const r = await client.messages.create({ model: 'm', max_tokens: 12, temperature: 0, messages: CHAT });
  assert.equal(r.content[0].text, ref.choices[0].text);
  assert.equal(r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0), ref.usage.prompt_tokens);
  const stream = client.messages.stream({ model: 'm', max_tokens: 12, temperature: 0, messages: CHAT });
  let text = '';
  stream.on('text', (t) => (text += t));
  await stream.finalMessage();
  assert.equal(text, ref.choices[0].text);
  // count_tokens counts the same prompt.
  const counted = await client.messages.countTokens({ model: 'm', messages: CHAT });
  assert.equal(counted.input_tokens, ref.usage.prompt_tokens);
});

test('Anthropic: trailing whitespace after the prefill is a 400, as Anthropic answers', async () => {
  const client = new Anthropic({ apiKey: 'unused', baseURL: server.baseURL, maxRetries: 0 });
  await assert.rejects(
    client.messages.create({
      model: 'm',
      max_tokens: 4,
      messages: [CHAT[0], { role: 'assistant', content: 'Once upon ' }],
    }),
    (e) => e.status === 400 && /trailing whitespace/.test(e.message),
  );
});

test('Ollama: /api/chat continues a final assistant message, whole and streamed', async () => {
  const ref = await reference(10);
  const ollama = new Ollama({ host: server.baseURL });
  const r = await ollama.chat({ model: 'stories260K', messages: CHAT, options: { temperature: 0, num_predict: 10 } });
  assert.equal(r.message.content, ref.choices[0].text);
  let text = '';
  for await (const part of await ollama.chat({
    model: 'stories260K',
    messages: CHAT,
    stream: true,
    options: { temperature: 0, num_predict: 10 },
  })) {
    text += part.message.content;
  }
  assert.equal(text, ref.choices[0].text);
});

test('OpenAI: continue_final_message continues it; without it the chat is answered as a new turn', async () => {
  const ref = await reference(10);
  const client = server.client();
  const r = await client.chat.completions.create({
    messages: CHAT,
    max_tokens: 10,
    temperature: 0,
    continue_final_message: true,
  });
  assert.equal(r.choices[0].message.content, ref.choices[0].text);
  assert.equal(r.usage.prompt_tokens, ref.usage.prompt_tokens);
  const streamed = await collectStream(
    await client.chat.completions.create({
      messages: CHAT,
      max_tokens: 10,
      temperature: 0,
      continue_final_message: true,
      stream: true,
    }),
  );
  assert.equal(streamed.text, ref.choices[0].text);
  const answered = await client.chat.completions.create({ messages: CHAT, max_tokens: 10, temperature: 0 });
  assert.ok(answered.usage.prompt_tokens > ref.usage.prompt_tokens); // "\nAssistant:" follows the message
});

test('OpenAI: what cannot be continued is a 400 naming why', async () => {
  const client = server.client();
  const cases = [
    [[{ role: 'user', content: 'Hi' }], /last message is the assistant's/],
    [[{ role: 'user', content: 'Hi' }, { role: 'assistant', content: '' }], /must be text/],
  ];
  for (const [messages, why] of cases) {
    await assert.rejects(
      client.chat.completions.create({ messages, max_tokens: 4, continue_final_message: true }),
      (e) => e.status === 400 && why.test(e.message),
    );
  }
  await assert.rejects(
    client.chat.completions.create({
      messages: CHAT,
      max_tokens: 4,
      continue_final_message: true,
      response_format: { type: 'json_object' },
    }),
    (e) => e.status === 400 && /continuation only/.test(e.message),
  );
});
