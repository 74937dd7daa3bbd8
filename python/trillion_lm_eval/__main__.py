"""python -m trillion_lm_eval ... / trillion-lm-eval ...: lm-eval's command
line (the same arguments as `lm_eval`) with the trillion models registered."""
import trillion_lm_eval  # noqa: F401  (registers the models)
from lm_eval.__main__ import cli_evaluate


def main():
    cli_evaluate()


if __name__ == "__main__":
    main()
