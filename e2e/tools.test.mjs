// Tool calls and structured output through the official openai client on stories260K, a story model
// with no tool template (the fallback format): everything here is the grammar's work. response_format json_schema
// gives JSON that validates on every seed; json_object gives an object; tool_choice "required" or a named function
// gives a well-formed call whose arguments validate against the function's schema, whole and streamed (OpenAI's
// delta shape); a tool-result turn reuses the cached prompt.
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

// The supported JSON Schema subset, checked independently of the server.
function validate(value, schema, path = '$') {
  const fail = (why) => {
    throw new Error(`${path}: ${why} (${JSON.stringify(value)})`);
  };
  if (schema.const !== undefined && JSON.stringify(value) !== JSON.stringify(schema.const)) fail('const');
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) fail('enum');
  const types = schema.type === undefined ? [] : [schema.type].flat();
  const typeOf = (v) =>
    v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v;
  if (types.length && !types.some((t) => t === typeOf(value) || (t === 'number' && typeof value === 'number')))
    fail(`type ${types}`);
  if (typeOf(value) === 'object') {
    for (const r of schema.required ?? []) if (!(r in value)) fail(`required ${r}`);
    for (const [k, v] of Object.entries(value)) {
      if (schema.properties?.[k]) validate(v, schema.properties[k], `${path}.${k}`);
      else if (schema.additionalProperties === false) fail(`additional ${k}`);
    }
  }
  if (Array.isArray(value)) {
    if (value.length < (schema.minItems ?? 0) || value.length > (schema.maxItems ?? Infinity)) fail('items count');
    value.forEach((v, i) => schema.items && validate(v, schema.items, `${path}[${i}]`));
  }
  if (typeof value === 'string') {
    const n = [...value].length;
    if (n < (schema.minLength ?? 0) || n > (schema.maxLength ?? Infinity)) fail('length');
  }
}

const room = { type: 'string', enum: ['kitchen', 'hall', 'bedroom', 'bathroom', 'garage'] };
const fn = (name, properties = {}, required = Object.keys(properties)) => ({
  type: 'function',
  function: {
    name,
    description: `household: ${name}`,
    parameters: { type: 'object', properties, required, additionalProperties: false },
  },
});
// A catalogue of 20 household functions.
const TOOLS = [
  fn('lights_on', { room, brightness: { type: 'integer' } }),
  fn('lights_off', { room }),
  fn('heater_set', { room, celsius: { type: 'number' } }),
  fn('heater_off', { room }),
  fn('blinds', { room, open: { type: 'boolean' } }),
  fn('door_lock', { door: { enum: ['front', 'back', 'garage'] } }),
  fn('door_unlock', { door: { enum: ['front', 'back', 'garage'] } }),
  fn('alarm_arm', { mode: { enum: ['home', 'away'] } }),
  fn('alarm_disarm'),
  fn('music_play', { room, song: { type: 'string', maxLength: 12 } }),
  fn('music_stop', { room }),
  fn('timer_start', { minutes: { type: 'integer' } }),
  fn('shopping_add', { item: { type: 'string', maxLength: 10 }, qty: { type: 'integer' } }),
  fn('shopping_list'),
  fn('weather', { day: { enum: ['today', 'tomorrow'] } }),
  fn('vacuum_start', { room }),
  fn('oven_preheat', { celsius: { type: 'integer' } }),
  fn('kettle_on'),
  fn('plants_water', { zone: { type: 'integer' } }),
  fn('reminder', { text: { type: 'string', maxLength: 12 }, tags: { type: 'array', items: room, maxItems: 2 } }),
];
const byName = Object.fromEntries(TOOLS.map((t) => [t.function.name, t.function.parameters]));

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer' },
    mood: { enum: ['happy', 'sad', 'sleepy'] },
    pets: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
    tall: { type: 'boolean' },
    height: { type: ['number', 'null'] },
  },
  required: ['name', 'age', 'mood'],
  additionalProperties: false,
};

test('response_format json_schema: schema-valid JSON on every one of 20 seeds', async () => {
  for (let seed = 0; seed < 20; seed++) {
    const r = await client.chat.completions.create({
      messages: [{ role: 'user', content: 'Tell me about a girl.' }],
      max_tokens: 300,
      temperature: 1,
      seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } },
    });
    assert.equal(r.choices[0].finish_reason, 'stop', `seed ${seed}: ${r.choices[0].message.content}`);
    validate(JSON.parse(r.choices[0].message.content), PERSON);
  }
});

test('response_format json_object gives an object, also on /v1/completions and streamed', async () => {
  const r = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 300,
    seed: 1,
    response_format: { type: 'json_object' },
  });
  const text = r.choices[0].message.content;
  if (r.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(text), 'object');
  else assert.ok(text.startsWith('{'), text); // max_tokens ended it: what was generated, a valid prefix
  const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
  const c = await client.completions.create({
    prompt: 'Once upon a time',
    max_tokens: 40,
    temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'n', schema } },
  });
  validate(JSON.parse(c.choices[0].text), schema);
  const stream = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 300,
    seed: 2,
    stream: true,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON } },
  });
  let content = '';
  for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
  validate(JSON.parse(content), PERSON);
});

