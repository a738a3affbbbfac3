#!/usr/bin/python3
"""selftest — checks of the PyTorch reference itself (run under CTest).

    /usr/bin/python3 tests/ref/selftest.py [-v] [-k PATTERN]

What it checks:
* every models/*.dp loads, prints, initialises and runs at batch 1 and 3;
  outputs are finite, batch-major, independent per sample, and float32
  agrees with float64;
* `parallel_model.dp` prints exactly the 11 lines of shared/spec/dataparallel.md;
* the 2.x ModuleList compression reproduces section 6.3 of the reference, and
  every builtin's repr matches the literal examples there;
* default init equals a hand-written PyTorch model's with the same seed;
  the interpreter's forward equals hand-written PyTorch forwards;
* parse and semantic errors are reported as file:line:col with a caret;
* safetensors writing/reading, weight loading rules, --kw parsing, compare;
* each command-line script once as a subprocess (exit codes, files).

Everything runs in-process except the CLI checks, so it takes seconds.
"""

from __future__ import annotations

import glob
import io
import math
import os
import subprocess
import sys
import tempfile
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(ROOT, "models")
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import compare  # noqa: E402
import dp2torch  # noqa: E402
import make_inputs  # noqa: E402
import st  # noqa: E402
import torch_init  # noqa: E402
import torch_print  # noqa: E402
import torch_run  # noqa: E402

torch_print.install_modulelist_repr()
torch.set_num_threads(min(2, os.cpu_count() or 1))
warnings.filterwarnings("ignore", message="dropout2d: Received a")

# The 11 lines of shared/spec/dataparallel.md, "Printing".
PARALLEL_MODEL_PRINT = """\
DataParallel(
  (module): ParallelModel(
    (conv1): Conv2d(1, 10, kernel_size=(5, 5), stride=(1, 1))
    (conv2): Conv2d(10, 20, kernel_size=(5, 5), stride=(1, 1))
    (conv3): Conv2d(20, 50, kernel_size=(5, 5), stride=(1, 1))
    (conv4): Conv2d(50, 80, kernel_size=(5, 5), stride=(1, 1))
    (dropout): Dropout2d(p=0.5, inplace=False)
    (fc1): Linear(in_features=80, out_features=500, bias=True)
    (fc2): Linear(in_features=500, out_features=10, bias=True)
  )
)"""


