"""Passes run where the blocks are: one call per worker per pass, no task per block
(`softkmeans.sources.dask_passes.BlockPasses` with a distributed client).

A pass of one task per block costs the scheduler and the workers a task's round of
messages and state changes per block, then a gather: about 15-20 ms a pass on a
2-process LocalCluster whatever the work, a third of an iteration of the 2e6 x 16, k = 64
fit (bench/dask_compare.py). Here each worker holding blocks gets one call
(`Client.run`, a coroutine on its event loop; the centroids travel once per worker in
it), runs the same block function on the persisted blocks it holds, in its own thread
pool, merges the groups of the fixed tree whose blocks it holds all of, and returns the
other nodes; the client merges the rest of the tree (`runner.merge_nodes`). The same
block function and tree as a pass of tasks: the same bits. About 2 ms a pass.

The plan (which worker computes which block) is made from the scheduler's `who_has` and
kept while it holds. Where it does not (a worker died, a block moved or was recomputed
elsewhere, sample_weight's block on another worker than X's, more than MERGE_FAN_IN nodes
would reach the client), `ResidentPasses.run` returns NOT_RESIDENT and the caller runs
the pass as tasks, which recompute what was lost; the plan is made again at the next
pass. An exception raised by a block function is raised here, as a task's would be.
"""

from __future__ import annotations

import asyncio
import uuid

from .runner import MERGE_FAN_IN, merge_nodes

__all__ = ["NOT_RESIDENT", "ResidentPasses"]

NOT_RESIDENT = object()

# At most this share of X's rows is copied to even out the blocks per worker thread.
MOVED_SHARE = 0.25
# Seconds a pass waits for its blocks' copies to other workers (`_even_out`).
COPY_WAIT_S = 30.0


