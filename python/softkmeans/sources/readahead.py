"""Row blocks of a memory-mapped file with the next block read ahead while the current
one is computed.

A native pass over an np.memmap reads its pages as it faults them in: each fault waits
for the disk, and the kernel's own read-around (about 128 KiB) keeps the disk busy only
while the pass waits. Read in blocks of BLOCK_BYTES instead, the pass first asks the
kernel for the next block's pages (``posix_fadvise(POSIX_FADV_WILLNEED)``, which starts
the reads and returns) and then computes the current block, with the GIL released: the
disk reads block i + 1 while the cores compute block i. The pages are the page cache's
(file-backed, clean: not the process's anonymous memory), and the kernel evicts them as
it needs, so a file larger than memory streams through.

Only a named file gets the advice (``np.memmap.filename``); elsewhere (an anonymous
mapping, a platform without ``posix_fadvise``) the blocks are the same, unadvised.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

__all__ = ["BLOCK_BYTES", "MIN_FILE_BYTES", "FileBlocks", "file_blocks", "file_region"]

# Bytes of X a block holds: many row tiles a native call (its thread team is woken once
# per block), and, read ahead, about 0.1 s of a disk at 600 MB/s.
BLOCK_BYTES = 1 << 26
# Files up to this size are read in one block, in place, with the in-memory array's
# results bit for bit; larger ones in blocks read ahead, their statistics merged in block
# order (the same up to the rounding of the merge; the labels the same but at exact ties).
MIN_FILE_BYTES = 1 << 30


def file_blocks(X):
    """FileBlocks of X when X is a memory-mapped file larger than MIN_FILE_BYTES, else None."""
    if X.nbytes <= MIN_FILE_BYTES or file_region(X) is None:
        return None
    return FileBlocks(X)


def file_region(a):
    """(path, byte offset in the file of a's first element) for a C-contiguous view of
    an np.memmap of a named file (an np.memmap or any view of one), else None."""
    root = a
    while isinstance(root, np.ndarray) and not isinstance(root.base, mmap.mmap):
        root = root.base  # views (np.asarray of a memmap is one) down to the mapping's
    if not isinstance(root, np.memmap):
        return None
    path = getattr(root, "filename", None)
    if path is None:
        return None
    gap = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return path, int(root.offset) + gap


class FileBlocks:
    """(start, stop, rows) blocks of the C-contiguous (n, d) array X, BLOCK_BYTES at a time,
    the next block's pages requested before the current one is yielded; on_block(stop, n),
    when set, is called after each block is consumed (progress of a long pass)."""

    # False: the same blocks, unadvised (bench/studies/readahead.py times both).
    ADVISE = True

    def __init__(self, X):
        self.X = X
        row_bytes = X.shape[1] * X.itemsize
        self.step = max(1, BLOCK_BYTES // row_bytes)
        self.row_bytes = row_bytes
        self.region = file_region(X) if hasattr(os, "posix_fadvise") else None
        self.on_block = None

    def __len__(self):
        return -(-self.X.shape[0] // self.step)

    def __iter__(self):
        n = self.X.shape[0]
        fd = None
        if self.region is not None:
            try:
                fd = os.open(self.region[0], os.O_RDONLY)
            except OSError:  # the file was removed or renamed: the mapping still reads
                fd = None
        try:
            self._advise(fd, 0)
            for start in range(0, n, self.step):
                stop = min(start + self.step, n)
                self._advise(fd, stop)
                yield start, stop, self.X[start:stop]
                if self.on_block is not None:
                    self.on_block(stop, n)
        finally:
            if fd is not None:
                os.close(fd)

    def _advise(self, fd, start):
        """Start reading the block of rows from `start` (no wait)."""
        if fd is None or start >= self.X.shape[0] or not self.ADVISE:
            return
        rows = min(self.step, self.X.shape[0] - start)
        offset = self.region[1] + start * self.row_bytes
        os.posix_fadvise(fd, offset, rows * self.row_bytes, os.POSIX_FADV_WILLNEED)
