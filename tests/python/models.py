"""Tiny Hugging Face decoders built from a config with random weights (no download)."""

import torch
from conftest import DEVICE

ARCHS = ("llama", "gpt2", "gpt_neox")
LORA_TARGETS = {"llama": ["q_proj", "v_proj", "down_proj"], "gpt2": ["c_attn", "c_fc"],
                "gpt_neox": ["query_key_value", "dense_h_to_4h"]}


def config(arch):
    import transformers as tf

    if arch == "llama":
        return tf.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                              max_position_embeddings=64)
    if arch == "gpt2":
        return tf.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    if arch == "gpt_neox":
        return tf.GPTNeoXConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                num_hidden_layers=2, num_attention_heads=4,
                                max_position_embeddings=64)
    raise ValueError(arch)


def build(arch, lora=False, checkpointing=False, seed=0):
    import transformers as tf

    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(config(arch)).to(DEVICE)
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora:
        import peft

        model = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                                           target_modules=LORA_TARGETS[arch]))
        model.train()
    return model


def batches(n=2, batch=2, seq=16, vocab=128, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(0, vocab, (batch, seq), generator=g).to(DEVICE)
        out.append({"input_ids": ids, "labels": ids})
    return out
