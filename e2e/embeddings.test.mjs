// Embeddings through the official clients against a real `hearth serve` of a synthetic Qwen3-Embedding-shaped file
// (qwen3, pooling_type last, EOS appended; `hearth synth --pooling last --add-eos` into the git-ignored models/
// folder): the openai client's embeddings.create (a string, several strings, token ids, base64) and the ollama
// client's embed, with the same unit vectors, usage.prompt_tokens, the limits as 400s naming them, and
// `dimensions` refused unless it is the model's own width.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { Ollama } from 'ollama';
import { BIN, startServer, tokenize } from './helpers.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SYNTH = path.join(repoRoot, 'models', 'e2e-qwen3-embedding-tiny.gguf');
const VOCAB = path.join(repoRoot, '../shared/vocab/ggml-vocab-qwen2.gguf');
const DIM = 64;

let server;
let client;
let ollama;
before(async () => {
  if (!existsSync(SYNTH)) {
    mkdirSync(path.dirname(SYNTH), { recursive: true });
    execFileSync(BIN, ['synth', '--arch', 'qwen3', '--preset', 'tiny', '--dim', String(DIM), '--layers', '2', '--ffn',
      '128', '--ctx', '512', '--type', 'f32', '--pooling', 'last', '--add-eos', '--vocab-from', VOCAB, '-o', SYNTH],
      { stdio: 'ignore' });
  }
  server = await startServer(['--model-id', 'qwen3-embedding'], {}, { models: [SYNTH] });
  client = server.client();
  ollama = new Ollama({ host: server.baseURL });
});
after(async () => assert.equal((await server.stop()).code, 0));

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const cosine = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b));
const TEXTS = ['The cat sat on the mat.', 'Rain is expected tomorrow afternoon.', 'def f(x): return x * 2'];

test('embeddings.create: one unit vector per input, in order, with usage', async () => {
  const one = await client.embeddings.create({ model: 'qwen3-embedding', input: TEXTS[0], encoding_format: 'float' });
  assert.equal(one.object, 'list');
  assert.equal(one.model, 'qwen3-embedding');
  assert.equal(one.data.length, 1);
  assert.equal(one.data[0].object, 'embedding');
  assert.equal(one.data[0].index, 0);
  assert.equal(one.data[0].embedding.length, DIM);
  assert.ok(Math.abs(norm(one.data[0].embedding) - 1) < 1e-5);
  const ids = await tokenize(server, TEXTS[0]);
  assert.equal(one.usage.prompt_tokens, ids.length);
  assert.equal(one.usage.total_tokens, ids.length);

  const many = await client.embeddings.create({ model: 'qwen3-embedding', input: TEXTS, encoding_format: 'float' });
  assert.deepEqual(many.data.map((d) => d.index), [0, 1, 2]);
  // Batched with the others, the first input's vector is the one it gets alone, bit for bit.
  assert.deepEqual(many.data[0].embedding, one.data[0].embedding);
  assert.ok(cosine(many.data[0].embedding, many.data[1].embedding) < 0.99, 'different texts, different vectors');
  let total = 0;
  for (const t of TEXTS) total += (await tokenize(server, t)).length;
  assert.equal(many.usage.prompt_tokens, total);
});

test('token ids in, and base64 out (the client default) decode to the same floats', async () => {
  const ids = await tokenize(server, TEXTS[1]);
  const fromText = await client.embeddings.create({ model: 'qwen3-embedding', input: TEXTS[1], encoding_format: 'float' });
  const fromIds = await client.embeddings.create({ model: 'qwen3-embedding', input: [ids], encoding_format: 'float' });
  assert.deepEqual(fromIds.data[0].embedding, fromText.data[0].embedding);
  const single = await client.embeddings.create({ model: 'qwen3-embedding', input: ids, encoding_format: 'float' });
  assert.equal(single.data.length, 1, 'a flat array of ids is one input');
  // Without encoding_format the openai client asks for base64 and decodes it to floats itself.
  const b64 = await client.embeddings.create({ model: 'qwen3-embedding', input: TEXTS[1] });
  assert.deepEqual(b64.data[0].embedding, fromText.data[0].embedding.map((x) => Math.fround(x)));
});

test('ollama embed and the legacy /api/embeddings give the same vectors', async () => {
  const openai = await client.embeddings.create({ model: 'qwen3-embedding', input: TEXTS, encoding_format: 'float' });
  const r = await ollama.embed({ model: 'qwen3-embedding', input: TEXTS });
  assert.equal(r.embeddings.length, TEXTS.length);
  r.embeddings.forEach((e, i) => assert.deepEqual(e, openai.data[i].embedding));
  assert.equal(r.prompt_eval_count, openai.usage.prompt_tokens);
  const single = await ollama.embed({ model: 'qwen3-embedding:latest', input: TEXTS[2] });
  assert.deepEqual(single.embeddings[0], openai.data[2].embedding);
  const legacy = await ollama.embeddings({ model: 'qwen3-embedding', prompt: TEXTS[2] });
  assert.deepEqual(legacy.embedding, openai.data[2].embedding);
  assert.ok((await ollama.show({ model: 'qwen3-embedding' })).capabilities.includes('embedding'));
});