def model_files() -> list[str]:
    """Top-level models (models/lib/ holds imported helpers, not entries)."""
    return sorted(glob.glob(os.path.join(MODELS, "*.dp")))


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="dpref-")
        self.tmp = self._tmp.name
        # unittest resets warning filters per test; Dropout2d on a 2-D input
        # (parallel_model.dp, exactly as the original) warns even in eval mode.
        warnings.filterwarnings("ignore", message="dropout2d: Received a")

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name: str, text: str) -> str:
        path = os.path.join(self.tmp, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path


# ---------------------------------------------------------------------------
# The zoo: every model end to end
# ---------------------------------------------------------------------------

class TestZoo(TempDirCase):
    def test_models_present(self):
        names = {os.path.basename(p) for p in model_files()}
        for seed in ("simple.dp", "multi_input.dp", "kwargs.dp", "parallel_model.dp",
                     "mlp.dp", "cnn.dp", "resnet.dp", "transformer.dp"):
            self.assertIn(seed, names)

    def test_seed_models_match_spec(self):
        """The four seed models are byte for byte the code blocks of dsl.md."""
        spec = os.path.join(ROOT, "..", "shared", "spec", "dsl.md")
        if not os.path.exists(spec):
            spec = "/work/shared/spec/dsl.md"
        if not os.path.exists(spec):
            self.skipTest("dsl.md not found")
        import re
        with open(spec) as f:
            text = f.read()
        blocks = re.findall(r"```\n(# models/[^\n]+\n.*?)```", text, re.S)
        self.assertEqual(len(blocks), 4)
        for b in blocks:
            rel = b.split("\n", 1)[0][2:].strip()
            with open(os.path.join(ROOT, rel)) as f:
                self.assertEqual(f.read(), b, rel)

    def test_header_comment(self):
        for path in model_files() + glob.glob(os.path.join(MODELS, "lib", "*.dp")):
            rel = os.path.relpath(path, ROOT)
            with open(path) as f:
                first = f.readline()
            self.assertTrue(first.startswith(f"# {rel}"), f"{rel}: first line {first!r}")

    def test_every_model(self):
        for path in model_files():
            with self.subTest(model=os.path.basename(path)):
                self.check_model(path)

    def check_model(self, path):
        model, info = dp2torch.load_model(path)
        text = repr(model)
        self.assertTrue(text)
        self.assertTrue(text.startswith("DataParallel(\n  (module): " if info["data_parallel"]
                                        else info["entry"] + "("))
        self.assertTrue(info["tensor_params"])
        for p in info["tensor_params"]:
            self.assertIsNone(p["dims"][0])
            self.assertTrue(all(isinstance(d, int) for d in p["dims"][1:]))

        # init -> safetensors -> run at batch 1 and 3
        tensors = torch_init.init_state(path, seed=1, random_stats=True, random_affine=True)
        inner = dp2torch.unwrap(model)
        self.assertEqual(sorted(tensors), sorted(inner.state_dict()))
        wpath = os.path.join(self.tmp, "w.safetensors")
        st.save(wpath, tensors, {"format": "pt"})
        results = {}
        for batch in (1, 3):
            arrays = make_inputs.make_inputs(path, batch, seed=7)
            ipaths = []
            for i, (_, arr) in enumerate(arrays):
                ipaths.append(os.path.join(self.tmp, f"b{batch}_x{i}.npy"))
                np.save(ipaths[-1], arr)
            outs = torch_run.run(path, wpath, ipaths, [], torch.float64)
            self.assertTrue(outs)
            for o in outs:
                self.assertGreaterEqual(o.ndim, 1)
                self.assertEqual(o.shape[0], batch)
                self.assertTrue(np.isfinite(o).all())
            results[batch] = (ipaths, outs)

        # per-sample independence: row 0 of the batch-3 inputs alone
        ipaths3, outs3 = results[3]
        row_paths = []
        for i, p in enumerate(ipaths3):
            row_paths.append(os.path.join(self.tmp, f"row0_x{i}.npy"))
            np.save(row_paths[-1], np.load(p)[:1])
        outs_row = torch_run.run(path, wpath, row_paths, [], torch.float64)
        for a, b in zip(outs_row, outs3):
            np.testing.assert_allclose(a, b[:1], rtol=1e-10, atol=1e-12)

        # float32 compute agrees with float64
        outs32 = torch_run.run(path, wpath, ipaths3, [], torch.float32)
        for a, b in zip(outs32, outs3):
            self.assertLess(compare.rel_l2(a, b), 1e-4)

    def test_parallel_model_print(self):
        text = torch_print.model_repr(os.path.join(MODELS, "parallel_model.dp"))
        self.assertEqual(text, PARALLEL_MODEL_PRINT)
        self.assertEqual(len(text.split("\n")), 11)

    def test_parallel_model_params(self):
        model, _ = dp2torch.load_model(os.path.join(MODELS, "parallel_model.dp"))
        self.assertEqual(sum(p.numel() for p in model.parameters()), 175920)
        self.assertEqual(next(iter(model.state_dict())), "module.conv1.weight")

    def test_transformer_print_compresses(self):
        text = torch_print.model_repr(os.path.join(MODELS, "transformer.dp"))
        self.assertIn("    (layers): ModuleList(\n      (0-1): 2 x Block(\n", text)

    def test_modulelist_model_print(self):
        text = torch_print.model_repr(os.path.join(MODELS, "modulelist.dp"))
        self.assertIn("""\
    (mixed): ModuleList(
      (0-1): 2 x Linear(in_features=12, out_features=12, bias=True)
      (2): Tanh()
      (3): Linear(in_features=12, out_features=12, bias=True)
    )""", text)
        self.assertIn("""\
    (heads): ModuleList(
      (0): Linear(in_features=12, out_features=4, bias=True)
      (1): Linear(in_features=12, out_features=2, bias=True)
    )""", text)


# ---------------------------------------------------------------------------
# Printing: the 2.x ModuleList rule and per-builtin extra_repr
# ---------------------------------------------------------------------------

class TestPrinting(TempDirCase):
    def test_modulelist_examples_6_3(self):
        """The four examples of reference section 6.3, built with torch.nn."""
        cases = [
            (nn.ModuleList([nn.Linear(2, 2) for _ in range(3)]),
             "ModuleList(\n"
             "  (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)\n"
             ")"),
            (nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)]),
             "ModuleList(\n"
             "  (0-1): 2 x Linear(in_features=2, out_features=2, bias=True)\n"
             "  (2): ReLU()\n"
             "  (3): Linear(in_features=2, out_features=2, bias=True)\n"
             ")"),
            (nn.ModuleList([nn.Sequential(nn.Linear(4, 4), nn.GELU()) for _ in range(2)]),
             "ModuleList(\n"
             "  (0-1): 2 x Sequential(\n"
             "    (0): Linear(in_features=4, out_features=4, bias=True)\n"
             "    (1): GELU(approximate='none')\n"
             "  )\n"
             ")"),
            (nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 3)]),
             "ModuleList(\n"
             "  (0): Linear(in_features=2, out_features=2, bias=True)\n"
             "  (1): Linear(in_features=2, out_features=3, bias=True)\n"
             ")"),
            (nn.ModuleList(), "ModuleList()"),
        ]
        for ml, want in cases:
            self.assertEqual(repr(ml), want)

    def test_modulelist_from_dp(self):
        """The same lists written in .dp; runs are consecutive only."""
        path = self.write("ml.dp", """
module M {
    a = [Linear(2, 2) for _ in range(3)]
    b = ModuleList([Linear(2, 2), Linear(2, 2), ReLU(), Linear(2, 2)])
    c = ModuleList([ReLU(), Tanh(), ReLU()])
    d = [Linear(2, 2) for i in range(0)]
    forward(x: [N, 2]) { return x }
}
""")
        text = torch_print.model_repr(path)
        self.assertEqual(text, """\
M(
  (a): ModuleList(
    (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
  )
  (b): ModuleList(
    (0-1): 2 x Linear(in_features=2, out_features=2, bias=True)
    (2): ReLU()
    (3): Linear(in_features=2, out_features=2, bias=True)
  )
  (c): ModuleList(
    (0): ReLU()
    (1): Tanh()
    (2): ReLU()
  )
  (d): ModuleList()
)""")

    def test_builtin_reprs_6_3(self):
        """Literal repr lines of reference section 6.3, from .dp constructor calls."""
        cases = [
            ("Linear(80, 500)", "Linear(in_features=80, out_features=500, bias=True)"),
            ("Linear(3, 4, bias=false)", "Linear(in_features=3, out_features=4, bias=False)"),
            ("Conv2d(1, 10, kernel_size=5)", "Conv2d(1, 10, kernel_size=(5, 5), stride=(1, 1))"),
            ("Conv2d(3, 16, 3, stride=2, padding=1, bias=False)",
             "Conv2d(3, 16, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)"),
            ("Conv2d(3, 16, (3, 5), (2, 1), (1, 2), dilation=2)",
             "Conv2d(3, 16, kernel_size=(3, 5), stride=(2, 1), padding=(1, 2), dilation=(2, 2))"),
            ('Conv2d(4, 8, 3, padding=1, groups=2, padding_mode="reflect")',
             "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=2, "
             "padding_mode=reflect)"),
            ('Conv2d(4, 8, 3, padding="same")',
             "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=same)"),
            ("MaxPool2d(2)", "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"),
            ("MaxPool2d((2, 2))",
             "MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=0, dilation=1, ceil_mode=False)"),
            ("MaxPool2d(3, stride=2, padding=1)",
             "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)"),
            ("MaxPool2d(3, dilation=2, ceil_mode=true)",
             "MaxPool2d(kernel_size=3, stride=3, padding=0, dilation=2, ceil_mode=True)"),
            ("AvgPool2d(2)", "AvgPool2d(kernel_size=2, stride=2, padding=0)"),
            ("AvgPool2d(3, 1, 1)", "AvgPool2d(kernel_size=3, stride=1, padding=1)"),
            ("AvgPool2d(2, ceil_mode=true, count_include_pad=false)",
             "AvgPool2d(kernel_size=2, stride=2, padding=0)"),
            ("AdaptiveAvgPool2d((1, 1))", "AdaptiveAvgPool2d(output_size=(1, 1))"),
            ("AdaptiveAvgPool2d(1)", "AdaptiveAvgPool2d(output_size=1)"),
            ("AdaptiveAvgPool2d((None, 7))", "AdaptiveAvgPool2d(output_size=(None, 7))"),
            ("BatchNorm2d(64)",
             "BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"),
            ("BatchNorm2d(64, eps=0.001, momentum=None, affine=false, track_running_stats=false)",
             "BatchNorm2d(64, eps=0.001, momentum=None, affine=False, track_running_stats=False)"),
            ("BatchNorm2d(8, momentum=0.01)",
             "BatchNorm2d(8, eps=1e-05, momentum=0.01, affine=True, track_running_stats=True)"),
            ("LayerNorm(768)", "LayerNorm((768,), eps=1e-05, elementwise_affine=True)"),
            ("LayerNorm((10, 20), eps=1e-6, elementwise_affine=false)",
             "LayerNorm((10, 20), eps=1e-06, elementwise_affine=False)"),
            ("LayerNorm(16, eps=1e-12)", "LayerNorm((16,), eps=1e-12, elementwise_affine=True)"),
            ("LayerNorm(16, bias=false)", "LayerNorm((16,), eps=1e-05, elementwise_affine=True)"),
            ("Dropout()", "Dropout(p=0.5, inplace=False)"),
            ("Dropout(0.1)", "Dropout(p=0.1, inplace=False)"),
            ("Dropout(0.25, inplace=true)", "Dropout(p=0.25, inplace=True)"),
            ("Dropout(p=0)", "Dropout(p=0, inplace=False)"),
            ("Dropout2d()", "Dropout2d(p=0.5, inplace=False)"),
            ("Dropout2d(0.2)", "Dropout2d(p=0.2, inplace=False)"),
            ("ReLU()", "ReLU()"),
            ("ReLU(inplace=true)", "ReLU(inplace=True)"),
            ("GELU()", "GELU(approximate='none')"),
            ('GELU(approximate="tanh")', "GELU(approximate='tanh')"),
            ("SiLU()", "SiLU()"),
            ("Sigmoid()", "Sigmoid()"),
            ("Tanh()", "Tanh()"),
            ("Softmax(dim=1)", "Softmax(dim=1)"),
            ("Softmax()", "Softmax(dim=None)"),
            ("Softmax(-1)", "Softmax(dim=-1)"),
            ("Flatten()", "Flatten(start_dim=1, end_dim=-1)"),
            ("Flatten(0, 2)", "Flatten(start_dim=0, end_dim=2)"),
            ("Embedding(10, 3)", "Embedding(10, 3)"),
            ("Embedding(10, 3, padding_idx=0)", "Embedding(10, 3, padding_idx=0)"),
            ("Embedding(10, 3, padding_idx=-1)", "Embedding(10, 3, padding_idx=9)"),
            ("Embedding(100, 16, max_norm=1.0)", "Embedding(100, 16, max_norm=1.0)"),
            ("Identity()", "Identity()"),
            ("Sequential()", "Sequential()"),
            ("ModuleList()", "ModuleList()"),
            ("Sequential(Linear(2, 3), ReLU(), Linear(3, 1))",
             "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n"
             "  (1): ReLU()\n  (2): Linear(in_features=3, out_features=1, bias=True)\n)"),
            ("Sequential(Sequential(Linear(1, 1)), ReLU())",
             "Sequential(\n  (0): Sequential(\n    (0): Linear(in_features=1, out_features=1, "
             "bias=True)\n  )\n  (1): ReLU()\n)"),
        ]
        members = "\n".join(f"    m{i} = {expr}" for i, (expr, _) in enumerate(cases))
        path = self.write("reprs.dp", f"module R {{\n{members}\n"
                                      "    forward(x: [N, 1]) { return x }\n}\n")
        model, _ = dp2torch.load_model(path)
        for i, (expr, want) in enumerate(cases):
            self.assertEqual(repr(model._modules[f"m{i}"]), want, expr)

    def test_generic_repr_shapes(self):
        path = self.write("e.dp", "module Empty {\n forward(x: [N, 1]) { return x }\n}\n")
        self.assertEqual(torch_print.model_repr(path), "Empty()")
        path = self.write("n.dp", "module Outer { d = DataParallel(Linear(1,1)) }\n")
        with self.assertRaises(dp2torch.DpError):
            dp2torch.load_model(path)

    def test_member_named_like_module_method(self):
        """Members may be called `eval`, `float`, `to` without breaking nn.Module."""
        path = self.write("names.dp", """
module M {
    eval = Linear(2, 2)
    float = ReLU()
    forward(x: [N, 2]) { return float(eval(x)) }
}
""")
        model, _ = dp2torch.load_model(path)
        model.eval()
        self.assertEqual(list(model.state_dict()), ["eval.weight", "eval.bias"])
        self.assertEqual(model(torch.ones(1, 2)).shape, (1, 2))


