"""offtune.record and offtune.OfftuneCallback: a Python training loop recorded into a store that the
CLI reads (report, recommend), one run per Trainer.train() with one step per optimizer step, and
bad input as one clear Python exception that leaves foreign files alone."""

import json
import os
import pathlib
import shutil
import sqlite3
import subprocess

import pytest
import torch
from conftest import BACKEND, DEVICE

import offtune
from offtune import _offtune

HOST_SIM = BACKEND == "host-sim"
# On host-sim, time as an H100 would: every step the same, so step counts are exact (warm-up until
# stable never drops one). cuda measures the GPU.
MODELLED = {"device_model": "h100-sxm"} if HOST_SIM else {}


def cli_binary():
    """The offtune CLI of the build the package comes from, else $OFFTUNE_CLI, else on PATH."""
    candidates = [os.environ.get("OFFTUNE_CLI", "")]
    package = os.environ.get("OFFTUNE_PYTHON_PATH")
    root = pathlib.Path(__file__).resolve().parents[2]
    candidates.append(str(pathlib.Path(package).parent / "cli" / "offtune") if package else "")
    candidates.append(str(root / "build" / "ci" / "cli" / "offtune"))
    candidates.append(shutil.which("offtune") or "")
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    pytest.skip("no offtune CLI binary (build the target offtune, or set OFFTUNE_CLI)")


def offtune_cli(*args):
    return subprocess.run([cli_binary(), *args], capture_output=True, text=True, timeout=300)


def tiny_llama(seed=0):
    import transformers as tf

    torch.manual_seed(seed)
    config = tf.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            max_position_embeddings=64)
    model = tf.LlamaForCausalLM(config).to(DEVICE)
    model.train()
    return model


def batch(seed=1, size=2, seq=16):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 128, (size, seq), generator=g).to(DEVICE)
    return {"input_ids": ids, "labels": ids}


def offloader():
    return offtune.Offloader(backend=BACKEND, min_offload_size=0, max_fwd_stash_size=2,
                             link="none")


