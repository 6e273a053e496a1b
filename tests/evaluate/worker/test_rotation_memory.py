"""How many input sets the bench stage keeps in rotation: sized from free GPU memory (rotation_memory.py). The figures
are 23_Softmax's at the file's size (4096 x 393216 fp32: 6.4 GB of input, as much output) on an H200."""

from __future__ import annotations

from avo.evaluate.worker.rotation_memory import HEADROOM_BYTES, OUTPUT_COPIES, rotation_sets

GB = 10**9
SOFTMAX = 4096 * 393216 * 4


def test_plenty_of_memory_keeps_the_configured_rotation():
    size = rotation_sets(3, SOFTMAX, SOFTMAX, 140 * GB)
    assert (size.sets, size.reduced) == (3, False)


def test_the_rotation_shrinks_to_what_fits_and_says_so():
    size = rotation_sets(3, SOFTMAX, SOFTMAX, 50 * GB)
    # 50 GB free with one source set made: outputs 4 x 6.4 GB and 2 GiB headroom leave room for 2n copies, n = 1.
    assert (size.sets, size.reduced) == (1, True)
    note = size.note("batch_size=4096,dim=393216")
    assert note == ("case batch_size=4096,dim=393216: input rotation reduced from 3 to 1 set(s) to fit GPU memory "
                    "(6.00 GiB per set, 46.57 GiB free)")
    two = 2 * 2 * SOFTMAX + OUTPUT_COPIES * SOFTMAX + HEADROOM_BYTES  # exactly enough for two sets
    assert rotation_sets(3, SOFTMAX, SOFTMAX, two).sets == 2
    assert rotation_sets(3, SOFTMAX, SOFTMAX, two - 1).sets == 1


def test_never_below_one_set_and_no_limit_off_the_gpu():
    assert rotation_sets(3, SOFTMAX, SOFTMAX, 1 * GB).sets == 1
    assert rotation_sets(3, SOFTMAX, SOFTMAX, None).sets == 3
    assert rotation_sets(0, SOFTMAX, SOFTMAX, None).sets == 1