# ---------------------------------------------------------------------------
# Initialisation and forward equal hand-written PyTorch
# ---------------------------------------------------------------------------

class HandParallelModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv3 = nn.Conv2d(20, 50, kernel_size=5)
        self.conv4 = nn.Conv2d(50, 80, kernel_size=5)
        self.dropout = nn.Dropout2d()
        self.fc1 = nn.Linear(80 * 1 * 1, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):
        x = self.conv4(self.conv3(self.conv2(self.conv1(x))))
        x = torch.flatten(self.dropout(x), 1)
        return self.fc2(self.dropout(self.fc1(x)))


class HandAttention(nn.Module):
    def __init__(self, dim, heads, seq, scale=0.25):
        super().__init__()
        self.dim, self.heads, self.seq, self.scale = dim, heads, seq, scale
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x):
        n, s, d, h = x.shape[0], self.seq, self.dim, self.heads
        q = self.q_proj(x).view(n, s, h, d // h).transpose(1, 2)
        k = self.k_proj(x).view(n, s, h, d // h).transpose(1, 2)
        v = self.v_proj(x).view(n, s, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(n, s, d)
        return self.out_proj(y)


class HandBlock(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = HandAttention(dim, heads, seq)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class HandTransformer(nn.Module):
    def __init__(self, vocab=100, dim=32, heads=2, depth=2, seq=8, classes=5):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, dim)
        self.pos_emb = nn.Embedding(seq, dim)
        self.layers = nn.ModuleList([HandBlock(dim, heads, seq) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids, pos):
        x = self.tok_emb(ids) + self.pos_emb(pos)
        for blk in self.layers:
            x = blk(x)
        pooled = self.norm(x).mean(1)
        return self.head(pooled), pooled


class HandBasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class HandResNet(nn.Module):
    def __init__(self, w=8, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, w, 3, padding=1, bias=False), nn.BatchNorm2d(w),
                                  nn.ReLU())
        self.layer1 = nn.Sequential(HandBasicBlock(w, w), HandBasicBlock(w, w))
        self.layer2 = nn.Sequential(HandBasicBlock(w, 2 * w, 2), HandBasicBlock(2 * w, 2 * w))
        self.layer3 = nn.Sequential(HandBasicBlock(2 * w, 4 * w, 2), HandBasicBlock(4 * w, 4 * w))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * w, num_classes)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class TestAgainstHandWritten(TempDirCase):
    def same_init(self, path, hand_cls, seed):
        got = torch_init.init_state(path, seed=seed)
        torch.manual_seed(seed)
        want = {k: v.numpy() for k, v in hand_cls().state_dict().items()}
        self.assertEqual(list(got), list(want))
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)

    def test_init_parallel_model(self):
        self.same_init(os.path.join(MODELS, "parallel_model.dp"), HandParallelModel, 3)

    def test_init_transformer(self):
        self.same_init(os.path.join(MODELS, "transformer.dp"), HandTransformer, 4)

    def test_init_resnet(self):
        self.same_init(os.path.join(MODELS, "resnet.dp"), HandResNet, 5)

    def same_forward(self, path, hand, inputs, rtol=1e-12):
        model, _ = dp2torch.load_model(path)
        inner = dp2torch.unwrap(model).double().eval()
        hand = hand.double().eval()
        tensors = torch_init.init_state(path, seed=9, random_stats=True, random_affine=True)
        torch_run.load_weights(inner, tensors)
        hand.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()})
        with torch.no_grad():
            got, want = inner(*inputs), hand(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertLess(compare.rel_l2(g.numpy(), w.numpy()), rtol)

    def test_forward_parallel_model(self):
        x = torch.randn(4, 1, 17, 17, dtype=torch.float64)
        self.same_forward(os.path.join(MODELS, "parallel_model.dp"), HandParallelModel(), [x])

    def test_forward_transformer(self):
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, 100, (3, 8), generator=g)
        pos = torch.arange(8).repeat(3, 1)
        self.same_forward(os.path.join(MODELS, "transformer.dp"), HandTransformer(), [ids, pos])

    def test_forward_resnet(self):
        x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
        self.same_forward(os.path.join(MODELS, "resnet.dp"), HandResNet(), [x])

    def test_init_seed_determinism(self):
        path = os.path.join(MODELS, "cnn.dp")
        a = st.dumps(torch_init.init_state(path, seed=11))
        b = st.dumps(torch_init.init_state(path, seed=11))
        c = st.dumps(torch_init.init_state(path, seed=12))
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_init_bounds(self):
        """Reference section 7: Linear/Conv weights and biases in U(-1/sqrt(fan_in), ...)."""
        t = torch_init.init_state(os.path.join(MODELS, "parallel_model.dp"), seed=0)
        for name, fan_in in (("conv1", 25), ("conv2", 250), ("conv3", 500), ("conv4", 1250),
                             ("fc1", 80), ("fc2", 500)):
            bound = 1 / math.sqrt(fan_in)
            for k in ("weight", "bias"):
                v = t[f"{name}.{k}"]
                self.assertLessEqual(np.abs(v).max(), bound)
                self.assertGreater(np.abs(v).max(), 0.8 * bound)

    def test_random_stats(self):
        path = os.path.join(MODELS, "cnn.dp")
        plain = torch_init.init_state(path, seed=2)
        rs = torch_init.init_state(path, seed=2, random_stats=True)
        self.assertTrue(np.all(plain["features.1.running_var"] == 1))
        self.assertFalse(np.all(rs["features.1.running_var"] == 1))
        self.assertTrue(np.all(rs["features.1.running_var"] > 0))
        np.testing.assert_array_equal(plain["features.0.weight"], rs["features.0.weight"])
        self.assertEqual(rs["features.1.num_batches_tracked"].dtype, np.int64)
        self.assertEqual(rs["features.1.num_batches_tracked"].shape, ())

    def test_dp_prefix(self):
        t = torch_init.init_state(os.path.join(MODELS, "simple.dp"), dp_prefix=True)
        self.assertEqual(sorted(t), ["module.fc.bias", "module.fc.weight"])
        t = torch_init.init_state(os.path.join(MODELS, "mlp.dp"), dp_prefix=True)
        self.assertIn("fc1.weight", t)  # not DataParallel: no prefix