test('an unsupported schema keyword is a 400 naming it', async () => {
  await assert.rejects(
    client.chat.completions.create({
      messages: [{ role: 'user', content: 'x' }],
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'string', not: { const: 'a' } } } } },
      },
    }),
    (e) => e.status === 400 && e.param === 'response_format.json_schema.schema' && /'not'/.test(e.message),
  );
});

test('max_tokens too small for the grammar: finish_reason length, the output is what was generated', async () => {
  const r = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 3,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON } },
  });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 3);
  assert.ok(r.choices[0].message.content.startsWith('{'));
});

function checkCall(call, only) {
  assert.match(call.id, /^call_[A-Za-z0-9]+$/);
  assert.equal(call.type, 'function');
  assert.ok(call.function.name in byName, call.function.name);
  if (only) assert.equal(call.function.name, only);
  assert.equal(typeof call.function.arguments, 'string');
  validate(JSON.parse(call.function.arguments), byName[call.function.name]);
}

test('tool_choice required over 20 household functions: a valid call on every seed', async () => {
  for (let seed = 0; seed < 8; seed++) {
    const r = await client.chat.completions.create({
      messages: [{ role: 'user', content: 'Make the kitchen warm.' }],
      tools: TOOLS,
      tool_choice: 'required',
      max_tokens: 200,
      temperature: 1,
      seed,
    });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    checkCall(choice.message.tool_calls[0]);
  }
});

test('a named tool_choice forces that function', async () => {
  const r = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Remind me.' }],
    tools: TOOLS,
    tool_choice: { type: 'function', function: { name: 'reminder' } },
    max_tokens: 200,
    seed: 5,
  });
  checkCall(r.choices[0].message.tool_calls[0], 'reminder');
});

test('streamed tool calls arrive as OpenAI deltas: id, type and name first, then the arguments', async () => {
  const stream = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'Lights!' }],
    tools: TOOLS,
    tool_choice: { type: 'function', function: { name: 'lights_on' } },
    max_tokens: 200,
    seed: 3,
    stream: true,
  });
  const deltas = [];
  let finish = null;
  let content = '';
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta.tool_calls) deltas.push(...c.delta.tool_calls);
      content += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(content, '');
  assert.ok(deltas.length >= 2);
  assert.equal(deltas[0].index, 0);
  assert.match(deltas[0].id, /^call_/);
  assert.equal(deltas[0].type, 'function');
  assert.equal(deltas[0].function.name, 'lights_on');
  for (const d of deltas.slice(1)) {
    assert.equal(d.index, 0);
    assert.equal(d.id, undefined);
  }
  const args = deltas.map((d) => d.function.arguments ?? '').join('');
  checkCall({ id: deltas[0].id, type: 'function', function: { name: 'lights_on', arguments: args } }, 'lights_on');
});

test('a tool-result turn renders through the template and reuses the cached prompt', async () => {
  const messages = [{ role: 'user', content: 'Is it cold?' }];
  const first = await client.chat.completions.create({
    messages,
    tools: TOOLS,
    tool_choice: 'required',
    max_tokens: 200,
    seed: 11,
  });
  const call = first.choices[0].message.tool_calls[0];
  const second = await client.chat.completions.create({
    messages: [
      ...messages,
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: 'done' },
    ],
    tools: TOOLS,
    max_tokens: 8,
    temperature: 0,
  });
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
  // The catalogue and the question were cached by the first request (all but its last token at most).
  assert.ok(
    second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 2,
    JSON.stringify(second.usage),
  );
  // tool_choice auto on a story model: plain text, finish_reason stop or length, never a broken tool_calls.
  assert.ok(['stop', 'length'].includes(second.choices[0].finish_reason));
  assert.equal(second.choices[0].message.tool_calls, undefined);
});

test('a forced call cut short by max_tokens is a truncated call with finish_reason length, never markup', async () => {
  const ask = (max_tokens, extra = {}) =>
    client.chat.completions.create({
      messages: [{ role: 'user', content: 'Remind me.' }],
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'reminder' } },
      max_tokens,
      temperature: 0,
      ...extra,
    });
  // Every budget: a call or nothing, never text; cut short, finish_reason length and arguments that are not whole.
  let cutShort = null;
  for (let k = 1; k <= 40; k++) {
    const choice = (await ask(k)).choices[0];
    assert.ok(!choice.message.content, `content at ${k}: ${choice.message.content}`);
    if (choice.finish_reason === 'tool_calls') break; // from here on the call fits
    assert.equal(choice.finish_reason, 'length');
    const call = choice.message.tool_calls?.[0];
    if (!call) continue; // the name is not whole yet
    assert.equal(call.function.name, 'reminder');
    assert.ok(!call.function.arguments.includes('"name"'), call.function.arguments);
    assert.throws(() => JSON.parse(call.function.arguments), `arguments at ${k}: ${call.function.arguments}`);
    cutShort = { k, arguments: call.function.arguments };
  }
  assert.ok(cutShort, 'some budget cuts the call short after its name');
  // Streamed: the same call in OpenAI's delta shape, ending with length.
  const stream = await ask(cutShort.k, { stream: true });
  let name = '';
  let args = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const t of c.delta?.tool_calls ?? []) {
        name += t.function?.name ?? '';
        args += t.function?.arguments ?? '';
      }
      assert.ok(!c.delta?.content, `content in a forced call: ${c.delta?.content}`);
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(name, 'reminder');
  assert.equal(args, cutShort.arguments);
  assert.equal(finish, 'length');
});
