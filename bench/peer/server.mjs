// The peer server: llama.cpp's engine (v0.5.0, through node-llama-cpp 3.22.1, CPU build) behind a thin
// OpenAI-compatible HTTP layer of ours, for side-by-side serving benchmarks (the household, batched decode).
//
// What it is, plainly: one llama.cpp context with `np` sequences, the way `llama-server -np N -c C` runs N slots
// of C/N tokens each. A request takes a free sequence (the one whose kept tokens share the longest prefix with its
// prompt when that is over half the prompt, else the least recently used, as llama-server picks a slot), keeps
// that common prefix, erases the rest and evaluates only the new tokens: per-sequence prompt reuse, exactly what
// llama-server's slots do. There is no shared prefix cache: a prefix one sequence computed is not reused by
// another. Requests wait in arrival order when every sequence is busy; node-llama-cpp batches the busy sequences'
// tokens into one decode call per step (continuous batching, with the dispatch schedule below). Even so its
// aggregate decode with several sequences stays near one stream's speed: each sequence's sampling and the
// JavaScript between steps run one after another. Its batched-decode figures measure this harness, not
// llama-server's batching.
//
// Chat messages are rendered with the model's chat template through node-llama-cpp's resolveChatWrapper, or, for a
// GGUF without `tokenizer.chat_template`, with the same fallback format as Hearth's (`User: ...\n`, answers as
// `Assistant:...\n`, system text then a blank line, ending `Assistant:`), so both servers see the same tokens.
//
// Routes: GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions (stream with SSE ending
// `data: [DONE]`, stream_options.include_usage, usage.prompt_tokens_details.cached_tokens = the tokens kept).
// Request fields: prompt / messages, max_tokens (default 256), temperature (0: greedy), seed, ignore_eos,
// cache_prompt (false: evaluate the whole prompt), stream. Other fields are ignored. Bad JSON or fields: 400.
//
//   node bench/peer/server.mjs --model F.gguf [-t 2] [--np 4] [-c 16384] [--port 8081] [--host 127.0.0.1] [--fa auto]
// It prints `listening on http://HOST:PORT` when ready (--port 0 picks a free port).

import http from "node:http";

import {fail, flashAttention, loadLlama, parseFlags, promptTokens} from "./peer.mjs";

const USAGE = "usage: server.mjs --model F.gguf [-t 2] [--np 4] [-c 16384] [--port 8081] [--host 127.0.0.1] " +
              "[--fa auto|on|off] [--isa avx2]";
const a = parseFlags(process.argv.slice(2),
                     {model: "", t: 2, np: 4, c: 16384, port: 8081, host: "127.0.0.1", fa: "auto", isa: ""}, USAGE);
if (!a.model) fail(USAGE);
if (a.np < 1 || a.np > 64 || a.c < a.np * 32) fail("need 1 <= --np <= 64 and -c >= 32 * np");
const MAX_BODY = 4 << 20;

const peer = await loadLlama({threads: a.t, isa: a.isa});
const model = await peer.llama.loadModel({modelPath: a.model}).catch((e) => fail(`cannot load ${a.model}: ${e.message}`));
const perSequence = Math.floor(a.c / a.np);
// node-llama-cpp dispatches a decode as soon as one sequence queues a token, unless every sequence of the context
// has queued one; a busy sequence's next token arrives only after its own sampling returns, so concurrent streams
// would rarely share a decode. llama-server's loop instead batches one token of every active slot per step. This
// schedule does the same: it dispatches when every busy sequence has queued its token (or after 2 ms, so a stream
// that is still rendering text does not hold the others back).
let busy = 0;
function dispatchWhenBusySequencesQueued(dispatch) {
  const start = performance.now();
  const poll = () => {
    const queued = context._queuedDecodeSequenceIds?.size ?? busy;  // node-llama-cpp's own count, when it has one
    if (queued >= busy || performance.now() - start > 2) dispatch();
    else setImmediate(poll);
  };
  setImmediate(poll);
}
const context = await model.createContext({
  contextSize: perSequence, sequences: a.np, batchSize: 512, threads: {ideal: a.t, min: a.t},
  flashAttention: flashAttention(a.fa), batching: {dispatchSchedule: dispatchWhenBusySequencesQueued},
});
const slots = Array.from({length: a.np}, (_, i) => ({id: i, sequence: context.getSequence(), busy: false, used: 0}));
const modelId = a.model.split("/").pop();
const hasTemplate = model.fileInfo.metadata?.tokenizer?.chat_template != null;
let chatWrapper = null;
if (hasTemplate) {
  const {resolveChatWrapper} = await import("node-llama-cpp");
  chatWrapper = resolveChatWrapper(model);
}