# ---------------------------------------------------------------------------
# Language semantics
# ---------------------------------------------------------------------------

class TestLanguage(TempDirCase):
    def load(self, text, name="m.dp"):
        return dp2torch.load_model(self.write(name, text))

    def run_model(self, text, *inputs, **kw):
        model, info = self.load(text)
        inner = dp2torch.unwrap(model).double().eval()
        with torch.no_grad():
            return inner(*inputs, **kw)

    def test_lexical(self):
        out = self.run_model("""
# comment
module M(a: float = .5, b: float = 1e-1, c: float = 2.5E+1) {   # trailing comment
    id = Identity(); fc = Linear(2,
        2)
    forward(x: [N, 2]) { y = x * a; z = y + b
        return z * c }
}
""", torch.ones(1, 2, dtype=torch.float64))
        np.testing.assert_allclose(out.numpy(), (1 * 0.5 + 0.1) * 25.0)

    def test_true_false_spellings(self):
        model, _ = self.load("""
module M {
    a = Linear(1, 1, bias=True)
    b = Linear(1, 1, bias=false)
    c = Linear(1, 1, bias=False)
    forward(x: [N, 1]) { return x }
}
""")
        self.assertEqual([m.bias is None for m in model.children()], [False, True, True])

    def test_integer_arithmetic(self):
        model, info = self.load("""
module M(dim: int = 12, heads: int = 3) {
    a = Linear(dim / heads, dim // 5)
    b = Linear(80 * 1 * 1, -1 * -2)
    c = Linear(2 + 3 * 4, (2 + 3) * 4)
    d = Linear(7 // 2, -7 // 2 + 10)
    forward(x: [N, dim / heads, dim // 5 * 2]) { return x }
}
""")
        dims = [(m.in_features, m.out_features) for m in model.children()]
        self.assertEqual(dims, [(4, 2), (80, 2), (14, 20), (3, 6)])
        self.assertEqual(info["tensor_params"][0]["dims"], [None, 4, 4])

    def test_forward_arithmetic(self):
        x = torch.tensor([[1.0, -2.0, 3.0]], dtype=torch.float64)
        out = self.run_model("""
module M(k: int = 6) {
    forward(x: [N, 3]) {
        return -x + 2 * x - x / 4 + 1 - (x - 1) * 3, x @ reshape(x, 3, 1), x * (k / 2), x * (k // 4)
    }
}
""", x)
        np.testing.assert_allclose(out[0].numpy(), (-x + 2 * x - x / 4 + 1 - (x - 1) * 3).numpy())
        np.testing.assert_allclose(out[1].numpy(), [[14.0]])
        np.testing.assert_allclose(out[2].numpy(), (x * 3).numpy())
        np.testing.assert_allclose(out[3].numpy(), (x * 1).numpy())

    def test_precedence(self):
        x = torch.full((1, 1), 2.0, dtype=torch.float64)
        out = self.run_model("""
module M {
    forward(x: [N, 1]) { return 1 + x * 3, -x * x, x - 1 - 1, x / 2 / 2, 2 ** 3 * x, -2 ** 2 * x }
}
""", x)
        self.assertEqual([float(o) for o in out], [7.0, -4.0, 0.0, 0.5, 16.0, -8.0])

    def test_broadcasting(self):
        x = torch.randn(2, 3, 4, dtype=torch.float64)
        y = torch.randn(2, 1, 4, dtype=torch.float64)
        out = self.run_model("""
module M {
    forward(x: [N, 3, 4], y: [N, 1, 4]) { return x * y + y - 0.5 }
}
""", x, y)
        np.testing.assert_allclose(out.numpy(), (x * y + y - 0.5).numpy())

    def test_builtin_functions(self):
        g = torch.Generator().manual_seed(1)
        x = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
        p = torch.rand(2, 3, 4, generator=g, dtype=torch.float64) + 0.1
        out = self.run_model("""
module M {
    forward(x: [N, 3, 4], p: [N, 3, 4]) {
        return (relu(x), gelu(x), gelu(x, approximate="tanh"), silu(x), sigmoid(x), tanh(x),
            exp(x), log(p), sqrt(p), abs(x), softmax(x, 1), log_softmax(x, dim=-1),
            flatten(x), flatten(x, 1), flatten(x, start_dim=0, end_dim=1),
            reshape(x, N, -1), reshape(x, [4, 3, N]), transpose(x, 0, 2), permute(x, 2, 0, 1),
            matmul(x, transpose(p, 1, 2)), cat([x, p], 1), cat([x, p]),
            mean(x, 1), sum(x, -1, true), amax(x, dim=2, keepdim=false), mean(x),
            layer_norm(x, [4]), layer_norm(x, [3, 4], None, None, 1e-3), dropout(x, 0.3),
            dropout(x))
    }
}
""", x, p)
        want = [F.relu(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), torch.sigmoid(x),
                torch.tanh(x), torch.exp(x), torch.log(p), torch.sqrt(p), torch.abs(x),
                F.softmax(x, 1), F.log_softmax(x, -1), torch.flatten(x), torch.flatten(x, 1),
                torch.flatten(x, 0, 1), x.reshape(2, -1), x.reshape(4, 3, 2), x.transpose(0, 2),
                x.permute(2, 0, 1), x @ p.transpose(1, 2), torch.cat([x, p], 1),
                torch.cat([x, p]), x.mean(1), x.sum(-1, keepdim=True), x.amax(2), x.mean(),
                F.layer_norm(x, [4]), F.layer_norm(x, [3, 4], eps=1e-3), x, x]
        self.assertEqual(len(out), len(want))
        for i, (o, w) in enumerate(zip(out, want)):
            self.assertEqual(tuple(o.shape), tuple(w.shape), i)
            np.testing.assert_allclose(o.numpy(), w.numpy(), rtol=1e-12, atol=1e-14, err_msg=str(i))

    def test_formulas_section_8(self):
        """GELU, LayerNorm, BatchNorm eval against the reference formulas (section 8)."""
        g = torch.Generator().manual_seed(2)
        x = torch.randn(2, 4, 3, 3, generator=g, dtype=torch.float64)
        model, _ = self.load("""
module M {
    bn = BatchNorm2d(4)
    ln = LayerNorm(3, eps=1e-5)
    ge = GELU()
    gt = GELU(approximate="tanh")
    forward(x: [N, 4, 3, 3]) { return bn(x), ln(x), ge(x), gt(x) }
}
""")
        m = model.double().eval()
        with torch.no_grad():
            m.bn.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
            m.bn.running_var.copy_(torch.tensor([0.5, 1.5, 2.0, 1.0]))
            m.bn.weight.copy_(torch.tensor([1.0, 2.0, -1.0, 0.5]))
            m.bn.bias.copy_(torch.tensor([0.0, 0.1, 0.2, 0.3]))
            bn, ln, ge, gt = m(x)
        x = x.detach()
        rm, rv = m.bn.running_mean.view(1, 4, 1, 1), m.bn.running_var.view(1, 4, 1, 1)
        w, b = m.bn.weight.detach().view(1, 4, 1, 1), m.bn.bias.detach().view(1, 4, 1, 1)
        np.testing.assert_allclose(bn, (x - rm) / torch.sqrt(rv + 1e-5) * w + b, rtol=1e-12)
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        np.testing.assert_allclose(ln, (x - mu) / torch.sqrt(var + 1e-5), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ge, 0.5 * x * (1 + torch.erf(x / math.sqrt(2))), rtol=1e-12)
        np.testing.assert_allclose(
            gt, 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
            rtol=1e-12, atol=1e-15)

    def test_scalars_and_submodule_kwargs(self):
        text = """
module Inner(k: float = 1.0) {
    forward(x: [N, 2], scale: float = 1.0, times: int = 1, flag: bool = false) {
        return x * scale * times * k
    }
}
module M {
    inner = Inner(2)
    forward(x: [N, 2], s: float = 3.0) {
        a = inner(x)
        b = inner(x, s, 2)
        c = inner(x, times=4, scale=s)
        return a, b, c
    }
}
"""
        x = torch.ones(1, 2, dtype=torch.float64)
        a, b, c = self.run_model(text, x)
        self.assertEqual((float(a[0, 0]), float(b[0, 0]), float(c[0, 0])), (2.0, 12.0, 24.0))
        a, b, c = self.run_model(text, x, s=1)
        self.assertEqual(float(c[0, 0]), 8.0)

    def test_tuple_unpack_and_index(self):
        out = self.run_model("""
module Two {
    forward(x: [N, 2]) { return x + 1, x - 1 }
}
module M {
    two = Two()
    blocks = [Linear(2, 2) for i in range(2)]
    seq = Sequential(ReLU(), Tanh())
    forward(x: [N, 2]) {
        a, b = two(x)
        c, d = b, a
        e = blocks[-1](c)
        for m in seq { d = m(d) }
        return d, e
    }
}
""", torch.zeros(1, 2, dtype=torch.float64))
        self.assertEqual(float(out[0][0, 0]), math.tanh(1.0))

    def test_for_over_list_comprehension_order(self):
        model, _ = self.load("""
module M(d: int = 3) {
    layers = [Linear(d + i, d + i + 1) for i in range(3)]
    forward(x: [N, d]) {
        for l in layers { x = l(x) }
        return x
    }
}
""")
        self.assertEqual([l.in_features for l in model.layers], [3, 4, 5])
        self.assertEqual(model(torch.zeros(2, 3)).shape, (2, 6))

    def test_entry_rules(self):
        # no model line: the last module of the main file is the entry
        _, info = self.load("module A { forward(x: [N, 1]) { return x } }\n"
                            "module B { a = A()\n forward(y: [M, 2]) { return y } }\n")
        self.assertEqual(info["entry"], "B")
        self.assertFalse(info["data_parallel"])
        self.assertEqual(info["tensor_params"][0]["batch_name"], "M")
        # DataParallel with its keyword arguments
        model, info = self.load("module A { forward(x: [N, 1]) { return x } }\n"
                                "model = DataParallel(A(), device_ids=[0, 1], output_device=0, dim=0)\n")
        self.assertIsInstance(model, nn.DataParallel)
        self.assertEqual(info["dp_kwargs"], {"device_ids": [0, 1], "output_device": 0, "dim": 0})
        self.assertEqual(repr(model), "DataParallel(\n  (module): A()\n)")

    def test_imports(self):
        self.write("lib/a.dp", 'import "b.dp"\nmodule A(n: int) { b = B(n)\n'
                               ' forward(x: [N, n]) { return b(x) } }\nmodel = A(1)\n')
        self.write("lib/b.dp", 'module B(n: int) { fc = Linear(n, n)\n'
                               ' forward(x: [N, n]) { return fc(x) } }\n')
        self.write("main.dp", 'import "lib/a.dp"\nimport "lib/b.dp"\n'
                              'module Top { a = A(3)\n forward(x: [N, 3]) { return a(x) } }\n')
        model, info = dp2torch.load_model(os.path.join(self.tmp, "main.dp"))
        self.assertEqual(info["entry"], "Top")  # lib/a.dp's model line is ignored
        self.assertEqual(list(model.state_dict()), ["a.b.fc.weight", "a.b.fc.bias"])

    def test_batch_binding(self):
        model, _ = self.load("""
module M {
    forward(x: [N, 2], y: [N, 3], z: [B, 1]) { return cat([x, y], 1), z }
}
""")
        out = model(torch.zeros(4, 2), torch.zeros(4, 3), torch.zeros(1, 1))
        self.assertEqual(out[0].shape, (4, 5))
        with self.assertRaisesRegex(dp2torch.DpError, "batch dim N is 4 for 'x' but 3 for 'y'"):
            model(torch.zeros(4, 2), torch.zeros(3, 3), torch.zeros(1, 1))
        with self.assertRaisesRegex(dp2torch.DpError, r"expects \[N, 3\], got \[4, 2\]"):
            model(torch.zeros(4, 2), torch.zeros(4, 2), torch.zeros(1, 1))

    def test_batch_zero(self):
        _, _ = self.load("module M { fc = Linear(3, 2)\n forward(x: [N, 3]) { return fc(x) } }\n")
        model, _ = self.load("module M { fc = Linear(3, 2)\n forward(x: [N, 3]) { return fc(x) } }\n")
        self.assertEqual(model(torch.zeros(0, 3)).shape, (0, 2))

    def test_i64_params(self):
        model, info = self.load("""
module M { e = Embedding(10, 4)
    forward(ids: i64[N, 5]) { return e(ids) } }
""")
        self.assertEqual(info["tensor_params"][0]["dtype"], "i64")
        self.assertEqual(model(torch.zeros(2, 5, dtype=torch.long)).shape, (2, 5, 4))
        with self.assertRaisesRegex(dp2torch.DpError, "expects i64 values, got float32"):
            model(torch.zeros(2, 5))

    def test_float_param_coercion(self):
        model, _ = self.load("module M(p: float = 0) { d = Dropout(p)\n"
                             " forward(x: [N, 1]) { return d(x) } }\n")
        self.assertEqual(repr(model.d), "Dropout(p=0.0, inplace=False)")