class ResidentPasses:
    """Passes over persisted blocks by one `Client.run` call per worker.

    blocks: [(start row, rows, X block future, w block future or None)] in block order.
    """

    def __init__(self, client, blocks):
        self.client = client
        self.originals = list(blocks)
        self.blocks = list(blocks)  # with the copies made to even out the workers
        self.plan = None
        self.rows = sum(rows for _, rows, *_ in blocks)
        self.moved = 0  # rows copied to even out the workers (`_even_out`)
        self.spread = False  # the tree's groups spread over the workers (`_make_plan`)

    def run(self, task, merge, args):
        """The merged result of task(start, X block, w block or None, *args) over the
        blocks, or NOT_RESIDENT where the blocks are not where a plan can use them."""
        plan = None if self.spread else self.plan or self._make_plan()
        if plan is None:
            return NOT_RESIDENT
        n = len(self.blocks)
        try:
            replies = self.client.run(_on_worker, plan, task, merge, n, args, workers=list(plan))
        except Exception:  # a worker unreachable or gone: the tasks will tell
            replies = {}
        nodes = {}
        for address in plan:
            kind, value = replies.get(address, ("missing", None))
            if kind == "raised":
                raise value
            if kind == "missing":
                # A worker gone: its copies too (each bound to its worker, never remade
                # elsewhere); the next plan starts from the source's own blocks.
                self.plan, self.blocks, self.moved = None, list(self.originals), 0
                return NOT_RESIDENT
            nodes.update(value)
        self.plan = plan
        (root,) = merge_nodes(nodes, n, merge).values()
        return root

    def _make_plan(self):
        """{worker address: [(block index, start, X key, w key or None)]}: each block on
        a worker that holds both its keys, the least loaded one in rows (blocks copied
        once to even out the rows per thread, `_even_out`); None where a block has no
        such worker, or where more than MERGE_FAN_IN nodes would reach the client (then
        self.spread: the blocks of the tree's groups are spread over the workers, and
        every pass runs as tasks, whose merges run on the workers)."""
        where = self._placement()
        if where is None or self._too_spread(where):
            return None
        if self._even_out(where):
            where = self._placement()
            if where is None or self._too_spread(where):
                return None
        plan = {}
        for i, (start, _, x, w) in enumerate(self.blocks):
            plan.setdefault(where[i], []).append((i, start, x.key, None if w is None else w.key))
        return plan

    def _too_spread(self, where):
        n = len(self.blocks)
        reaching = sum(
            len(merge_nodes({(0, i): None for i in range(n) if where[i] == a}, n, _nothing))
            for a in set(where)
        )
        self.spread = reaching > MERGE_FAN_IN
        return self.spread

    def _placement(self):
        """[the worker of each block]: one holding both its keys, the least loaded in
        rows so far; None where a block has none."""
        from distributed import wait  # made with a client only: distributed is there

        futures = [f for *_, x, w in self.blocks for f in (x, w) if f is not None]
        wait(futures)  # blocks still being persisted have no holder yet
        holders = self.client.who_has(futures)
        where, load = [], {}
        for _, rows, x, w in self.blocks:
            held = set(holders.get(x.key, ()))
            if w is not None:
                held &= set(holders.get(w.key, ()))
            if not held:
                return None
            address = min(sorted(held), key=lambda a: load.get(a, 0))
            load[address] = load.get(address, 0) + rows
            where.append(address)
        return where

    def _even_out(self, where):
        """Copy blocks from the workers with the most rows per thread to those with the
        fewest while that lowers the most (persist leaves 5 of 8 blocks on one of 2
        workers about one time in four; a pass then waits for 5 blocks' work), up to
        MOVED_SHARE of the rows in all: the copies live as long as the source. True
        where blocks were copied (self.blocks then names the copies)."""
        threads = self.client.nthreads()
        where = list(where)  # the caller's placement stays the blocks' (copies may fail)
        load = dict.fromkeys(threads, 0)
        for (_, rows, *_), address in zip(self.blocks, where):
            load[address] = load.get(address, 0) + rows

        def per_thread(address, change=0):
            return (load[address] + change) / threads.get(address, 1)

        def busiest_after(i, dst):
            rows = self.blocks[i][1]
            return max(per_thread(where[i], -rows), per_thread(dst, rows))

        copies = {}
        while True:
            src, dst = max(load, key=per_thread), min(threads, key=per_thread)
            mine = [i for i, a in enumerate(where) if a == src and i not in copies]
            best = min(mine, key=lambda i: busiest_after(i, dst), default=None)
            if best is None or busiest_after(best, dst) >= per_thread(src):
                break
            rows = self.blocks[best][1]
            if self.moved + rows > MOVED_SHARE * self.rows:
                break
            self.moved += rows
            load[src], load[dst], where[best] = load[src] - rows, load[dst] + rows, dst
            copies[best] = dst
        made = {i: self._copies(i, dst) for i, dst in copies.items()}
        return self._keep_copied(made)

    def _copies(self, i, address):
        """Block i's futures copied to the worker at address: restricted to it (a loose
        restriction lets an idle worker steal the copy, the one that already holds the
        block, and nothing is evened out)."""
        start, rows, *keys = self.blocks[i]
        return (start, rows, *(None if f is None else self.client.submit(
            _identity, f, workers=[address], allow_other_workers=False, pure=False,
            key=f"softkmeans-block-copy-{uuid.uuid4().hex}") for f in keys))  # fmt: skip

    def _keep_copied(self, made):
        """Name the copies made within COPY_WAIT_S in self.blocks (True where any); a copy
        not made by then (its worker lost, say) is cancelled and its block stays where it
        was: evening out is never worth waiting on."""
        from distributed import wait  # made with a client only: distributed is there

        try:
            wait([f for _, _, *keys in made.values() for f in keys if f is not None],
                 timeout=COPY_WAIT_S)  # fmt: skip
        except TimeoutError:
            pass  # the late ones are cancelled below
        for i, block in made.items():
            keys = [f for f in block[2:] if f is not None]
            if any(f.status != "finished" for f in keys):
                self.client.cancel(keys)
                self.moved -= block[1]
                continue
            self.blocks[i] = block
        return any(self.blocks[i] is block for i, block in made.items())


def _identity(value):
    return value


def _nothing(group):
    return None


async def _on_worker(plan, task, merge, n, args, dask_worker=None):
    """On a worker: ("nodes", its blocks' tree nodes), ("missing", None) where it no
    longer holds one of its blocks, or ("raised", the exception of a block function)."""
    data = dask_worker.data
    try:
        mine = [
            (i, start, data[x], None if w is None else data[w])
            for i, start, x, w in plan.get(dask_worker.address, ())
        ]
    except KeyError:
        return "missing", None
    loop = asyncio.get_running_loop()
    pool = dask_worker.executors["default"]
    # One job a thread of the worker, each running its share of the blocks in turn (a
    # job a block cost a thread hop each); with one share, the merges in the same job.
    t = dask_worker.state.nthreads
    shares = [share for share in (mine[j::t] for j in range(t)) if share]
    try:
        if len(shares) <= 1:
            nodes = await loop.run_in_executor(pool, _merged_blocks, task, args, mine, n, merge)
            return "nodes", nodes
        parts = await asyncio.gather(
            *(loop.run_in_executor(pool, _blocks, task, args, share) for share in shares)
        )
        nodes = {node: part for share in parts for node, part in share.items()}
        return "nodes", await loop.run_in_executor(pool, merge_nodes, nodes, n, merge)
    except Exception as exc:
        return "raised", exc


def _blocks(task, args, mine):
    """{(0, block index): task's part} of the blocks `mine`, in turn."""
    return {(0, i): task(start, x, w, *args) for i, start, x, w in mine}


def _merged_blocks(task, args, mine, n, merge):
    return merge_nodes(_blocks(task, args, mine), n, merge)
