"""Compares the sentence model run whole with its static distillation, on
the search corpus: each alone, and each fused with the engine's ranking
by words, as discoveryd/internal/search fuses them.

Usage: search-model-compare.py MODEL_DIR TABLE DUMP

MODEL_DIR holds all-MiniLM-L6-v2's model.safetensors and tokenizer.json;
TABLE is the distilled model (scripts/search-model.sh); DUMP is the
engine's hits (TestDumpEngine). Prints recall@1 / recall@5 on the tuned
set, the hold-out and the dev set, the sets choices are made on; with
BLIND=1 also on the blind set, for reporting a choice already made.
Needs numpy and tokenizers.
"""
import importlib.util
import json
import os
import re
import struct
import sys
import time

import numpy as np
from tokenizers import Tokenizer

TIERS = ("exact name", "exact alias or server-qualified name", "tool name in the query")


def load_table(path):
    """Reads the distilled model as discoveryd/internal/embed does."""
    with open(path, "rb") as f:
        assert f.read(8) == b"CXEMBED1"
        dims, count = struct.unpack("<II", f.read(8))
        vocab = [f.read(f.read(1)[0]).decode() for _ in range(count)]
        w = np.frombuffer(f.read(4 * count), "<f4")
        q = np.frombuffer(f.read(count * dims), np.int8).reshape(count, dims)
        scale = np.frombuffer(f.read(4 * count), "<f4")
    special = np.array([t.startswith("[") and t.endswith("]") for t in vocab])
    return q.astype(np.float32) * (scale * w * ~special)[:, None]


def split_name(name):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return re.sub(r"[_\-./]+", " ", s)


def recall(ranked, relevant, k):
    return sum(1 for h in ranked[:k] if h in relevant) / min(len(relevant), k)


def fused(q, docvecs, qvec, ids, pos, w, floor=0.2, pool=50, nearest=20):
    """The engine's ranking with the model's cosine mixed in, as
    semantic.go does it."""
    tier = [h["id"] for h in q["hits"] if h["why"] in TIERS]
    words = [(h["id"], h["score"]) for h in q["hits"] if h["why"] not in TIERS]
    if w == 0:
        return tier + [i for i, _ in words]
    cos = docvecs @ qvec
    best = max([s for _, s in words], default=0) or 1.0
    g = lambda c: max(0.0, (c - floor) / (1 - floor))
    score = {i: (1 - w) * s for i, s in words}
    for i, _ in words[:pool]:
        score[i] += w * best * g(cos[pos[i]])
    for t in np.argsort(-cos)[:nearest]:
        if ids[t] not in score and ids[t] not in tier and g(cos[t]) > 0:
            score[ids[t]] = w * best * g(cos[t])
    return tier + sorted((i for i in score if i not in tier), key=lambda i: -score[i])


def report(name, dump, rank, sets):
    row = {}
    for q in dump["queries"]:
        if q["set"] not in sets:
            continue
        r = rank(q)
        n, r1, r5 = row.get(q["set"], (0, 0, 0))
        row[q["set"]] = (n + 1, r1 + recall(r, q["relevant"], 1), r5 + recall(r, q["relevant"], 5))
    print("%-44s" % name + "  ".join("%s %.3f/%.3f" % (s, row[s][1] / row[s][0], row[s][2] / row[s][0]) for s in sets if s in row), flush=True)


def main():
    model_dir, table_path, dump_path = sys.argv[1:4]
    spec = importlib.util.spec_from_file_location("sm", os.path.join(os.path.dirname(__file__), "search-model.py"))
    sm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sm)
    bert = sm.Bert(sm.load_safetensors(model_dir + "/model.safetensors"))
    tok = Tokenizer.from_file(model_dir + "/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(128)
    dump = json.load(open(dump_path))
    docs = dump["docs"]
    ids = [d["Server"] + "/" + d["Tool"] for d in docs]
    pos = {k: i for i, k in enumerate(ids)}
    doc_text = [split_name(d["Tool"]) + ". " + d["Description"][:600] for d in docs]
    queries = sorted({q["query"] for q in dump["queries"]})
    qpos = {q: i for i, q in enumerate(queries)}
    sets = ("tuned", "holdout", "dev") + (("blind",) if os.environ.get("BLIND") == "1" else ())

    def whole(texts, batch):
        """Mean-pooled, normalised outputs: the model as it is meant to run."""
        encs = [tok.encode(t).ids for t in texts]
        out = np.zeros((len(texts), 384), np.float32)
        order = np.argsort([len(e) for e in encs])
        for i in range(0, len(order), batch):
            idx = order[i : i + batch]
            t = max(len(encs[j]) for j in idx)
            x = np.zeros((len(idx), t), np.int64)
            m = np.zeros((len(idx), t), np.float32)
            for r, j in enumerate(idx):
                x[r, : len(encs[j])], m[r, : len(encs[j])] = encs[j], 1
            h = bert.forward(x, m)
            v = (h * m[:, :, None]).sum(1) / m.sum(1, keepdims=True)
            out[idx] = v / np.linalg.norm(v, axis=1, keepdims=True)
        return out

    start = time.perf_counter()
    for q in queries[:50]:
        whole([q], 1)
    per_query = (time.perf_counter() - start) / 50
    start = time.perf_counter()
    full_docs = whole(doc_text, 16)
    per_doc = (time.perf_counter() - start) / len(doc_text)
    full_q = whole(queries, 64)
    print("whole model in numpy: %.1f ms a query (one at a time), %.1f ms a tool (batches of 16)" % (1000 * per_query, 1000 * per_doc))

    table = load_table(table_path)

    def static(texts):
        enc = tok.encode_batch(texts, add_special_tokens=False)
        out = np.zeros((len(texts), table.shape[1]), np.float32)
        for i, e in enumerate(enc):
            v = table[e.ids].sum(0) if e.ids else out[i]
            n = np.linalg.norm(v)
            out[i] = v / n if n > 0 else v
        return out

    static_docs, static_q = static(doc_text), static(queries)

    def alone(dv, qv):
        return lambda q: [ids[t] for t in np.argsort(-(dv @ qv[qpos[q["query"]]]))[:5]]

    report("engine (words)", dump, lambda q: fused(q, None, None, ids, pos, 0), sets)
    report("distilled model alone", dump, alone(static_docs, static_q), sets)
    report("whole model alone", dump, alone(full_docs, full_q), sets)
    for w in (0.3, 0.5, 0.7):
        report("engine + distilled model, w %.1f" % w, dump, lambda q: fused(q, static_docs, static_q[qpos[q["query"]]], ids, pos, w), sets)
        report("engine + whole model, w %.1f" % w, dump, lambda q: fused(q, full_docs, full_q[qpos[q["query"]]], ids, pos, w), sets)


if __name__ == "__main__":
    main()
