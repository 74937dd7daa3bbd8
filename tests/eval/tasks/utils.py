"""Loads the tasks' data from data/ next to this file: lm-eval 0.4.13 resolves
a relative dataset_kwargs.data_files against the working directory, not the
YAML, so the YAMLs name a loader here (`custom_dataset: !function ...`),
which lm-eval imports from the YAML's own folder."""
import os

import datasets

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _load(name):
    return datasets.load_dataset("json", data_files={"test": os.path.join(DATA, name)})


def cloze(**kwargs):
    return _load("cloze.jsonl")


def ppl(**kwargs):
    return _load("ppl.jsonl")


def gen(**kwargs):
    return _load("gen.jsonl")
