// The Anthropic Messages route with the official @anthropic-ai/sdk client against a real `hearth serve`:
// messages.create and messages.stream with a system prompt marked cache_control (the first call creates the cache,
// the second reads it), a 5-turn conversation with a rolling breakpoint, stop sequences, Anthropic's error shape (also
// for the router's and transport's errors), tools with tool_use / tool_result (forced by grammar on stories260K,
// whole and streamed), messages.countTokens (the prompt tokens a real request has), and x-api-key with --api-key.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { startServer } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Anthropic({ apiKey: 'unused', baseURL: server.baseURL, maxRetries: 0, timeout: 30000 });
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

// A system prompt no other test sends (so nothing of it is cached yet), about 80 tokens.
function houseRules() {
  return `House rules ${randomUUID()}. The cat may sleep on the bed. Tom feeds the dog at seven. Sue waters the ` +
    'garden when the sun is low. Nobody plays loud music after nine. Everyone helps with the dishes.';
}

function total(u) {
  return u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
}

test('messages.create: a cache_control system prompt is created once, then read', async () => {
  const system = [{ type: 'text', text: houseRules(), cache_control: { type: 'ephemeral' } }];
  const ask = () =>
    client.messages.create({
      model: 'claude-sonnet-4-5',
      max_tokens: 6,
      temperature: 0,
      system,
      messages: [{ role: 'user', content: 'Tell me a story.' }],
    });
  const first = await ask();
  assert.equal(first.type, 'message');
  assert.equal(first.role, 'assistant');
  assert.equal(first.content[0].type, 'text');
  assert.equal(first.stop_reason, 'max_tokens');
  assert.equal(first.usage.output_tokens, 6);
  assert.ok(first.usage.cache_creation_input_tokens > 40, JSON.stringify(first.usage));
  assert.equal(first.usage.cache_read_input_tokens, 0);
  assert.ok(first.usage.input_tokens > 0);
  const second = await ask();
  assert.ok(second.usage.cache_read_input_tokens >= first.usage.cache_creation_input_tokens, JSON.stringify(second.usage));
  assert.equal(second.usage.cache_creation_input_tokens, 0);
  assert.equal(total(second.usage), total(first.usage));
  assert.equal(second.content[0].text, first.content[0].text); // a cache hit gives the same greedy tokens
});

