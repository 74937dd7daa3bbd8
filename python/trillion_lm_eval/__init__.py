"""lm-evaluation-harness backends for trillion (docs/evaluations.md).

lm-eval 0.4.13 discovers no plugins: a model is known only once a module that
registers it has been imported. Importing this package registers `trillion`
(the engine) and `trillion-reference` (the float64 reference of
tests/reference on the same requests); `python -m trillion_lm_eval` then runs
lm-eval's own command line."""
# The registry imports lm_eval.models (the built-in backends) only while it is
# empty; registering ours first would hide them, so import them first.
import lm_eval.models  # noqa: F401
from lm_eval.api.registry import register_model

from .lm import TrillionLM
from .reference import ReferenceLM

register_model("trillion")(TrillionLM)
register_model("trillion-reference")(ReferenceLM)

__all__ = ["TrillionLM", "ReferenceLM"]
