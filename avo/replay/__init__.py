"""A recorded run looked at again: its timeline, re-scored here, or its model turns driven again.

- `timeline.py`: the transcript as steps (observe / orient / decide / act) and markers, fed event by event.
- `view.py`: the terminal rendering of `avo replay`: compact steps, one step in full, a live run followed.
- `rebench.py`: `--rebench` (candidates re-scored by today's evaluator, recorded vs now) and the settings of
  `--redrive`.
"""
