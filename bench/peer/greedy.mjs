// Greedy continuation by the peer (llama.cpp v0.5.0 through node-llama-cpp 3.22.1): the reference a new
// architecture's forward pass is checked against on a synthetic file. Prints one JSON object:
//   {"prompt_ids": [...], "ids": [...], "text": "...", "variant": "libggml-cpu-<level>.so"}
// prompt_ids: BOS (when the model adds one) and the prompt tokenized without special-token parsing; ids: the n
// greedy tokens after it (temperature 0, no repeat penalty, end-of-generation tokens generated like any other, as
// llama-cli -n with --ignore-eos would); text: those ids detokenized.
//
// Flash attention is off by default: llama.cpp's CPU flash-attention kernel accumulates the softmax-weighted values
// in f16 when V is f16, so on a random model a near-tie can flip (the synthetic llama3 file's 20th token does),
// while its plain attention path keeps them in f32 as Hearth does (and as llama.cpp b4748's default did).
//
//   node bench/peer/greedy.mjs --model F.gguf --prompt "Once upon a time" [-n 32] [--fa off] [-t 2] [--ctx 1024]

import {fail, flashAttention, loadLlama, parseFlags, promptTokens} from "./peer.mjs";

const USAGE = "usage: greedy.mjs --model F.gguf --prompt TEXT [-n 32] [-t 2] [--fa off|on|auto] [--ctx 1024] [--isa avx2]";
const a = parseFlags(process.argv.slice(2), {model: "", prompt: "", n: 32, t: 2, fa: "off", ctx: 1024, isa: ""},
                     USAGE);
if (!a.model || !a.prompt) fail(USAGE);
if (a.n < 1 || a.n > 4096) fail("-n must be between 1 and 4096");

const {llama, variant, log} = await loadLlama({threads: a.t, isa: a.isa});
let model;
try {
  model = await llama.loadModel({modelPath: a.model});
} catch (e) {
  fail(`cannot load ${a.model}: ${e.message}\n${log.join("\n")}`);
}
const prompt = promptTokens(model, a.prompt);
if (prompt.length + a.n > a.ctx) fail(`prompt (${prompt.length}) + n (${a.n}) exceeds --ctx ${a.ctx}`);
const context = await model.createContext({contextSize: a.ctx, threads: {ideal: a.t, min: a.t},
                                           flashAttention: flashAttention(a.fa), sequences: 1});
const sequence = context.getSequence();
const ids = [];
// evaluate() stops at nothing by itself: the loop takes exactly n tokens, end-of-generation ones included.
for await (const token of sequence.evaluate(prompt, {temperature: 0})) {
  ids.push(token);
  if (ids.length >= a.n) break;
}
process.stdout.write(JSON.stringify({prompt_ids: prompt, ids, text: model.detokenize(ids), variant: variant()}) + "\n");
await context.dispose();
await model.dispose();
