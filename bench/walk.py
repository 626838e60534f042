"""The walk of a plain hard fit of an in-memory array to its first kernel call (issue 34):
how many softkmeans modules it passes through and how many softkmeans functions return
before the first call into the compiled core (`softkmeans._core`), and the modules on
the stack at that call.

Counted with sys.setprofile from `SoftKMeans(k, assignment="hard").fit(X)` (the
estimator warmed up first, so imports and one-time caches are not counted): every
"call" event of a softkmeans Python function adds its module, every "return" event of
one adds a return, until the first "c_call" of a `softkmeans._core` function. Modules
outside softkmeans (scikit-learn's validation, NumPy) are listed apart. A detour is a
return into a frame that is still on the stack at the kernel call (the final path): a
softkmeans function that path called and that came back before the kernel (a check, a
lookup, a feature answering "not me"); calls made inside a detour are not counted again.
Each line prints measured / needed where issue 34 sets a target. A second walk goes on
to k-means++'s first kernel call (the seeding), counted the same way.

    PYTHONPATH=python python bench/walk.py
"""

from __future__ import annotations

import sys

import numpy as np

import softkmeans
from softkmeans import SoftKMeans

# Issue 34: "at most 8 Python modules with at most 3 returns" before the first kernel
# call, counted as every softkmeans module entered and every return to the final path.
NEEDED_MODULES = 8
NEEDED_DETOURS = 3


def walk(fit, kernel=""):
    """(softkmeans modules in call order, other modules, returns, the first kernel), to
    the first call of a `softkmeans._core` function whose name starts with `kernel` (""
    for any: the first kernel call; kernel calls before it are passed like any C call)."""
    modules, others, state = [], [], {"returns": 0, "kernel": None}
    detours = []  # (id of the caller's frame, callee's module) of each softkmeans return

    def profile(frame, event, arg):
        if state["kernel"] is not None:
            return
        if event == "c_call":
            if getattr(arg, "__module__", "") == "softkmeans._core" and (
                arg.__name__.startswith(kernel)
            ):
                state["kernel"] = arg.__name__
                state["stack"] = _stack_modules(frame)
                state["path"] = _stack_frames(frame)
            return
        name = frame.f_globals.get("__name__", "")
        mine = name.startswith("softkmeans")
        if event == "call":
            seen = modules if mine else others
            if name not in seen:
                seen.append(name)
        elif event == "return" and mine:
            state["returns"] += 1
            # The caller itself, not its id: a frame that has ended may leave its id to
            # a later one (a return into a finished helper would count as a detour).
            detours.append((frame.f_back, name))

    sys.setprofile(profile)
    try:
        fit()
    finally:
        sys.setprofile(None)
    path = state["path"]
    # A detour: a softkmeans function called from the final path that returned before
    # the kernel call (a feature answering "not me", a check, a lookup).
    off_path = [name for caller, name in detours if any(caller is f for f in path)]
    return modules, others, state["returns"], state["kernel"], state["stack"], off_path


def _stack_frames(frame):
    """The softkmeans frames on the stack (the frames themselves)."""
    out = []
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("softkmeans"):
            out.append(frame)
        frame = frame.f_back
    return out


def _stack_modules(frame):
    """The softkmeans modules of the frames on the stack, outermost first (repeats of a
    module in a row once)."""
    out = []
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("softkmeans") and (not out or out[-1] != name):
            out.append(name)
        frame = frame.f_back
    return out[::-1]


def main():
    X = np.random.default_rng(0).normal(size=(2000, 16))
    SoftKMeans(8, assignment="hard", random_state=0).fit(X)  # warm-up
    print(f"softkmeans {softkmeans.__file__}")
    report(walk(lambda: SoftKMeans(8, assignment="hard", random_state=0).fit(X)))
    # The second walk: on to k-means++'s first kernel (the seeding), no target of its own.
    print()
    report(walk(lambda: SoftKMeans(8, assignment="hard", random_state=0).fit(X), "kmeanspp"),
           targets=False)


def report(walked, targets=True):
    """Print a walk; targets: with issue 34's (measured / needed)."""
    modules, others, returns, kernel, stack, off_path = walked
    need_modules = f" / {NEEDED_MODULES} needed" if targets else ""
    need_detours = f" / {NEEDED_DETOURS} needed" if targets else ""
    print(f"first kernel call: _core.{kernel}")
    print(f"softkmeans modules entered: {len(modules)}{need_modules}: "
          + " -> ".join(modules))
    print(f"softkmeans returns before it: {returns}")
    print(f"the stack at it ({len(stack)} modules, {len(set(stack))} distinct): "
          + " -> ".join(stack))
    print(f"returns to the path (detours) before it: {len(off_path)}{need_detours}, "
          f"into {len(set(off_path))} modules: {', '.join(sorted(set(off_path)))}")
    print(f"other modules ({len(others)}): {', '.join(others)}")


if __name__ == "__main__":
    main()
