#!/usr/bin/python3
"""check_hf_ref — check tests/ref/hf_models.py against the real HuggingFace transformers.

    check_hf_ref.py [--venv /tmp/hfvenv] [--seqs 1,7,64] [--batch 3]

A developer script, not a CI test (it needs PyPI).  It creates a throwaway
venv on top of the system packages (Debian's torch 1.13), installs the pinned
transformers (hf_models.TRANSFORMERS_VERSION, 4.30.2) into it, and re-runs
itself inside that venv, where for BertModel(BertConfig(num_hidden_layers=2))
and GPT2Model(GPT2Config(n_layer=2)) it compares, library against copy:

* print(model) byte for byte (torch 1.13's ModuleList repr and the 2.x
  compressed one of tests/ref/torch_print.py);
* the module tree: every (qualified name, class name), in order;
* state_dict(): keys in order, shapes, dtypes; every buffer, persistent or
  not, with its values (position_ids, the causal mask);
* the outputs on the same weights (the library's state_dict loaded strictly
  into the copy, with every bias and LayerNorm made non-trivial), for each
  sequence length, in float32 and float64: the largest relative error
  max|a-b| / max|b| must be <= 1e-6 (they are normally bitwise equal).

It also writes tests/ref/hf_golden.json from the *library*: the print
texts, the state_dict keys, shapes and dtypes, and output fingerprints
(hf_golden.fingerprint) on deterministic weights (hf_golden.fill), which
tests/zoo/zoo_check.py's selftest compares hf_models.py with in CI, where
transformers is not installed.

Exit 0 when everything matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def ensure_venv(venv: str, version: str) -> str:
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        print(f"check_hf_ref: creating {venv}", flush=True)
        subprocess.check_call(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv])
    r = subprocess.run([py, "-c", "import transformers; print(transformers.__version__)"],
                       capture_output=True, text=True)
    if r.returncode != 0 or r.stdout.strip() != version:
        print(f"check_hf_ref: installing transformers=={version} into {venv}", flush=True)
        subprocess.check_call([py, "-m", "pip", "install", "-q", f"transformers=={version}"])
    return py


def inside(seqs, batch) -> int:
    import torch
    import transformers
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    import hf_golden
    import hf_models
    import torch_print

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            failures.append(what)

    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    check(transformers.__version__ == hf_models.TRANSFORMERS_VERSION,
          f"installed transformers is the mirrored {hf_models.TRANSFORMERS_VERSION}")

    def perturb(model, gen):
        """Non-trivial biases and LayerNorm affines (the library inits them 0/1)."""
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("bias") or "LayerNorm" in name or ".ln_" in name or name.startswith("ln_f"):
                    base = 1.0 if name.endswith("weight") else 0.0
                    p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen))

    cases = [
        ("bert", lambda: BertModel(BertConfig(num_hidden_layers=2)), lambda: hf_models.bert(num_hidden_layers=2)),
        ("gpt2", lambda: GPT2Model(GPT2Config(n_layer=2)), lambda: hf_models.gpt2(n_layer=2)),
    ]
    golden = {"transformers": transformers.__version__, "models": {}}
    for name, make_lib, make_ref in cases:
        torch.manual_seed(0)
        lib = make_lib().eval()
        ref = make_ref().eval()
        golden["models"][name] = hf_golden.record(name, lib, lambda m, *x: (
            [m(input_ids=x[0], attention_mask=x[1], token_type_ids=x[2]).last_hidden_state,
             m(input_ids=x[0], attention_mask=x[1], token_type_ids=x[2]).pooler_output]
            if name == "bert" else [m(input_ids=x[0]).last_hidden_state]))
        bad = hf_golden.compare(name, ref, golden["models"][name])
        check(not bad, f"{name}: the golden record of the library matches hf_models" + "".join("\n     " + b for b in bad))
        # print, torch 1.13 ModuleList repr
        check(repr(lib) == repr(ref), f"{name}: print(model) identical (torch 1.13 ModuleList)")
        if repr(lib) != repr(ref):
            import difflib
            sys.stdout.writelines(difflib.unified_diff(repr(lib).splitlines(True), repr(ref).splitlines(True),
                                                       "transformers", "hf_models"))
        saved = torch.nn.ModuleList.__repr__
        torch_print.install_modulelist_repr()
        check(repr(lib) == repr(ref), f"{name}: print(model) identical (2.x ModuleList compression)")
        check(repr(torch.nn.DataParallel(lib)) == repr(torch.nn.DataParallel(ref)),
              f"{name}: print(DataParallel(model)) identical")
        torch.nn.ModuleList.__repr__ = saved
        tree_l = [(n, type(m).__name__) for n, m in lib.named_modules()]
        tree_r = [(n, type(m).__name__) for n, m in ref.named_modules()]
        check(tree_l == tree_r, f"{name}: module tree ({len(tree_l)} modules, names and classes, in order)")
        sd_l, sd_r = lib.state_dict(), ref.state_dict()
        check(list(sd_l) == list(sd_r), f"{name}: state_dict keys in the same order ({len(sd_l)} keys)")
        check(all(sd_l[k].shape == sd_r[k].shape and sd_l[k].dtype == sd_r[k].dtype for k in sd_l if k in sd_r),
              f"{name}: state_dict shapes and dtypes")
        bl = [(n, tuple(b.shape), b.dtype) for n, b in lib.named_buffers()]
        br = [(n, tuple(b.shape), b.dtype) for n, b in ref.named_buffers()]
        check(bl == br, f"{name}: buffers (persistent and not): {[n for n, _, _ in bl]}")
        check(all(torch.equal(a, b) for a, b in zip(lib.buffers(), ref.buffers())), f"{name}: buffer values")
        persistent = [k for k in sd_l if k in dict(lib.named_buffers())]
        print(f"     {name}: persistent buffers in the state_dict: {persistent}")
        nparams = sum(p.numel() for p in lib.parameters())
        check(nparams == sum(p.numel() for p in ref.parameters()), f"{name}: {nparams} parameters")

        gen = torch.Generator().manual_seed(1)
        perturb(lib, gen)
        ref.load_state_dict(lib.state_dict(), strict=True)
        for dtype in (torch.float32, torch.float64):
            lib_d, ref_d = lib.to(dtype), ref.to(dtype)
            for s in seqs:
                g = torch.Generator().manual_seed(100 + s)
                vocab = lib.config.vocab_size
                ids = torch.randint(0, vocab, (batch, s), generator=g)
                if name == "bert":
                    mask = (torch.rand(batch, s, generator=g) > 0.25).long()
                    mask[:, 0] = 1
                    tt = (torch.arange(s)[None, :] >= torch.randint(0, s + 1, (batch, 1), generator=g)).long()
                    with torch.no_grad():
                        o = lib_d(input_ids=ids, attention_mask=mask, token_type_ids=tt)
                        outs_l = [o.last_hidden_state, o.pooler_output]
                        outs_r = list(ref_d(ids, mask, tt))
                else:
                    with torch.no_grad():
                        outs_l = [lib_d(input_ids=ids).last_hidden_state]
                        outs_r = [ref_d(ids)]
                for i, (a, b) in enumerate(zip(outs_l, outs_r)):
                    same_shape = a.shape == b.shape and a.dtype == b.dtype
                    err = float((a - b).abs().max() / b.abs().max()) if same_shape else float("inf")
                    bitwise = same_shape and torch.equal(a, b)
                    check(err <= 1e-6, f"{name}: {str(dtype)[6:]} S={s} output {i} {list(b.shape)}: "
                                       f"max rel err {err:.2e}{' (bitwise equal)' if bitwise else ''}")
            lib.float(), ref.float()
    if failures:
        print(f"check_hf_ref: {len(failures)} check(s) failed")
        return 1
    hf_golden.save(golden)
    print(f"check_hf_ref: wrote {hf_golden.PATH}")
    print(f"check_hf_ref: hf_models.py matches transformers {hf_models.TRANSFORMERS_VERSION}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Check hf_models.py against the real transformers.")
    ap.add_argument("--venv", default="/tmp/hfvenv", help="throwaway venv (created if missing)")
    ap.add_argument("--seqs", default="1,7,64", help="sequence lengths (default 1,7,64)")
    ap.add_argument("--batch", type=int, default=3, help="batch size (default 3)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    seqs = [int(s) for s in a.seqs.split(",")]
    if a.inside:
        return inside(seqs, a.batch)
    import hf_models
    py = ensure_venv(a.venv, hf_models.TRANSFORMERS_VERSION)
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "2")
    return subprocess.call([py, os.path.abspath(__file__), "--inside", "--seqs", a.seqs,
                            "--batch", str(a.batch)], env=env)


if __name__ == "__main__":
    sys.exit(main())
