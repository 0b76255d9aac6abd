// bench/tool-calls-110m's client: forced calls and schema outputs against a running server, every seed checked.
// Usage: node bench/tool_calls_check.mjs BASE_URL SEEDS
import { createRequire } from 'node:module';
const require = createRequire(`${process.cwd()}/e2e/package.json`);
const OpenAI = require('openai');

const [baseURL, seedsArg] = process.argv.slice(2);
const seeds = Number(seedsArg ?? 12);
const client = new OpenAI({ apiKey: 'unused', baseURL, maxRetries: 0, timeout: 600000 });

function validate(value, schema, path = '$') {
  const fail = (why) => {
    throw new Error(`${path}: ${why} (${JSON.stringify(value)})`);
  };
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) fail('enum');
  const types = schema.type === undefined ? [] : [schema.type].flat();
  const typeOf = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v);
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
  function: { name, description: `household: ${name}`, parameters: { type: 'object', properties, required, additionalProperties: false } },
});
// The e2e catalogue, with free strings (no maxLength) as real apps send them.
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
  fn('music_play', { room, song: { type: 'string' } }),
  fn('music_stop', { room }),
  fn('timer_start', { minutes: { type: 'integer' } }),
  fn('shopping_add', { item: { type: 'string' }, qty: { type: 'integer' } }),
  fn('shopping_list'),
  fn('weather', { day: { enum: ['today', 'tomorrow'] } }),
  fn('vacuum_start', { room }),
  fn('oven_preheat', { celsius: { type: 'integer' } }),
  fn('kettle_on'),
  fn('plants_water', { zone: { type: 'integer' } }),
  fn('reminder', { text: { type: 'string' }, tags: { type: 'array', items: room } }),
];
const byName = Object.fromEntries(TOOLS.map((t) => [t.function.name, t.function.parameters]));
const PERSON = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' }, mood: { enum: ['happy', 'sad'] }, pets: { type: 'array', items: { type: 'string' } } },
  required: ['name', 'age', 'mood'],
  additionalProperties: false,
};

async function collect(stream) {
  const args = [];
  let name = null;
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const d of c.delta.tool_calls ?? []) {
        name ??= d.function?.name ?? null;
        args.push(d.function?.arguments ?? '');
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { name, args: args.join(''), finish };
}

const results = { calls: 0, valid: 0, streamed: 0, streamedValid: 0, schema: 0, schemaValid: 0, finish: {}, cached: [] };
const messages = [{ role: 'system', content: 'You control the house.' }, { role: 'user', content: 'Make the kitchen warm.' }];
for (let seed = 0; seed < seeds; seed++) {
  const named = seed % 3 === 2 ? { type: 'function', function: { name: TOOLS[seed % TOOLS.length].function.name } } : 'required';
  const body = { model: 'any', messages, tools: TOOLS, tool_choice: named, max_tokens: 96, temperature: 1, seed };
  const r = await client.chat.completions.create(body);
  results.calls++;
  const c = r.choices[0];
  results.finish[c.finish_reason] = (results.finish[c.finish_reason] ?? 0) + 1;
  results.cached.push(r.usage.prompt_tokens_details?.cached_tokens ?? 0);
  try {
    const call = c.message.tool_calls[0];
    if (typeof named === 'object' && call.function.name !== named.function.name) throw new Error('wrong function');
    validate(JSON.parse(call.function.arguments), byName[call.function.name]);
    results.valid++;
  } catch (e) {
    console.log(`seed ${seed}: invalid: ${e.message}: ${JSON.stringify(c.message)}`);
  }
  const s = await collect(await client.chat.completions.create({ ...body, stream: true }));
  results.streamed++;
  try {
    validate(JSON.parse(s.args), byName[s.name]);
    if (s.finish !== 'tool_calls') throw new Error(`finish ${s.finish}`);
    results.streamedValid++;
  } catch (e) {
    console.log(`seed ${seed}: streamed invalid: ${e.message}: ${s.name} ${s.args}`);
  }
  const j = await client.chat.completions.create({
    model: 'any', messages, max_tokens: 64, temperature: 1, seed,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } },
  });
  results.schema++;
  try {
    validate(JSON.parse(j.choices[0].message.content), PERSON);
    results.schemaValid++;
  } catch (e) {
    console.log(`seed ${seed}: schema output invalid: ${e.message}`);
  }
}
console.log(JSON.stringify(results));
if (results.valid !== results.calls || results.streamedValid !== results.streamed || results.schemaValid !== results.schema)
  process.exit(1);
