"""offtune.OfftuneCallback: a Hugging Face TrainerCallback that records every train() into a store.

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[offtune.OfftuneCallback("runs.db", name="sft")])
    trainer.train()        # one run, one step per optimizer step

TRL's trainers are Trainers: the same callback records them (with activation_offloading=True and
offtune's drop-in, the drop-in's offloader is the one listened to).

One run per train(): it begins at on_train_begin and ends at on_train_end. A step is an optimizer
step, from on_step_begin (before the first micro-batch of a gradient-accumulation cycle) to
on_step_end (after the optimizer stepped); logging, evaluation and saving between steps are not in
it. A train() that raises ends without on_train_end: its run is marked interrupted when the
callback begins the next run, is garbage-collected, or the store is next opened for writing after
this process ended.
"""

from typing import Optional

from transformers import TrainerCallback

from .record import record

__all__ = ["OfftuneCallback"]


class OfftuneCallback(TrainerCallback):
    """Records each train() as a run of the store `db` (see offtune.record for the arguments).

    name defaults to the TrainingArguments' run_name (else the model's class); batch to
    per_device_train_batch_size x gradient_accumulation_steps; warmup to 1 optimizer step.
    """

    def __init__(self, db, name: Optional[str] = None, offloader=None,
                 device_model: Optional[str] = None, **record_kwargs):
        self.db = db
        self.name = name
        self.offloader = offloader
        self.device_model = device_model
        self.record_kwargs = record_kwargs
        self.recording = None  # the run of the current (or last) train()
        self.runs = []  # ids of the runs recorded by this callback, in order

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._end_abandoned()
        kw = dict(self.record_kwargs)
        kw.setdefault("batch", args.per_device_train_batch_size * args.gradient_accumulation_steps)
        name = self.name or (args.run_name if getattr(args, "run_name", None) else None)
        # TRL's trainers with activation_offloading=True wrap each forward in TRL's own
        # offloading context (unless offtune's drop-in replaced it, whose offloader is then seen).
        other = "TRL activation_offloading" if getattr(args, "activation_offloading", False) \
            else None
        rec = record(self.db, name=name, model=model, offloader=self.offloader,
                     device_model=self.device_model, begin_first_step=False,
                     _other_hooks=other, **kw)
        self.recording = rec.start()
        self.runs.append(self.recording.id)

    def on_step_begin(self, args, state, control, **kwargs):
        if self.recording is not None and not self.recording.step_open:
            self.recording.begin_step()

    def on_step_end(self, args, state, control, **kwargs):
        if self.recording is not None and self.recording.step_open:
            self.recording.end_step()

    def on_train_end(self, args, state, control, **kwargs):
        if self.recording is not None and self.recording.summary is None:
            self.recording.finish()

    def _end_abandoned(self):
        # The previous train() raised: its run ends as interrupted now.
        if self.recording is not None and self.recording.summary is None:
            self.recording.interrupt("train() ended without on_train_end (it raised)")
