// The texts every golden file is made from (shared by make_hf_goldens.js and
// make_tiktoken_goldens.js). Varied scripts, whitespace, digits, code, emoji.
const texts = [
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog. It's 5 o'clock; we'll see—won't we?",
  "  leading spaces and trailing   ",
  "tabs\tand\t\tmore\ttabs\n\nnew lines\r\nwindows line\rold mac",
  "\n\n\n   \n\t\t\n",
  "          ",
  "a  b   c    d     e",
  "Привет, мир! Как дела? Съешь же ещё этих мягких французских булок.",
  "مرحبا بالعالم. هذه جملة باللغة العربية مع أرقام ١٢٣٤٥.",
  "你好，世界！今天天气很好，我们去公园散步吧。",
  "日本語のテキスト：東京は日本の首都です。カタカナとひらがな。",
  "한국어 문장입니다. 안녕하세요, 반갑습니다!",
  "Emoji: 😀😃😄 👍🏽 🇺🇸🇯🇵 family 👨‍👩‍👧‍👦 rainbow flag 🏳️‍🌈 heart ❤️",
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "int main(int argc, char** argv) {\n\tstd::printf(\"%d\\n\", argc);\n\treturn 0;\n}",
  "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
  "1234567890123456789012345678901234567890",
  "3.14159265358979 and 2.71828, 1e-10, -42, +7, 0x1F, 1,000,000",
  "<｜begin▁of▁sentence｜>Hello<｜end▁of▁sentence｜>",
  "User: hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User｜>bye",
  "<|endoftext|>plain <|fim_prefix|>code<|fim_suffix|> and <|endofprompt|>",
  "Mixed: English, русский, العربية, 中文, 日本語, 한국어, emoji 🎉, code `x += 1`.",
  "URLs: https://example.com/path?q=1&r=two#frag and emails a.b@c.de",
  "CamelCaseIdentifiers and snake_case_names and SCREAMING_CASE",
  "Ünïcödé çåfé naïve résumé Straße ΑΒΓ αβγ",
  "Zero\u200bwidth\u200bspaces and non\u00a0breaking\u00a0spaces",
  "combining: e\u0301 a\u0308 n\u0303 and precomposed é ä ñ",
  "!!!??? ... --- *** ### $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
  "I'm you're he's we've they'd I'll DON'T Can't",
  "",
  " ",
  "a",
  "hello\n",
  "   \n   x",
  "数字123和汉字混合456",
  "ﾊﾝｶｸｶﾀｶﾅ and ＦＵＬＬＷＩＤＴＨ ａｂｃ １２３",
  "math: ∑ᵢ xᵢ² ≤ ∞, ∀x∈ℝ, √2 ≈ 1.414",
  "Thai: สวัสดีครับ Hindi: नमस्ते दुनिया Hebrew: שלום עולם",
];

// Plus generated mixtures (a fixed-seed LCG, so reruns give the same texts):
// fragments glued with odd whitespace, Unicode spaces, marks and specials.
const fragments = [
  "hello", "World", "don't", "I'M", "42", "1234567", "3.5", "x=y+z;", "if (a) {", "}\n", "naïve", "Ωμέγα",
  "Москва", "москва", "北京", "東京タワー", "ひらがな", "서울", "القاهرة", "עברית", "हिन्दी", "ไทย",
  "😀", "👍🏿", "👩‍💻", "🇩🇪", "❤️", "1️⃣", "é", "e\u0301", "\u0301", "ǅ", "ﬁ", "Ⅻ", "²", "½", "٣",
  "<｜begin▁of▁sentence｜>", "<｜User｜>", "<|endoftext|>", "<|fim_middle|>", "<think>", "<", "｜", "▁",
  "'s", "'ll", "'", "\"", "...", "—", "–", "…", "«", "»", "、", "。", "！", "？", "$", "€", "¥", "@", "#",
  "https://x.io/a?b=c", "/usr/bin/env", "\\n", "C:\\Windows", "a_b", "__init__", "0x7f", "1e9",
];
const spaces = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\u00a0", "\u3000", "\u2028", "\u200b", "\u2003", "", "", ""];
let state = 20240607;
function rand(n) {
  state = (state * 1103515245 + 12345) % 2147483648;
  return state % n;
}
for (let i = 0; i < 160; ++i) {
  let s = "";
  const parts = 1 + rand(12);
  for (let k = 0; k < parts; ++k) s += fragments[rand(fragments.length)] + spaces[rand(spaces.length)];
  texts.push(s);
}
module.exports = texts;