// ---- slots ----
const waiting = [];
let clock = 0;

function commonPrefix(x, y) {
  let i = 0;
  while (i < x.length && i < y.length && x[i] === y[i]) ++i;
  return i;
}

// Resolves with a free slot for `tokens` as llama-server picks one: the slot whose kept tokens share the longest
// prefix with the prompt when that prefix is over half the prompt (its --slot-prompt-similarity 0.5), else the
// least recently used free slot.
function acquire(tokens) {
  return new Promise((resolve) => {
    waiting.push({tokens, resolve});
    dispatch();
  });
}

function dispatch() {
  while (waiting.length > 0) {
    const free = slots.filter((s) => !s.busy);
    if (free.length === 0) return;
    const {tokens, resolve} = waiting.shift();
    let best = null;
    let bestLength = 0;
    for (const s of free) {
      const length = commonPrefix(s.sequence.contextTokens, tokens);
      if (length > bestLength) [best, bestLength] = [s, length];
    }
    if (best === null || bestLength <= 0.5 * tokens.length) {
      best = free.reduce((x, y) => (y.used < x.used ? y : x));
    }
    best.busy = true;
    ++busy;
    best.used = ++clock;
    resolve(best);
  }
}

function release(slot) {
  slot.busy = false;
  --busy;
  dispatch();
}

// ---- requests ----
class BadRequest extends Error {}

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => (part && typeof part.text === "string" ? part.text : "")).join("");
  if (content == null) return "";
  throw new BadRequest("message content must be a string or an array of text parts");
}

function renderChat(messages) {
  if (!Array.isArray(messages) || messages.length === 0) throw new BadRequest("messages must be a non-empty array");
  for (const m of messages) {
    if (!m || typeof m.role !== "string") throw new BadRequest("each message needs a string role");
  }
  if (chatWrapper) {
    const chatHistory = messages.map((m) => {
      const text = contentText(m.content);
      if (m.role === "system") return {type: "system", text};
      if (m.role === "assistant") return {type: "model", response: [text]};
      return {type: "user", text};
    });
    chatHistory.push({type: "model", response: []});
    const {contextText} = chatWrapper.generateContextState({chatHistory});
    return contextText.tokenize(model.tokenizer);
  }
  let text = "";
  for (const m of messages) {
    const content = contentText(m.content);
    if (m.role === "system") text += `${content}\n\n`;
    else if (m.role === "assistant") text += `Assistant:${content}\n`;
    else text += `${m.role.charAt(0).toUpperCase()}${m.role.slice(1).toLowerCase()}: ${content}\n`;
  }
  return promptTokens(model, `${text}Assistant:`);
}

function parseOptions(body, chat) {
  const tokens = chat ? renderChat(body.messages) : (() => {
    if (typeof body.prompt !== "string" || body.prompt.length === 0) throw new BadRequest("prompt must be a non-empty string");
    return promptTokens(model, body.prompt);
  })();
  const maxTokens = body.max_tokens ?? body.max_completion_tokens ?? 256;
  if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new BadRequest("max_tokens must be a positive integer");
  const temperature = body.temperature ?? 1;
  if (typeof temperature !== "number" || temperature < 0 || temperature > 2) throw new BadRequest("temperature must be in [0, 2]");
  if (tokens.length + maxTokens > perSequence) {
    throw new BadRequest(`prompt (${tokens.length} tokens) + max_tokens (${maxTokens}) exceeds a sequence's ${perSequence}-token context (-c ${a.c} / --np ${a.np})`);
  }
  return {tokens, maxTokens, temperature, seed: Number.isInteger(body.seed) ? body.seed : undefined,
          ignoreEos: body.ignore_eos === true, cachePrompt: body.cache_prompt !== false,
          stream: body.stream === true, includeUsage: body.stream_options?.include_usage === true};
}