def train(rec, model, off=None, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = batch()
    losses = []
    for _ in range(steps):
        if off is not None:
            with off.scope():
                loss = model(**data).loss
        else:
            loss = model(**data).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        rec.step(loss)
    return losses


def step_rows(db, run):
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return c.execute("SELECT count(*) FROM steps WHERE run = ?", (run,)).fetchone()[0]


def test_a_recorded_hugging_face_run_opens_in_report_and_recommend(tmp_path):
    db = tmp_path / "runs.db"
    model = tiny_llama()
    off = offloader()
    # The baseline (no offloader, even with one alive) and the offloaded run, under one name.
    with offtune.record(db, name="tiny-llama", model=model, offloader=(), warmup=1,
                        batch=2, seq=16, **MODELLED) as base:
        train(base, model, steps=4)
    with offtune.record(db, name="tiny-llama", model=model, warmup=1, batch=2, seq=16,
                        **MODELLED) as rec:  # listens to every live Offloader: `off`
        losses = train(rec, model, off, steps=4)
    assert base.summary["status"] == "ok", base.summary
    assert rec.summary["status"] == "ok", rec.summary
    assert base.summary["offloaded_bytes"] == 0
    assert rec.summary["offloaded_bytes"] > 0
    assert base.summary["peak_allocated"] > 0
    assert rec.summary["final_loss"] == pytest.approx(losses[-1])
    # 4 steps ended, the first is warm-up.
    if HOST_SIM:
        assert step_rows(db, rec.id) == 3
    else:
        assert step_rows(db, rec.id) + rec.summary["warmup_added"] == 3

    report = offtune_cli("report", "--db", str(db), "--json")
    assert report.returncode == 0, report.stderr
    runs = json.loads(report.stdout)["runs"]
    assert [r["status"] for r in runs] == ["ok", "ok"]
    assert runs[1]["label"] == "tiny-llama"
    text = offtune_cli("report", "--db", str(db))
    assert text.returncode == 0 and "tiny-llama" in text.stdout, text.stdout + text.stderr

    chosen = offtune_cli("recommend", "--db", str(db), "--json", "--max-slowdown", "100")
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr
    picked = json.loads(chosen.stdout)
    assert "point" in picked and "slowdown" in picked, picked  # the baseline was found
    exported = offtune_cli("export", "--db", str(db), "--format", "chrome", "-o",
                           str(tmp_path / "trace.json"))
    assert exported.returncode == 0, exported.stderr


def test_the_run_records_the_offloaders_options_and_the_model(tmp_path):
    db = tmp_path / "runs.db"
    model = tiny_llama()
    off = offtune.Offloader(backend=BACKEND, min_offload_size="64KiB", max_fwd_stash_size=3,
                            prefetch=2, link="none")
    with offtune.record(db, model=model, offloader=off, warmup=0, **MODELLED) as rec:
        train(rec, model, off, steps=2)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        c.row_factory = sqlite3.Row
        row = dict(c.execute("SELECT * FROM runs WHERE id = ?", (rec.id,)).fetchone())
    assert row["model"] == "LlamaForCausalLM"
    assert row["dtype"] == "fp32"
    assert row["label"] == "LlamaForCausalLM"  # no name given: the model's class
    assert (row["offload"], row["min_offload_size"], row["max_fwd_stash_size"], row["prefetch"]) \
        == (1, 65536, 3, 2)
    assert row["link"] == "none"
    assert row["env_backend"] == BACKEND


@pytest.mark.skipif(not HOST_SIM, reason="a device model applies to host-sim only")
def test_a_device_model_times_the_loop_as_that_gpu(tmp_path):
    # The same loop recorded twice takes exactly the same modelled time: the GPU's, not this CPU's.
    summaries = []
    for _ in range(2):
        model = tiny_llama()
        off = offloader()
        with offtune.record(tmp_path / "runs.db", model=model, offloader=off,
                            device_model="h100-sxm", warmup=1) as rec:
            train(rec, model, off, steps=4)
        summaries.append(rec.summary)
    for s in summaries:
        assert s["status"] == "ok"
        assert "h100-sxm" in s["collector"]
        assert s["warmup_added"] == 0
    assert summaries[0]["step_ms_median"] == summaries[1]["step_ms_median"] > 0
    assert summaries[0]["peak_allocated"] == summaries[1]["peak_allocated"]
    # What an H100 holds besides the loop's tensors (docs/memory.md): cuBLAS's workspaces for
    # forward's and backward's matmuls (32 MiB each, inside allocated), and the CUDA context
    # outside the allocator; the process's host peak is not measured on host-sim.
    s = summaries[0]
    assert s["peak_allocated"] >= 2 * 32 * 2**20
    assert s["device_outside"] == 512 * 2**20
    assert s["peak_device_total"] == s["peak_reserved"] + s["device_outside"]
    assert s["host_rss_peak"] == 0


def test_a_device_model_on_cuda_is_a_value_error(tmp_path):
    if HOST_SIM:
        pytest.skip("needs the cuda backend")
    with pytest.raises(ValueError, match="host-sim only"):
        with offtune.record(tmp_path / "runs.db", offloader=(), backend="cuda",
                            device_model="h100-sxm"):
            pass


def test_an_error_in_the_loop_is_recorded_as_failed_and_raised(tmp_path):
    db = tmp_path / "runs.db"
    model = tiny_llama()
    with pytest.raises(ZeroDivisionError):
        with offtune.record(db, model=model, offloader=(), warmup=0) as rec:
            train(rec, model, steps=1)
            raise ZeroDivisionError("division by zero")
    assert rec.summary["status"] == "failed"
    assert rec.summary["error"] == "ZeroDivisionError: division by zero"
    assert step_rows(db, rec.id) == 1  # what was measured before is kept


def test_a_trainer_with_the_callback_writes_one_run_per_train_and_a_step_per_optimizer_step(
        tmp_path):
    import transformers as tf
    from torch.utils.data import Dataset

    class Tokens(Dataset):
        def __init__(self, n=12):
            self.items = [batch(seed=i, size=1)["input_ids"][0].cpu() for i in range(n)]

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            return {"input_ids": self.items[i], "labels": self.items[i]}

    db = tmp_path / "runs.db"
    model = tiny_llama()
    forwards = []
    model.register_forward_hook(lambda *_: forwards.append(1))
    callback = offtune.OfftuneCallback(db, name="sft", offloader=(), warmup=0, **MODELLED)
    args = tf.TrainingArguments(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=2,
        gradient_accumulation_steps=2, max_steps=3, learning_rate=1e-3, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0, disable_tqdm=True)
    trainer = tf.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[callback])
    trainer.train()
    trainer.train()
    assert len(forwards) == 12  # 2 x 3 optimizer steps x 2 micro-batches
    assert len(callback.runs) == 2
    report = offtune_cli("report", "--db", str(db), "--json")
    assert report.returncode == 0, report.stderr
    runs = json.loads(report.stdout)["runs"]
    assert [r["status"] for r in runs] == ["ok", "ok"]
    for run in callback.runs:
        if HOST_SIM:
            assert step_rows(db, run) == 3
        else:
            assert 1 <= step_rows(db, run) <= 3
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        batch_recorded = c.execute("SELECT batch FROM runs WHERE id = ?",
                                   (callback.runs[0],)).fetchone()[0]
    assert batch_recorded == 4  # per device x accumulation


