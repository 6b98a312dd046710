#!/usr/bin/env python3
"""onnxruntime's transformer optimizer applied to benchmark model folders: the "optimized"
models people share, full of com.microsoft ops (Attention, EmbedLayerNormalization,
SkipLayerNormalization, BiasGelu; docs/contrib_ops.md), for benchmarks/compare.py.

    build/bench-venv/bin/python benchmarks/ort_optimize.py --bert-eager build/zoo-ort/bert_base_eager
    build/bench-venv/bin/python benchmarks/ort_optimize.py build/zoo-ort/bert_base_eager \\
        --model-type bert --heads 12 --hidden 768 [--out build/zoo-ort]
    build/venv/bin/python benchmarks/compare.py build/zoo-ort/bert_base_eager{,-ort} --threads 1,2

--bert-eager DIR writes a BERT-base (Hugging Face transformers, random weights, seed 0) exported by
torch.onnx.export with eager attention, which is the pattern the optimizer fuses into Attention
(the benchmark zoo's export through scaled_dot_product_attention is not fused), with a
test_data_set_0 of one sequence of 128 tokens, the last 28 padded. Needs torch and transformers
(build/bench-venv, benchmarks/zoo-setup.sh).

Otherwise, for each model folder (model.onnx and test_data_set_0), OUT/NAME-ort/ gets the
optimizer's model (onnxruntime.transformers.optimizer.optimize_model with the given model type,
heads and hidden size) and a copy of test_data_set_0; prints the com.microsoft ops it holds.
The optimizer imports torch, so this runs in build/bench-venv; never run in CI.
"""
import argparse
import collections
import os
import shutil

import numpy as np
import onnx
from onnx import numpy_helper


def export_bert_eager(out):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(attn_implementation="eager")  # BERT-base: 12 layers, 768 wide

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel(config).eval()

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    ids = torch.randint(0, config.vocab_size, (1, 128))
    mask = torch.ones(1, 128, dtype=torch.long)
    mask[0, 100:] = 0
    types = torch.zeros(1, 128, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    torch.onnx.export(Bert().eval(), (ids, mask, types), os.path.join(out, "model.onnx"), input_names=names,
                      output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                      dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names})
    for i, (name, t) in enumerate(zip(names, (ids, mask, types))):
        tensor = numpy_helper.from_array(t.numpy().astype(np.int64), name)
        with open(os.path.join(out, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(tensor.SerializeToString())
    print(f"{out}: BERT-base, eager attention, random weights")


def optimize(folder, out, model_type, heads, hidden):
    from onnxruntime.transformers import optimizer

    name = os.path.basename(os.path.normpath(folder)) + "-ort"
    dst = os.path.join(out, name)
    os.makedirs(dst, exist_ok=True)
    model = optimizer.optimize_model(os.path.join(folder, "model.onnx"), model_type=model_type, num_heads=heads,
                                     hidden_size=hidden)
    model.save_model_to_file(os.path.join(dst, "model.onnx"))
    shutil.copytree(os.path.join(folder, "test_data_set_0"), os.path.join(dst, "test_data_set_0"),
                    dirs_exist_ok=True)
    ops = collections.Counter(n.op_type for n in onnx.load(os.path.join(dst, "model.onnx"),
                                                           load_external_data=False).graph.node
                              if n.domain == "com.microsoft")
    print(f"{dst}: " + ", ".join(f"{count} {op}" for op, count in sorted(ops.items())))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="*", help="model folders (model.onnx, test_data_set_0)")
    p.add_argument("--bert-eager", metavar="DIR", help="write the eager-attention BERT-base folder DIR")
    p.add_argument("--out", default="build/zoo-ort", help="where the optimized folders go (default build/zoo-ort)")
    p.add_argument("--model-type", default="bert", help="the optimizer's model_type (bert, gpt2, ...; default bert)")
    p.add_argument("--heads", type=int, default=12, help="attention heads (default 12)")
    p.add_argument("--hidden", type=int, default=768, help="hidden size (default 768)")
    args = p.parse_args()
    if not args.folders and not args.bert_eager:
        p.error("give model folders, or --bert-eager DIR")
    if args.bert_eager:
        export_bert_eager(args.bert_eager)
    for folder in args.folders:
        optimize(folder, args.out, args.model_type, args.heads, args.hidden)


if __name__ == "__main__":
    main()
