"""
Loss curves from train.py's log_file: train loss per iteration, the evaluations'
train/val loss, and tokens/s, for one or several runs, drawn to a PNG.

$ python train.py config/train_shakespeare_char_cpu.py --log_file=cpu.jsonl
$ python plot_log.py cpu.jsonl                      # writes cpu.png
$ python plot_log.py a.jsonl b.jsonl --out runs.png  # one colour per file
"""

import argparse
import json
import os
import sys


def read_log(path: str) -> tuple[list[dict], list[dict]]:
    """The training records ({"iter", "loss", ...}) and the evaluation records
    ({"iter", "train_loss", "val_loss"}) of one log file."""
    steps, evals = [], []
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise ValueError(f"{path}:{n} is not a JSON line") from None
            if 'val_loss' in record:
                evals.append(record)
            elif 'loss' in record:
                steps.append(record)
    if not steps and not evals:
        raise ValueError(f"{path} holds no train.py log records")
    return steps, evals


def plot(paths: list[str], out: str):
    """Draw the runs in paths to the image out; returns the matplotlib figure."""
    import matplotlib
    matplotlib.use('Agg')  # files only, no display needed
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_tok) = plt.subplots(2, 1, figsize=(9, 7), sharex=True,
                                          gridspec_kw=dict(height_ratios=[3, 1]))
    for i, path in enumerate(paths):
        steps, evals = read_log(path)
        name, color = os.path.splitext(os.path.basename(path))[0], f"C{i % 10}"
        if steps:
            ax_loss.plot([r['iter'] for r in steps], [r['loss'] for r in steps], color=color,
                         alpha=0.35, linewidth=0.8, label=f"{name} train (per step)")
        if evals:
            its = [r['iter'] for r in evals]
            ax_loss.plot(its, [r['train_loss'] for r in evals], color=color, linestyle='--',
                         marker='.', label=f"{name} train (eval)")
            ax_loss.plot(its, [r['val_loss'] for r in evals], color=color, marker='o',
                         label=f"{name} val")
        rate = [r for r in steps if 'tok_per_s' in r]  # logs of older train.py versions lack it
        if rate:
            ax_tok.plot([r['iter'] for r in rate], [r['tok_per_s'] for r in rate], color=color,
                        linewidth=0.8, label=name)
    ax_loss.set_ylabel('loss')
    ax_loss.grid(alpha=0.3)
    ax_loss.legend(fontsize='small')
    ax_tok.set_ylabel('tokens/s')
    ax_tok.set_xlabel('iteration')
    ax_tok.grid(alpha=0.3)
    if ax_tok.lines:
        ax_tok.legend(fontsize='small')
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    return fig


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument('logs', nargs='+', help="JSON-lines files written by train.py --log_file=...")
    parser.add_argument('--out', help="the PNG to write (default: the first log's name with .png)")
    args = parser.parse_args(argv)
    out = args.out or os.path.splitext(args.logs[0])[0] + '.png'
    try:
        plot(args.logs, out)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyError as e:
        print(f"error: a log record lacks the key {e}: is it a train.py log_file?", file=sys.stderr)
        return 1
    except ImportError:
        print("error: plot_log.py needs matplotlib (pip install matplotlib)", file=sys.stderr)
        return 1
    print(f"wrote {os.path.abspath(out)}")
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