class TestErrors(TempDirCase):
    """Compiler-style diagnostics: file:line:col: error: message, line, caret."""

    CASES = [
        # (source, line, col, message fragment)
        ("module M {\n    fc1 = Linear(10, 5)\n    forward(x: [N, 10]) {\n        return fc(x)\n    }\n}\n",
         4, 16, "unknown name 'fc' (did you mean 'fc1'?)"),
        ("module M(d: int = 10) {\n    fc = Linear(d, d / 3)\n    forward(x: [N, 10]) { return fc(x) }\n}\n",
         2, 22, "integer division 10 / 3 is not exact"),
        ("module M {\n    fc = Linear(10, 5, biass=false)\n    forward(x: [N, 10]) { return fc(x) }\n}\n",
         2, 24, "Linear has no argument 'biass' (did you mean 'bias'?)"),
        ("module M {\n    fc = Linaer(10, 5)\n    forward(x: [N, 10]) { return fc(x) }\n}\n",
         2, 10, "'Linaer' is not a module (did you mean 'Linear'?)"),
        ("module M {\n    fc = Linear(10, 5)\n    forward(x: [N, 10]) { return fc(x) + }\n}\n",
         3, 42, "expected an expression, got '}'"),
        ("module M {\n    fc = Linear(10, 5)\n    fc = Linear(10, 5)\n}\n",
         3, 5, "member 'fc' is defined twice"),
        ("module M(d: int = 3) {\n    forward(x: [N, d + e]) { return x }\n}\n",
         2, 24, "unknown name 'e' in dims"),
        # the constructs of if/elif/else, comparisons, str/Module parameters,
        # extends Sequential, f-strings and dicts
        ("module M(a: bool = true) {\n    if a {\n        forward(x: [N, 1]) { return x }\n    }\n}\n",
         3, 9, "forward cannot be inside an if"),
        ("module M {\n    ReLU()\n    forward(x: [N, 1]) { return x }\n}\n",
         2, 5, "a bare module in a module body is an entry of a Sequential subclass"),
        ("module M extends ModuleList {\n    ReLU()\n}\n", 1, 18, "extend only Sequential"),
        ("module M extends Sequential {\n    ReLU()\n    forward(x: [N, 1]) { return x }\n}\n",
         3, 5, "extends Sequential, which runs its entries in order"),
        ("module M(s: str = 3) {\n    forward(x: [N, 1]) { return x }\n}\n",
         1, 19, "expects str, got int"),
        ("module B(m: Module = 2) {\n    forward(x: [N, 1]) { return x }\n}\n",
         1, 22, "expects a module, a module class or None, got int"),
        ("module M(a: int = 1) {\n    b = a is 1\n    forward(x: [N, 1]) { return x }\n}\n",
         2, 11, "'is' compares with None"),
        ('module M(a: str = "x") {\n    b = a < 1\n    forward(x: [N, 1]) { return x }\n}\n',
         2, 11, "cannot compare string and int with '<'"),
        ('module M {\n    extra_repr = f"a={b}"\n    forward(x: [N, 1]) { return x }\n}\n',
         2, 22, "f-string: unknown name '{b}'"),
        ('module M {\n    extra_repr = f"a={b"\n    forward(x: [N, 1]) { return x }\n}\n',
         2, 22, "'{' without a closing '}'"),
        ('module M {\n    d = {"a": 1, "a": 2}\n    forward(x: [N, 1]) { return x }\n}\n',
         2, 18, "key 'a' is given twice"),
        ('module M {\n    d = {1: 2}\n    forward(x: [N, 1]) { return x }\n}\n',
         2, 10, "a dict key must be a string, got int"),
        ("module M(a: bool = true) {\n    if a { f = ReLU() }\n    if a { f = GELU() }\n"
         "    forward(x: [N, 1]) { return f(x) }\n}\n",
         3, 12, "member 'f' is defined twice"),
        ("module M {\n    forward(x: [N, 10]) { y = x }\n}\n",
         2, 5, "must end with a return"),
        ("module M {\n    g = GELU(approximate='tanh')\n}\n",
         2, 26, "strings use double quotes"),
        ("module M {\n    fc = Linear(10)\n}\n",
         2, 10, "Linear is missing required argument 'out_features'"),
        ("module M {\n    m = M()\n}\n",
         2, 9, "module M contains itself"),
        ("module M {\n    forward(x: [N, 1]) { return x }\n}\nmodule M {\n}\n",
         4, 1, "module M is already defined"),
        ("module M {\n    forward(x: [N, 1]) { return relu }\n}\n",
         2, 33, "relu is a function"),
        ("module M {\n    forward(x: [N, 1]) { y = Linear(1, 1)(x)\n return y }\n}\n",
         2, 30, "Linear is a module type"),
        ("module M {\n    fc = Linear(1, 1)\n    forward(x: [N, 1] { return x }\n}\n",
         3, 23, "expected ',' or ')' in the parameter list"),
        ("module M {\n  x = 1 $ 2\n}\n", 2, 9, "unexpected character '$'"),
        ('import "missing.dp"\nmodule M {}\n', 1, 1, "cannot read"),
        ("module M {\n    forward(x: [5, 1]) { return x }\n}\n",
         2, 17, "batch dim: a fresh name"),
        ("module Linear {}\n", 1, 1, "redefines a builtin module"),
        ("module M { a = Linear(2, 2)\n forward(x: [N, 2]) { return x } }\nmodel = Foo()\n",
         3, 9, "the model is a user module"),
        ("module M(n: int) {\n forward(x: [N, n]) { return x } }\n",
         1, 1, "missing required argument 'n'"),
        ("module M {\n    d = Dropout(1.5)\n}\n", 2, 9, "Dropout: dropout probability"),
        ("module M {\n    forward(x: [N, 1]) { return 1.5e }\n}\n", 2, 33, "malformed exponent"),
    ]

    def test_cases(self):
        for i, (text, line, col, frag) in enumerate(self.CASES):
            with self.subTest(case=i, expect=frag):
                path = self.write(f"err{i}.dp", text)
                with self.assertRaises(dp2torch.DpError) as cm:
                    dp2torch.load_model(path)
                e = cm.exception
                msg = str(e)
                first = msg.split("\n")[0]
                self.assertIn(frag, first)
                self.assertTrue(first.startswith(f"{path}:{line}:{col}: error: "), first)
                lines = msg.split("\n")
                self.assertEqual(len(lines), 3)
                self.assertEqual(lines[1], text.split("\n")[line - 1])
                self.assertEqual(lines[2], " " * (col - 1) + "^")

    def test_runtime_shape_error(self):
        path = self.write("shape.dp", "module M {\n    fc1 = Linear(80, 5)\n"
                                      "    forward(x: [N, 320]) { return fc1(x) }\n}\n")
        model, _ = dp2torch.load_model(path)
        with self.assertRaises(dp2torch.DpError) as cm:
            model(torch.zeros(2, 320))
        self.assertIn(f"{path}:3:35: error: fc1 expects [..., 80], got [2, 320]", str(cm.exception))

    def test_runtime_language_errors(self):
        """Misuse that shows when forward runs: a tensor condition, calling a
        None member or a class, comparing a tensor."""
        cases = [
            ("module M {\n    forward(x: [N, 1]) {\n        if x { return x }\n        return x\n    }\n}\n",
             "3:12: error: this condition is a tensor"),
            ("module M(ds: Module = None) {\n    ds = ds\n    forward(x: [N, 1]) { return ds(x) }\n}\n",
             "3:33: error: 'ds' is None, not a module"),
            ("module M {\n    c = BatchNorm2d\n    forward(x: [N, 1]) { return c(x) }\n}\n",
             "3:33: error: 'c' is a module class"),
            ("module M {\n    forward(x: [N, 1]) { return x if x > 0 else x }\n}\n",
             "2:40: error: this condition is a tensor"),
        ]
        for i, (text, frag) in enumerate(cases):
            with self.subTest(case=i):
                path = self.write(f"rt{i}.dp", text)
                model, _ = dp2torch.load_model(path)
                with self.assertRaises(dp2torch.DpError) as cm:
                    model(torch.zeros(2, 1))
                self.assertIn(f"{path}:{frag}", str(cm.exception))


