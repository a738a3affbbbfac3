#!/usr/bin/python3
"""check_seqlen.py DPC TEST_API TEST_LRU - run-time sequence length.

seqlen/seq_mean.dp declares forward(ids: i64[N, S], bias: [S, 16]): S is
neither the batch nor a constructor value, so it is bound from the inputs
when the model runs, and each value met is compiled then and cached. Here,
against the same module written in PyTorch (float64):
  - `dpc print` needs no value of S; `dpc ir`/`source` without --bind say
    that S is bound at run time and ask for --bind; with --bind S=4 the
    graph is built for S = 4; a --bind of another name is refused;
  - `dpc run` at two values of S (one and two CPU replicas), from the .dp
    and from a .dpa (which stores no graph);
  - inputs that disagree on S are refused, naming both;
  - test_seqlen_api: one process, the C API, several values in turn;
  - test_seqlen_lru: with DPC_SPEC_CACHE=4, 17 values and then the first
    again: 4 kept, the least recently run evicted, an evicted value
    compiled again and still right.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import st  # noqa: E402

MODEL = os.path.join(HERE, "seqlen", "seq_mean.dp")
B = 3


class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, h):
        n, s, d = h.shape
        return torch.relu(self.fc(h)).reshape(n, s * d).reshape(n, s, d)


class SeqMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(50, 16)
        self.mix = Mix()
        self.head = nn.Linear(16, 4)

    def forward(self, ids, bias):
        h = self.mix(self.tok(ids) + bias)
        return self.head(h.mean(1)), h.reshape(h.shape[0], -1)


failures = []


def need(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(*args, env=None):
    return subprocess.run(list(args), capture_output=True, text=True, env=env)


def close(a, b):
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-5)


def main():
    dpc, test_api, test_lru = sys.argv[1:4]
    ref = SeqMean().eval()
    with tempfile.TemporaryDirectory() as tmp:
        # the front end: print without S, ir and source asking for it
        p = run(dpc, "print", MODEL)
        need(p.returncode == 0 and p.stdout == repr(ref) + "\n", "print equals PyTorch's, no value of S needed")
        ask = ("dpc: error: SeqMean has the run-time dim S (dim 1 of input 'ids'), bound from the input when it "
               "runs; its graph is built for one value: give it with --bind S=VALUE (e.g. --bind S=16)\n")
        for verb in (["ir"], ["ir", "--stage", "fused"], ["source"], ["graph"]):
            p = run(dpc, *verb, MODEL)
            need(p.returncode == 1 and p.stderr == ask, f"{' '.join(verb)} without --bind asks for S: {p.stderr!r}")
        p = run(dpc, "ir", MODEL, "--bind", "S=4")
        need(p.returncode == 0 and "graph SeqMean(%0: i64[N, 4], %1: f32[4, 16])\n  # run-time dim S = 4\n"
             in p.stdout and "f32[N, 64]" in p.stdout, "ir --bind S=4: the graph at S = 4")
        p = run(dpc, "ir", MODEL, "--bind", "T=4")
        need(p.returncode == 1 and p.stderr == "dpc: error: --bind T=4: forward of SeqMean has no run-time dim "
             "'T' (its run-time dims: S)\n", "--bind of another name: " + p.stderr.strip())
        p = run(dpc, "ir", MODEL, "--bind", "S=0")
        need(p.returncode == 2 and "--bind S: the value must be an integer between 1 and 2147483647, got '0'"
             in p.stderr, "--bind S=0 is a usage error")
        p = run(dpc, "ir", os.path.join(HERE, "..", "..", "models", "simple.dp"), "--bind", "S=4")
        need(p.returncode == 1 and "has no run-time dim 'S' (it has none)" in p.stderr,
             "--bind on a model without run-time dims: " + p.stderr.strip())
        p = run(dpc, "source", MODEL, "--bind", "S=4")
        need(p.returncode == 0 and "dpc_forward" in p.stdout, "source --bind S=4")
        p = run(dpc, "graph", MODEL, "--bind", "S=4")
        need(p.returncode == 0 and p.stdout.startswith("digraph"), "graph --bind S=4")

        w = os.path.join(tmp, "w.safetensors")
        need(run(dpc, "init", MODEL, "-o", w).returncode == 0, "init")
        ref.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in st.load(w).items()}, strict=True)
        ref64 = ref.double()
        rng = np.random.default_rng(0)
        want = {}
        values = list(range(1, 18))
        for s in values:
            ids = rng.integers(0, 50, (B, s)).astype(np.int64)
            bias = rng.standard_normal((s, 16)).astype(np.float32)
            np.save(os.path.join(tmp, f"ids_{s}.npy"), ids)
            np.save(os.path.join(tmp, f"bias_{s}.npy"), bias)
            with torch.no_grad():
                o = ref64(torch.from_numpy(ids), torch.from_numpy(bias.astype(np.float64)))
            want[s] = [t.numpy() for t in o]

        def cli_run(model, s, *extra, bias_s=None):
            outs = [os.path.join(tmp, f"cli{j}.npy") for j in range(2)]
            p = run(dpc, "run", model, "--input", os.path.join(tmp, f"ids_{s}.npy"), "--input",
                    os.path.join(tmp, f"bias_{bias_s or s}.npy"), "-o", outs[0], "-o", outs[1], *extra)
            return p, [np.load(o) for o in outs] if p.returncode == 0 else None

        for s in (5, 9):
            for devs in ("cpu", "cpu,cpu"):
                p, got = cli_run(MODEL, s, "--weights", w, "--devices", devs)
                need(got is not None and all(close(g, x) for g, x in zip(got, want[s])),
                     f"dpc run at S = {s} over {devs}: {p.stderr.strip()}")
        p, _ = cli_run(MODEL, 5, "--weights", w, bias_s=9)
        need(p.returncode == 1 and p.stderr == "dpc: error: inputs disagree on the run-time dim S: input 'ids' has "
             "S = 5 (dim 1) but input 'bias' has S = 9 (dim 0)\n", "inputs disagreeing on S: " + p.stderr.strip())

        dpa = os.path.join(tmp, "m.dpa")
        p = run(dpc, "compile", MODEL, "--weights", w, "-o", dpa)
        need(p.returncode == 0, "compile to a .dpa: " + p.stderr.strip())
        p = run(dpc, "inspect", dpa)
        need("inputs:        ids: i64[N, S]" in p.stdout and
             "kernels:       compiled when it runs, for each value of its run-time dim S" in p.stdout,
             "inspect lists S")
        p = run(dpc, "compile", MODEL, "-o", os.path.join(tmp, "x.dpa"), "--arch", "sm_90")
        need(p.returncode == 2 and "no CUDA images can be stored" in p.stderr, "compile --arch refused")
        for s in (3, 12):
            p, got = cli_run(dpa, s)
            need(got is not None and all(close(g, x) for g, x in zip(got, want[s])),
                 f"dpc run of the .dpa at S = {s}: {p.stderr.strip()}")
        p = run(dpc, "ir", dpa, "--bind", "S=6")
        need(p.returncode == 0 and "# run-time dim S = 6" in p.stdout, "ir of the .dpa with --bind")
        p = run(dpc, "bench", MODEL, "--batch", "2", "--iters", "2", "--bind", "S=8")
        need(p.returncode == 0 and "SeqMean batch 2" in p.stdout, "bench --bind S=8: " + p.stderr.strip())
        p = run(dpc, "bench", MODEL, "--batch", "2", "--iters", "2")
        need(p.returncode == 1 and "give it with --bind S=VALUE" in p.stderr, "bench without --bind asks for S")

        # one process, the C API: several values in turn, repeats too
        order = [5, 9, 5, 3, 12]
        p = run(test_api, dpa, tmp, *map(str, order))
        need(p.returncode == 0, "test_seqlen_api: " + (p.stdout + p.stderr).strip())
        for s in set(order):
            got = [np.load(os.path.join(tmp, f"api{j}_{s}.npy")) if p.returncode == 0 else None for j in range(2)]
            need(p.returncode == 0 and all(close(g, x) for g, x in zip(got, want[s])), f"C API at S = {s}")

        # the bound of the cache: 4 kept, the least recently run evicted
        env = dict(os.environ, DPC_SPEC_CACHE="4")
        order = values + [17, 1]
        p = run(test_lru, MODEL, w, tmp, *map(str, order), env=env)
        need(p.returncode == 0, "test_seqlen_lru: " + p.stderr.strip())
        rows = [tuple(map(int, line.split())) for line in p.stdout.split("\n") if line]
        want_rows = [(s, s, max(0, s - 4), min(s, 4)) for s in values] + [(17, 17, 13, 4), (1, 18, 14, 4)]
        need(rows == want_rows, f"cache: (S, compiles, evictions, kept) {rows[-3:]} vs {want_rows[-3:]}")
        for s in values:
            got = [np.load(os.path.join(tmp, f"lru{j}_{s}.npy")) if p.returncode == 0 else None for j in range(2)]
            need(p.returncode == 0 and all(close(g, x) for g, x in zip(got, want[s])), f"LRU run at S = {s}")
        p = run(dpc, "run", MODEL, "--weights", w, "--input", os.path.join(tmp, "ids_3.npy"), "--input",
                os.path.join(tmp, "bias_3.npy"), "-o", os.path.join(tmp, "a.npy"), "-o", os.path.join(tmp, "b.npy"),
                env=dict(os.environ, DPC_SPEC_CACHE="0"))
        need(p.returncode != 0 and "DPC_SPEC_CACHE" in p.stderr, "DPC_SPEC_CACHE=0 refused: " + p.stderr.strip())
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
