// Fixtures and golden ids from the npm `tiktoken` package (the OpenAI
// tiktoken Rust core compiled to wasm). Writes, for each encoding,
//   FIXTURES/<name>/tiktoken.model  (base64 token + rank per line, as Kimi K2 ships)
//   FIXTURES/<name>/tiktoken.json   ({"pat_str", "special_tokens"})
//   <name>.jsonl                    ({"text", "ids"} per line, special tokens allowed)
// usage: node make_tiktoken_goldens.js FIXTURES_DIR
const { get_encoding } = require("tiktoken");
const fs = require("fs");
const path = require("path");
const texts = require("./texts.js");

const fixtures = process.argv[2];
for (const name of ["cl100k_base", "o200k_base"]) {
  const data = require(`tiktoken/encoders/${name}.json`);
  const fields = data.bpe_ranks.split(" ");
  if (fields[0] !== "!") throw new Error("unexpected bpe_ranks format");
  let rank = Number(fields[1]);
  const lines = [];
  for (const tok of fields.slice(2)) lines.push(`${tok} ${rank++}`);
  const dir = path.join(fixtures, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tiktoken.model"), lines.join("\n") + "\n");
  fs.writeFileSync(path.join(dir, "tiktoken.json"),
                   JSON.stringify({ pat_str: data.pat_str, special_tokens: data.special_tokens }, null, 1) + "\n");
  const enc = get_encoding(name);
  const out = texts.map((text) => JSON.stringify({ text, ids: Array.from(enc.encode(text, "all")) }));
  fs.writeFileSync(path.join(__dirname, `${name}.jsonl`), out.join("\n") + "\n");
  enc.free();
}