async function post(route, body) {
  const res = await fetch(`${server.baseURL}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

test('bad inputs, the limits and dimensions are 400s naming the field', async () => {
  const dims = await client.embeddings.create({ model: 'qwen3-embedding', input: 'x', dimensions: DIM, encoding_format: 'float' });
  assert.equal(dims.data[0].embedding.length, DIM);
  await assert.rejects(client.embeddings.create({ model: 'qwen3-embedding', input: 'x', dimensions: 32 }),
    (e) => e.status === 400 && e.param === 'dimensions' && /64/.test(e.message));
  for (const [input, param] of [['', 'input'], [[], 'input'], [['a', ''], 'input[1]'], [[[1, -2]], 'input[0]'], [{ a: 1 }, 'input']]) {
    const r = await post('/v1/embeddings', { model: 'qwen3-embedding', input });
    assert.equal(r.status, 400, JSON.stringify(input));
    assert.equal(r.body.error.param, param, JSON.stringify(input));
  }
  const tooMany = await post('/v1/embeddings', { input: Array.from({ length: 2049 }, () => 'a') });
  assert.equal(tooMany.status, 400);
  assert.match(tooMany.body.error.message, /at most 2048/);
  const tooLong = await post('/v1/embeddings', { input: 'word '.repeat(600) });
  assert.equal(tooLong.status, 400);
  assert.equal(tooLong.body.error.code, 'context_length_exceeded');
  // Ollama truncates to the context by default, and refuses with truncate false.
  const truncated = await post('/api/embed', { model: 'qwen3-embedding', input: 'word '.repeat(600) });
  assert.equal(truncated.status, 200);
  assert.equal(truncated.body.prompt_eval_count, 512);
  const refused = await post('/api/embed', { model: 'qwen3-embedding', input: 'word '.repeat(600), truncate: false });
  assert.equal(refused.status, 400);
  assert.equal(typeof refused.body.error, 'string');
  const alias = await post('/embeddings', { input: 'x' });
  assert.equal(alias.status, 200, 'reachable without /v1 as the other OpenAI routes');
});

test('a chat model answers 400 naming why', async () => {
  const chat = await startServer();
  try {
    const r = await fetch(`${chat.baseURL}/v1/embeddings`, { method: 'POST', body: JSON.stringify({ input: 'hi' }) });
    assert.equal(r.status, 400);
    const body = await r.json();
    assert.equal(body.error.code, 'model_not_embedding');
    assert.match(body.error.message, /not an embedding model.*pooling_type.*--pooling/);
  } finally {
    await chat.stop();
  }
  const pooled = await startServer(['--pooling', 'mean']);
  try {
    const r = await pooled.client().embeddings.create({ model: 'stories260K', input: 'Once upon a time', encoding_format: 'float' });
    assert.equal(r.data[0].embedding.length, 64);
  } finally {
    await pooled.stop();
  }
});

// A BERT-family encoder (`hearth synth --arch bert`: a synthetic WordPiece vocabulary, mean pooling): the openai
// client's embeddings.create gives unit vectors, the same for an input alone or batched, and chat is a 400 naming
// why.
test('a bert encoder embeds through embeddings.create and refuses chat', async () => {
  const bert = path.join(repoRoot, 'models', 'e2e-bert-tiny.gguf');
  if (!existsSync(bert)) {
    mkdirSync(path.dirname(bert), { recursive: true });
    execFileSync(BIN, ['synth', '--arch', 'bert', '--dim', '64', '--layers', '2', '--heads', '4', '--ffn', '128',
      '--ctx', '512', '--type', 'f32', '-o', bert], { stdio: 'ignore' });
  }
  const encoder = await startServer(['--model-id', 'bert-tiny'], {}, { models: [bert] });
  try {
    const c = encoder.client();
    const texts = ['The house rules: no shoes in the kitchen!', 'Café déjà vu, 東京 and 42 apples.'];
    const many = await c.embeddings.create({ model: 'bert-tiny', input: texts, encoding_format: 'float' });
    assert.equal(many.data.length, 2);
    for (const d of many.data) {
      assert.equal(d.embedding.length, 64);
      assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5);
    }
    const one = await c.embeddings.create({ model: 'bert-tiny', input: texts[1], encoding_format: 'float' });
    assert.deepEqual(one.data[0].embedding, many.data[1].embedding, 'batched or alone, the same bits');
    assert.ok(cosine(many.data[0].embedding, many.data[1].embedding) < 0.99);
    await assert.rejects(
      c.chat.completions.create({ model: 'bert-tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
      (e) => e.status === 400 && /embedding model/.test(e.message));
  } finally {
    await encoder.stop();
  }
});