# ---------------------------------------------------------------------------
# File formats and tools
# ---------------------------------------------------------------------------

class TestSafetensors(TempDirCase):
    def test_layout(self):
        tensors = {"b.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
                   "a.num_batches_tracked": np.array(0, dtype=np.int64),
                   "c": np.ones((0, 4), dtype=np.float32)}
        blob = st.dumps(tensors, {"format": "pt"})
        n = int.from_bytes(blob[:8], "little")
        self.assertEqual(n % 8, 0)
        header = blob[8:8 + n].decode()
        self.assertTrue(header.startswith("{") and header.rstrip(" ").endswith("}"))
        h, base = st.parse_header(blob)
        names = [k for k in h if k != "__metadata__"]
        self.assertEqual(names, sorted(names))
        self.assertEqual(h["a.num_batches_tracked"], {"dtype": "I64", "shape": [],
                                                      "data_offsets": [0, 8]})
        back = st.loads(blob)
        for k, v in tensors.items():
            self.assertEqual(back[k].dtype, v.dtype)
            np.testing.assert_array_equal(back[k], v)

    def test_rejects_bad_files(self):
        good = st.dumps({"a": np.ones(2, np.float32), "b": np.ones(2, np.float32)})
        n = int.from_bytes(good[:8], "little")
        bad = {
            "short": good[:5],
            "header past end": (10 ** 6).to_bytes(8, "little") + good[8:],
            "trailing bytes": good + b"\0",
            "missing bytes": good[:-1],
            "duplicate key": None,
            "gap": None,
        }
        hdr = good[8:8 + n].decode()
        dup = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},' \
              '"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}'
        bad["duplicate key"] = len(dup).to_bytes(8, "little") + dup.encode() + good[8 + n:]
        gap = hdr.replace('"data_offsets":[8,16]', '"data_offsets":[9,17]')
        bad["gap"] = len(gap).to_bytes(8, "little") + gap.encode() + good[8 + n:] + b"\0"
        for what, blob in bad.items():
            with self.subTest(what=what):
                with self.assertRaises(st.SafetensorsError):
                    st.loads(blob)