test('messages.stream: the events in order and the final usage', async () => {
  const rules = houseRules();
  const body = {
    model: 'claude-haiku-4-5',
    max_tokens: 6,
    temperature: 0,
    system: [{ type: 'text', text: rules, cache_control: { type: 'ephemeral', ttl: '1h' } }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello there' }] }],
  };
  const stream = client.messages.stream(body);
  const types = [];
  stream.on('streamEvent', (event) => types.push(event.type));
  const first = await stream.finalMessage();
  assert.equal(types[0], 'message_start');
  assert.equal(types[1], 'content_block_start');
  assert.ok(types.includes('content_block_delta'));
  assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(first.stop_reason, 'max_tokens');
  assert.equal(first.usage.output_tokens, 6);
  assert.ok(first.usage.cache_creation_input_tokens > 40, JSON.stringify(first.usage));
  const secondStream = client.messages.stream(body);
  let startUsage;
  secondStream.on('streamEvent', (event) => {
    if (event.type === 'message_start') startUsage = event.message.usage;
  });
  const second = await secondStream.finalMessage();
  assert.ok(second.usage.cache_read_input_tokens >= first.usage.cache_creation_input_tokens, JSON.stringify(second.usage));
  // message_start already has the real cache split; message_delta adds the output tokens.
  for (const k of ['input_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens']) {
    assert.equal(startUsage[k], second.usage[k], k);
  }
  assert.equal(second.content[0].text, first.content[0].text);
  // The SDK drops pings; the wire has one after content_block_start, and every event names its type.
  const raw = await fetch(server.baseURL + '/v1/messages', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(raw.headers.get('content-type'), 'text/event-stream');
  const events = [...(await raw.text()).matchAll(/^event: (\w+)\ndata: (.*)$/gm)].map((m) => [m[1], JSON.parse(m[2]).type]);
  assert.deepEqual(events.slice(0, 3).map((e) => e[0]), ['message_start', 'content_block_start', 'ping']);
  for (const [event, type] of events) assert.equal(event, type);
  const delta = events.findIndex((e) => e[0] === 'message_delta');
  assert.ok(delta > 3);
});

test('a 5-turn conversation with a rolling breakpoint reads the previous turn each time', async () => {
  const system = houseRules();
  const messages = [];
  let previousPrompt = 0;
  for (let turn = 0; turn < 5; ++turn) {
    // Only the newest user message carries the breakpoint; earlier ones lose theirs (as Claude-style agents do).
    for (const m of messages) if (m.role === 'user') m.content = [{ type: 'text', text: m.content[0].text }];
    messages.push({
      role: 'user',
      content: [{ type: 'text', text: `Question ${turn}: what did the dog do?`, cache_control: { type: 'ephemeral' } }],
    });
    const r = await client.messages.create({ model: 'm', max_tokens: 8, temperature: 0, system, messages });
    const prompt = total(r.usage);
    if (turn > 0) {
      assert.ok(r.usage.cache_read_input_tokens >= previousPrompt, `turn ${turn}: ${JSON.stringify(r.usage)} after ${previousPrompt}`);
    }
    assert.ok(r.usage.cache_creation_input_tokens > 0, `turn ${turn}: ${JSON.stringify(r.usage)}`);
    previousPrompt = prompt;
    messages.push({ role: 'assistant', content: r.content.length ? r.content[0].text : '' });
  }
});

test('stop_sequences end with stop_reason stop_sequence', async () => {
  const body = { model: 'm', max_tokens: 24, temperature: 0, messages: [{ role: 'user', content: 'Once upon a time' }] };
  const free = await client.messages.create(body);
  const text = free.content[0].text;
  assert.ok(text.length > 12, text);
  const stop = text.slice(8, 11);
  const stopped = await client.messages.create({ ...body, stop_sequences: [stop] });
  assert.equal(stopped.stop_reason, 'stop_sequence');
  assert.equal(stopped.stop_sequence, stop);
  assert.equal(stopped.content[0].text, text.slice(0, text.indexOf(stop)));
});

test('errors use Anthropic\'s error shape', async () => {
  const cases = [
    [{ model: 'm', messages: [{ role: 'user', content: 'hi' }] }, /max_tokens/],
    [{ model: 'm', max_tokens: 4, messages: [] }, /messages/],
    [{ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 't' }] }, /input_schema/],
    [{ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, /only custom tools/],
    [{ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral', ttl: '2h' } }] }] }, /ttl/],
    [{ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }, /only text/],
    [{ model: 'm', max_tokens: 4, temperature: 1.5, messages: [{ role: 'user', content: 'hi' }] }, /temperature/],
  ];
  for (const [body, message] of cases) {
    await assert.rejects(client.messages.create(body), (err) => {
      assert.ok(err instanceof Anthropic.BadRequestError, String(err));
      assert.equal(err.status, 400);
      assert.equal(err.error.type, 'error');
      assert.equal(err.error.error.type, 'invalid_request_error');
      assert.match(err.error.error.message, message);
      return true;
    });
  }
  const five = Array.from({ length: 5 }, (_, i) => ({ type: 'text', text: `p${i}`, cache_control: { type: 'ephemeral' } }));
  await assert.rejects(client.messages.create({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: five }] }),
    (err) => err.status === 400 && /maximum of 4/.test(err.error.error.message));
});

test('the transport\'s and the router\'s errors under /v1/messages keep Anthropic\'s shape', async () => {
  const shapes = [
    [await fetch(`${server.baseURL}/v1/messages`), 405],
    [await fetch(`${server.baseURL}/v1/messages/batches`, { method: 'POST', body: '{}' }), 404],
    [await fetch(`${server.baseURL}/v1/messages/count_tokens`, { method: 'POST', body: '{}' }), 400],
    [await fetch(`${server.baseURL}/v1/messages`, { method: 'POST', body: 'x'.repeat(5 << 20) }), 413],
  ];
  for (const [res, status] of shapes) {
    assert.equal(res.status, status);
    const body = await res.json();
    assert.equal(body.type, 'error', JSON.stringify(body));
    assert.equal(typeof body.error.type, 'string');
    assert.equal(typeof body.error.message, 'string');
  }
  // The OpenAI routes keep theirs.
  const openai = await (await fetch(`${server.baseURL}/v1/nothing`)).json();
  assert.equal(openai.error.type, 'not_found_error');
  assert.equal(openai.type, undefined);
});

// A small household catalogue in Anthropic's tool shape; the last tool ends the cached tools prefix.
const ROOM = { type: 'string', enum: ['kitchen', 'hall', 'bedroom'] };
const TOOLS = [
  { name: 'lights_on', description: 'Turn the lights on', input_schema: { type: 'object', properties: { room: ROOM, level: { type: 'integer' } }, required: ['room', 'level'], additionalProperties: false } },
  { name: 'heater_set', description: 'Set a heater', input_schema: { type: 'object', properties: { room: ROOM, celsius: { type: 'number' } }, required: ['room', 'celsius'], additionalProperties: false } },
  { name: 'reminder', description: 'Remember something', input_schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false } },
  { name: 'door_lock', description: 'Lock a door', input_schema: { type: 'object', properties: { door: { enum: ['front', 'back'] } }, required: ['door'], additionalProperties: false }, cache_control: { type: 'ephemeral' } },
];
const SCHEMA = Object.fromEntries(TOOLS.map((t) => [t.name, t.input_schema]));

