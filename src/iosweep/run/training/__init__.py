"""Horovod training jobs that iosweep traces (run by the per-rank wrapper, one process per rank).

Stdlib only here: this package is imported by every framework's interpreter.
"""

import argparse


def base_parser(description: str, lr: float) -> argparse.ArgumentParser:
    """The arguments every training script takes (the runner passes them all)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data", required=True, help="dataset directory")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps-per-epoch", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=lr, help="base rate, scaled by the number of ranks")
    p.add_argument("--checkpoint-dir", default="", help="rank 0 checkpoints here every epoch")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--progress", default="", help="per-rank timestamps file, {rank} filled in")
    p.add_argument("--seed", type=int, default=42)
    return p