class TestRunTool(TempDirCase):
    def test_weights_rules(self):
        path = os.path.join(MODELS, "cnn.dp")
        model, _ = dp2torch.load_model(path)
        inner = dp2torch.unwrap(model)
        t = torch_init.init_state(path, seed=1, dp_prefix=True)
        self.assertTrue(all(k.startswith("module.") for k in t))
        torch_run.load_weights(inner, t)  # prefix accepted
        t2 = {k: v for k, v in torch_init.init_state(path).items() if "num_batches" not in k}
        torch_run.load_weights(inner, t2)  # num_batches_tracked optional
        t3 = dict(t2)
        del t3["fc.bias"]
        with self.assertRaisesRegex(torch_run.RunError, "missing key 'fc.bias'"):
            torch_run.load_weights(inner, t3)
        t4 = dict(t2, extra=np.zeros(1, np.float32))
        with self.assertRaisesRegex(torch_run.RunError, "unexpected key 'extra'"):
            torch_run.load_weights(inner, t4)
        t5 = dict(t2)
        t5["fc.bias"] = np.zeros(3, np.float32)
        with self.assertRaisesRegex(torch_run.RunError, r"has shape \[3\], the model expects \[10\]"):
            torch_run.load_weights(inner, t5)

    def test_kw(self):
        path = os.path.join(MODELS, "kwargs.dp")
        w = os.path.join(self.tmp, "w.safetensors")
        st.save(w, torch_init.init_state(path))
        x = os.path.join(self.tmp, "x.npy")
        np.save(x, np.random.default_rng(0).standard_normal((3, 10)).astype(np.float32))
        base = torch_run.run(path, w, [x], [])[0]
        twice = torch_run.run(path, w, [x], ["scale=2"])[0]
        np.testing.assert_allclose(twice, 2 * base, rtol=1e-14)
        with self.assertRaisesRegex(torch_run.RunError, "no scalar parameter 'scal'"):
            torch_run.run(path, w, [x], ["scal=2"])
        with self.assertRaisesRegex(torch_run.RunError, "not a valid float"):
            torch_run.run(path, w, [x], ["scale=abc"])
        _, info = dp2torch.load_model(os.path.join(MODELS, "activations.dp"))
        self.assertEqual(torch_run.parse_kw(["verbose=true", "reps=3", "shift=1"],
                                            info["scalar_params"]),
                         {"verbose": True, "reps": 3, "shift": 1.0})

    def test_input_checks(self):
        path = os.path.join(MODELS, "multi_input.dp")
        w = os.path.join(self.tmp, "w.safetensors")
        st.save(w, torch_init.init_state(path))
        a, b, c = (os.path.join(self.tmp, f"{n}.npy") for n in "abc")
        np.save(a, np.zeros((4, 5), np.float32))
        np.save(b, np.zeros((3, 5), np.float32))
        np.save(c, np.zeros((4, 5), np.int64))
        with self.assertRaisesRegex(torch_run.RunError, "different batch sizes"):
            torch_run.run(path, w, [a, b], [])
        with self.assertRaisesRegex(torch_run.RunError, "takes 2 tensor input"):
            torch_run.run(path, w, [a], [])
        with self.assertRaisesRegex(torch_run.RunError, "expected floating point"):
            torch_run.run(path, w, [a, c], [])

    def test_vocab_detection(self):
        arrays = make_inputs.make_inputs(os.path.join(MODELS, "transformer.dp"), 64, seed=3)
        (n1, ids), (n2, pos) = arrays
        self.assertEqual((n1, n2), ("ids", "pos"))
        self.assertEqual(ids.dtype, np.int64)
        self.assertEqual(ids.shape, (64, 8))
        self.assertLess(ids.max(), 100)
        self.assertGreater(ids.max(), 8)
        self.assertLess(pos.max(), 8)


