"""Measures a sentence model run whole by ONNX Runtime, alone and fused
with the engine's ranking by words as discoveryd/internal/search fuses
them, on the search corpus.

Usage: search-model-onnx-compare.py MODEL.onnx TOKENIZER.json DUMP CACHE_DIR

DUMP is the engine's hits (TestDumpEngine); CACHE_DIR keeps the tools'
and queries' vectors between runs, by model file and text. A tool's text
is its server's and its own name spelled as words and the first 600
characters of its description, cut at 128 tokens. Prints
recall@1 / recall@5 on the tuned set, the hold-out and the dev set, the
sets choices are made on, for a grid of weights and floors. BLIND=1
prints the blind set too, for the one row FUSE names ("w,floor"), to
report a choice already made. POOLING is cls (bge) or mean (MiniLM,
e5); QUERY_PREFIX is put before every query, DOC_PREFIX before every tool's text. Needs numpy, tokenizers
and onnxruntime.
"""
import hashlib
import json
import os
import re
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

TIERS = (
    "exact name",
    "exact alias or server-qualified name",
    "tool name in the query",
    "misspelt tool name",
)


def split_name(name):
    """Spells an identifier as words, as semantic.go's splitName does."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return re.sub(r"[_\-./]+", " ", s)


def doc_text(d):
    """What the model reads of a tool, as search.ModelText writes it."""
    return split_name(d["Server"]) + " " + split_name(d["Tool"]) + ". " + d["Description"][:600]


def recall(ranked, relevant, k):
    return sum(1 for h in ranked[:k] if h in relevant) / min(len(relevant), k)


def fused(q, docvecs, qvec, ids, pos, w, floor, pool=50, nearest=20):
    """The engine's ranking with the model's cosine mixed in, as
    semantic.go does it: the pool of word matches scores
    (1-w)*words + w*best*g(cos), the nearest tools by cosine join with
    w*best*g(cos), and the name tiers stay first."""
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
    print("%-40s" % name + "  ".join("%s %.3f/%.3f" % (s, row[s][1] / row[s][0], row[s][2] / row[s][0]) for s in sets if s in row), flush=True)


class Encoder:
    """The model as it is meant to run: tokens in, pooled unit vector out."""

    def __init__(self, model, tokenizer, pooling, max_tokens, threads):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        self.tok = Tokenizer.from_file(tokenizer)
        self.tok.no_padding()
        self.tok.enable_truncation(max_tokens)
        self.pooling = pooling
        self.inputs = {i.name for i in self.sess.get_inputs()}

    def __call__(self, texts, batch):
        encs = [self.tok.encode(t).ids for t in texts]
        out = np.zeros((len(texts), 384), np.float32)
        order = np.argsort([len(e) for e in encs])
        for i in range(0, len(order), batch):
            idx = order[i : i + batch]
            t = max(len(encs[j]) for j in idx)
            x = np.zeros((len(idx), t), np.int64)
            m = np.zeros((len(idx), t), np.int64)
            for r, j in enumerate(idx):
                x[r, : len(encs[j])], m[r, : len(encs[j])] = encs[j], 1
            feed = {"input_ids": x, "attention_mask": m}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(x)
            h = self.sess.run(None, feed)[0]
            if self.pooling == "cls":
                v = h[:, 0]
            else:
                v = (h * m[:, :, None]).sum(1) / m.sum(1, keepdims=True)
            out[idx] = v / np.linalg.norm(v, axis=1, keepdims=True)
        return out


def cached(cache, model, texts, compute):
    """compute(texts), kept in cache by the model file's name and the texts."""
    key = hashlib.sha256((os.path.basename(model) + "\0" + "\0".join(texts)).encode()).hexdigest()[:16]
    path = os.path.join(cache, key + ".npy")
    if os.path.exists(path):
        return np.load(path)
    v = compute(texts)
    np.save(path, v)
    return v


def main():
    model, tokenizer, dump_path, cache = sys.argv[1:5]
    os.makedirs(cache, exist_ok=True)
    pooling = os.environ.get("POOLING", "cls")
    prefix = os.environ.get("QUERY_PREFIX", "")
    doc_tokens = int(os.environ.get("DOC_TOKENS", "128"))
    enc = Encoder(model, tokenizer, pooling, doc_tokens, int(os.environ.get("THREADS", "1")))
    dump = json.load(open(dump_path))
    docs = dump["docs"]
    ids = [d["Server"] + "/" + d["Tool"] for d in docs]
    pos = {k: i for i, k in enumerate(ids)}
    texts = [os.environ.get("DOC_PREFIX", "") + doc_text(d) for d in docs]
    queries = sorted({q["query"] for q in dump["queries"]})
    qpos = {q: i for i, q in enumerate(queries)}
    blind = os.environ.get("BLIND") == "1"

    if os.environ.get("TIME") == "1":
        start = time.perf_counter()
        for q in queries[:100]:
            enc([prefix + q], 1)
        per_query = (time.perf_counter() - start) / 100
        start = time.perf_counter()
        enc(texts[:256], 16)
        per_doc = (time.perf_counter() - start) / 256
        print("%s: %.2f ms a query (one at a time), %.2f ms a tool (batches of 16), load %.1f" % (os.path.basename(model), 1000 * per_query, 1000 * per_doc, os.getloadavg()[0]), flush=True)

    # One text at a time, as discoveryd embeds them: a quantized model's
    # outputs depend on what else is in the batch (its activations are
    # scaled per batch), and a text's vector must not.
    dv = cached(cache, model + str(doc_tokens) + "/1", texts, lambda t: enc(t, 1))
    qv = cached(cache, model + "/1", [prefix + q for q in queries], lambda t: enc(t, 1))

    if blind:
        w, floor = (float(x) for x in os.environ["FUSE"].split(","))
        sets = ("tuned", "holdout", "dev", "blind")
        report("engine (words)", dump, lambda q: fused(q, None, None, ids, pos, 0, 0), sets)
        report("model alone", dump, lambda q: [ids[t] for t in np.argsort(-(dv @ qv[qpos[q["query"]]]))[:5]], sets)
        report("engine + model, w %.2f, floor %.2f" % (w, floor), dump, lambda q: fused(q, dv, qv[qpos[q["query"]]], ids, pos, w, floor), sets)
        return
    sets = ("tuned", "holdout", "dev")
    report("engine (words)", dump, lambda q: fused(q, None, None, ids, pos, 0, 0), sets)
    report("model alone", dump, lambda q: [ids[t] for t in np.argsort(-(dv @ qv[qpos[q["query"]]]))[:5]], sets)
    grid = os.environ.get("GRID", "0.5,0.2;0.7,0.2;0.8,0.2;0.7,0.4;0.8,0.4;0.8,0.5;0.9,0.5")
    for cell in grid.split(";"):
        w, floor = (float(x) for x in cell.split(","))
        report("engine + model, w %.2f, floor %.2f" % (w, floor), dump, lambda q: fused(q, dv, qv[qpos[q["query"]]], ids, pos, w, floor), sets)


if __name__ == "__main__":
    main()
