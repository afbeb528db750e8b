"""Where a command's wall time goes: run it, prefix every line it prints with the seconds since launch, and say
when it printed its first and last line and when it exited.

    python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=tk

Made for issue 12's "under 60 s of wall time from launch": train.py's own clock ("elapsed") starts at its
training loop, so the imports, the model and kernel setup before it and the interpreter's exit after it are
only visible from outside. The child's stdout and stderr are merged (run it with PYTHONUNBUFFERED=1, which this
script sets, so that lines arrive when they are printed). The exit status is the child's.
"""
import os
import subprocess
import sys
import time


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(__doc__.strip())
        return 2
    t0 = time.time()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                            errors="replace")
    first = last = None
    for line in proc.stdout:
        t = time.time() - t0
        first = t if first is None else first
        last = t
        print(f"[{t:7.2f}] {line}", end="", flush=True)
    rc = proc.wait()
    t_exit = time.time() - t0
    fmt = lambda v: "-" if v is None else f"{v:.2f} s"  # noqa: E731
    print(f"[timeline] first line {fmt(first)}, last line {fmt(last)}, exit {fmt(t_exit)} (rc {rc})", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