class TestCompare(unittest.TestCase):
    def test_compare(self):
        b = np.linspace(-1, 1, 12).reshape(3, 4)
        self.assertTrue(compare.compare(b.copy(), b, 1e-12)[0])
        self.assertTrue(compare.compare(b * (1 + 1e-7), b, 1e-6)[0])
        ok, report = compare.compare(b * (1 + 1e-3), b, 1e-5)
        self.assertFalse(ok)
        self.assertIn("worst elements", report)
        self.assertFalse(compare.compare(b.reshape(4, 3), b, 1)[0])
        c = b.copy()
        c[0, 0] = np.nan
        self.assertFalse(compare.compare(c, b, 1)[0])
        self.assertTrue(compare.compare(c, c.copy(), 1e-12)[0])
        self.assertTrue(compare.compare(np.zeros(3), np.zeros(3), 1e-12)[0])
        self.assertTrue(compare.compare(np.zeros((0, 3)), np.zeros((0, 3)), 1e-12)[0])


class TestCLI(TempDirCase):
    """Each script once as a real process: arguments, exit codes, files."""

    def cli(self, script, *args, expect=0):
        p = subprocess.run([sys.executable, os.path.join(HERE, script), *args],
                           capture_output=True, text=True, cwd=ROOT)
        self.assertEqual(p.returncode, expect, f"{script} {args}: {p.stdout}\n{p.stderr}")
        return p

    def test_pipeline(self):
        t = self.tmp
        p = self.cli("torch_print.py", "models/parallel_model.dp")
        self.assertEqual(p.stdout, PARALLEL_MODEL_PRINT + "\n")
        self.cli("torch_init.py", "models/kwargs.dp", "-o", f"{t}/w.safetensors", "--seed", "3")
        p = self.cli("st.py", f"{t}/w.safetensors")
        self.assertEqual(p.stdout.split("\n")[0], "fc.bias\tF32\t[5]")
        p = self.cli("make_inputs.py", "models/kwargs.dp", "--batch", "3", "--seed", "1", "-o", f"{t}/in")
        self.assertEqual(p.stdout.strip(), f"{t}/in/x0.npy")
        self.cli("torch_run.py", "models/kwargs.dp", "--weights", f"{t}/w.safetensors",
                 "--input", f"{t}/in/x0.npy", "--kw", "scale=2.0", "-o", f"{t}/y.npy")
        y = np.load(f"{t}/y.npy")
        self.assertEqual((y.shape, y.dtype), ((3, 5), np.float32))
        self.cli("torch_run.py", "models/kwargs.dp", "--weights", f"{t}/w.safetensors",
                 "--input", f"{t}/in/x0.npy", "-o", f"{t}/y64.npy", "--keep-f64")
        y64 = np.load(f"{t}/y64.npy")
        self.assertEqual(y64.dtype, np.float64)
        np.testing.assert_allclose(y, 2 * y64, rtol=1e-6)
        self.cli("compare.py", f"{t}/y64.npy", f"{t}/y64.npy", "--rtol-l2", "0")
        p = self.cli("compare.py", f"{t}/y.npy", f"{t}/y64.npy", expect=1)
        self.assertIn("rel_l2 =", p.stdout)

    def test_errors(self):
        t = self.tmp
        bad = self.write("bad.dp", "module M {\n    fc = Linear(10, 5\n}\n")
        for script, extra in (("torch_print.py", []), ("torch_init.py", ["-o", f"{t}/w.st"]),
                              ("make_inputs.py", ["--batch", "1", "-o", f"{t}/in"])):
            p = self.cli(script, bad, *extra, expect=1)
            self.assertTrue(p.stderr.startswith(f"{bad}:3:1: error: "), p.stderr)
        self.assertFalse(os.path.exists(f"{t}/w.st"))
        self.cli("torch_init.py", "models/simple.dp", expect=2)  # -o is required
        # a failed run leaves no output file
        self.cli("torch_init.py", "models/simple.dp", "-o", f"{t}/w.safetensors")
        np.save(f"{t}/x.npy", np.zeros((2, 11), np.float32))
        p = self.cli("torch_run.py", "models/simple.dp", "--weights", f"{t}/w.safetensors",
                     "--input", f"{t}/x.npy", "-o", f"{t}/y.npy", expect=1)
        self.assertIn("expects [N, 10], got [2, 11]", p.stderr)
        self.assertFalse(os.path.exists(f"{t}/y.npy"))


if __name__ == "__main__":
    unittest.main(verbosity=1)
