// Embeddings by the peer (llama.cpp v0.5.0 through node-llama-cpp 3.22.1): model.createEmbeddingContext(), then
// getEmbeddingFor(text) for each text, one after another (node-llama-cpp evaluates one input per call). The
// reference Hearth's /v1/embeddings is checked against on a synthetic embedding file (tests/model/embedding_test.cpp)
// and timed against (bench/embed_bench.mjs). Prints one JSON object:
//   {"inputs": [{"ids": [...], "embedding": [...]}, ...], "seconds": S, "variant": "libggml-cpu-<level>.so"}
// ids: the tokens the peer evaluated (BOS and EOS as the file asks, no special-token parsing); embedding: the
// model's pooling (its pooling_type) as llama.cpp returns it, not normalised; seconds: the wall time of the
// getEmbeddingFor calls only.
//
//   node bench/peer/embed.mjs --model F.gguf --texts TEXTS.json [-t 2] [--ctx 1024] [--no-vectors]
// TEXTS.json holds a JSON array of strings. --no-vectors leaves the embeddings out (a benchmark's output).

import {readFileSync} from "node:fs";

import {fail, loadLlama, parseFlags} from "./peer.mjs";

const USAGE = "usage: embed.mjs --model F.gguf --texts TEXTS.json [-t 2] [--ctx 1024] [--no-vectors]";
const a = parseFlags(process.argv.slice(2), {model: "", texts: "", t: 2, ctx: 1024, "no-vectors": false}, USAGE);
if (!a.model || !a.texts) fail(USAGE);
const texts = JSON.parse(readFileSync(a.texts, "utf8"));
if (!Array.isArray(texts) || texts.some((t) => typeof t !== "string")) fail(`${a.texts} must hold an array of strings`);

const {llama, variant, log} = await loadLlama({threads: a.t});
let model;
try {
  model = await llama.loadModel({modelPath: a.model});
} catch (e) {
  fail(`cannot load ${a.model}: ${e.message}\n${log.join("\n")}`);
}
const context = await model.createEmbeddingContext({contextSize: a.ctx, threads: a.t});
const inputs = [];
const start = process.hrtime.bigint();
for (const text of texts) {
  const embedding = await context.getEmbeddingFor(text);
  inputs.push({embedding: a["no-vectors"] ? [] : Array.from(embedding.vector)});
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
for (let i = 0; i < texts.length; ++i) {
  // The ids getEmbeddingFor evaluated: the text's tokens with the BOS and EOS its _prepareInput adds.
  const ids = model.tokenize(texts[i], false);
  context._prepareInput(ids);
  inputs[i].ids = ids;
}
process.stdout.write(JSON.stringify({inputs, seconds, variant: variant()}) + "\n");
await context.dispose();
await model.dispose();
