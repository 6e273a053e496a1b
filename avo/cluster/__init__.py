"""Evaluation on several machines: ray.py runs the evaluation workers as Ray tasks (`avo evolve --cluster`)."""