def test_a_file_that_is_not_a_store_is_refused_and_left_as_it_is(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE people (name TEXT)")
        c.execute("INSERT INTO people VALUES ('ada')")
    before = {p: p.read_bytes() for p in (text, foreign)}
    for path in (text, foreign):
        with pytest.raises(ValueError, match="not an offtune store"):
            with offtune.record(path, offloader=()) as rec:
                rec.step()
    for p, data in before.items():
        assert p.read_bytes() == data, p
    assert sorted(x.name for x in tmp_path.iterdir()) == ["notes.txt", "other.db"]


def test_a_directory_that_cannot_be_written_is_an_os_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        with offtune.record(blocker / "runs.db", offloader=()):
            pass
    with pytest.raises(OSError):
        with offtune.record(tmp_path / "missing" / "runs.db", offloader=()):
            pass


def test_bad_arguments_are_value_errors_and_write_no_store(tmp_path):
    db = tmp_path / "runs.db"
    with pytest.raises(ValueError, match="h100-typo"):
        with offtune.record(db, offloader=(), device_model="h100-typo"):
            pass
    with pytest.raises(ValueError, match="warmup"):
        offtune.record(db, warmup=-1)
    with pytest.raises(ValueError, match="collector"):
        with offtune.record(db, offloader=(), collector="everything"):
            pass
    with pytest.raises(TypeError, match="offloader"):
        with offtune.record(db, offloader="yes"):
            pass
    assert not db.exists()


def test_step_calls_out_of_order_are_runtime_errors(tmp_path):
    with offtune.record(tmp_path / "runs.db", offloader=(), warmup=0,
                        begin_first_step=False) as rec:
        with pytest.raises(RuntimeError, match="end_step"):
            rec.end_step()
        rec.begin_step()
        with pytest.raises(RuntimeError, match="begin_step"):
            rec.begin_step()
        rec.end_step()
    assert rec.summary["status"] == "ok"


def test_finish_waits_for_the_stores_lock_without_holding_the_gil(tmp_path):
    # Another process holds the store's write lock; finish() waits for it (up to the store's busy
    # timeout). The process's other threads must run meanwhile: here the one that releases the
    # lock. Before: finish() held the GIL, that thread could not run until the wait gave up, and
    # the run's end was lost.
    import threading
    import time

    db = tmp_path / "runs.db"
    model = torch.nn.Linear(8, 8)
    rec = offtune.record(db, name="gil", offloader=(), warmup=0).start()
    for _ in range(2):
        model(torch.randn(4, 8)).sum().backward()
        rec.step()
    holder = sqlite3.connect(db, isolation_level=None, timeout=30)
    holder.execute("BEGIN EXCLUSIVE")
    order, errors = [], []

    def finish():
        try:
            rec.finish()
            order.append("finished")
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    waiter = threading.Thread(target=finish)
    waiter.start()
    time.sleep(0.5)  # finish() is waiting for the lock by now
    order.append("lock released")
    holder.execute("COMMIT")
    holder.close()
    waiter.join(60)
    assert not errors, errors
    assert order == ["lock released", "finished"]
    assert rec.summary["status"] == "ok"


def _points(db):
    with sqlite3.connect(db) as con:
        return [r for (r,) in con.execute("SELECT run FROM points ORDER BY run")]


def test_a_run_under_another_tools_offloading_is_recorded_as_such_not_as_a_baseline(tmp_path):
    # Before: recorded as the baseline (offload off) of its recorded sweep, with no word.
    db = tmp_path / "runs.db"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))

    def loop(rec, other_hooks):
        for _ in range(3):
            ctx = torch.autograd.graph.save_on_cpu() if other_hooks else offtune.no_offload()
            with ctx:
                loss = model(torch.randn(4, 8)).pow(2).mean()
            loss.backward()
            rec.step()

    # Found at the first forward (the usual case: the other tool wraps each forward).
    with pytest.warns(UserWarning, match=r"not offtune's \(torch\.autograd\.graph\.save_on_cpu\)"):
        with offtune.record(db, name="sweep", model=model, offloader=(), warmup=0) as rec:
            loop(rec, other_hooks=True)
    assert rec.other_hooks == "torch.autograd.graph.save_on_cpu"
    assert rec.summary["status"] == "ok"
    # Found before the run began: its label says so as well.
    with pytest.warns(UserWarning, match="save_on_cpu"):
        with torch.autograd.graph.save_on_cpu():
            early = offtune.record(db, name="sweep", offloader=(), warmup=0).start()
        loop(early, other_hooks=False)
        early.finish()
    # The callback, for a TRL trainer with activation_offloading=True and no offtune offloader.
    from types import SimpleNamespace

    callback = offtune.OfftuneCallback(db, name="sweep", offloader=(), warmup=0)
    args = SimpleNamespace(per_device_train_batch_size=4, gradient_accumulation_steps=1,
                           run_name=None, activation_offloading=True)
    with pytest.warns(UserWarning, match="TRL activation_offloading"):
        callback.on_train_begin(args, None, None, model=model)
    for _ in range(2):
        callback.on_step_begin(args, None, None)
        model(torch.randn(4, 8)).sum().backward()
        callback.on_step_end(args, None, None)
    callback.on_train_end(args, None, None)
    # A plain baseline under the same name is its recorded sweep's one point.
    with offtune.record(db, name="sweep", model=model, offloader=(), warmup=0) as base:
        loop(base, other_hooks=False)
    assert base.other_hooks is None
    assert _points(db) == [base.id]
    labels = {r["id"]: r["label"] for r in _offtune.read_runs(str(db))}
    assert labels[early.id] == "sweep [under torch.autograd.graph.save_on_cpu]"
    assert labels[callback.runs[0]] == "sweep [under TRL activation_offloading]"
    assert labels[rec.id] == labels[base.id] == "sweep"
