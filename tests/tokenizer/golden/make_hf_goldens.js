// Golden ids from the reference Hugging Face `tokenizers` library (its Rust
// core, published on npm as @anush008/tokenizers). See README.md to rerun.
// usage: node make_hf_goldens.js TOKENIZER_JSON OUT_JSONL
const { Tokenizer } = require("@anush008/tokenizers");
const fs = require("fs");
const texts = require("./texts.js");

async function main() {
  const [file, out] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(file);
  const lines = [];
  for (const text of texts) {
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    const ids = enc.getIds();
    const decoded = await tok.decode(ids, false);
    lines.push(JSON.stringify({ text, ids, decoded }));
  }
  fs.writeFileSync(out, lines.join("\n") + "\n");
}
main();