function checkToolUse(block, only) {
  assert.equal(block.type, 'tool_use');
  assert.match(block.id, /^toolu_[A-Za-z0-9]{24}$/);
  assert.ok(block.name in SCHEMA, block.name);
  if (only) assert.equal(block.name, only);
  const schema = SCHEMA[block.name];
  assert.equal(typeof block.input, 'object');
  for (const key of schema.required) assert.ok(key in block.input, `${key} in ${JSON.stringify(block.input)}`);
  for (const [key, value] of Object.entries(block.input)) {
    const p = schema.properties[key];
    assert.ok(p, `unexpected ${key}`);
    if (p.enum) assert.ok(p.enum.includes(value), `${key}=${value}`);
    if (p.type === 'integer') assert.ok(Number.isInteger(value), `${key}=${value}`);
    if (p.type === 'number') assert.equal(typeof value, 'number');
    if (p.type === 'string') assert.equal(typeof value, 'string');
  }
}

test('tools: tool_choice any gives a valid tool_use on every seed; the tool_result turn reads the cached catalogue', async () => {
  const question = `Make the house safe ${randomUUID()}`;
  let first;
  for (let seed = 0; seed < 4; seed++) {
    const r = await client.messages.create({
      model: 'm', max_tokens: 160, temperature: 1, tools: TOOLS, tool_choice: { type: 'any' },
      messages: [{ role: 'user', content: question }], metadata: { user_id: `seed-${seed}` },
    });
    assert.equal(r.stop_reason, 'tool_use', JSON.stringify(r));
    const uses = r.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1, JSON.stringify(r.content));
    checkToolUse(uses[0]);
    first ??= r;
  }
  // The first request created the catalogue's cache (the breakpoint on the last tool); the later ones read it.
  assert.ok(first.usage.cache_creation_input_tokens > 0 || first.usage.cache_read_input_tokens > 0, JSON.stringify(first.usage));
  const use = first.content.find((b) => b.type === 'tool_use');
  const second = await client.messages.create({
    model: 'm', max_tokens: 6, temperature: 0, tools: TOOLS,
    messages: [
      { role: 'user', content: question },
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'done', cache_control: { type: 'ephemeral' } }] },
    ],
  });
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(second.stop_reason), second.stop_reason);
  assert.ok(total(second.usage) > total(first.usage), JSON.stringify([first.usage, second.usage]));
  // Tools, question and the call are the first request's prompt and answer: read from the cache.
  assert.ok(second.usage.cache_read_input_tokens >= total(first.usage) - 16, JSON.stringify([first.usage, second.usage]));
  assert.ok(second.usage.cache_creation_input_tokens > 0, JSON.stringify(second.usage));
});