// Runs one request on a slot: keeps the common prefix, evaluates the rest, calls onToken(text) per token.
async function generate(options, onToken) {
  const slot = await acquire(options.tokens);
  try {
    const sequence = slot.sequence;
    let keep = options.cachePrompt ? commonPrefix(sequence.contextTokens, options.tokens) : 0;
    keep = Math.min(keep, options.tokens.length - 1);  // the last prompt token is evaluated for its logits
    if (keep < sequence.nextTokenIndex) {
      await sequence.eraseContextTokenRanges([{start: keep, end: sequence.nextTokenIndex}]);
    }
    keep = sequence.nextTokenIndex;  // what the sequence really kept (a model that cannot erase keeps less)
    const generated = [];
    let finish = "length";
    const sampling = {temperature: options.temperature, seed: options.seed};
    for await (const token of sequence.evaluate(options.tokens.slice(keep), sampling)) {
      if (!options.ignoreEos && model.isEogToken(token)) {
        finish = "stop";
        break;
      }
      const text = model.detokenize([token], false, generated.slice(-8));
      generated.push(token);
      onToken(text);
      if (generated.length >= options.maxTokens) break;
    }
    return {generated, cached: keep, finish};
  } finally {
    release(slot);
  }
}

function usage(options, result) {
  return {prompt_tokens: options.tokens.length, completion_tokens: result.generated.length,
          total_tokens: options.tokens.length + result.generated.length,
          prompt_tokens_details: {cached_tokens: result.cached}};
}

function sendJson(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, {"content-type": "application/json", "content-length": Buffer.byteLength(text)});
  res.end(text);
}

function sendError(res, status, message, type = "invalid_request_error") {
  sendJson(res, status, {error: {message, type, code: null}});
}

async function complete(res, body, chat) {
  const options = parseOptions(body, chat);
  const id = `${chat ? "chatcmpl" : "cmpl"}-peer-${++clock}`;
  const created = Math.floor(Date.now() / 1000);
  const object = chat ? "chat.completion" : "text_completion";
  const choice = (text, finish) => chat
      ? {index: 0, delta: text == null ? {} : {content: text}, finish_reason: finish}
      : {index: 0, text: text ?? "", finish_reason: finish};
  if (!options.stream) {
    let text = "";
    const result = await generate(options, (piece) => { text += piece; });
    const only = chat ? {index: 0, message: {role: "assistant", content: text}, finish_reason: result.finish}
                      : {index: 0, text, finish_reason: result.finish};
    sendJson(res, 200, {id, object, created, model: modelId, choices: [only], usage: usage(options, result)});
    return;
  }
  res.writeHead(200, {"content-type": "text/event-stream", "cache-control": "no-cache"});
  const chunkObject = chat ? "chat.completion.chunk" : "text_completion";
  const send = (payload) => res.write(`data: ${JSON.stringify(payload)}\n\n`);
  const result = await generate(options, (piece) => {
    send({id, object: chunkObject, created, model: modelId, choices: [choice(piece, null)]});
  });
  send({id, object: chunkObject, created, model: modelId, choices: [choice(null, result.finish)]});
  if (options.includeUsage) send({id, object: chunkObject, created, model: modelId, choices: [], usage: usage(options, result)});
  res.end("data: [DONE]\n\n");
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on("data", (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new BadRequest(`body exceeds ${MAX_BODY} bytes`));
        req.destroy();
        return;
      }
      parts.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

const server = http.createServer(async (req, res) => {
  const path = req.url.split("?")[0];
  try {
    if (req.method === "GET" && path === "/health") return sendJson(res, 200, {status: "ok"});
    if (req.method === "GET" && path === "/v1/models") {
      return sendJson(res, 200, {object: "list", data: [{id: modelId, object: "model", owned_by: "llama.cpp"}]});
    }
    const chat = path === "/v1/chat/completions";
    if (req.method !== "POST" || (!chat && path !== "/v1/completions")) return sendError(res, 404, `no route ${req.method} ${path}`, "not_found_error");
    let body;
    try {
      body = JSON.parse(await readBody(req));
    } catch (e) {
      throw e instanceof BadRequest ? e : new BadRequest(`body is not JSON: ${e.message}`);
    }
    if (!body || typeof body !== "object" || Array.isArray(body)) throw new BadRequest("body must be a JSON object");
    await complete(res, body, chat);
  } catch (e) {
    if (res.headersSent) {
      res.end();
    } else if (e instanceof BadRequest) {
      sendError(res, 400, e.message);
    } else {
      sendError(res, 500, `peer server: ${e.message}`, "server_error");
    }
  }
});

server.listen(a.port, a.host, () => {
  const {port} = server.address();
  process.stdout.write(`peer server (llama.cpp v0.5.0 via node-llama-cpp 3.22.1, ${peer.variant()}, ${a.np} sequences of ` +
                       `${perSequence} tokens, per-sequence prompt reuse) listening on http://${a.host}:${port}\n`);
});
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    server.close();
    process.exit(0);
  });
}
