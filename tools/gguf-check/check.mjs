// Reads GGUF files with an independent reader (@huggingface/gguf) and checks the tensor layout against the file.
// Usage: node tools/gguf-check/check.mjs FILE...   (run `npm ci` in tools/gguf-check once)
// Prints one summary line per file; exits 1 if any file fails to parse or a tensor lies outside the file.

import { gguf } from "@huggingface/gguf";
import { statSync } from "node:fs";

// [elements per block, bytes per block] by GGML type id, for the layout check.
const BLOCKS = {
  0: [1, 4], 1: [1, 2], 2: [32, 18], 3: [32, 20], 6: [32, 22], 7: [32, 24], 8: [32, 34], 9: [32, 36],
  10: [256, 84], 11: [256, 110], 12: [256, 144], 13: [256, 176], 14: [256, 210], 15: [256, 292],
  24: [1, 1], 25: [1, 2], 26: [1, 4], 27: [1, 8], 28: [1, 8], 30: [1, 2],
};

function tensorBytes(info) {
  const block = BLOCKS[info.dtype];
  if (!block) throw new Error(`tensor ${info.name}: type ${info.dtype} not in this checker's table`);
  const [size, bytes] = block;
  const n = info.shape.reduce((a, b) => a * b, 1n);
  if (info.shape[0] % BigInt(size) !== 0n) throw new Error(`tensor ${info.name}: row not a whole number of blocks`);
  return (n / BigInt(size)) * BigInt(bytes);
}

async function check(file) {
  const { metadata, tensorInfos, tensorDataOffset } = await gguf(file, {
    allowLocalFile: true,
    computeParametersCount: true,
  });
  const fileSize = BigInt(statSync(file).size);
  const alignment = BigInt(metadata["general.alignment"] ?? 32);
  if (tensorInfos.length > 0 && tensorDataOffset % alignment !== 0n) {
    throw new Error(`data section at ${tensorDataOffset} is not aligned to ${alignment}`);
  }
  const sorted = [...tensorInfos].sort((a, b) => (a.offset < b.offset ? -1 : a.offset > b.offset ? 1 : 0));
  let end = 0n;
  for (const info of sorted) {
    if (info.offset % alignment !== 0n) throw new Error(`tensor ${info.name}: offset ${info.offset} not aligned`);
    if (info.offset < end) throw new Error(`tensor ${info.name}: overlaps the previous tensor`);
    end = info.offset + tensorBytes(info);
    if (tensorDataOffset + end > fileSize) throw new Error(`tensor ${info.name}: data runs past end of file`);
  }
  const arch = metadata["general.architecture"];
  const tokens = metadata["tokenizer.ggml.tokens"];
  console.log(
    `${file}: ok: GGUF v${metadata.version}, arch ${arch}, ${tensorInfos.length} tensors, ` +
      `${metadata.kv_count} metadata keys, vocab ${tokens ? tokens.length : 0}, ` +
      `context ${metadata[`${arch}.context_length`]}, embedding ${metadata[`${arch}.embedding_length`]}`,
  );
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node check.mjs FILE...");
  process.exit(2);
}
let failed = false;
for (const file of files) {
  try {
    await check(file);
  } catch (err) {
    console.error(`${file}: FAILED: ${err.message}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