test('messages.stream with a named tool: a tool_use block with input_json_delta, parsed by the SDK', async () => {
  const stream = client.messages.stream({
    model: 'm', max_tokens: 160, temperature: 1, tools: TOOLS, tool_choice: { type: 'tool', name: 'heater_set' },
    messages: [{ role: 'user', content: 'Warm the kitchen' }],
  });
  const events = [];
  stream.on('streamEvent', (event) => events.push(event));
  const message = await stream.finalMessage();
  assert.equal(message.stop_reason, 'tool_use');
  assert.equal(message.content.length, 1, JSON.stringify(message.content));
  checkToolUse(message.content[0], 'heater_set');
  const start = events.find((e) => e.type === 'content_block_start');
  assert.equal(start.content_block.type, 'tool_use');
  assert.deepEqual(start.content_block.input, {});
  assert.ok(events.some((e) => e.type === 'content_block_delta' && e.delta.type === 'input_json_delta'));
  assert.deepEqual(events.slice(-3).map((e) => e.type), ['content_block_stop', 'message_delta', 'message_stop']);
});

test('tool_choice none, and tools without a forced call, answer in text', async () => {
  const r = await client.messages.create({
    model: 'm', max_tokens: 8, temperature: 0, tools: TOOLS, tool_choice: { type: 'none' },
    messages: [{ role: 'user', content: 'Once upon a time' }],
  });
  assert.notEqual(r.stop_reason, 'tool_use');
  assert.ok(r.content.every((b) => b.type === 'text'));
});

test('messages.countTokens: the prompt tokens messages.create would have, without running anything', async () => {
  const system = [{ type: 'text', text: houseRules(), cache_control: { type: 'ephemeral' } }];
  const tools = [
    {
      name: 'get_weather',
      description: 'The weather in a city',
      input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  ];
  for (const body of [
    { model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'Tell me a story.' }] },
    { model: 'claude-sonnet-4-5', system, messages: [{ role: 'user', content: 'Hello there' }] },
    {
      model: 'claude-sonnet-4-5',
      system: 'Be brief.',
      tools,
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: 'It is sunny.' },
        { role: 'user', content: [{ type: 'text', text: 'And tomorrow?' }] },
      ],
    },
  ]) {
    const counted = await client.messages.countTokens(body);
    assert.deepEqual(Object.keys(counted), ['input_tokens']);
    const real = await client.messages.create({ ...body, max_tokens: 1, temperature: 0 });
    assert.equal(counted.input_tokens, total(real.usage), JSON.stringify(body));
    assert.ok(counted.input_tokens > 5);
  }
  // Errors keep Anthropic's shape; max_tokens is optional here but still checked when given.
  await assert.rejects(client.messages.countTokens({ model: 'm', messages: 'hi' }), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError);
    assert.equal(err.error.type, 'error');
    assert.match(err.error.error.message, /messages/);
    return true;
  });
  await assert.rejects(
    client.messages.countTokens({ model: 'm', max_tokens: 0, messages: [{ role: 'user', content: 'x' }] }),
    { status: 400 },
  );
});

test('x-api-key works with --api-key; a wrong one is a 401 in Anthropic\'s shape', async () => {
  const KEY = 'sk-ant-hearth-test';
  const keyed = await startServer(['--api-key', KEY]);
  try {
    const ok = new Anthropic({ apiKey: KEY, baseURL: keyed.baseURL, maxRetries: 0 });
    const r = await ok.messages.create({ model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.usage.output_tokens, 2);
    const wrong = new Anthropic({ apiKey: 'sk-wrong', baseURL: keyed.baseURL, maxRetries: 0 });
    await assert.rejects(wrong.messages.create({ model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
      (err) => {
        assert.ok(err instanceof Anthropic.AuthenticationError);
        assert.equal(err.error.error.type, 'authentication_error');
        return true;
      });
    // x-api-key also opens the OpenAI routes.
    const res = await fetch(keyed.baseURL + '/v1/models', { headers: { 'x-api-key': KEY } });
    assert.equal(res.status, 200);
  } finally {
    assert.equal((await keyed.stop()).code, 0);
  }
});
