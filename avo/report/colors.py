"""The colours of candidate statuses, shared by the PNG figures and the web pages."""

STATUS_COLOR = {"correct": "#2b8cbe", "incorrect": "#e6550d", "compile_error": "#756bb1", "timeout": "#d6a300",
                "crash": "#636363", "rejected": "#de2d26", "not_run": "#9e9ac8"}
"""One colour per candidate status, shared by the PNG figures and the web pages."""
ACCEPTED_COLOR = "#31a354"
